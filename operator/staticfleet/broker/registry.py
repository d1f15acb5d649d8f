"""The Kafka APIs this broker serves, in one table filled by the `kafka_api` decorator on each handler.

An entry is everything the one dispatch path (dispatch.py) needs to know of an API before and around
its handler: kio's name of the API and its key (looked up in kio's `api_key_map`, so no key is typed by
hand), the versions served, the request entity every version is read into, the ACLs it requires, its
error answer, the part it plays in a SASL login, and whether its latency is measured. ApiVersions
advertises exactly this table. This is the one module of the broker that speaks of API keys.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v4.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32Timedelta
from kio.static.protocol import ResponsePayload

from staticfleet.broker.codec import (
    API_KEYS,
    EncodedBody,
    RequestHeader,
    UnsupportedVersion,
    carry,
    for_version,
)
from staticfleet.broker.fetch_wire import RegionFetchResponse
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.security import admin
from staticfleet.broker.security.access import Access, Session
from staticfleet.broker.security.acl import ANONYMOUS, CLUSTER_NAME, AclOperation, ResourceType
from staticfleet.broker.security.authenticator import LoginStep, SaslAuthenticator
from staticfleet.broker.security.state import SecurityState
from staticfleet.broker.topiclog import TopicLog
from staticfleet.coordinator import messages as m

__all__ = ["API_KEYS", "RequestHeader", "UnsupportedVersion"]

NO_THROTTLE: Final = i32Timedelta.parse(datetime.timedelta(0))

Body = TypeVar("Body")
Shape = TypeVar("Shape")


@dataclass
class BrokerContext:
    """What handlers need besides the request: the coordinator, the topics, and who this node is."""

    host: CoordinatorHost
    topics: TopicLog
    node_id: int
    advertised_host: str
    advertised_port: int
    cluster_id: str
    auto_create_topics: bool = True
    producer_ids: Iterable[int] = field(default_factory=lambda: itertools.count(int(time.time()) << 12))
    # ACLs and credentials (None: no security configured, every request allowed).
    security: SecurityState | None = None
    # The address each listener advertises (Metadata and FindCoordinator answer with the caller's).
    listener_addresses: dict[str, tuple[str, int]] = field(default_factory=dict)

    def advertised(self, listener: str) -> tuple[str, int]:
        return self.listener_addresses.get(listener, (self.advertised_host, self.advertised_port))


@dataclass(slots=True)
class Peer:
    """The client at the other end of one connection: its address, the listener it came in on, who it
    is, and how far its SASL login got (`login` None: nothing to log in to, PLAINTEXT or SSL)."""

    client_host: str  # "/127.0.0.1", as Kafka writes it
    listener: str = "PLAINTEXT"
    # Who the transport says it is: the certificate subject on SSL, else User:ANONYMOUS.
    transport_principal: str = ANONYMOUS
    login: SaslAuthenticator | None = None
    # The connection can take records straight from the segment files (plaintext, see sendfile.py).
    splice: bool = False

    @property
    def principal(self) -> str:
        """User:ANONYMOUS on PLAINTEXT, the certificate subject on SSL, the SASL user once logged in."""
        if self.login is not None and self.login.principal is not None:
            return self.login.principal
        return self.transport_principal


@dataclass(frozen=True, slots=True)
class ApiError:
    """An error an API's error answer carries: Kafka's code, and the message (None: the answer has none)."""

    code: ErrorCode
    message: str | None = None


class CloseConnection(Exception):
    """Raised by a handler whose request ends the connection without an answer."""

    def __init__(self, why: str, label: str = "bad-request") -> None:
        super().__init__(why)
        self.label = label  # the reason, as the connection metrics count it


# --- the ACLs an API requires ------------------------------------------------------------------------

# Kafka's default message of the errors the front door answers with (Errors.java).
_MESSAGES: Final[dict[ErrorCode, str]] = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
    ErrorCode.illegal_sasl_state: "Request is not valid given the current SASL state.",
}
# Kafka's error for a denied resource of each type.
_DENIED: Final[dict[ResourceType, ErrorCode]] = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
}


def kafka_message(code: ErrorCode) -> str | None:
    """The error's default message, which some error answers carry whatever the cause (`error.message()`)."""
    return _MESSAGES.get(code)


def denied(resource_type: ResourceType) -> ApiError:
    """Kafka's error, with its default message, for a resource of this type the caller may not use."""
    code = _DENIED[resource_type]
    return ApiError(code, _MESSAGES[code])


DenialMessage = Callable[["Request[Any]", AclOperation, ResourceType], "str | None"]


def default_message(
    request: Request[Any], operation: AclOperation, resource_type: ResourceType
) -> str | None:
    """The error's own message (Kafka answers `getErrorResponse(error.exception())`)."""
    return denied(resource_type).message


def needs_permission(request: Request[Any], operation: AclOperation, resource_type: ResourceType) -> str:
    """Kafka's `authorizeClusterOperation` text, which describes the server's request object."""
    return admin.denied_message(operation.name, request.client_host, request.listener, request.listener)


