"""The event log's columns as Spark sees them, and the event types each table is made of."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from staticfleet.analytics.operator_events import FLEET_OPERATION_COMPLETED, FLEET_OPERATION_STARTED
from staticfleet.coordinator import events as ev
from staticfleet.coordinator.group import GroupState

if TYPE_CHECKING:
    from pyspark.sql.types import ArrayType, StructType

SCHEMA_VERSION: Final = 1
CORRUPT: Final = "_corrupt_record"

# Row status in the events table: every input line gets one, so nothing read is lost.
OK: Final = "ok"
MALFORMED: Final = "malformed"
MISSING_FIELDS: Final = "missing-fields"
UNSUPPORTED_VERSION: Final = "unsupported-version"

EPISODE_START: Final = (ev.REBALANCE_STARTED,)
EPISODE_CLOSERS: Final = (ev.REBALANCE_COMPLETED, ev.GROUP_EMPTY, ev.GROUP_LOADED)
MEMBERSHIP_TYPES: Final = (
    ev.MEMBER_JOINED,
    ev.STATIC_MEMBER_REPLACED,
    ev.MEMBER_FENCED,
    ev.MEMBER_LEFT,
    ev.MEMBER_REMOVED,
    ev.MEMBER_EXPIRED,
)
OPERATOR_TYPES: Final = (FLEET_OPERATION_STARTED, FLEET_OPERATION_COMPLETED)
EXPIRY_CAUSES: Final = ("session-timeout", "join-timeout", "sync-timeout", "rebalance-timeout", "pending")

# The event log's fields. `members` and `configs` are JSON text here (the shape of a Parquet log):
# `members` is a count in some event types and a list in others, and is parsed where its shape is known.
_STRING = "string"
_INT = "int"
_LONG = "long"
_BOOL = "boolean"
EVENT_FIELDS: Final = (
    ("v", _INT),
    ("ts", _LONG),
    ("type", _STRING),
    ("group", _STRING),
    ("generation", _INT),
    ("state", _STRING),
    ("member_id", _STRING),
    ("instance_id", _STRING),
    ("client_id", _STRING),
    ("client_host", _STRING),
    ("session_timeout_ms", _INT),
    ("rebalance_timeout_ms", _INT),
    ("old_member_id", _STRING),
    ("new_member_id", _STRING),
    ("rebalance", _BOOL),
    ("api", _STRING),
    ("client_reason", _STRING),
    ("cause", _STRING),
    ("reason", _STRING),
    ("detail", _STRING),
    ("from_state", _STRING),
    ("members", _STRING),
    ("protocol_type", _STRING),
    ("protocol", _STRING),
    ("leader", _STRING),
    ("leader_instance_id", _STRING),
    ("duration_ms", _LONG),
    ("configs", _STRING),
    ("operation", _STRING),
    ("id", _STRING),
    ("from_replicas", _INT),
    ("to_replicas", _INT),
    ("mode", _STRING),
)
NOT_ANALYSED: Final = (
    "members",
    "configs",
    "client_id",
    "session_timeout_ms",
    "rebalance_timeout_ms",
    "protocol_type",
    "protocol",
    "leader",
)
"""Fields no table reads from an event: a JSON line's parser skips them; a rejected line keeps them."""
ANALYSED_FIELDS: Final = tuple((name, kind) for name, kind in EVENT_FIELDS if name not in NOT_ANALYSED)

# How the analysed fields are held once read. The fields every line has are one struct, `core`: its
# numbers, the group, and the event type, group state and line status as codes (below). A struct is
# held as one value, so caching the lines spends nothing on choosing a compression for each of these
# columns, a lookup of every value in a table of those seen that costs more than the memory it saves.
# The other fields are one struct per kind of event, set only on events of that kind.
CORE_NUMBERS: Final = ("v", "ts", "generation")

EVENT_TYPES: Final = (
    ev.REBALANCE_STARTED,
    ev.JOIN_COMPLETED,
    ev.REBALANCE_COMPLETED,
    ev.MEMBER_JOINED,
    ev.STATIC_MEMBER_REPLACED,
    ev.MEMBER_LEFT,
    ev.MEMBER_EXPIRED,
    ev.MEMBER_REMOVED,
    ev.MEMBER_FENCED,
    ev.GROUP_EMPTY,
    ev.GROUP_LOADED,
    ev.GROUP_DELETED,
    ev.GROUP_CONFIG_CHANGED,
    FLEET_OPERATION_STARTED,
    FLEET_OPERATION_COMPLETED,
)
STATES: Final = tuple(state.value for state in GroupState)
STATUSES: Final = (OK, MALFORMED, MISSING_FIELDS, UNSUPPORTED_VERSION)
OTHER: Final = 0
"""Codes: a known type, state or status is its place in `EVENT_TYPES`, `STATES` or `STATUSES`, from 1;
any other type or state is `OTHER`, its text kept beside the code (`other_type`, `other_state`)."""


def codes(names: tuple[str, ...]) -> dict[str, int]:
    return {name: code for code, name in enumerate(names, start=1)}


TYPE_CODES: Final = codes(EVENT_TYPES)
STATE_CODES: Final = codes(STATES)
STATUS_CODES: Final = codes(STATUSES)

MEMBER_FIELDS: Final = (
    "member_id",
    "instance_id",
    "client_host",
    "old_member_id",
    "new_member_id",
    "rebalance",
    "api",
    "client_reason",
    "cause",
)
EPISODE_FIELDS: Final = ("reason", "detail", "from_state", "duration_ms", "leader_instance_id")
"""Read from a rebalance event; the member count and decoded assignment are added to them."""
OPERATOR_FIELDS: Final = ("operation", "id", "from_replicas", "to_replicas", "mode")
SOURCE_COLUMNS: Final = ("source_file", "source_mtime", "source_offset", "source_row")
ORDER_COLUMNS: Final = ("ts", "source_mtime", "source_file", "source_offset", "source_row")
"""Events of a group in log order: by time, then by where they were read (file modification time,
path, split, line). Once the splits are known, `position` stands for the last four."""


def event_schema(
    fields_read: tuple[tuple[str, str], ...] = EVENT_FIELDS, with_corrupt: bool = True
) -> StructType:
    from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

    types = {_STRING: StringType(), _INT: IntegerType(), _LONG: LongType(), _BOOL: BooleanType()}
    fields = [StructField(name, types[kind]) for name, kind in fields_read]
    if with_corrupt:
        fields.append(StructField(CORRUPT, StringType()))
    return StructType(fields)


def members_schema() -> ArrayType:
    """`members` of join_completed / rebalance_completed: who, and (consumer protocol) which partitions."""
    from pyspark.sql.types import ArrayType, IntegerType, MapType, StringType, StructField, StructType

    member = StructType(
        [
            StructField("member_id", StringType()),
            StructField("instance_id", StringType()),
            StructField("assignment", MapType(StringType(), ArrayType(IntegerType()))),
        ]
    )
    return ArrayType(member)
