"""The analysis as DataFrame transformations: the event log in, one DataFrame per output table.

Every function here is lazy and pure (DataFrames in, DataFrames out); reading and writing happen in
`pipeline`, over the events of `lines.analysed`. Events of a group are ordered by `ORDER_COLUMNS`:
time, then where the line was read, which `position` stands for once the file splits are known.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from staticfleet.analytics import schema as s
from staticfleet.analytics.lines import Census, is_type, local_frame, state_name, type_name
from staticfleet.analytics.operator_events import FLEET_OPERATION_COMPLETED, FLEET_OPERATION_STARTED
from staticfleet.coordinator import events as ev

COMPLETED = "completed"
EMPTIED = "emptied"
INTERRUPTED = "interrupted"
OPEN = "open"
INCOMPLETE = "incomplete"


def _code(event_type: str) -> int:
    return s.TYPE_CODES[event_type]


# === timeline and rebalances ========================================================================

TIMELINE_TYPES = (
    ev.REBALANCE_STARTED,
    ev.JOIN_COMPLETED,
    ev.REBALANCE_COMPLETED,
    ev.GROUP_EMPTY,
    ev.GROUP_LOADED,
    ev.GROUP_DELETED,
)
"""The events that change a group's state (and only they do): the group's state timeline."""


_ROW_BITS = 33  # monotonically_increasing_id: partition index above bit 33, row within it below


def split_ranks(spark: SparkSession, census: Census) -> DataFrame:
    """(file_key, source_offset) -> split_rank, with the split's file name and modification time: the
    file splits in log order (file modification time, name, offset). With the row number inside the
    split it gives each line one sortable number, `position`, so that sorting never compares names."""
    splits = census.splits
    return (
        local_frame(
            spark,
            file_key=("bigint", [split.file_key for split in splits]),
            source_offset=("bigint", [split.offset for split in splits]),
            split_rank=("bigint", list(range(len(splits)))),
            source_file=("string", [split.path for split in splits]),
            _mtime=("bigint", [split.mtime_ms for split in splits]),
        )
        .select("*", F.timestamp_millis(F.col("_mtime")).alias("source_mtime"))
        .drop("_mtime")
    )


def _hashed_gid() -> Column:
    return F.xxhash64(F.col("group"))


def group_hashes_unique(numbers: DataFrame) -> bool:
    """Whether no two groups share a 64-bit hash of their name, which then serves as `gid` with no
    lookup (a clash is possible, not likely)."""
    counted = numbers.agg(F.count("*").alias("groups"), F.count_distinct(_hashed_gid()).alias("hashes"))
    row = counted.first()
    return row is None or row["groups"] == row["hashes"]


def group_ids(numbers: DataFrame, hashed: bool) -> DataFrame:
    """group -> gid, a number per group: windows over a group sort by it rather than by the group's
    name, which would be compared character by character on every step of every sort. The hash of the
    name, unless two names share one (`group_hashes_unique`)."""
    gid = _hashed_gid() if hashed else F.monotonically_increasing_id()
    return numbers.select("group", gid.alias("gid"))


def with_position(frame: DataFrame, ranks: DataFrame, ids: DataFrame | None) -> DataFrame:
    """`position` and `split_rank` (see `split_ranks`) and `gid` on every row; `gid` is the hash of the
    group's name unless `ids` (`group_ids`) are given."""
    row_in_split = F.col("source_row").bitwiseAND(F.lit((1 << _ROW_BITS) - 1))
    position = F.shiftleft(F.col("split_rank"), _ROW_BITS) + row_in_split
    keys = ranks.select("file_key", "source_offset", "split_rank")
    ranked = frame.join(F.broadcast(keys), ["file_key", "source_offset"])
    if ids is None:
        ranked = ranked.withColumn("gid", _hashed_gid())
    else:
        ranked = ranked.join(F.broadcast(ids), "group")
    return ranked.withColumn("position", position)


def _stream_order() -> WindowSpec:
    """Log order, with operation marks (is_item 0) before events (is_item 1) of the same millisecond."""
    return Window.partitionBy("gid").orderBy("ts", "is_item", "position")


