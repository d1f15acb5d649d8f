"""`staticfleet analyze`: event logs in; Parquet tables, summary.json, PNG charts and report.html out.

Steps: every input line is read once and cached with a status, so lines that did not parse are kept
(in the `rejected` table) and counted; the tables are computed from that cache, written, and read back,
so nothing is computed twice; small aggregates are collected for the summary, charts and report.
Work that does not depend on other work still running is started at once (`_together`), so that
Spark's tasks keep every core busy while the driver plans the next query.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from staticfleet.analytics import charts, jvm_lines, report, tables
from staticfleet.analytics import lines as read_lines
from staticfleet.analytics import schema as s
from staticfleet.analytics.inputs import InputError, Sources, is_remote, resolve
from staticfleet.analytics.outputs import OutputDir
from staticfleet.coordinator import events as ev

TABLES = ("rebalances", "membership", "operations", "groups", "rejected")
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"


@dataclass(frozen=True, slots=True)
class Options:
    fmt: str = "auto"
    max_chart_groups: int = 20
    max_table_rows: int = 200
    chart_points: int = 2_000
    # Told the name and the seconds of each step of STEPS as it ends (`staticfleet analyze` prints them).
    progress: Callable[[str, float], None] | None = None


# The steps of an analysis, in order.
STEPS = (
    "read",
    "operations",
    "rebalances and membership",
    "operations and groups",
    "summary",
    "charts and report",
    "write",
)


@dataclass
class AnalysisResult:
    out_dir: Path | str
    """As given: a local directory or any Hadoop filesystem URI."""
    summary: dict[str, Any]
    tables: dict[str, str] = field(default_factory=dict)
    charts: dict[str, str] = field(default_factory=dict)
    report: str | None = None


class _Timer:
    def __init__(self, progress: Callable[[str, float], None] | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.progress = progress

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.seconds[name] = round(time.perf_counter() - started, 3)
        if self.progress is not None:
            self.progress(name, self.seconds[name])


@contextmanager
def _sql_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    before = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


UNIQUE_VALUED = {
    "rebalances": ("detail", "start_ts", "end_ts", "operation_id"),
    "membership": ("ts", "source_row", "member_id", "old_member_id", "client_host", "operation_id"),
    "operations": ("operation_id", "start_ts", "end_ts"),
}
"""Columns whose values are (nearly) all distinct, written without a dictionary: Parquet would build
one for each, look every value up in it and give it up at the end of the first page."""


def _together(*work: Callable[[], Any]) -> list[Any]:
    """Run these at once and return what each returned. Their Spark jobs share the cores: one job's
    tasks fill what another leaves idle (its driver planning and compiling a query, or waiting on the
    last task of a stage)."""
    with ThreadPoolExecutor(max_workers=len(work)) as pool:
        started = [pool.submit(each) for each in work]
        return [future.result() for future in started]


def _parquet_options(table: str) -> dict[str, str]:
    return {f"parquet.enable.dictionary#{column}": "false" for column in UNIQUE_VALUED.get(table, ())}


def _as_written(schema: StructType) -> StructType:
    """A table's schema as a Parquet file written by Spark holds it: every field, element and value
    nullable."""
    return StructType([StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in schema.fields])


def _nullable(kind: DataType) -> DataType:
    if isinstance(kind, StructType):
        return _as_written(kind)
    if isinstance(kind, ArrayType):
        return ArrayType(_nullable(kind.elementType), True)
    if isinstance(kind, MapType):
        return MapType(_nullable(kind.keyType), _nullable(kind.valueType), True)
    return kind


_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def _listed(spark: SparkSession, sources: Sources) -> AbstractContextManager[None]:
    """Local inputs are files, each listed already (`inputs.resolve`): Spark, given more than a few
    paths, would look each up again in a job of its own. Remote ones are Spark's to list."""
    if any(is_remote(path) for path in (*sources.json, *sources.parquet)):
        return nullcontext()
    return _sql_conf(spark, _LISTING_THRESHOLD, str(2**31 - 1))


