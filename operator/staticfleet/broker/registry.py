"""The Kafka APIs this broker serves, in one table filled by the `kafka_api` decorator on each handler.

An entry holds kio's name of the API, its key (looked up in kio's `api_key_map`, so no key is typed
by hand), the versions served, the handler, and whether its latency is measured. ApiVersions
advertises exactly this table, and the server finds each request's handler here. This is the one
module of the broker that speaks of API keys.
"""

from __future__ import annotations

import datetime
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from kio.schema.api_versions.v4.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.static.primitive import i16, i32Timedelta
from kio.static.protocol import ResponsePayload

from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.security.state import SecurityState
from staticfleet.broker.topiclog import TopicLog
from staticfleet.coordinator import messages as m

API_KEYS: Final[dict[str, int]] = {name: key for key, name in api_key_map.items()}
NO_THROTTLE: Final = i32Timedelta.parse(datetime.timedelta(0))

Body = TypeVar("Body")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class UnsupportedVersion(Exception):
    """A request for an API or version the table does not hold (answered for ApiVersions only)."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"api {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id

    def is_for(self, name: str) -> bool:
        return self.api_key == API_KEYS[name]


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


@dataclass(frozen=True, slots=True)
class Request(Generic[Body]):
    """One parsed request: its header, the address of the client that sent it, and its kio body.

    `Body` names the newest version's entity, which every older version's fields are a subset of
    (up to the renames handlers branch on); a field some requested version lacks is read with
    `optional`, which answers the protocol default instead.
    """

    header: RequestHeader
    client_host: str
    body: Body
    # Who sent it: User:ANONYMOUS on PLAINTEXT, the certificate subject on SSL, the SASL user on SASL.
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"
    # The connection can take records straight from the segment files (plaintext, see sendfile.py).
    splice: bool = False

    @property
    def version(self) -> int:
        return self.header.api_version

    def optional(self, name: str, default: Any = None) -> Any:
        return getattr(self.body, name, default)

    def context(self) -> m.RequestContext:
        """What the coordinator needs to know of the caller."""
        return m.RequestContext(self.header.api_version, self.header.client_id or "", self.client_host)


Handler = Callable[[BrokerContext, Request[Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class KafkaApi:
    name: str  # kio's name, e.g. "join_group"
    key: int
    min_version: int
    max_version: int
    handler: Handler
    timed: bool  # its latency (parking included) is a histogram of its own

    @property
    def title(self) -> str:
        """Kafka's own spelling, e.g. JoinGroup (the label of its metrics)."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


_APIS: dict[int, KafkaApi] = {}

H = TypeVar("H", bound=Handler)


def kafka_api(name: str, versions: tuple[int, int], *, timed: bool = False) -> Callable[[H], H]:
    """Serve the API kio calls `name`, versions `versions` (both ends included), with this handler."""
    key = API_KEYS[name]

    def register(handler: H) -> H:
        if key in _APIS:
            raise ValueError(
                f"{name} is served twice: by {_APIS[key].handler.__name__} and {handler.__name__}"
            )
        _APIS[key] = KafkaApi(name, key, versions[0], versions[1], handler, timed)
        return handler

    return register


def api_for(request: RequestHeader | UnsupportedVersion) -> KafkaApi | None:
    """The API a request names (None for a key this broker does not serve)."""
    return _APIS.get(request.api_key)


def api_named(name: str) -> KafkaApi:
    return _APIS[API_KEYS[name]]


def title_of(key: int) -> str:
    found = _APIS.get(key)
    return found.title if found is not None else str(key)


def served() -> Iterator[KafkaApi]:
    return iter(sorted(_APIS.values(), key=lambda api: api.key))


def key_of(response: ResponsePayload) -> int:
    return int(response.__api_key__)


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
