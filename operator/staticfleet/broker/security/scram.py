"""SCRAM-SHA-256 and SCRAM-SHA-512 as Kafka implements them (RFC 5802 / RFC 7677, KIP-84).

Kafka's server differs from the RFC in ways clients can see, and this module keeps each one:
- only the gs2 flag `n` is accepted (no channel binding), and the `c=` value is never checked, only echoed
  into the AuthMessage;
- the password is not SASLprep-ed, and the server nonce is a 130-bit random number in base 36;
- an unknown user fails on the first message (no fake salt), and failures carry no `e=` attribute: the
  broker turns them into SASL_AUTHENTICATION_FAILED with a fixed text;
- extensions are parsed and ignored except `tokenauth` (delegation tokens, which are not supported here).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from staticfleet.broker.security.errors import SaslAuthenticationError, SaslFailure


class ScramMechanism(enum.Enum):
    """The mechanisms with Kafka's type bytes (UserScramCredentialRecord.Mechanism, admin ScramMechanism)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512")

    def __init__(self, mechanism_name: str, type_code: int, hash_name: str) -> None:
        self.mechanism_name = mechanism_name
        self.type_code = type_code
        self.hash_name = hash_name

    @property
    def min_iterations(self) -> int:
        return MIN_ITERATIONS

    @property
    def max_iterations(self) -> int:
        return MAX_ITERATIONS

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        for mechanism in cls:
            if mechanism.mechanism_name == name:
                return mechanism
        return None

    @classmethod
    def by_type(cls, code: int) -> ScramMechanism | None:
        for mechanism in cls:
            if mechanism.type_code == code:
                return mechanism
        return None


MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps per (user, mechanism): never the password (UserScramCredentialRecord)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with one block, over the UTF-8 bytes (Kafka does no SASLprep)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    client_key = _hmac(mechanism.hash_name, salted, b"Client Key")
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = _hmac(mechanism.hash_name, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def secure_random_string() -> str:
    """Kafka's `new BigInteger(130, random).toString(36)`: at most 26 characters of [0-9a-z]."""
    return base36(secrets.randbits(130))


def base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if value == 0:
        return "0"
    out = []
    while value:
        value, rest = divmod(value, 36)
        out.append(digits[rest])
    return "".join(reversed(out))


def generate_salt() -> bytes:
    """Salts Kafka makes itself are the UTF-8 bytes of a base-36 random string."""
    return secure_random_string().encode("ascii")


def generate_credential(
    mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = generate_salt() if salt is None else salt
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


# --- message grammar (Kafka's ScramMessages regular expressions, matched whole)

_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"  # 0x01-0x7F except ',' and '='
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # 0x01-0x7F except ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # 0x21-0x7E except ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS})"
)
CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})"
)
# Only used by the client side of tests and tools.
SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+){_EXTENSIONS}"
)
SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE_SAFE}))|(?:v=(?P<signature>{_BASE64})){_EXTENSIONS}")


def sasl_name(username: str) -> str:
    """The username as a saslname: `=` as `=3D`, `,` as `=2C`."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_of(saslname: str) -> str:
    """The saslname decoded; any `=` other than `=2C`/`=3D` is an error (ScramFormatter.username)."""
    decoded = saslname.replace("=2C", ",")
    if "=" in decoded.replace("=3D", ""):
        raise ValueError(f"Invalid username: {saslname}")
    return decoded.replace("=3D", "=")


@dataclass(frozen=True)
class ClientFirst:
    authorization_id: str
    saslname: str
    nonce: str
    extensions: dict[str, str]

    @property
    def bare(self) -> str:
        extensions = ",".join(f"{k}={v}" for k, v in self.extensions.items())
        bare = f"n={self.saslname},r={self.nonce}"
        return f"{bare},{extensions}" if extensions else bare

    @classmethod
    def parse(cls, data: bytes) -> ClientFirst:
        message = data.decode("utf-8", errors="replace")
        match = CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise SaslFailure(f"Invalid SCRAM client first message format: {message}")
        extensions: dict[str, str] = {}
        text = match.group("extensions")
        if text:
            for item in text[1:].split(","):
                key, _, value = item.partition("=")
                extensions[key] = value
        return cls(match.group("authzid") or "", match.group("saslname"), match.group("nonce"), extensions)


@dataclass(frozen=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes

    @property
    def without_proof(self) -> str:
        # Rebuilt from the parsed fields (extensions dropped), as Kafka does for the AuthMessage.
        return f"c={base64.b64encode(self.channel_binding).decode()},r={self.nonce}"

    @classmethod
    def parse(cls, data: bytes) -> ClientFinal:
        message = data.decode("utf-8", errors="replace")
        match = CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslFailure(f"Invalid SCRAM client final message format: {message}")
        return cls(
            base64.b64decode(match.group("channel")),
            match.group("nonce"),
            base64.b64decode(match.group("proof")),
        )


class ProofLengthError(ValueError):
    """A client proof whose length is not the hash length: Kafka's xor throws and the connection closes."""