def rebalance_pass(positioned: DataFrame, operations: DataFrame) -> DataFrame:
    """The groups' rebalance events in log order, one sort, with operation marks merged in; the result is
    the rebalance rows.

    Window functions over that single order give each event the kind of the boundary (start or closer)
    before it, its episode, the operation then running, the previous closing event's member count and
    the previous completed assignment (compared at once, so the assignments go no further). An episode's
    first rebalance_started is a start after no other; a closer has its start in the log when the
    boundary before it is a start. Of the remaining rows, first starts and closers, a closer with its
    start in the log directly follows that start, so a second pass over the same order, without
    sorting again, hands each closer its start and numbers the rebalances."""
    kind = F.col("type_code")
    events = positioned.filter(is_type(*s.EPISODE_START, *s.EPISODE_CLOSERS)).select(
        "gid",
        "ts",
        F.lit(1).alias("is_item"),
        "position",
        "type_code",
        "generation",
        "reason",
        F.when(kind == _code(ev.REBALANCE_STARTED), F.col("detail")).alias("detail"),
        "from_state",
        "duration_ms",
        "leader_instance_id",
        "member_count",  # set only on rebalance_completed and group_loaded
        "assignment",
    )
    stream = events.unionByName(_marks(operations), allowMissingColumns=True)

    order = _stream_order()
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    so_far = order.rowsBetween(Window.unboundedPreceding, 0)
    started = kind == _code(ev.REBALANCE_STARTED)
    closer = is_type(*s.EPISODE_CLOSERS)
    boundary = started | closer

    def last_before(value: Column, where: Column) -> Column:
        return F.last(F.when(where, value), ignorenulls=True).over(before)

    mark = F.struct(
        F.col("_op_end").alias("end"), F.col("_op_id").alias("id"), F.col("_op").alias("operation")
    )
    stream = stream.select(
        "*",
        last_before(kind, boundary).alias("previous_boundary"),
        F.sum(started.cast("int")).over(so_far).alias("starts_so_far"),
        last_before(F.struct(F.col("member_count").alias("n")), closer).alias("previous_closer_count"),
        last_before(F.col("assignment"), kind == _code(ev.REBALANCE_COMPLETED)).alias("previous_assignment"),
        F.last(F.when(F.col("is_item") == 0, mark), ignorenulls=True).over(so_far).alias("_mark"),
    )
    current = F.col("_mark")
    operation_now = F.when(
        F.col("ts") <= current["end"],
        F.struct(current["id"].alias("id"), current["operation"].alias("operation")),
    )
    after_start = F.coalesce(F.col("previous_boundary") == _code(ev.REBALANCE_STARTED), F.lit(False))
    first_start = started & ~after_start
    ended = is_type(ev.REBALANCE_COMPLETED, ev.GROUP_EMPTY)
    start_info = F.struct(
        F.col("ts"),
        F.col("reason"),
        F.col("detail"),
        F.col("from_state"),
        (F.col("starts_so_far") - 1).alias("starts_before"),
        operation_now.alias("operation_now"),
    )
    # Partitions that changed owner since the group's previous completed rebalance: those whose
    # (partition, owner) is new, less those that are new partitions.
    now, previous = F.col("assignment"), F.col("previous_assignment")
    known = previous.isNotNull() & previous["pairs"].isNotNull() & now["pairs"].isNotNull()
    moved = F.size(F.array_except(now["pairs"], previous["pairs"])) - F.size(
        F.array_except(now["keys"], previous["keys"])
    )
    stream = stream.filter(first_start | closer).select(
        "gid",
        "ts",
        "is_item",
        "position",
        "type_code",
        "generation",
        "reason",
        "duration_ms",
        "leader_instance_id",
        "member_count",
        "starts_so_far",
        "previous_closer_count",
        operation_now.alias("operation_now"),
        F.when(first_start, start_info).alias("start_info"),
        (closer & after_start).alias("start_in_log"),
        (closer & (after_start | ended)).alias("closes_a_rebalance"),
        F.when(now["keys"].isNotNull(), F.size(now["keys"])).alias("partitions_total"),
        F.when(known, moved).alias("partitions_moved"),
    )
    # Of these rows, a start is a first start: it is open when no closer follows it, so when it is
    # the group's last row (a first start follows a closer, or nothing). Filtering keeps the order:
    # this pass sorts nothing.
    is_open = (kind == _code(ev.REBALANCE_STARTED)) & F.lead("position").over(order).isNull()
    return (
        stream.select(
            "*",
            F.coalesce(
                F.when(F.col("start_in_log"), F.lag("start_info").over(order)), F.col("start_info")
            ).alias("episode_start"),
            is_open.alias("is_open"),
            (
                F.sum(F.col("closes_a_rebalance").cast("int")).over(so_far)
                + F.when(is_open, F.lit(1)).otherwise(F.lit(0))
            ).alias("rebalance_no"),
        )
        .filter(F.col("closes_a_rebalance") | F.col("is_open"))
        .withColumn("start_in_log", F.col("start_in_log") | F.col("is_open"))
        .drop("start_info", "is_open", "closes_a_rebalance")
    )


