"""The one front door: every frame a client sends goes through `Dispatcher.answer`, in this order.

1. After a v0 SaslHandshake the frames are bare SASL tokens, not Kafka requests: the login takes them.
2. The fixed header (key, version, correlation id); a frame too short for it closes the connection.
3. On a SASL listener, the login admits the request or not before it is parsed, as Kafka's
   SaslServerAuthenticator does: ApiVersions and SaslHandshake before the handshake, SaslAuthenticate
   after it, everything once logged in (`registry.KafkaApi.login` says which part an API plays). Any
   other request closes the connection, or during the exchange gets its API's error answer with
   ILLEGAL_SASL_STATE after the failed-authentication delay.
4. The codec parses the request; a version outside the table closes the connection, but ApiVersions,
   which is answered at v0 with the list (KIP-511); a frame that cannot be parsed closes it.
5. The body is read into the entity the API declares (codec.carry).
6. The ACLs the API declares: one denied for the request as a whole is answered with the API's error
   answer; those decided per item are made for the handler (`Request.grants`).
7. The handler; its answer is carried over to the version asked for, framed and counted.

A login that fails ends the connection after its answer and the delay, whichever handler failed it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from staticfleet.broker import fetch_wire, registry
from staticfleet.broker.codec import (
    EncodedBody,
    FrameError,
    UnsupportedVersion,
    carry,
    encode_body,
    for_version,
    frame_body,
    frame_payload,
    parse_request,
    peek_header,
)
from staticfleet.broker.fetch_wire import RegionFetchResponse, SplicedFrame
from staticfleet.broker.metrics import BrokerMetrics
from staticfleet.broker.registry import (
    Answer,
    ApiError,
    BrokerContext,
    CloseConnection,
    Grants,
    KafkaApi,
    Peer,
    Request,
    unsupported_version_reply,
)
from staticfleet.broker.security.access import Access, Session
from staticfleet.broker.security.authenticator import Admission, Close, illegal_state_message

# Why connections close, as the connection metrics count them.
AUTHENTICATION, BAD_REQUEST = "authentication", "bad-request"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the server does with one frame: send `frame` (if any), then carry on, or close the
    connection (`close`: the reason as the connection metrics count it, `why`: as the log says it),
    after the failed-authentication delay when `delayed`."""

    frame: bytes | SplicedFrame | None = None
    close: str | None = None
    why: str = ""
    delayed: bool = False


def _closing(label: str, why: object) -> Outcome:
    return Outcome(close=label, why=str(why))


class Dispatcher:
    def __init__(self, ctx: BrokerContext, metrics: BrokerMetrics) -> None:
        self.ctx = ctx
        self.metrics = metrics

    async def answer(self, peer: Peer, frame: bytes) -> Outcome:
        login = peer.login
        if login is not None and login.expects_raw_tokens:
            token = login.raw_token(frame)
            if token.close == Close.NOW:
                return _closing(AUTHENTICATION, "SASL authentication failed")
            return self._after_login_step(peer, None if token.reply is None else frame_payload(token.reply))
        try:
            key, _, _ = peek_header(frame)
        except FrameError as exc:
            return _closing(BAD_REQUEST, exc)
        api = registry.api_for(key)
        admission = Admission.SERVE if login is None else login.admit(None if api is None else api.login)
        if admission == Admission.CLOSE:
            return _closing(
                AUTHENTICATION, f"{_name(api, key)} is not allowed at this step of the SASL login"
            )
        started = time.perf_counter()
        try:
            header, parsed = parse_request(frame, registry.is_supported)
        except UnsupportedVersion as exc:
            reply = unsupported_version_reply(exc) if admission == Admission.SERVE else None
            if reply is None:
                return _closing(BAD_REQUEST, exc)
            self.metrics.observe_request(api, exc.api_version, _error_of(reply), 0.0)
            return Outcome(frame_body(exc.correlation_id, encode_body(reply)))
        except FrameError as exc:
            return _closing(BAD_REQUEST, exc)
        assert api is not None  # parse_request let only served APIs through
        request: Request[Any] = Request(header, carry(parsed, api.request), peer, received=parsed)
        if admission == Admission.ILLEGAL_STATE:
            refused = ApiError(ErrorCode.illegal_sasl_state, illegal_state_message(api.enum_name))
            return self._after_login_step(
                peer, self._encode(api, request, api.error(request, refused), started)
            )
        decided = self._authorize(api, request)
        if isinstance(decided, ApiError):
            return Outcome(self._encode(api, request, api.error(request, decided), started))
        request = Request(header, request.body, peer, decided, parsed)
        try:
            answer = await api.handler(self.ctx, request)
        except CloseConnection as exc:
            return _closing(exc.label, exc)
        framed = self._encode(api, request, answer, started)
        return self._after_login_step(peer, framed) if login is not None else Outcome(framed)

    def _after_login_step(self, peer: Peer, frame: bytes | SplicedFrame | None) -> Outcome:
        """A failed login ends the connection, its answer sent after the delay."""
        if peer.login is not None and peer.login.failed:
            return Outcome(frame, AUTHENTICATION, "SASL authentication failed", delayed=True)
        return Outcome(frame)

    def _authorize(self, api: KafkaApi[Any], request: Request[Any]) -> ApiError | Grants:
        """The request's refusal, from an ACL it needs as a whole; else the decisions for its handler."""
        security = self.ctx.security
        authorizer = security.authorizer if security is not None else None
        if authorizer is None:
            return Grants(None, api.acl_rules)
        access = Access(authorizer, Session.of(request.principal, request.client_host.lstrip("/")))
        grants = Grants(access, api.acl_rules)
        for rule in api.acl:
            if rule.applies is not None and not rule.applies(request):
                continue
            if rule.names is None:
                continue  # decided as the handler meets each name
            names = rule.names(self.ctx, request)
            if rule.per_item:
                for name in names:
                    grants.allows(rule.operation, rule.resource_type, name)
            elif not all(grants.allows(rule.operation, rule.resource_type, name) for name in names):
                return rule.denial(request)
        return grants

    def _encode(
        self, api: KafkaApi[Any], request: Request[Any], answer: Answer, started: float
    ) -> bytes | SplicedFrame | None:
        """The answer framed for the version asked (a Fetch's records may stay in the segment files, as
        a SplicedFrame the caller sends or closes), and counted."""
        header = request.header
        framed: bytes | SplicedFrame | None = None
        error = 0
        reply: Answer = answer
        if isinstance(reply, RegionFetchResponse):
            if header.api_version in fetch_wire.VERSIONS and fetch_wire.supports(reply.response):
                try:
                    framed = fetch_wire.encode(
                        reply.response, header.api_version, header.correlation_id, reply.regions
                    )
                except BaseException:
                    reply.close()
                    raise
                error = _error_of(reply.response)
                reply = None
            else:
                reply = reply.copied()
        if reply is not None:
            encoded = (
                reply
                if isinstance(reply, EncodedBody)
                else encode_body(for_version(reply, header.api_version))
            )
            error = _error_of(encoded.response)
            framed = frame_body(header.correlation_id, encoded)
        self.metrics.observe_request(api, header.api_version, error, time.perf_counter() - started)
        return framed


def _name(api: KafkaApi[Any] | None, key: int) -> str:
    return api.title if api is not None else f"api {key}"


def _error_of(response: ResponsePayload) -> int:
    """The response's top-level error code (0 for APIs that only carry errors per item)."""
    return int(getattr(response, "error_code", 0))