def no_message(request: Request[Any], operation: AclOperation, resource_type: ResourceType) -> None:
    return None


Names = Callable[[BrokerContext, "Request[Body]"], Iterable[str]]


@dataclass(frozen=True, slots=True)
class Requires(Generic[Body]):
    """An ACL an API requires: `operation` on the resources of `resource_type` a request names.

    `per_item` False: a single denial answers the whole request with the API's error answer (the error
    of the resource type, with `message`), before the handler runs. True: the handler answers each denied
    item in its place, reading the decisions from `request.grants`. `names` lists the resources a request
    names (the cluster: none; None for per-item ACLs whose names only the answer holds, decided as the
    handler meets them). With `cluster_grants`, the operation on the cluster grants it on every resource
    (CREATE and DELETE of topics, as in KIP-277; DESCRIBE of every group). `applies` limits the ACL to
    the requests it says (a version, a key type)."""

    operation: AclOperation
    resource_type: ResourceType
    names: Names[Body] | None
    per_item: bool
    applies: Callable[[Request[Body]], bool] | None = None
    cluster_grants: bool = False
    message: DenialMessage = default_message

    @classmethod
    def request(
        cls,
        operation: AclOperation,
        resource_type: ResourceType,
        name: Callable[[Request[Body]], str],
        *,
        applies: Callable[[Request[Body]], bool] | None = None,
        message: DenialMessage = default_message,
    ) -> Requires[Body]:
        """`operation` on the one resource the request names, or the request is refused as a whole."""
        return cls(
            operation, resource_type, lambda ctx, request: (name(request),), False, applies, False, message
        )

    @classmethod
    def cluster(cls, operation: AclOperation, *, message: DenialMessage = default_message) -> Requires[Body]:
        """`operation` on the cluster, or the request is refused as a whole."""
        return cls(
            operation, ResourceType.CLUSTER, lambda ctx, request: (CLUSTER_NAME,), False, None, False, message
        )

    @classmethod
    def each(
        cls,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Names[Body] | None = None,
        *,
        applies: Callable[[Request[Body]], bool] | None = None,
        cluster_grants: bool = False,
    ) -> Requires[Body]:
        """`operation` on each resource; the handler answers the denied ones in their place."""
        return cls(operation, resource_type, names, True, applies, cluster_grants)

    def denial(self, request: Request[Any]) -> ApiError:
        return ApiError(
            denied(self.resource_type).code, self.message(request, self.operation, self.resource_type)
        )


class UndeclaredAcl(LookupError):
    """A handler asked about an ACL its registry entry does not declare."""


class Grants:
    """The decisions on the ACLs one request's API declares, made once per resource. Without an
    authorizer every check passes, as in Kafka."""

    __slots__ = ("_access", "_decided", "_rules")

    def __init__(
        self, access: Access | None, rules: Mapping[tuple[AclOperation, ResourceType], Requires[Any]] | None
    ) -> None:
        self._access = access
        self._rules = rules  # None: a request made by hand (tests), which may ask anything
        self._decided: dict[tuple[AclOperation, ResourceType, str], bool] = {}

    @property
    def enabled(self) -> bool:
        """Whether an authorizer decides (some answers differ in shape when one does)."""
        return self._access is not None and self._access.enabled

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        rule = self._rules.get((operation, resource_type)) if self._rules is not None else None
        if rule is None and self._rules is not None:
            raise UndeclaredAcl(f"{operation.name} on {resource_type.name} is not declared by this API")
        if self._access is None:
            return True
        if (
            rule is not None
            and rule.cluster_grants
            and self._decide(self._access, operation, ResourceType.CLUSTER)
        ):
            return True
        return self._decide(self._access, operation, resource_type, name)

    def _decide(
        self, access: Access, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> bool:
        key = (operation, resource_type, name)
        decided = self._decided.get(key)
        if decided is None:
            decided = self._decided[key] = access.allowed(operation, resource_type, name)
        return decided

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The KIP-430 bitfield of what the caller may do with the resource (an answer's content, not a
        check: every operation the resource supports when there is no authorizer)."""
        access = self._access or Access(None, Session())
        return access.authorized_operations(resource_type, name)


EVERYTHING_GRANTED: Final = Grants(None, None)


# --- a request, as handlers see it -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request(Generic[Body]):
    """One request: its header, its body read into the API's declared entity (`Body`, the newest
    version's: fields the requested version lacks hold the protocol's default), who sent it, and the
    decisions on the ACLs its API declares.

    Where an older version has another shape (a field renamed, a list where the newest has a single
    value), `shaped` reads the body as that version's entity."""

    header: RequestHeader
    body: Body
    peer: Peer
    grants: Grants = EVERYTHING_GRANTED
    received: Any = None  # the body as parsed, the entity of the requested version (None: `body`)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_host(self) -> str:
        return self.peer.client_host

    @property
    def principal(self) -> str:
        return self.peer.principal

    @property
    def listener(self) -> str:
        return self.peer.listener

    @property
    def splice(self) -> bool:
        return self.peer.splice

    def shaped(self, entity: type[Shape]) -> Shape:
        """The body as `entity`, another version's request entity (see codec.carry)."""
        return carry(self.body if self.received is None else self.received, entity)

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """Whether the caller may do `operation` on the resource: a decision on an ACL the API declares."""
        return self.grants.allows(operation, resource_type, name)

    def context(self) -> m.RequestContext:
        """What the coordinator needs to know of the caller."""
        return m.RequestContext(self.header.api_version, self.header.client_id or "", self.client_host)


