"""SCRAM and PLAIN users: the credential store and the bootstrap users file.

The bootstrap file has one user credential per line, in the syntax of `kafka-storage format --add-scram`
(Kafka's ScramParser), plus PLAIN entries for the PLAIN mechanism:

    # comments and blank lines are ignored
    SCRAM-SHA-512=[name=operator,password=operator-secret]
    SCRAM-SHA-256=[name=alice,iterations=8192,password=alice-secret]
    SCRAM-SHA-512=[name=bob,salt=c2FsdA==,saltedpassword=...,iterations=4096]
    PLAIN=[name=alice,password=alice-secret]

As in Kafka, the value is split on `,` (so a password cannot contain a comma), surrounding double quotes
are stripped, unknown keys are an error, and iterations must lie within 4096..16384.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from staticfleet.broker.security.plain import PlainCredential
from staticfleet.broker.security.scram import (
    DEFAULT_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
    generate_salt,
    salted_password,
)

PLAIN_ENTRY = "PLAIN"


class UsersFileError(ValueError):
    """A bootstrap users file that cannot be read; the message names the line."""


@dataclass(frozen=True)
class ScramEntry:
    name: str
    mechanism: ScramMechanism
    credential: ScramCredential


@dataclass(frozen=True)
class PlainEntry:
    name: str
    credential: PlainCredential


def _component(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise UsersFileError(f"No equals sign found in SCRAM component: {text}")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return key, value


def parse_entry(text: str) -> ScramEntry | PlainEntry:
    """One `MECHANISM=[key=value,...]` entry."""
    text = text.strip()
    mechanism_name, sep, config = text.partition("=")
    if not sep:
        raise UsersFileError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism_name != PLAIN_ENTRY and ScramMechanism.by_name(mechanism_name) is None:
        raise UsersFileError(f"The add-scram mechanism {mechanism_name} is not supported.")
    if not config.startswith("["):
        raise UsersFileError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise UsersFileError("Expected configuration string to end with ]")
    components = dict(_component(part) for part in config[1:-1].split(","))
    name = components.pop("name", None)
    if name is None:
        raise UsersFileError("You must supply 'name' to add-scram")
    password = components.pop("password", None)
    if mechanism_name == PLAIN_ENTRY:
        if components:
            raise UsersFileError("Unknown PLAIN configurations: " + ", ".join(sorted(components)))
        if not password:
            raise UsersFileError("You must supply 'password' for a PLAIN user")
        return PlainEntry(name, PlainCredential.of(password))
    mechanism = ScramMechanism.by_name(mechanism_name)
    assert mechanism is not None
    salt = _b64(components.pop("salt", None), "Failed to decode given salt: ")
    iterations_text = components.pop("iterations", None)
    try:
        iterations = DEFAULT_ITERATIONS if iterations_text is None else int(iterations_text)
    except ValueError:
        raise UsersFileError(f"Failed to parse iterations count: {iterations_text}") from None
    salted_text = components.pop("saltedpassword", None)
    if components:
        raise UsersFileError("Unknown SCRAM configurations: " + ", ".join(sorted(components)))
    if password is None:
        if salted_text is None:
            raise UsersFileError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise UsersFileError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if iterations < mechanism.min_iterations:
        raise UsersFileError(
            f"The 'iterations' value must be >= {mechanism.min_iterations} for add-scram using "
            f"{mechanism.mechanism_name}"
        )
    if iterations > mechanism.max_iterations:
        raise UsersFileError(
            f"The 'iterations' value must be <= {mechanism.max_iterations} for add-scram using "
            f"{mechanism.mechanism_name}"
        )
    salt = salt if salt is not None else generate_salt()
    if password is not None:
        salted = salted_password(mechanism, password, salt, iterations)
    else:
        decoded = _b64(salted_text, "Failed to decode given saltedPassword: ")
        assert decoded is not None
        salted = decoded
    return ScramEntry(name, mechanism, credential_from_salted_password(mechanism, salt, salted, iterations))


def _b64(text: str | None, error: str) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise UsersFileError(error + text) from None


def parse_users(lines: Iterable[str], source: str = "users file") -> list[ScramEntry | PlainEntry]:
    entries: list[ScramEntry | PlainEntry] = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            entries.append(parse_entry(text))
        except UsersFileError as exc:
            raise UsersFileError(f"{source}, line {number}: {exc}") from None
    return entries


def load_users_file(path: Path) -> list[ScramEntry | PlainEntry]:
    return parse_users(path.read_text(encoding="utf-8").splitlines(), str(path))


class CredentialStore:
    """SCRAM credentials per (user, mechanism) and PLAIN credentials per user.

    A user with only a SCRAM-SHA-256 credential is unknown to SCRAM-SHA-512, as in Kafka.
    """

    def __init__(self, entries: Iterable[ScramEntry | PlainEntry] = ()) -> None:
        self._scram: dict[tuple[str, ScramMechanism], ScramCredential] = {}
        self._plain: dict[str, PlainCredential] = {}
        for entry in entries:
            if isinstance(entry, ScramEntry):
                self.upsert(entry.name, entry.mechanism, entry.credential)
            else:
                self._plain[entry.name] = entry.credential

    def scram(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._scram.get((user, mechanism))

    def plain(self, user: str) -> PlainCredential | None:
        return self._plain.get(user)

    def upsert(self, user: str, mechanism: ScramMechanism, credential: ScramCredential) -> None:
        self._scram[(user, mechanism)] = credential

    def delete(self, user: str, mechanism: ScramMechanism) -> bool:
        return self._scram.pop((user, mechanism), None) is not None

    def describe(self, user: str) -> list[tuple[ScramMechanism, int]]:
        """The (mechanism, iterations) pairs a user has, as DescribeUserScramCredentials shows them."""
        return sorted(
            ((m, c.iterations) for (u, m), c in self._scram.items() if u == user),
            key=lambda pair: pair[0].type_code,
        )

    def scram_users(self) -> list[str]:
        return sorted({user for user, _ in self._scram})

    def scram_credentials(self) -> list[tuple[str, ScramMechanism, ScramCredential]]:
        """Every SCRAM credential, by user then mechanism."""
        return [
            (user, mechanism, self._scram[(user, mechanism)])
            for user, mechanism in sorted(self._scram, key=lambda key: (key[0], key[1].type_code))
        ]
