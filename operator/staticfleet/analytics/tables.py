"""The analysis as DataFrame transformations: the event log in, one DataFrame per output table.

Every function here is lazy and pure (DataFrames in, DataFrames out); reading and writing happen in
`pipeline`. Events of a group are ordered by `ORDER_COLUMNS`: time, then where the line was read.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType
from pyspark.sql.window import WindowSpec

from staticfleet.analytics import schema as s
from staticfleet.analytics.inputs import Sources
from staticfleet.analytics.operator_events import FLEET_OPERATION_COMPLETED, FLEET_OPERATION_STARTED
from staticfleet.coordinator import events as ev

COMPLETED = "completed"
EMPTIED = "emptied"
INTERRUPTED = "interrupted"
OPEN = "open"
INCOMPLETE = "incomplete"

# === reading ========================================================================================


def read_events(spark: SparkSession, sources: Sources) -> DataFrame:
    """Every input line as a row with a `status`: the fields some table reads (`ANALYSED_FIELDS`, held as
    `CORE_TEXTS`, a struct of numbers and one struct per kind of event), the member count
    (rebalance_completed, group_loaded) and decoded assignment (rebalance_completed), `raw_line` on
    lines other than `ok`, and where the line was read (`SOURCE_COLUMNS`). Blank lines have no status;
    nothing counts or keeps them. `unpacked` makes each field a column."""
    frames = []
    if sources.json:
        frames.append(_read_json(spark, sources.json))
    if sources.parquet:
        frames.append(_read_parquet(spark, sources.parquet))
    events = frames[0]
    for frame in frames[1:]:
        events = events.unionByName(frame)
    return events


def _source_columns() -> list[Column]:
    return [
        # Not `_metadata.file_path`: that one is rebuilt as text on every row, at a cost that shows.
        F.input_file_name().alias("source_file"),
        F.col("_metadata.file_modification_time").alias("source_mtime"),
        F.col("_metadata.file_block_start").alias("source_offset"),
        # Rows of one file split share a partition, in line order: this id orders them.
        F.monotonically_increasing_id().alias("source_row"),
    ]


_ANALYSED = [name for name, _ in s.ANALYSED_FIELDS]
_KEEP_MALFORMED = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": s.CORRUPT}
"""A line that does not parse fills the corrupt-record field, and what could be read of it the others."""


def _read_json(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Spark's JSON-lines reader, for the analysed fields and `members` as text: the parser skips the
    other fields without building them, and copies `members` as it stands, to be decoded where it is
    a rebalance_completed's member list. A line that does not parse keeps its text in the corrupt
    record field and gives what could be read of it. Like the reader, a line holding a JSON array
    counts as the values in it."""
    schema = s.event_schema((*s.ANALYSED_FIELDS, ("members", "string")))
    read = spark.read.schema(schema).options(**_KEEP_MALFORMED).json(list(paths))
    kind = F.col("type")
    fields = read.select(
        *_source_columns(),
        *_ANALYSED,
        _status(F.col(s.CORRUPT).isNotNull()).alias("status"),
        F.col(s.CORRUPT).alias("_line"),
        F.when(kind == ev.REBALANCE_COMPLETED, F.from_json(F.col("members"), s.members_schema())).alias(
            "_members"
        ),
        F.when(kind == ev.GROUP_LOADED, F.col("members").try_cast("int")).alias("_count"),
    )
    return _analysed(fields, F.col("_members"), F.col("_count"), F.col("_line"))