# --- the table ---------------------------------------------------------------------------------------

# What a handler returns: a kio response (of any version of its API), one already encoded, a Fetch
# response whose records stay in the segment files, or None when the protocol expects no answer.
Answer = ResponsePayload | EncodedBody | RegionFetchResponse | None
Handler = Callable[[BrokerContext, Request[Body]], Awaitable[Answer]]
# How an API answers a request it will not serve: Kafka's `getErrorResponse` (None: no answer at all).
ErrorAnswer = Callable[[Request[Body], ApiError], ResponsePayload | None]


@dataclass(frozen=True)
class KafkaApi(Generic[Body]):
    name: str  # kio's name, e.g. "join_group"
    key: int
    min_version: int
    max_version: int
    request: type[Body]
    handler: Handler[Body]
    error: ErrorAnswer[Body]
    acl: tuple[Requires[Body], ...]
    login: LoginStep | None  # the part it plays in a SASL login (None: it waits for the login)
    timed: bool  # its latency (parking included) is a histogram of its own

    @property
    def title(self) -> str:
        """Kafka's own spelling, e.g. JoinGroup (the label of its metrics)."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def enum_name(self) -> str:
        """Kafka's ApiKeys name, e.g. JOIN_GROUP (as its messages spell it)."""
        return self.name.upper()

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @functools.cached_property
    def acl_rules(self) -> Mapping[tuple[AclOperation, ResourceType], Requires[Body]]:
        """The declared ACLs by (operation, resource type), which is what handlers ask about."""
        return {(rule.operation, rule.resource_type): rule for rule in self.acl}


_APIS: dict[int, KafkaApi[Any]] = {}


def kafka_api(
    name: str,
    versions: tuple[int, int],
    request: type[Body],
    *,
    error: ErrorAnswer[Body],
    acl: Sequence[Requires[Body]] = (),
    login: LoginStep | None = None,
    timed: bool = False,
) -> Callable[[Handler[Body]], Handler[Body]]:
    """Serve the API kio calls `name`, versions `versions` (both ends included), with this handler:
    every version's request read into `request`, the ACLs in `acl` checked before the handler runs (or
    decided for it, per item), and `error` answering what is refused."""
    key = API_KEYS[name]

    def register(handler: Handler[Body]) -> Handler[Body]:
        if key in _APIS:
            raise ValueError(
                f"{name} is served twice: by {_APIS[key].handler.__name__} and {handler.__name__}"
            )
        _APIS[key] = KafkaApi(
            name, key, versions[0], versions[1], request, handler, error, tuple(acl), login, timed
        )
        return handler

    return register


def api_for(request: RequestHeader | UnsupportedVersion | int) -> KafkaApi[Any] | None:
    """The API a request (or key) names (None for a key this broker does not serve)."""
    return _APIS.get(request if isinstance(request, int) else request.api_key)


def api_named(name: str) -> KafkaApi[Any]:
    return _APIS[API_KEYS[name]]


def title_of(key: int) -> str:
    found = _APIS.get(key)
    return found.title if found is not None else str(key)


def served() -> Iterator[KafkaApi[Any]]:
    return iter(sorted(_APIS.values(), key=lambda api: api.key))


def is_supported(key: int, version: int) -> bool:
    found = _APIS.get(key)
    return found is not None and found.serves(version)


def api_versions_response(
    error: ErrorCode = ErrorCode.none, names: Iterable[str] | None = None
) -> ApiVersionsResponse:
    """ApiVersions' answer: every API served with its versions, or only those named."""
    wanted = None if names is None else {API_KEYS[n] for n in names}
    return ApiVersionsResponse(
        error_code=error,
        api_keys=tuple(
            ApiVersion(
                api_key=i16(api.key), min_version=i16(api.min_version), max_version=i16(api.max_version)
            )
            for api in served()
            if wanted is None or api.key in wanted
        ),
        throttle_time=NO_THROTTLE,
    )


def unsupported_version_reply(exc: UnsupportedVersion) -> ApiVersionsResponseV0 | None:
    """KIP-511: an ApiVersions the broker cannot parse is answered as v0 with the list; any other
    unsupported request closes the connection (None)."""
    if not exc.is_for("api_versions"):
        return None
    # A client asking with a version too new learns only which ApiVersions versions exist.
    answer = for_version(api_versions_response(ErrorCode.unsupported_version, names=("api_versions",)), 0)
    assert isinstance(answer, ApiVersionsResponseV0)
    return answer