def _marks(operations: DataFrame) -> DataFrame:
    return operations.select(
        "gid",
        F.col("start_ts").alias("ts"),
        F.lit(0).alias("is_item"),
        F.lit(s.OTHER).alias("type_code"),
        F.col("operation_id").alias("_op_id"),
        F.col("operation").alias("_op"),
        F.col("window_end_ts").alias("_op_end"),
    )


def rebalances(rows: DataFrame, ids: DataFrame) -> DataFrame:
    """One row per rebalance episode: from its first rebalance_started to its rebalance_completed or
    group_empty. A group_loaded (the coordinator restarted) ends an episode as `interrupted`; an episode
    still going at the end of the log is `open`; one whose start precedes the log is reconstructed from
    the coordinator's own duration (and attributed to an operation by its end)."""
    kind = F.col("type_code")
    completed = kind == _code(ev.REBALANCE_COMPLETED)
    emptied = kind == _code(ev.GROUP_EMPTY)
    ended = completed | emptied
    is_open = kind == _code(ev.REBALANCE_STARTED)
    start = F.col("episode_start")
    in_log = F.col("start_in_log")
    status = (
        F.when(completed, F.lit(COMPLETED))
        .when(emptied, F.lit(EMPTIED))
        .when(kind == _code(ev.GROUP_LOADED), F.lit(INTERRUPTED))
        .otherwise(F.lit(OPEN))
    )
    start_ts = F.when(in_log, start["ts"]).otherwise(F.col("ts") - F.col("duration_ms"))
    end_ts = F.when(~is_open, F.col("ts"))
    start_events = F.when(in_log, F.col("starts_so_far") - start["starts_before"]).otherwise(F.lit(0))
    members_before = F.coalesce(
        F.col("previous_closer_count")["n"], F.when(start["from_state"] == "Empty", F.lit(0))
    )
    operation = F.when(in_log, start["operation_now"]).otherwise(F.col("operation_now"))
    return rows.join(F.broadcast(ids), "gid").select(
        "group",
        F.col("rebalance_no").cast("int").alias("rebalance_no"),
        status.alias("status"),
        F.when(in_log, start["reason"]).otherwise(F.col("reason")).alias("reason"),
        F.when(in_log, start["detail"]).alias("detail"),
        F.when(in_log, start["from_state"]).alias("from_state"),
        start_ts.alias("start_ts"),
        end_ts.alias("end_ts"),
        F.when(ended, F.when(in_log, F.col("ts") - start["ts"]).otherwise(F.col("duration_ms"))).alias(
            "duration_ms"
        ),
        F.when(ended, F.col("duration_ms")).alias("reported_duration_ms"),
        in_log.alias("start_in_log"),
        start_events.cast("long").alias("start_events"),
        F.when(ended, F.col("generation")).alias("generation"),
        members_before.alias("members_before"),
        F.when(completed, F.col("member_count")).when(emptied, F.lit(0)).alias("members_after"),
        F.when(completed, F.col("partitions_total")).alias("partitions_total"),
        F.when(completed, F.col("partitions_moved")).alias("partitions_moved"),
        F.when(completed, F.col("leader_instance_id")).alias("leader_instance_id"),
        operation["id"].alias("operation_id"),
        operation["operation"].alias("operation"),
    )