def _read(spark: SparkSession, sources: Sources) -> tuple[read_lines.Lines, read_lines.Census]:
    """The input's lines, cached, and what the first pass over them found. Should two files named in
    the data share a key, the lines are read again with another salt."""
    salt = 0
    strict = bool(sources.json) and jvm_lines.register(spark)
    while True:
        with _listed(spark, sources):
            lines = read_lines.read(spark, sources, salt, strict)
        lines.frame.persist(StorageLevel.MEMORY_AND_DISK_DESER)
        # Adaptive execution would build the cache in a job of its own and then scan it again for
        # this aggregation; without it, the aggregation's own scan builds the cache.
        with _sql_conf(spark, "spark.sql.adaptive.enabled", "false"):
            census = read_lines.Census.of(read_lines.splits(lines).collect(), lines)
        # A line the strict parser did not take counts as malformed: Spark's reader reads it again.
        redo = strict and census.lines.get(s.MALFORMED, 0) > 0
        if not census.ambiguous and not redo:
            return lines, census
        lines.frame.unpersist()
        strict = strict and not redo
        salt = lines.salt + 1 if census.ambiguous else lines.salt


def analyze(
    spark: SparkSession, inputs: Sequence[str], out_dir: Path | str, options: Options | None = None
) -> AnalysisResult:
    """Analyse the inputs into `out_dir`, a local directory or any Hadoop filesystem URI that the
    driver and the executors both reach."""
    options = options or Options()
    sources = resolve(inputs, options.fmt)
    out = OutputDir(spark, out_dir)
    out.create()
    spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # a partition assigned twice: keep one
    # What is cached is mostly structs, which are not compressed; the other columns are the operation
    # windows' ids and texts, which would each have every value looked up to choose a compression.
    spark.conf.set("spark.sql.inMemoryColumnarStorage.compressed", "false")
    timer = _Timer(options.progress)
    paths = {name: out.child(name) for name in TABLES}

    def save(frame: DataFrame, name: str) -> DataFrame:
        frame.write.mode("overwrite").options(**_parquet_options(name)).parquet(paths[name])
        # Read back with the schema it was written with: finding it in a file would cost a job.
        return spark.read.schema(_as_written(frame.schema)).parquet(paths[name])

    with timer.step("read"):
        # The one pass over the input: read once, cached, and every table computed from the cache.
        lines, census = _read(spark, sources)
    if not census.lines.get(s.OK):
        lines.frame.unpersist()
        read = sum(census.lines.values())
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(census.lines.items())) or "empty"
        raise InputError(
            f"no events in {', '.join(inputs)}: {read} line(s) read, none is an event of schema version "
            f"{s.SCHEMA_VERSION} ({counts})"
        )
    # Without rejected lines the table is written empty (with its columns) without a scan.
    everything_ok = set(census.lines) == {s.OK}
    rejected_lines = replace(lines, frame=lines.frame.limit(0)) if everything_ok else lines
    # Nothing but the report reads the rejected lines: they are written while the tables are made.
    background = ThreadPoolExecutor(max_workers=1)
    rejected_saved = background.submit(
        lambda: save(read_lines.rejected(spark, rejected_lines, census), "rejected")
    )
    background.shutdown(wait=False)
    valid = read_lines.analysed(lines)
    with timer.step("operations"):
        numbers = tables.group_numbers(valid).persist(StorageLevel.MEMORY_AND_DISK)
        hashed = tables.group_hashes_unique(numbers)
        ids = tables.group_ids(numbers, hashed).persist(StorageLevel.MEMORY_AND_DISK)
        ranks = tables.split_ranks(spark, census)
        positioned = tables.with_position(valid, ranks, None if hashed else ids)
        stats = tables.group_stats(positioned, numbers, ids).persist(StorageLevel.MEMORY_AND_DISK)
        windows = tables.operation_windows(positioned, stats, census.starts_without_id > 0)
        windows = windows.persist(StorageLevel.MEMORY_AND_DISK)
        windows.count()
        numbers.unpersist()
    with timer.step("rebalances and membership"):
        rebalance_rows = tables.rebalance_pass(positioned, windows)
        attributed = tables.attribute(tables.membership(positioned), "ts", windows)
        rebalances, membership = _together(
            lambda: save(tables.rebalances(rebalance_rows, ids), "rebalances"),
            lambda: save(tables.membership_table(attributed, ranks, ids), "membership"),
        )
    with timer.step("operations and groups"):
        operations, groups = _together(
            lambda: save(tables.operations_table(windows, rebalances, membership), "operations"),
            lambda: save(tables.groups_table(stats, rebalances, membership, windows), "groups"),
        )
        windows.unpersist()
        ids.unpersist()
        stats.unpersist()
    with timer.step("summary"):
        summary = _summary(sources, census.lines, census.by_type, rebalances, groups, operations)
    with timer.step("charts and report"):
        made, items = _together(
            lambda: _charts(positioned, rebalances, groups, operations, summary, options),
            lambda: _report_tables(summary, rejected_saved.result(), rebalances, groups, operations, options),
        )
        files = {f"{chart.name}.png": chart.png for chart in made}
        files[REPORT_FILE] = _report(summary, items, made).encode("utf-8")
    summary["outputs"] = {
        "tables": {name: name for name in TABLES},
        "charts": {
            c.name: {"file": f"{c.name}.png", "title": c.title, "panels": list(c.panels)} for c in made
        },
        "report": REPORT_FILE,
    }
    summary["timings_s"] = dict(timer.seconds)  # as written: the write step itself is not in it
    lines.frame.unpersist()
    files[SUMMARY_FILE] = (json.dumps(summary, indent=2, sort_keys=False) + "\n").encode("utf-8")
    with timer.step("write"):
        out.write_files(files)  # the driver's own outputs, written once, through the same filesystem
    charts_written = {chart.name: out.child(f"{chart.name}.png") for chart in made}
    return AnalysisResult(out_dir, summary, paths, charts_written, out.child(REPORT_FILE))


