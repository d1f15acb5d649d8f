"""The table of Kafka APIs: named by kio, filled by the decorator, advertised as served."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from staticfleet.broker import apis, registry
from staticfleet.broker.codec import for_version
from staticfleet.broker.registry import RequestHeader, UnsupportedVersion


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

    with pytest.raises(ValueError, match="served twice"):
        registry.kafka_api("heartbeat", (0, 4))(again)
    assert registry.api_named("heartbeat").handler is apis.groups.handle_heartbeat


def test_an_unknown_api_name_fails_when_the_handler_is_declared() -> None:
    with pytest.raises(KeyError):
        registry.kafka_api("heart_beat", (0, 4))


def test_a_too_new_api_versions_is_answered_at_v0_listing_only_api_versions() -> None:
    answer: Any = apis.unsupported_version_reply(UnsupportedVersion(registry.API_KEYS["api_versions"], 99, 7))
    assert answer.__version__ == 0 and answer.error_code == ErrorCode.unsupported_version
    assert [int(k.api_key) for k in answer.api_keys] == [registry.API_KEYS["api_versions"]]
    assert apis.unsupported_version_reply(UnsupportedVersion(registry.API_KEYS["heartbeat"], 99, 7)) is None


def test_handlers_answer_every_served_version_of_api_versions() -> None:
    api = registry.api_named("api_versions")
    for version in range(api.min_version, api.max_version + 1):
        body = load_request_schema(api.key, version)(
            **({"client_software_name": "x", "client_software_version": "1"} if version >= 3 else {})
        )
        request = registry.Request(RequestHeader(api.key, version, 1, "c"), "/127.0.0.1", body)
        response: Any = for_version(asyncio.run(api.handler(Any, request)), version)  # type: ignore[arg-type]
        assert response.__version__ == version and response.error_code == ErrorCode.none