def group_numbers(valid: DataFrame) -> DataFrame:
    """One row per group: its coordinator events, their time range, its last event of any kind, highest
    generation, the time of its last state-changing event (`_last_change_ts`) and its mode. Every line
    is hashed by (group, mode), numbers only: `mode` is set on operator events alone, so that makes few
    rows per group, which are then folded into one; a text value in the aggregation of every line
    (the mode, the state) would make Spark sort every line by group."""
    coordinator_event = ~is_type(*s.OPERATOR_TYPES)
    per_mode = valid.groupBy("group", "mode").agg(
        F.count_if(coordinator_event).alias("events"),
        F.min(F.when(coordinator_event, F.col("ts"))).alias("first_ts"),
        F.max(F.when(coordinator_event, F.col("ts"))).alias("last_ts"),
        F.max("ts").alias("group_last_ts"),
        F.max("generation").alias("generation"),
        F.max(F.when(is_type(*TIMELINE_TYPES), F.col("ts"))).alias("_last_change_ts"),
    )
    return per_mode.groupBy("group").agg(
        F.sum("events").alias("events"),
        F.min("first_ts").alias("first_ts"),
        F.max("last_ts").alias("last_ts"),
        F.max("group_last_ts").alias("group_last_ts"),
        F.max("generation").alias("generation"),
        F.max("_last_change_ts").alias("_last_change_ts"),
        F.max("mode").alias("mode"),
    )


def group_stats(positioned: DataFrame, numbers: DataFrame, ids: DataFrame) -> DataFrame:
    """`group_numbers` with the group's `gid` and its state after its last state-changing event. The
    state comes from few lines (the state-changing events in the millisecond of the group's last one),
    the last in log order."""
    timeline = is_type(*TIMELINE_TYPES)
    last_change = timeline & (F.col("ts") == F.col("_last_change_ts"))
    dead = F.struct(F.lit(s.STATE_CODES["Dead"]).alias("code"), F.lit(None).cast("string").alias("other"))
    state = F.when(F.col("type_code") == _code(ev.GROUP_DELETED), dead).otherwise(
        F.struct(F.col("state_code").alias("code"), F.col("other_state").alias("other"))
    )
    last = (
        positioned.filter(timeline)
        .join(F.broadcast(numbers.select("group", "_last_change_ts")), "group")
        .filter(last_change)
        .groupBy("group")
        .agg(F.max_by(state, F.struct("ts", "position")).alias("_state"))
    )
    states = last.select("group", state_name(F.col("_state.code"), F.col("_state.other")).alias("state"))
    return numbers.drop("_last_change_ts").join(ids, "group").join(states, "group", "left")


# === membership events ==============================================================================


_MEMBER_DETAILS = ("instance_id", "old_member_id", "cause", "api", "client_reason", "client_host")
"""Fields of a membership event that its row in the `membership` table keeps as they are."""


def membership(positioned: DataFrame) -> DataFrame:
    """The membership events, with `gid` for `attribute`. Where a line was read travels as its split's
    number (`split_rank`) and `source_row` until `membership_table` names the split again, and the
    group as its `gid`: a path or name on every row would weigh on each step in between."""
    replaced = F.col("type_code") == _code(ev.STATIC_MEMBER_REPLACED)
    return positioned.filter(is_type(*s.MEMBERSHIP_TYPES)).select(
        "gid",
        "ts",
        "split_rank",
        "source_row",
        "type_code",
        "generation",
        "state_code",
        "other_state",
        F.coalesce(F.col("member_id"), F.col("new_member_id")).alias("member_id"),
        *_MEMBER_DETAILS,
        F.when(replaced, F.col("rebalance")).alias("rebalance"),
        (replaced & (F.col("rebalance") == F.lit(False))).alias("absorbed"),
    )


MEMBERSHIP_COLUMNS = (
    "member_id",
    *_MEMBER_DETAILS,
    "rebalance",
    "absorbed",
    "operation_id",
    "operation",
)


def membership_table(attributed: DataFrame, ranks: DataFrame, ids: DataFrame) -> DataFrame:
    """The attributed membership events (`membership`, then `attribute`) with their group's name, their
    type and state as text, and their split's file and offset again (`ranks` from `split_ranks`)."""
    named = attributed.join(F.broadcast(ranks.drop("file_key")), "split_rank").join(F.broadcast(ids), "gid")
    return named.select(
        "group",
        *s.ORDER_COLUMNS,
        type_name(F.col("type_code"), F.lit(None).cast("string")).alias("type"),
        "generation",
        state_name().alias("state"),
        *MEMBERSHIP_COLUMNS,
    )