# === summary ========================================================================================


def _iso(ms: int | None) -> str | None:
    return None if ms is None else report.format_time(ms)


def _summary(
    sources: Sources,
    lines: dict[str, int],
    by_type: dict[str, tuple[int, int, int]],
    rebalances: DataFrame,
    groups: DataFrame,
    operations: DataFrame,
) -> dict[str, Any]:
    first = min(v[1] for v in by_type.values())
    last = max(v[2] for v in by_type.values())
    counts = list(tables.MEMBERSHIP_COUNT_COLUMNS)
    totals_query = groups.agg(
        F.count("*").alias("groups"),
        *[F.sum(c).alias(c) for c in ("rebalances", "rebalance_time_ms", "partitions_moved", *counts)],
    )
    durations_query = rebalances.agg(
        F.max("duration_ms").alias("max_ms"),
        F.avg("duration_ms").alias("mean_ms"),
        F.percentile_approx("duration_ms", 0.5).alias("p50_ms"),
        F.percentile_approx("duration_ms", 0.95).alias("p95_ms"),
        F.count_if(F.col("operation_id").isNull()).alias("unattributed"),
    )
    by_status_reason_query = rebalances.groupBy("status", "reason").agg(
        F.count("*").alias("count"), F.sum("duration_ms").alias("total_ms")
    )
    completed_query = operations.filter(F.col("status") == tables.COMPLETED)
    totals_row, durations, by_status_reason, comparison, completed = _together(
        totals_query.first,
        durations_query.first,
        by_status_reason_query.collect,
        lambda: _comparison(operations),
        completed_query.count,
    )
    assert totals_row is not None and durations is not None
    totals = {k: int(v or 0) for k, v in totals_row.asDict().items()}
    by_status: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {}
    for r in by_status_reason:
        by_status[r["status"]] = by_status.get(r["status"], 0) + int(r["count"])
        entry = reasons.setdefault(r["reason"] or "unknown", {"count": 0, "total_ms": 0})
        entry["count"] += int(r["count"])
        entry["total_ms"] += int(r["total_ms"] or 0)
    by_reason = dict(sorted(reasons.items(), key=lambda item: (-item[1]["count"], item[0])))
    by_operation: dict[str, int] = {}
    for row in comparison:
        by_operation[row["operation"]] = by_operation.get(row["operation"], 0) + int(row["operations"])
    read = sum(lines.values())
    return {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "inputs": list(sources.described),
        "files": {"json": len(sources.json), "parquet": len(sources.parquet)},
        "lines": {"read": read, **{k: lines[k] for k in sorted(lines)}},
        "skipped_lines": read - lines.get(s.OK, 0),
        "events_by_type": {k: by_type[k][0] for k in sorted(by_type)},
        "time_range": {"first_ts": first, "last_ts": last, "first": _iso(first), "last": _iso(last)},
        "groups": totals["groups"],
        "rebalances": {
            "total": totals["rebalances"],
            "by_status": dict(sorted(by_status.items())),
            "by_reason": by_reason,
            "total_ms": totals["rebalance_time_ms"],
            "mean_ms": None if durations["mean_ms"] is None else round(float(durations["mean_ms"]), 1),
            "p50_ms": durations["p50_ms"],
            "p95_ms": durations["p95_ms"],
            "max_ms": durations["max_ms"],
            "partitions_moved": totals["partitions_moved"],
            "not_in_an_operation": int(durations["unattributed"]),
        },
        "membership": {c: totals[c] for c in counts},
        "operations": {
            "total": sum(by_operation.values()),
            "by_operation": dict(sorted(by_operation.items())),
            "completions_without_start": tables.completions_without_start(by_type, completed),
        },
        "comparison": comparison,
    }