def _read_parquet(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Parquet event logs: the known columns, cast to the event schema; missing ones are null. A row
    that is not an event keeps its `raw_line` if it has one (an events table), else its columns as
    JSON text."""
    frame = spark.read.parquet(*paths)
    present = {field.name: field.dataType for field in frame.schema.fields}
    columns = []
    for name, kind in s.EVENT_FIELDS:
        if name not in present:
            columns.append(F.lit(None).cast(kind).alias(name))
        elif kind == "string" and not isinstance(present[name], StringType):
            columns.append(F.to_json(F.col(name)).alias(name))
        else:
            columns.append(F.col(name).try_cast(kind).alias(name))
    given = F.col("raw_line").cast("string") if "raw_line" in present else F.lit(None).cast("string")
    if all(name in present for name in s.SOURCE_COLUMNS):
        sources = [F.col(name) for name in s.SOURCE_COLUMNS]  # an events table keeps its log order
    else:
        sources = _source_columns()
    typed = frame.select(*columns, *sources, given.alias("_given_line"))
    as_read = F.to_json(F.struct(*[F.col(name) for name, _ in s.EVENT_FIELDS]))
    fields = typed.select(
        F.coalesce(F.col("_given_line"), as_read).alias("_line"),
        *s.SOURCE_COLUMNS,
        *_ANALYSED,
        _status(_not_json(F.col("_given_line"))).alias("status"),
        "members",
    )
    event_type = F.col("type")
    members = F.when(event_type == ev.REBALANCE_COMPLETED, F.from_json(F.col("members"), s.members_schema()))
    count = F.when(event_type == ev.GROUP_LOADED, F.col("members").try_cast("int"))
    return _analysed(fields, members, count, F.col("_line"))


def _not_json(line: Column) -> Column:
    """A line kept in an events table that does not parse as an event (parsed again: these are few)."""
    parsed = F.from_json(line, s.event_schema(), _KEEP_MALFORMED)
    return line.isNotNull() & parsed[s.CORRUPT].isNotNull()


def _analysed(fields: DataFrame, members: Column, loaded_count: Column, line: Column) -> DataFrame:
    """The analysed columns: member count and assignment from the members, the line where it is not
    an event. The member list is decoded straight into each member's entries, in a projection of its
    own, so it is decoded once."""
    kind = F.col("type")
    decoded = fields.select(
        "*",
        F.transform(members, _member_entries).alias("_per_member"),
        loaded_count.alias("_loaded_count"),
    )
    per_member = F.col("_per_member")
    counted = decoded.select(
        *fields.columns,
        F.coalesce(F.size(per_member), F.col("_loaded_count")).alias("member_count"),
        # Null when any member's assignment is unknown (not the consumer protocol, undecodable).
        F.flatten(per_member).alias("_entries"),
    )
    entries = F.col("_entries")
    # A completed rebalance with an unknown assignment still has a struct (of nulls): it is the
    # previous assignment of the next one, which then has no partitions-moved count.
    assignment = F.when(
        kind == ev.REBALANCE_COMPLETED,
        F.struct(
            F.transform(entries, lambda entry: entry["pair"]).alias("pairs"),
            F.transform(entries, lambda entry: entry["key"]).alias("keys"),
        ),
    )
    episode: list[str | Column] = [*s.EPISODE_FIELDS, "member_count", assignment.alias("assignment")]
    return counted.select(
        "status",
        *s.CORE_TEXTS,
        _packed(s.MEMBERSHIP_TYPES, s.MEMBER_FIELDS).alias("member"),
        _packed((*s.EPISODE_START, *s.EPISODE_CLOSERS), episode).alias("episode"),
        _packed(s.OPERATOR_TYPES, s.OPERATOR_FIELDS).alias("operator"),
        F.when(F.col("status") != s.OK, line).alias("raw_line"),
        "source_file",
        # Numbers as columns would each have their values counted for compression, at a cost that
        # shows (a lookup of every value in a table of those seen), for little memory saved.
        F.struct(*s.CORE_NUMBERS, *_SOURCE_NUMBERS, _split_key().alias("split_key")).alias("numbers"),
    )


_SOURCE_NUMBERS = [name for name in s.SOURCE_COLUMNS if name != "source_file"]


def _number(name: str) -> Column:
    """A number of `read_events`' rows, held in their `numbers` struct."""
    return F.col("numbers")[name]


def _source() -> list[Column]:
    return [F.col("source_file"), *[_number(name).alias(name) for name in _SOURCE_NUMBERS]]


def _split_key() -> Column:
    """A 64-bit hash of the file split a line was read from: `split_ranks` ranks the splits by it, so
    that no step after the read looks a path up."""
    return F.xxhash64(F.col("source_file"), F.col("source_offset"))


def _packed(types: Sequence[str], fields: Sequence[str | Column]) -> Column:
    """The fields of one kind of event as a struct, set on events of that kind only."""
    return F.when(F.col("type").isin(*types), F.struct(*fields))


def _member_entries(member: Column) -> Column:
    """A member's assignment as (pair, key) hashes: a 64-bit hash of each (topic, partition, owner) and
    of each (topic, partition); the owner is the instance id, else the member id. Hashes keep the
    comparison of two generations to arrays of longs."""
    owner = F.coalesce(member["instance_id"], member["member_id"])
    return F.flatten(
        F.transform(
            F.map_entries(member["assignment"]),
            lambda topic: F.transform(
                topic["value"],
                lambda partition: F.struct(
                    F.xxhash64(topic["key"], partition, owner).alias("pair"),
                    F.xxhash64(topic["key"], partition).alias("key"),
                ),
            ),
        )
    )


def _status(malformed: Column) -> Column:
    missing = F.col("v").isNull() | F.col("ts").isNull() | F.col("type").isNull()
    missing = missing | F.col("group").isNull() | (F.col("group") == "")
    return (
        F.when(malformed, F.lit(s.MALFORMED))
        .when(missing, F.lit(s.MISSING_FIELDS))
        .when(F.col("v") != s.SCHEMA_VERSION, F.lit(s.UNSUPPORTED_VERSION))
        .otherwise(F.lit(s.OK))
    )


def unpacked(events: DataFrame) -> DataFrame:
    """The lines of `read_events` with each field a column (null where the event's kind lacks it)."""
    return events.select(
        "status",
        *s.CORE_TEXTS,
        *[_number(name).alias(name) for name in s.CORE_NUMBERS],
        "member.*",
        "episode.*",
        "operator.*",
        "raw_line",
        *_source(),
        _number("split_key").alias("split_key"),
    )


def valid_events(events: DataFrame) -> DataFrame:
    return unpacked(events.filter(F.col("status") == s.OK))


def rejected(events: DataFrame, reread: DataFrame | None = None) -> DataFrame:
    """The lines that are not events, with why, where they were, the line, and what could be read of
    it (parsed again here: these are few). A rejected line that parsed as JSON has no text in `events`;
    `reread` (from `reread_lines`) gives those lines."""
    shown = [name for name, _ in s.EVENT_FIELDS if name != "members"]
    kept = events.filter((F.col("status") != s.OK) & F.col("raw_line").isNotNull()).select(
        "status",
        "raw_line",
        *_source(),
        F.from_json(F.col("raw_line"), s.event_schema(), _KEEP_MALFORMED).alias("_read"),
    )
    if reread is not None:
        kept = kept.unionByName(reread)
    return kept.select(
        "status", "raw_line", *s.SOURCE_COLUMNS, *[F.col("_read")[name].alias(name) for name in shown]
    )


def files_to_reread(split_rows: Sequence[Row]) -> list[str]:
    """The files with rejected lines whose text the JSON reader did not keep (it keeps it only for
    lines that do not parse)."""
    return sorted({row["source_file"] for row in split_rows if row["lines_without_text"]})


def reread_lines(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """The lines of these JSON-lines files that parse but are not events (fields missing, another
    schema version), with their text. They are read again as text and parsed as the JSON reader
    parses them, so the same lines are found: a line holding a JSON array counts as its values."""
    schema = s.event_schema()
    lines = spark.read.text(list(files)).select(F.col("value").alias("raw_line"), *_source_columns())
    line = F.col("raw_line")
    values = F.when(line.rlike(r"^\s*\["), F.from_json(line, ArrayType(schema))).otherwise(
        F.array(F.from_json(line, schema, _KEEP_MALFORMED))
    )
    read = lines.select("raw_line", *s.SOURCE_COLUMNS, F.explode(values).alias("_read"))
    status = _status(F.lit(False))
    return (
        read.select("*", *[F.col("_read")[name].alias(name) for name in ("v", "ts", "type", "group")])
        .filter(F.col("_read").isNotNull() & F.col("_read")[s.CORRUPT].isNull())
        .select(status.alias("status"), "raw_line", *s.SOURCE_COLUMNS, "_read")
        .filter(F.col("status") != s.OK)
    )


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


def splits(events: DataFrame) -> DataFrame:
    """Lines per (status, file split, event type), with the type's first and last time: a few rows per
    split that give the line counts, the splits, and the events by type. The type is null on lines that
    are not events, so what a rejected line says cannot multiply the rows. The first action over the
    cached events, so it is what builds the cache. Also counts the operation starts without an id."""
    valid_type = F.when(F.col("status") == s.OK, F.col("type"))
    return events.groupBy(
        "status",
        "source_file",
        _number("source_mtime").alias("source_mtime"),
        _number("source_offset").alias("source_offset"),
        valid_type.alias("type"),
    ).agg(
        F.count("*").alias("count"),
        F.min(_number("split_key")).alias("split_key"),
        F.min(_number("ts")).alias("first_ts"),
        F.max(_number("ts")).alias("last_ts"),
        F.count_if((valid_type == FLEET_OPERATION_STARTED) & F.col("operator")["id"].isNull()).alias(
            "starts_without_id"
        ),
        F.count_if((F.col("status") != s.OK) & F.col("raw_line").isNull()).alias("lines_without_text"),
    )


def starts_without_id(split_rows: Sequence[Row]) -> int:
    return sum(int(row["starts_without_id"]) for row in split_rows)


def events_by_type(split_rows: Sequence[Row]) -> dict[str, tuple[int, int, int]]:
    """type -> (events, first ts, last ts), from the rows of `splits`."""
    found: dict[str, tuple[int, int, int]] = {}
    for row in split_rows:
        kind = row["type"]
        if row["status"] != s.OK or kind is None:
            continue
        count, first, last = int(row["count"]), int(row["first_ts"]), int(row["last_ts"])
        if kind in found:
            seen = found[kind]
            count, first, last = seen[0] + count, min(seen[1], first), max(seen[2], last)
        found[kind] = (count, first, last)
    return found


def split_ranks(spark: SparkSession, split_rows: Sequence[Row]) -> DataFrame:
    """(source_file, source_offset, split_key) -> split_rank: the file splits (rows of `splits`) in log
    order (file modification time, path, offset). With the row number inside the split it gives each
    line one sortable number, `position`, so that sorting never compares file paths."""
    keys = {(r["source_mtime"], r["source_file"], r["source_offset"], r["split_key"]) for r in split_rows}
    rows = [(path, offset, key, rank) for rank, (_, path, offset, key) in enumerate(sorted(keys))]
    return spark.createDataFrame(
        rows, "source_file string, source_offset long, split_key long, split_rank long"
    )


def split_keys_unique(split_rows: Sequence[Row]) -> bool:
    """Whether no two file splits share a `split_key` (a 64-bit hash: a clash is possible, not likely)."""
    splits_read = {(r["source_file"], r["source_offset"]) for r in split_rows}
    return len({r["split_key"] for r in split_rows}) == len(splits_read)


def _hashed_gid() -> Column:
    return F.xxhash64(F.col("group"))


def group_hashes_unique(stats: DataFrame) -> bool:
    """Whether no two groups share a 64-bit hash of their name, which then serves as `gid` with no
    lookup (a clash is possible, not likely)."""
    counted = stats.agg(F.count("*").alias("groups"), F.count_distinct(_hashed_gid()).alias("hashes"))
    row = counted.first()
    return row is None or row["groups"] == row["hashes"]


def group_ids(stats: DataFrame) -> DataFrame:
    """group -> gid, a number per group: windows over a group sort by it rather than by the group's
    name, which would be compared character by character on every step of every sort. Needed only
    when the hashes of two names clash (`group_hashes_unique`)."""
    return stats.select("group", F.monotonically_increasing_id().alias("gid"))


def with_position(
    frame: DataFrame, ranks: DataFrame, ids: DataFrame | None, by_split_key: bool = True
) -> DataFrame:
    """`position` and `split_rank` (see `split_ranks`) and `gid` on every row. The split is found by its
    `split_key` when no two splits share one (`split_keys_unique`), else by path and offset; `gid` is
    the hash of the group's name unless `ids` (`group_ids`) are given."""
    row_in_split = F.col("source_row").bitwiseAND(F.lit((1 << _ROW_BITS) - 1))
    position = F.shiftleft(F.col("split_rank"), _ROW_BITS) + row_in_split
    if by_split_key:
        ranked = frame.join(F.broadcast(ranks.select("split_key", "split_rank")), "split_key")
    else:
        ranked = frame.join(F.broadcast(ranks.drop("split_key")), ["source_file", "source_offset"])
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
    kind = F.col("type")
    events = positioned.filter(kind.isin(*s.EPISODE_START, *s.EPISODE_CLOSERS)).select(
        "group",
        "gid",
        "ts",
        F.lit(1).alias("is_item"),
        "position",
        "type",
        "generation",
        "reason",
        F.when(kind == ev.REBALANCE_STARTED, F.col("detail")).alias("detail"),
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
    # A whole-partition frame is computed once per group; a frame "from here to the end" would be
    # computed again for every row. What follows a row is the whole, less what came up to it.
    whole = order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    started = kind == ev.REBALANCE_STARTED
    closer = kind.isin(*s.EPISODE_CLOSERS)
    boundary = started | closer

    def last_before(value: Column, where: Column) -> Column:
        return F.last(F.when(where, value), ignorenulls=True).over(before)

    mark = F.struct(
        F.col("_op_end").alias("end"), F.col("_op_id").alias("id"), F.col("_op").alias("operation")
    )
    closers_so_far = F.sum(closer.cast("int")).over(so_far)
    stream = stream.select(
        "*",
        last_before(kind, boundary).alias("previous_boundary"),
        (closers_so_far - closer.cast("int")).alias("episode"),
        F.sum(closer.cast("int")).over(whole).alias("closers"),
        F.sum(started.cast("int")).over(so_far).alias("starts_so_far"),
        last_before(F.struct(F.col("member_count").alias("n")), closer).alias("previous_closer_count"),
        last_before(F.col("assignment"), kind == ev.REBALANCE_COMPLETED).alias("previous_assignment"),
        F.last(F.when(F.col("is_item") == 0, mark), ignorenulls=True).over(so_far).alias("_mark"),
    )
    current = F.col("_mark")
    operation_now = F.when(
        F.col("ts") <= current["end"],
        F.struct(current["id"].alias("id"), current["operation"].alias("operation")),
    )
    after_start = F.coalesce(F.col("previous_boundary") == ev.REBALANCE_STARTED, F.lit(False))
    first_start = started & ~after_start
    ended = kind.isin(ev.REBALANCE_COMPLETED, ev.GROUP_EMPTY)
    # A first start with no closer after it (for a start, the closers so far are `episode`) is open.
    is_open = first_start & (F.col("closers") == F.col("episode"))
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
        "group",
        "gid",
        "ts",
        "is_item",
        "position",
        "type",
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
        ((closer & (after_start | ended)) | is_open).alias("is_rebalance"),
        F.when(now["keys"].isNotNull(), F.size(now["keys"])).alias("partitions_total"),
        F.when(known, moved).alias("partitions_moved"),
    )
    # Filtering keeps the order: this pass sorts nothing.
    return (
        stream.select(
            "*",
            F.coalesce(
                F.when(F.col("start_in_log"), F.lag("start_info").over(order)), F.col("start_info")
            ).alias("episode_start"),
            F.sum(F.col("is_rebalance").cast("int")).over(so_far).alias("rebalance_no"),
        )
        .filter(F.col("is_rebalance"))
        .withColumn("start_in_log", F.col("start_in_log") | (F.col("type") == ev.REBALANCE_STARTED))
        .drop("start_info")
    )


def _marks(operations: DataFrame) -> DataFrame:
    return operations.select(
        "group",
        "gid",
        F.col("start_ts").alias("ts"),
        F.lit(0).alias("is_item"),
        F.lit("operation").alias("type"),
        F.col("operation_id").alias("_op_id"),
        F.col("operation").alias("_op"),
        F.col("window_end_ts").alias("_op_end"),
    )


def rebalances(rows: DataFrame) -> DataFrame:
    """One row per rebalance episode: from its first rebalance_started to its rebalance_completed or
    group_empty. A group_loaded (the coordinator restarted) ends an episode as `interrupted`; an episode
    still going at the end of the log is `open`; one whose start precedes the log is reconstructed from
    the coordinator's own duration (and attributed to an operation by its end)."""
    kind = F.col("type")
    completed = kind == ev.REBALANCE_COMPLETED
    emptied = kind == ev.GROUP_EMPTY
    ended = completed | emptied
    is_open = kind == ev.REBALANCE_STARTED
    start = F.col("episode_start")
    in_log = F.col("start_in_log")
    status = (
        F.when(completed, F.lit(COMPLETED))
        .when(emptied, F.lit(EMPTIED))
        .when(kind == ev.GROUP_LOADED, F.lit(INTERRUPTED))
        .otherwise(F.lit(OPEN))
    )
    start_ts = F.when(in_log, start["ts"]).otherwise(F.col("ts") - F.col("duration_ms"))
    end_ts = F.when(~is_open, F.col("ts"))
    start_events = F.when(in_log, F.col("starts_so_far") - start["starts_before"]).otherwise(F.lit(0))
    members_before = F.coalesce(
        F.col("previous_closer_count")["n"], F.when(start["from_state"] == "Empty", F.lit(0))
    )
    operation = F.when(in_log, start["operation_now"]).otherwise(F.col("operation_now"))
    return rows.select(
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
    kind = F.col("type")
    coordinator_event = ~kind.isin(*s.OPERATOR_TYPES)
    per_mode = valid.groupBy("group", "mode").agg(
        F.count_if(coordinator_event).alias("events"),
        F.min(F.when(coordinator_event, F.col("ts"))).alias("first_ts"),
        F.max(F.when(coordinator_event, F.col("ts"))).alias("last_ts"),
        F.max("ts").alias("group_last_ts"),
        F.max("generation").alias("generation"),
        F.max(F.when(kind.isin(*TIMELINE_TYPES), F.col("ts"))).alias("_last_change_ts"),
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


def group_stats(valid: DataFrame, numbers: DataFrame) -> DataFrame:
    """`group_numbers` with the group's state after its last state-changing event. The state comes
    from few lines (the state-changing events in the millisecond of the group's last one), ordered by
    (ts, file modification time, path, split, row) as `position` orders them, without the join."""
    kind = F.col("type")
    timeline = kind.isin(*TIMELINE_TYPES)
    last_change = timeline & (F.col("ts") == F.col("_last_change_ts"))
    state = F.when(kind == ev.GROUP_DELETED, F.lit("Dead")).otherwise(F.col("state"))
    states = (
        valid.filter(timeline)
        .join(F.broadcast(numbers.select("group", "_last_change_ts")), "group")
        .filter(last_change)
        .groupBy("group")
        .agg(F.max_by(state, F.struct(*s.ORDER_COLUMNS)).alias("state"))
    )
    return numbers.drop("_last_change_ts").join(states, "group", "left")


# === membership events ==============================================================================


def membership(positioned: DataFrame) -> DataFrame:
    """The membership events, with `gid` for `attribute`. Where a line was read travels as its split's
    number (`split_rank`) and `source_row` until `membership_table` names the split again: a path on
    every row would weigh on each step in between."""
    kind = F.col("type")
    replaced = kind == ev.STATIC_MEMBER_REPLACED
    return positioned.filter(kind.isin(*s.MEMBERSHIP_TYPES)).select(
        "group",
        "ts",
        "source_mtime",
        "split_rank",
        "source_row",
        "gid",
        "type",
        "generation",
        "state",
        F.coalesce(F.col("member_id"), F.col("new_member_id")).alias("member_id"),
        "instance_id",
        "old_member_id",
        "cause",
        "api",
        "client_reason",
        "client_host",
        F.when(replaced, F.col("rebalance")).alias("rebalance"),
        (replaced & (F.col("rebalance") == F.lit(False))).alias("absorbed"),
    )


def membership_table(attributed: DataFrame, ranks: DataFrame) -> DataFrame:
    """The attributed membership events (`membership`, then `attribute`) with their split's path and
    offset again (`ranks` from `split_ranks`)."""
    named = attributed.join(F.broadcast(ranks.drop("split_key")), "split_rank")
    return named.select(
        "group",
        *s.ORDER_COLUMNS,
        *[name for name in attributed.columns if name not in ("group", "split_rank", *s.ORDER_COLUMNS)],
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
    kind = F.col("type")
    events = positioned.filter(kind.isin(*s.OPERATOR_TYPES)).withColumn(
        "pair_key", F.coalesce(F.col("id"), F.col("operation"), F.lit(""))
    )
    pairs = Window.partitionBy("gid", "pair_key").orderBy("ts", "position")
    starts = events.select(
        "*",
        F.lead("type").over(pairs).alias("next_type"),
        F.lead("ts").over(pairs).alias("next_ts"),
        F.lead("to_replicas").over(pairs).alias("next_to_replicas"),
        F.lead("mode").over(pairs).alias("next_mode"),
    ).filter(kind == FLEET_OPERATION_STARTED)
    ordinal = F.row_number().over(Window.partitionBy("gid").orderBy("ts", "position"))
    named_by_place = F.concat(F.col("group"), F.lit("#"), ordinal.cast("string")) if numbered else F.lit(None)
    last_ts = stats.select("group", "group_last_ts")
    completed = F.col("next_type") == FLEET_OPERATION_COMPLETED
    return starts.join(last_ts, "group", "left").select(
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
    kept = [name for name in items.columns if name != "gid"]
    return (
        combined.select("*", current.alias("_current"))
        .filter(F.col("_kind") == 1)
        .select(
            *kept,
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
    events = stats.drop("group_last_ts")
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
