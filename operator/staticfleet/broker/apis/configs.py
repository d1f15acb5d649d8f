"""DescribeConfigs and IncrementalAlterConfigs (groups: the staticfleet extension; topics: the topic log)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.describe_configs.v4 import request as describe_configs_req
from kio.schema.describe_configs.v4 import response as describe_configs_res
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as alter_configs_req
from kio.schema.incremental_alter_configs.v1 import response as alter_configs_res
from kio.static.primitive import i8

from staticfleet.broker.apis.common import SOURCE_DEFAULT, SOURCE_DYNAMIC_TOPIC, E, gated
from staticfleet.broker.apis.security import access
from staticfleet.broker.registry import NO_THROTTLE, BrokerContext, Request, kafka_api
from staticfleet.broker.security.acl import AclOperation
from staticfleet.broker.topiclog_errors import TopicLogError
from staticfleet.coordinator import CoordinatorError, CoordinatorResult, GroupCoordinator

# Resource types of DescribeConfigs / IncrementalAlterConfigs.
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32

_TYPE_STRING, _TYPE_LONG = i8(0), i8(2)


def _config_entry(
    name: str, value: str | None, source: i8
) -> describe_configs_res.DescribeConfigsResourceResult:
    return describe_configs_res.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=False,
        config_source=source,
        is_sensitive=False,
        synonyms=(),
        config_type=_TYPE_LONG if name.endswith(("ms", "bytes", "partitions")) else _TYPE_STRING,
        documentation=None,
    )


@kafka_api("describe_configs", (1, 4))
async def handle_describe_configs(
    ctx: BrokerContext, request: Request[describe_configs_req.DescribeConfigsRequest]
) -> describe_configs_res.DescribeConfigsResponse:
    results = []
    refused = []
    checks = access(ctx, request)
    for resource in request.body.resources:
        kind, name = resource.resource_type, resource.resource_name
        denial = _config_denial(checks, kind, name, AclOperation.DESCRIBE_CONFIGS)
        if denial is not None:
            # Refused resources come after the others, with the error's default message.
            refused.append(
                describe_configs_res.DescribeConfigsResult(
                    error_code=denial[0],
                    error_message=denial[1],
                    resource_type=kind,
                    resource_name=name,
                    configs=(),
                )
            )
            continue
        keys = resource.configuration_keys
        wanted = None if keys is None else set(keys)
        error, message = E.none, "" if checks.enabled else None
        configs: tuple[describe_configs_res.DescribeConfigsResourceResult, ...] = ()
        if kind == RESOURCE_GROUP:
            configs = tuple(
                _config_entry(k, v, SOURCE_DYNAMIC_TOPIC)
                for k, v in sorted(ctx.host.coordinator.describe_group_config(name).items())
                if wanted is None or k in wanted
            )
        elif kind == RESOURCE_TOPIC:
            if not ctx.topics.has_topic(name):
                error, message = E.unknown_topic_or_partition, f"Topic {name} does not exist."
            else:
                overrides = ctx.topics.describe_topic(name).configs
                configs = tuple(
                    _config_entry(k, v, SOURCE_DYNAMIC_TOPIC if k in overrides else SOURCE_DEFAULT)
                    for k, v in sorted(ctx.topics.topic_configs(name).items())
                    if wanted is None or k in wanted
                )
        elif kind != RESOURCE_BROKER:
            error, message = E.invalid_request, f"Unsupported resource type {kind}"
        results.append(
            describe_configs_res.DescribeConfigsResult(
                error_code=error,
                error_message=message,
                resource_type=kind,
                resource_name=name,
                configs=configs,
            )
        )
    return describe_configs_res.DescribeConfigsResponse(
        throttle_time=NO_THROTTLE, results=tuple(results) + tuple(refused)
    )


def _config_denial(
    checks: Any, kind: int, name: str, operation: AclOperation
) -> tuple[ErrorCode, str] | None:
    """The error for a config resource the caller may not describe or alter (None: allowed)."""
    if not checks.enabled:
        return None
    if kind == RESOURCE_GROUP and not checks.group(operation, name):
        return E.group_authorization_failed, "Group authorization failed."
    if kind == RESOURCE_TOPIC and not checks.topic(operation, name):
        return E.topic_authorization_failed, "Topic authorization failed."
    if kind == RESOURCE_BROKER and not checks.cluster(operation):
        return E.cluster_authorization_failed, "Cluster authorization failed."
    return None


_SET, _DELETE, _APPEND, _SUBTRACT = range(4)


def _config_changes(current: dict[str, str], configs: Iterable[Any]) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for c in configs:
        op, name, value = int(c.config_operation), c.name, c.value
        if op == _SET:
            changes[name] = value
        elif op == _DELETE:
            changes[name] = None
        elif op in (_APPEND, _SUBTRACT):
            base = [v for v in (changes.get(name) or current.get(name) or "").split(",") if v]
            items = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == _APPEND:
                base += [v for v in items if v not in base]
            else:
                base = [v for v in base if v not in items]
            changes[name] = ",".join(base) if base else None
        else:
            raise CoordinatorError(E.invalid_request, f"unknown config operation {op}")
    return changes


@kafka_api("incremental_alter_configs", (0, 1))
async def handle_incremental_alter_configs(
    ctx: BrokerContext, request: Request[alter_configs_req.IncrementalAlterConfigsRequest]
) -> alter_configs_res.IncrementalAlterConfigsResponse:
    validate_only = bool(request.body.validate_only)
    responses = []
    checks = access(ctx, request)
    for resource in request.body.resources:
        kind, name = resource.resource_type, resource.resource_name
        error: ErrorCode = E.none
        message: str | None = None
        denial = _config_denial(checks, kind, name, AclOperation.ALTER_CONFIGS)
        if denial is not None:
            responses.append(
                alter_configs_res.AlterConfigsResourceResponse(
                    error_code=denial[0], error_message=denial[1], resource_type=kind, resource_name=name
                )
            )
            continue
        try:
            if kind == RESOURCE_GROUP:
                changes = _config_changes(ctx.host.coordinator.describe_group_config(name), resource.configs)

                def alter(
                    c: GroupCoordinator, group: str = name, ch: dict[str, str | None] = changes
                ) -> CoordinatorResult[None]:
                    return c.alter_group_config(group, ch, validate_only)

                ctx.host.call(alter)
            elif kind == RESOURCE_TOPIC:
                current = ctx.topics.describe_topic(name).configs if ctx.topics.has_topic(name) else {}
                topic_changes = _config_changes(dict(current), resource.configs)
                ctx.topics.alter_topic_configs(name, topic_changes, validate_only=validate_only)
            else:
                error, message = (
                    E.invalid_request,
                    f"Altering configs of resource type {kind} is not supported",
                )
        except CoordinatorError as exc:
            error, message = exc.code, str(exc)
        except TopicLogError as exc:
            error, message = exc.error_code, str(exc)
        responses.append(
            alter_configs_res.AlterConfigsResourceResponse(
                error_code=error, error_message=message, resource_type=kind, resource_name=name
            )
        )
    result = alter_configs_res.IncrementalAlterConfigsResponse(
        throttle_time=NO_THROTTLE, responses=tuple(responses)
    )
    return await gated(ctx, result)