COMPARISON_COLUMNS = (
    "mode",
    "operation",
    "operations",
    "mean_operation_ms",
    "rebalances",
    "rebalances_per_operation",
    "rebalance_time_ms",
    "rebalance_time_per_operation_ms",
    "partitions_moved",
    "partitions_moved_per_operation",
    "restarts_absorbed",
    "expired",
    "removed",
    "left",
)


def _comparison(operations: DataFrame) -> list[dict[str, Any]]:
    """Per membership mode and operation: totals and per-operation means."""
    n = F.count("*")
    rows = (
        operations.groupBy("mode", "operation")
        .agg(
            n.alias("operations"),
            F.round(F.avg("duration_ms"), 0).alias("mean_operation_ms"),
            F.sum("rebalances").alias("rebalances"),
            F.round(F.sum("rebalances") / n, 2).alias("rebalances_per_operation"),
            F.sum("rebalance_time_ms").alias("rebalance_time_ms"),
            F.round(F.sum("rebalance_time_ms") / n, 0).alias("rebalance_time_per_operation_ms"),
            F.sum("partitions_moved").alias("partitions_moved"),
            F.round(F.sum("partitions_moved") / n, 2).alias("partitions_moved_per_operation"),
            F.sum("restarts_absorbed").alias("restarts_absorbed"),
            F.sum("expired").alias("expired"),
            F.sum("removed").alias("removed"),
            F.sum("left").alias("left"),
        )
        .orderBy("operation", "mode")
    )
    return [{c: row[c] for c in COMPARISON_COLUMNS} for row in rows.collect()]


# === charts =========================================================================================


def _charts(
    positioned: DataFrame,
    rebalances: DataFrame,
    groups: DataFrame,
    operations: DataFrame,
    summary: dict[str, Any],
    options: Options,
) -> list[charts.Chart]:
    first, last = summary["time_range"]["first_ts"], summary["time_range"]["last_ts"]
    return _together(
        lambda: _states_chart(positioned, groups, operations, summary["groups"], last, options),
        lambda: _rebalances_chart(rebalances, first, last),
        lambda: _moved_chart(rebalances, options),
    )


