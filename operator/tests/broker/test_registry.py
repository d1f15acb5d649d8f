"""The table of Kafka APIs: named by kio, filled by the decorator, advertised as served."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from staticfleet.broker import apis, registry
from staticfleet.broker.codec import _empty_entity, carry, encode_body, for_version
from staticfleet.broker.registry import (
    ApiError,
    Grants,
    Peer,
    RequestHeader,
    Requires,
    UndeclaredAcl,
    UnsupportedVersion,
)
from staticfleet.broker.security.access import Access, Session
from staticfleet.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from staticfleet.broker.security.authorizer import Authorizer, AuthorizerConfig


def test_every_served_version_has_a_kio_request_and_response_entity() -> None:
    for api in registry.served():
        assert api_key_map[api.key] == api.name
        for version in range(api.min_version, api.max_version + 1):
            assert load_request_schema(api.key, version).__version__ == version
            assert load_response_schema(api.key, version).__version__ == version


def test_api_versions_advertises_exactly_the_table() -> None:
    advertised = {(int(k.api_key), int(k.min_version), int(k.max_version)) for k in apis_versions().api_keys}
    assert advertised == {(api.key, api.min_version, api.max_version) for api in registry.served()}
    assert {api.title for api in registry.served()} >= {"JoinGroup", "SyncGroup", "Heartbeat", "ApiVersions"}


def apis_versions() -> Any:
    return registry.api_versions_response()


def test_only_join_and_sync_latencies_are_timed() -> None:
    assert {api.title for api in registry.served() if api.timed} == {"JoinGroup", "SyncGroup"}


def test_an_api_cannot_be_served_by_two_handlers() -> None:
    async def again(ctx: Any, request: Any) -> None:
        return None

    heartbeat = registry.api_named("heartbeat")
    with pytest.raises(ValueError, match="served twice"):
        registry.kafka_api("heartbeat", (0, 4), heartbeat.request, error=heartbeat.error)(again)
    assert registry.api_named("heartbeat").handler is apis.groups.handle_heartbeat


def test_an_unknown_api_name_fails_when_the_handler_is_declared() -> None:
    heartbeat = registry.api_named("heartbeat")
    with pytest.raises(KeyError):
        registry.kafka_api("heart_beat", (0, 4), heartbeat.request, error=heartbeat.error)


def test_a_too_new_api_versions_is_answered_at_v0_listing_only_api_versions() -> None:
    answer: Any = registry.unsupported_version_reply(
        UnsupportedVersion(registry.API_KEYS["api_versions"], 99, 7)
    )
    assert answer.__version__ == 0 and answer.error_code == ErrorCode.unsupported_version
    assert [int(k.api_key) for k in answer.api_keys] == [registry.API_KEYS["api_versions"]]
    assert (
        registry.unsupported_version_reply(UnsupportedVersion(registry.API_KEYS["heartbeat"], 99, 7)) is None
    )


def test_handlers_answer_every_served_version_of_api_versions() -> None:
    api = registry.api_named("api_versions")
    for version in range(api.min_version, api.max_version + 1):
        body = load_request_schema(api.key, version)(
            **({"client_software_name": "x", "client_software_version": "1"} if version >= 3 else {})
        )
        header = RequestHeader(api.key, version, 1, "c")
        request = registry.Request(header, carry(body, api.request), Peer("/127.0.0.1"), received=body)
        response: Any = for_version(asyncio.run(api.handler(Any, request)), version)  # type: ignore[arg-type]
        assert response.__version__ == version and response.error_code == ErrorCode.none


def test_every_api_reads_its_requests_into_its_newest_version() -> None:
    for api in registry.served():
        assert (api.request.__api_key__, api.request.__version__) == (api.key, api.max_version), api.name
        for version in range(api.min_version, api.max_version + 1):
            # Every field a version lacks takes the protocol's default: nothing is missing.
            assert isinstance(
                carry(_empty_entity(load_request_schema(api.key, version)), api.request), api.request
            )


def test_every_api_declares_an_error_answer_for_every_served_version() -> None:
    """What the dispatch path sends for a refused request (a denial, or a request during a SASL login)
    can be written at every version; only an acks=0 Produce has none, as in Kafka."""
    refused = ApiError(
        ErrorCode.illegal_sasl_state, "Unexpected Kafka request of type X during SASL authentication."
    )
    for api in registry.served():
        for version in range(api.min_version, api.max_version + 1):
            body = _empty_entity(load_request_schema(api.key, version))
            header = RequestHeader(api.key, version, 1, "c")
            request = registry.Request(header, carry(body, api.request), Peer("/127.0.0.1"), received=body)
            answer = api.error(request, refused)
            if answer is None:
                assert api.name == "produce"
                continue
            encoded = encode_body(for_version(answer, version))
            assert encoded.response.__version__ == version
            assert getattr(encoded.response, "error_code", refused.code) in (refused.code, ErrorCode.none), (
                api.name
            )


def test_whole_request_acls_have_names_and_answer_with_the_resource_types_error() -> None:
    for api in registry.served():
        for rule in api.acl:
            if not rule.per_item:
                assert rule.names is not None, api.name
                assert rule.denial(_request_of(api)).code in (
                    ErrorCode.group_authorization_failed,
                    ErrorCode.cluster_authorization_failed,
                )


def _request_of(api: Any) -> Any:
    body = _empty_entity(api.request)
    return registry.Request(RequestHeader(api.key, api.max_version, 1, "c"), body, Peer("/127.0.0.1"))


def _create_acl(resource: ResourceType, name: str) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, PatternType.LITERAL),
        AccessControlEntry("User:a", "*", AclOperation.CREATE, PermissionType.ALLOW),
    )


def test_topic_creation_is_allowed_by_create_on_the_topic_or_on_the_cluster_where_the_api_says_so() -> None:
    def grants(acl: AclBinding, cluster_grants: bool) -> Grants:
        access = Access(Authorizer(AuthorizerConfig(), [acl]), Session("User:a"))
        rule: Requires[Any] = Requires.each(
            AclOperation.CREATE, ResourceType.TOPIC, cluster_grants=cluster_grants
        )
        return Grants(access, {(AclOperation.CREATE, ResourceType.TOPIC): rule})

    on_topic = grants(_create_acl(ResourceType.TOPIC, "t"), cluster_grants=True)
    assert on_topic.allows(AclOperation.CREATE, ResourceType.TOPIC, "t")
    assert not on_topic.allows(AclOperation.CREATE, ResourceType.TOPIC, "u")
    on_cluster = _create_acl(ResourceType.CLUSTER, "kafka-cluster")
    assert grants(on_cluster, cluster_grants=True).allows(AclOperation.CREATE, ResourceType.TOPIC, "anything")
    assert not grants(on_cluster, cluster_grants=False).allows(
        AclOperation.CREATE, ResourceType.TOPIC, "anything"
    )


def test_a_handler_may_ask_only_about_the_acls_its_api_declares() -> None:
    declared = Grants(None, registry.api_named("delete_groups").acl_rules)
    assert declared.allows(AclOperation.DELETE, ResourceType.GROUP, "g")  # no authorizer: allowed
    with pytest.raises(UndeclaredAcl):
        declared.allows(AclOperation.READ, ResourceType.GROUP, "g")