def membership_counts() -> list[Column]:
    kind = F.col("type")
    expired = kind == ev.MEMBER_EXPIRED
    replaced = kind == ev.STATIC_MEMBER_REPLACED
    counts = [
        F.count_if(kind == ev.MEMBER_JOINED).alias("joined"),
        F.count_if(kind == ev.MEMBER_LEFT).alias("left"),
        F.count_if(kind == ev.MEMBER_REMOVED).alias("removed"),
        F.count_if(kind == ev.MEMBER_FENCED).alias("fenced"),
        F.count_if(expired).alias("expired"),
    ]
    counts += [
        F.count_if(expired & (F.col("cause") == cause)).alias(f"expired_{cause.replace('-', '_')}")
        for cause in s.EXPIRY_CAUSES
    ]
    counts += [
        F.count_if(replaced & (F.col("rebalance") == F.lit(False))).alias("restarts_absorbed"),
        F.count_if(replaced & (F.col("rebalance") == F.lit(True))).alias("restarts_rebalanced"),
    ]
    return counts


MEMBERSHIP_COUNT_COLUMNS = (
    "joined",
    "left",
    "removed",
    "fenced",
    "expired",
    *(f"expired_{cause.replace('-', '_')}" for cause in s.EXPIRY_CAUSES),
    "restarts_absorbed",
    "restarts_rebalanced",
)

# === operations =====================================================================================


def operation_windows(positioned: DataFrame, stats: DataFrame, numbered: bool = True) -> DataFrame:
    """Operations paired from their operator events.

    A started event pairs with the next event of the same group and operation id (or, without ids,
    the same operation kind) when that is a completion; otherwise the operation is `incomplete` and
    its window runs to the group's last event in the log. A start without an id is named after its
    group and its place among the group's starts; `numbered=False` skips that numbering, for logs
    whose starts all have ids (`starts_without_id`)."""
    events = positioned.filter(is_type(*s.OPERATOR_TYPES)).withColumn(
        "pair_key", F.coalesce(F.col("id"), F.col("operation"), F.lit(""))
    )
    # One window per group, its operator events by pair key, then in log order: the event after a
    # start is the next of its pair when it has the same key. (A window per pair would be a window
    # per operation, each with its own set-up.)
    pairs = Window.partitionBy("gid").orderBy("pair_key", "ts", "position")
    same_pair = F.lead("pair_key").over(pairs) == F.col("pair_key")

    def following(name: str) -> Column:
        return F.when(same_pair, F.lead(name).over(pairs))

    starts = events.select(
        "*",
        following("type_code").alias("next_type"),
        following("ts").alias("next_ts"),
        following("to_replicas").alias("next_to_replicas"),
        following("mode").alias("next_mode"),
    ).filter(F.col("type_code") == _code(FLEET_OPERATION_STARTED))
    ordinal = F.row_number().over(Window.partitionBy("gid").orderBy("ts", "position"))
    named_by_place = F.concat(F.col("group"), F.lit("#"), ordinal.cast("string")) if numbered else F.lit(None)
    last_ts = stats.select("gid", "group_last_ts")
    completed = F.col("next_type") == _code(FLEET_OPERATION_COMPLETED)
    return starts.join(F.broadcast(last_ts), "gid", "left").select(
        "group",
        "gid",
        F.coalesce(F.col("id"), named_by_place).alias("operation_id"),
        F.coalesce(F.col("operation"), F.lit("unknown")).alias("operation"),
        F.coalesce(F.col("mode"), F.when(completed, F.col("next_mode"))).alias("mode"),
        F.when(completed, F.lit(COMPLETED)).otherwise(F.lit(INCOMPLETE)).alias("status"),
        "from_replicas",
        "to_replicas",
        F.when(completed, F.col("next_to_replicas")).alias("final_replicas"),
        F.col("ts").alias("start_ts"),
        F.when(completed, F.col("next_ts")).alias("end_ts"),
        F.when(completed, F.col("next_ts") - F.col("ts")).alias("duration_ms"),
        F.coalesce(F.when(completed, F.col("next_ts")), F.col("group_last_ts")).alias("window_end_ts"),
    )


def completions_without_start(by_type: dict[str, tuple[int, int, int]], completed_operations: int) -> int:
    """A completion pairs with the start before it, if any, so those not paired are the completions
    less the completed operations."""
    completions = by_type.get(FLEET_OPERATION_COMPLETED, (0, 0, 0))[0]
    return completions - completed_operations