def _states_chart(
    positioned: DataFrame,
    groups: DataFrame,
    operations: DataFrame,
    total: int,
    last_ts: int,
    options: Options,
) -> charts.Chart:
    top = [
        r["group"]
        for r in groups.filter(F.col("events") > 0)
        .orderBy(F.desc("rebalances"), "group")
        .limit(options.max_chart_groups)
        .collect()
    ]
    deleted = F.col("type_code") == s.TYPE_CODES[ev.GROUP_DELETED]
    state = F.when(deleted, F.lit("Dead")).otherwise(read_lines.state_name())
    changes = (
        positioned.filter(F.col("group").isin(top) & read_lines.is_type(*tables.TIMELINE_TYPES))
        .select("group", state.alias("state"), "ts", "position")
        .collect()
    )
    per_group: dict[str, list[tuple[int, str]]] = {g: [] for g in top}
    for row in sorted(changes, key=lambda r: (r["ts"], r["position"])):
        per_group[row["group"]].append((row["ts"], row["state"]))
    timelines = {g: charts.state_spans(per_group[g], last_ts) for g in top}
    windows: dict[str, list[tuple[int, int]]] = {g: [] for g in top}
    for row in (
        operations.filter(F.col("group").isin(top))
        .select("group", "start_ts", F.coalesce("end_ts", F.lit(last_ts)).alias("end_ts"))
        .collect()
    ):
        windows[row["group"]].append((row["start_ts"], row["end_ts"]))
    return charts.group_states_chart(timelines, total, windows)


def _rebalances_chart(rebalances: DataFrame, first_ts: int, last_ts: int) -> charts.Chart:
    bucket = charts.bucket_size_ms(max(1, last_ts - first_ts))
    start = F.floor(F.col("start_ts") / bucket) * bucket
    rows = (
        rebalances.groupBy(start.cast("long").alias("bucket"), "reason")
        .count()
        .orderBy("bucket", "reason")
        .collect()
    )
    reasons = sorted({r["reason"] or "unknown" for r in rows})
    buckets = [(int(r["bucket"]), r["reason"] or "unknown", int(r["count"])) for r in rows]
    return charts.rebalances_over_time_chart(buckets, bucket, reasons)


def _moved_chart(rebalances: DataFrame, options: Options) -> charts.Chart:
    known = rebalances.filter(F.col("partitions_moved").isNotNull())
    histogram_rows = known.groupBy("partitions_moved").count().orderBy("partitions_moved").collect()
    histogram = [(int(r["partitions_moved"]), int(r["count"])) for r in histogram_rows]
    total = sum(n for _, n in histogram)
    sample = (
        known
        if total <= options.chart_points
        else known.sample(fraction=options.chart_points / total, seed=7)
    )
    points = [
        (int(r["start_ts"]), int(r["partitions_moved"]))
        for r in sample.select("start_ts", "partitions_moved").collect()
    ]
    return charts.partitions_moved_chart(points, histogram, total)


# === report =========================================================================================


def _cells(rows: Sequence[Row], columns: Sequence[str]) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(row[c] for c in columns) for row in rows)


def _table_from(
    frame: DataFrame, key: str, title: str, columns: Sequence[str], limit: int, total: int, note: str = ""
) -> report.Table:
    rows = frame.select(*columns).limit(limit).collect()
    return report.Table(key, title, tuple(columns), _cells(rows, columns), total, note)


REBALANCE_COLUMNS = (
    "group",
    "rebalance_no",
    "status",
    "reason",
    "start_ts",
    "duration_ms",
    "start_events",
    "generation",
    "members_before",
    "members_after",
    "partitions_moved",
    "operation",
    "operation_id",
)
OPERATION_COLUMNS = (
    "group",
    "operation_id",
    "operation",
    "mode",
    "status",
    "from_replicas",
    "to_replicas",
    "start_ts",
    "duration_ms",
    "rebalances",
    "rebalance_time_ms",
    "partitions_moved",
    "restarts_absorbed",
    "joined",
    "left",
    "removed",
    "expired",
    "fenced",
)
GROUP_COLUMNS = (
    "group",
    "mode",
    "state",
    "generation",
    "events",
    "operations",
    "rebalances",
    "rebalance_time_ms",
    "max_rebalance_ms",
    "partitions_moved",
    "restarts_absorbed",
    "joined",
    "left",
    "removed",
    "fenced",
    "expired",
    *(f"expired_{c.replace('-', '_')}" for c in s.EXPIRY_CAUSES),
)


