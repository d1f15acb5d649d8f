"""DescribeConfigs and IncrementalAlterConfigs (groups: the staticfleet extension; topics: the topic log)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from kio.schema.describe_configs.v4 import request as describe_configs_req
from kio.schema.describe_configs.v4 import response as describe_configs_res
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as alter_configs_req
from kio.schema.incremental_alter_configs.v1 import response as alter_configs_res
from kio.static.primitive import i8
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import SOURCE_DEFAULT, SOURCE_DYNAMIC_TOPIC, E, gated
from staticfleet.broker.registry import (
    NO_THROTTLE,
    ApiError,
    BrokerContext,
    Request,
    Requires,
    denied,
    kafka_api,
    kafka_message,
)
from staticfleet.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from staticfleet.broker.topic_configs import config_type
from staticfleet.broker.topiclog_errors import TopicLogError
from staticfleet.coordinator import CoordinatorError, CoordinatorResult, GroupCoordinator

# Resource types of DescribeConfigs / IncrementalAlterConfigs.
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32

_TYPE_STRING, _TYPE_LONG = i8(0), i8(2)
# The ACL resource of each config resource type.
_ACL_RESOURCE = {
    RESOURCE_GROUP: ResourceType.GROUP,
    RESOURCE_TOPIC: ResourceType.TOPIC,
    RESOURCE_BROKER: ResourceType.CLUSTER,
}

DescribeConfigsRequest = describe_configs_req.DescribeConfigsRequest
AlterConfigsRequest = alter_configs_req.IncrementalAlterConfigsRequest
C = TypeVar("C", DescribeConfigsRequest, AlterConfigsRequest)


def _config_acls(operation: AclOperation, entity: type[C]) -> tuple[Requires[C], ...]:
    """`operation` on each resource a configs request names, answered in its place when denied: a group,
    a topic, or (for a broker) the cluster."""

    def named(kind: int) -> Callable[[BrokerContext, Request[C]], list[str]]:
        def names(ctx: BrokerContext, request: Request[C]) -> list[str]:
            found = [r.resource_name for r in request.body.resources if r.resource_type == kind]
            return [CLUSTER_NAME] if kind == RESOURCE_BROKER and found else found

        return names

    return tuple(Requires.each(operation, _ACL_RESOURCE[kind], named(kind)) for kind in _ACL_RESOURCE)


def _config_denial(request: Request[C], kind: int, name: str, operation: AclOperation) -> ApiError | None:
    """The error for a config resource the caller may not describe or alter (None: allowed)."""
    resource_type = _ACL_RESOURCE.get(kind)
    if resource_type is None:
        return None
    name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else name
    return None if request.allows(operation, resource_type, name) else denied(resource_type)


def _config_entry(
    name: str, value: str | None, source: i8, kind: i8 | None = None
) -> describe_configs_res.DescribeConfigsResourceResult:
    return describe_configs_res.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=False,
        config_source=source,
        is_sensitive=False,
        synonyms=(),
        config_type=kind
        if kind is not None
        else _TYPE_LONG
        if name.endswith(("ms", "bytes", "partitions"))
        else _TYPE_STRING,
        documentation=None,
    )


def _describe_configs_error(request: Request[DescribeConfigsRequest], error: ApiError) -> ResponsePayload:
    return describe_configs_res.DescribeConfigsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            describe_configs_res.DescribeConfigsResult(
                error_code=error.code,
                error_message=kafka_message(error.code),  # Kafka writes the error's own message here
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=(),
            )
            for r in request.body.resources
        ),
    )


@kafka_api(
    "describe_configs",
    (1, 4),
    DescribeConfigsRequest,
    error=_describe_configs_error,
    acl=_config_acls(AclOperation.DESCRIBE_CONFIGS, DescribeConfigsRequest),
)
async def handle_describe_configs(
    ctx: BrokerContext, request: Request[DescribeConfigsRequest]
) -> describe_configs_res.DescribeConfigsResponse:
    results = []
    refused = []
    for resource in request.body.resources:
        kind, name = resource.resource_type, resource.resource_name
        denial = _config_denial(request, kind, name, AclOperation.DESCRIBE_CONFIGS)
        if denial is not None:
            # Refused resources come after the others, with the error's default message.
            refused.append(
                describe_configs_res.DescribeConfigsResult(
                    error_code=denial.code,
                    error_message=denial.message,
                    resource_type=kind,
                    resource_name=name,
                    configs=(),
                )
            )
            continue
        keys = resource.configuration_keys
        wanted = None if keys is None else set(keys)
        error, message = E.none, "" if request.grants.enabled else None
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
                    _config_entry(
                        k, v, SOURCE_DYNAMIC_TOPIC if k in overrides else SOURCE_DEFAULT, i8(config_type(k))
                    )
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


_SET, _DELETE, _APPEND, _SUBTRACT = range(4)


def _config_changes(
    current: dict[str, str], configs: Iterable[alter_configs_req.AlterableConfig]
) -> dict[str, str | None]:
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


def _alter_configs_error(request: Request[AlterConfigsRequest], error: ApiError) -> ResponsePayload:
    return alter_configs_res.IncrementalAlterConfigsResponse(
        throttle_time=NO_THROTTLE,
        responses=tuple(
            alter_configs_res.AlterConfigsResourceResponse(
                error_code=error.code,
                error_message=error.message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in request.body.resources
        ),
    )


@kafka_api(
    "incremental_alter_configs",
    (0, 1),
    AlterConfigsRequest,
    error=_alter_configs_error,
    acl=_config_acls(AclOperation.ALTER_CONFIGS, AlterConfigsRequest),
)
async def handle_incremental_alter_configs(
    ctx: BrokerContext, request: Request[AlterConfigsRequest]
) -> alter_configs_res.IncrementalAlterConfigsResponse:
    validate_only = request.body.validate_only
    responses = []
    for resource in request.body.resources:
        kind, name = resource.resource_type, resource.resource_name
        error: ErrorCode = E.none
        message: str | None = None
        denial = _config_denial(request, kind, name, AclOperation.ALTER_CONFIGS)
        if denial is not None:
            responses.append(
                alter_configs_res.AlterConfigsResourceResponse(
                    error_code=denial.code,
                    error_message=denial.message,
                    resource_type=kind,
                    resource_name=name,
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
                # APPEND and SUBTRACT start from the effective value, the default when none is set.
                current = ctx.topics.topic_configs(name) if ctx.topics.has_topic(name) else {}
                topic_changes = _config_changes(current, resource.configs)
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