def attribute(items: DataFrame, time_column: str, operations: DataFrame) -> DataFrame:
    """Add operation_id and operation: the group's most recently started operation, if the item's time
    falls inside that operation's window (both ends included). Items and operations carry `gid`."""
    marks = operations.select(
        "gid",
        F.col("start_ts").alias("_at"),
        F.lit(0).alias("_kind"),
        F.struct(
            F.col("operation_id").alias("id"),
            F.col("operation").alias("operation"),
            F.col("window_end_ts").alias("end"),
        ).alias("_mark"),
    )
    tagged = items.withColumn("_at", F.col(time_column)).withColumn("_kind", F.lit(1))
    combined = tagged.unionByName(marks, allowMissingColumns=True)
    so_far = Window.partitionBy("gid").orderBy("_at", "_kind").rowsBetween(Window.unboundedPreceding, 0)
    current = F.last("_mark", ignorenulls=True).over(so_far)
    return (
        combined.select("*", current.alias("_current"))
        .filter(F.col("_kind") == 1)
        .select(
            *items.columns,
            *[
                F.when(F.col("_at") <= F.col("_current")["end"], F.col("_current")[name]).alias(alias)
                for name, alias in (("id", "operation_id"), ("operation", "operation"))
            ],
        )
    )


def _counted(rebalances: DataFrame, membership: DataFrame, key: str) -> DataFrame:
    """The rebalances and membership events with the columns their counts read, as one frame for one
    aggregation (rather than an aggregation of each and a join of the two). `_rebalance` marks the
    rebalances."""
    return rebalances.select(
        key, F.lit(1).alias("_rebalance"), "status", "duration_ms", "partitions_moved"
    ).unionByName(membership.select(key, "type", "cause", "rebalance"), allowMissingColumns=True)


def operations_table(operations: DataFrame, rebalances: DataFrame, membership: DataFrame) -> DataFrame:
    attributed = F.col("operation_id").isNotNull()
    counts = (
        _counted(rebalances.filter(attributed), membership.filter(attributed), "operation_id")
        .groupBy("operation_id")
        .agg(
            F.count("_rebalance").alias("rebalances"),
            F.sum("duration_ms").alias("rebalance_time_ms"),
            F.max("duration_ms").alias("max_rebalance_ms"),
            F.sum("partitions_moved").alias("partitions_moved"),
            *membership_counts(),
        )
    )
    joined = operations.join(counts, "operation_id", "left")
    # Sums over the rebalances that have a value: none attributed, or none known, is zero.
    joined = joined.fillna(
        0, subset=["rebalances", "rebalance_time_ms", "partitions_moved", *MEMBERSHIP_COUNT_COLUMNS]
    )
    return joined.drop("window_end_ts", "gid")


# === groups =========================================================================================


def groups_table(
    stats: DataFrame, rebalances: DataFrame, membership: DataFrame, operations: DataFrame
) -> DataFrame:
    """One row per group. `operations` may be the operations table or the operation windows it is
    made from (`operation_windows`): only their groups are counted."""
    events = stats.drop("group_last_ts", "gid")
    status = F.col("status")
    per_group = (
        _counted(rebalances, membership, "group")
        .unionByName(operations.select("group", F.lit(1).alias("_operation")), allowMissingColumns=True)
        .groupBy("group")
        .agg(
            F.count("_rebalance").alias("rebalances"),
            F.count_if(status == COMPLETED).alias("completed"),
            F.count_if(status == EMPTIED).alias("emptied"),
            F.count_if(status == INTERRUPTED).alias("interrupted"),
            F.count_if(status == OPEN).alias("open"),
            F.sum("duration_ms").alias("rebalance_time_ms"),
            F.max("duration_ms").alias("max_rebalance_ms"),
            F.round(F.avg("duration_ms"), 1).alias("mean_rebalance_ms"),
            F.sum("partitions_moved").alias("partitions_moved"),
            *membership_counts(),
            F.count("_operation").alias("operations"),
        )
    )
    table = events.join(per_group, "group", "left")
    counts = [
        "rebalances",
        "completed",
        "emptied",
        "interrupted",
        "open",
        "operations",
        *MEMBERSHIP_COUNT_COLUMNS,
    ]
    table = table.withColumn(
        "rebalance_time_ms", F.coalesce(F.col("rebalance_time_ms"), F.lit(0).cast("long"))
    ).withColumn("partitions_moved", F.coalesce(F.col("partitions_moved"), F.lit(0).cast("long")))
    return table.fillna(0, subset=counts).orderBy("group")