def _report_tables(
    summary: dict[str, Any],
    rejected: DataFrame,
    rebalances: DataFrame,
    groups: DataFrame,
    operations: DataFrame,
    options: Options,
) -> list[report.Table]:
    """The report's tables, in order; those read from the written tables are read at once."""
    limit = options.max_table_rows
    skipped_query = rejected.groupBy("source_file", "status").count().orderBy("source_file", "status")
    operation_table, group_table, rebalance_table, skipped = _together(
        lambda: _table_from(
            operations.orderBy("start_ts", "group"),
            "operations",
            "Operations",
            OPERATION_COLUMNS,
            limit,
            summary["operations"]["total"],
            "In start order.",
        ),
        lambda: _table_from(
            groups.orderBy(F.desc("rebalances"), "group"),
            "groups",
            "Groups",
            GROUP_COLUMNS,
            limit,
            summary["groups"],
            "Most rebalances first.",
        ),
        lambda: _table_from(
            rebalances.orderBy(F.desc_nulls_first("duration_ms"), "group", "rebalance_no"),
            "rebalances",
            "Rebalances",
            REBALANCE_COLUMNS,
            limit,
            summary["rebalances"]["total"],
            "Longest first (open ones on top).",
        ),
        skipped_query.collect,
    )
    items: list[report.Table] = []
    if summary["comparison"]:
        rows = tuple(tuple(r[c] for c in COMPARISON_COLUMNS) for r in summary["comparison"])
        items.append(
            report.Table("comparison", "Operations by membership mode", COMPARISON_COLUMNS, rows, len(rows))
        )
    items += [operation_table, group_table, rebalance_table]
    reason_rows = tuple(
        (reason, v["count"], v["total_ms"]) for reason, v in summary["rebalances"]["by_reason"].items()
    )
    items.append(
        report.Table(
            "reasons",
            "Rebalances by reason",
            ("reason", "rebalances", "total_ms"),
            reason_rows,
            len(reason_rows),
        )
    )
    member_rows = tuple((k, v) for k, v in summary["membership"].items())
    items.append(
        report.Table("membership", "Membership events", ("count", "members"), member_rows, len(member_rows))
    )
    skipped_rows = tuple((r["source_file"], r["status"], int(r["count"])) for r in skipped)
    items.append(
        report.Table(
            "skipped",
            "Lines skipped",
            ("file", "status", "lines"),
            skipped_rows,
            len(skipped_rows),
            "Kept, with the line where it was not JSON, in the rejected table.",
        )
    )
    return items


def _report(summary: dict[str, Any], items: Sequence[report.Table], made: Sequence[charts.Chart]) -> str:
    time_range = summary["time_range"]
    subtitle = (
        f"{summary['lines']['read']} lines from {len(summary['inputs'])} input(s), "
        f"{time_range['first']} to {time_range['last']}; generated {summary['generated_at']}"
    )
    rb = summary["rebalances"]
    cards = {
        "groups": summary["groups"],
        "events": sum(summary["events_by_type"].values()),
        "lines skipped": summary["skipped_lines"],
        "rebalances": rb["total"],
        "rebalance time (s)": round(rb["total_ms"] / 1000, 1),
        "partitions moved": rb["partitions_moved"],
        "restarts absorbed": summary["membership"]["restarts_absorbed"],
        "members expired": summary["membership"]["expired"],
        "operations": summary["operations"]["total"],
    }
    return report.render("staticfleet rebalance report", subtitle, cards, items, made)