def _xor(first: bytes, second: bytes) -> bytes:
    if len(first) != len(second):
        raise ProofLengthError("Argument arrays must be of the same length")
    return bytes(a ^ b for a, b in zip(first, second, strict=True))


CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]


class ScramServer:
    """One SCRAM exchange, server side (Kafka's ScramSaslServer).

    `evaluate` returns the next challenge; it raises SaslAuthenticationError (its message goes to the client),
    SaslFailure (the client sees only a generic message) or ProofLengthError (Kafka closes the connection).
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: CredentialLookup,
        *,
        nonce_factory: Callable[[], str] = secure_random_string,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._nonce_factory = nonce_factory
        self._state = "first"
        self._client_first: ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, response: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._first(response)
            if self._state == "final":
                return self._final(response)
            raise SaslFailure(f"Unexpected challenge in Sasl server state {self._state.upper()}")
        except (SaslFailure, SaslAuthenticationError, ProofLengthError):
            self._state = "failed"
            self._credential = None
            raise

    def _first(self, response: bytes) -> bytes:
        first = ClientFirst.parse(response)
        server_nonce = self._nonce_factory()
        if first.extensions.get("tokenauth", "").lower() == "true":
            raise SaslFailure(f"Token Authentication failed: Invalid tokenId : {first.saslname}")
        try:
            username = username_of(first.saslname)
        except ValueError as exc:
            raise SaslFailure("Authentication failed: Credentials could not be obtained") from exc
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        if first.authorization_id and first.authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslFailure(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism.mechanism_name}"
            )
        self._client_first = first
        self._credential = credential
        self._nonce = first.nonce + server_nonce
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self.authorization_id = username
        self._state = "final"
        return self._server_first.encode()

    def _final(self, response: bytes) -> bytes:
        final = ClientFinal.parse(response)
        if final.nonce != self._nonce:
            raise SaslFailure("Invalid client nonce in the final client message.")
        assert self._client_first is not None and self._credential is not None
        auth_message = f"{self._client_first.bare},{self._server_first},{final.without_proof}".encode()
        hash_name = self.mechanism.hash_name
        client_signature = _hmac(hash_name, self._credential.stored_key, auth_message)
        computed = hashlib.new(hash_name, _xor(client_signature, final.proof)).digest()
        if not hmac.compare_digest(computed, self._credential.stored_key):
            raise SaslFailure("Invalid client credentials")
        signature = _hmac(hash_name, self._credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        return b"v=" + base64.b64encode(signature)


# --- client side (tools, tests and the admin client)


class ScramClient:
    """The client half of one exchange: `first()`, then `final(server_first)`, then `verify(server_final)`."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None):
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.nonce = nonce or secrets.token_urlsafe(18).replace("-", "A").replace("_", "B")
        self._bare = f"n={sasl_name(username)},r={self.nonce}"
        self._server_key = b""
        self._auth_message = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes, *, channel_binding: str = "biws") -> bytes:
        text = server_first.decode()
        match = SERVER_FIRST.fullmatch(text)
        if match is None or not match.group("nonce").startswith(self.nonce):
            raise ValueError(f"bad SCRAM server first message: {text!r}")
        salt = base64.b64decode(match.group("salt"))
        salted = salted_password(self.mechanism, self.password, salt, int(match.group("iterations")))
        hash_name = self.mechanism.hash_name
        client_key = _hmac(hash_name, salted, b"Client Key")
        stored_key = hashlib.new(hash_name, client_key).digest()
        without_proof = f"c={channel_binding},r={match.group('nonce')}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        proof = _xor(client_key, _hmac(hash_name, stored_key, self._auth_message))
        self._server_key = _hmac(hash_name, salted, b"Server Key")
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        match = SERVER_FINAL.fullmatch(server_final.decode())
        if match is None or match.group("signature") is None:
            return False
        expected = _hmac(self.mechanism.hash_name, self._server_key, self._auth_message)
        return hmac.compare_digest(base64.b64decode(match.group("signature")), expected)
