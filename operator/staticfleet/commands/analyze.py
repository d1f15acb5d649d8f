"""`staticfleet analyze`: rebalance analytics over coordinator event logs, on Spark."""

from __future__ import annotations

import argparse
import sys
import time

from staticfleet.commands.arguments import positive_int


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="rebalance analytics over coordinator event logs (Spark)",
        description="Read event logs (JSON lines or Parquet; files, directories, globs, or any Hadoop "
        "path), compute rebalances, membership events, operations and group totals with Spark, and write "
        "Parquet tables, summary.json, PNG charts and a self-contained report.html to --out.",
    )
    p.add_argument("events", nargs="+", metavar="EVENTS", help="event log files, directories or globs")
    p.add_argument(
        "--out",
        required=True,
        help="output directory, local or any Hadoop path (file:///shared/..., hdfs://...); created, "
        "outputs replaced",
    )
    p.add_argument(
        "--master",
        default=None,
        help="Spark master, e.g. spark://host:7077 (default: spark-submit's when started by it, else "
        "local[*])",
    )
    p.add_argument(
        "--format",
        dest="fmt",
        choices=("auto", "json", "parquet"),
        default="auto",
        help="input format; auto tells Parquet from JSON lines by content (local) or extension (remote)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit's --conf (repeatable), e.g. spark.executor.memory=2g",
    )
    p.add_argument("--driver-memory", default=None, help="Spark driver memory, e.g. 4g (local mode)")
    p.add_argument(
        "--shuffle-partitions", type=positive_int, default=None, help="spark.sql.shuffle.partitions"
    )
    p.add_argument("--chart-groups", type=positive_int, default=20, help="groups shown in the state timeline")
    p.add_argument("--report-rows", type=positive_int, default=200, help="rows per table in report.html")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from staticfleet.analytics.inputs import InputError, resolve

    try:
        resolve(args.events, args.fmt)  # fail on a bad path before starting a JVM
        settings = _settings(args.conf)
    except InputError as exc:
        print(f"staticfleet analyze: {exc}", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    from staticfleet.analytics.pipeline import STEPS, Options, analyze
    from staticfleet.analytics.session import build_session

    began = time.monotonic()
    _say(f"starting Spark ({args.master or 'local[*] unless spark-submit chose'})")
    owned = SparkSession.getActiveSession() is None
    spark = build_session(
        args.master,
        shuffle_partitions=args.shuffle_partitions,
        driver_memory=args.driver_memory,
        settings=settings,
        writes_class_archive=True,
    )
    _say(f"Spark {spark.version} ready ({spark.sparkContext.master}) in {time.monotonic() - began:.1f} s")

    def progress(step: str, seconds: float) -> None:
        _say(f"[{STEPS.index(step) + 1}/{len(STEPS)}] {step}: {seconds:.1f} s")

    try:
        options = Options(
            fmt=args.fmt,
            max_chart_groups=args.chart_groups,
            max_table_rows=args.report_rows,
            progress=progress,
        )
        result = analyze(spark, args.events, args.out, options)
    except InputError as exc:
        print(f"staticfleet analyze: {exc}", file=sys.stderr)
        return 2
    finally:
        if owned:
            spark.stop()
    summary = result.summary
    rebalances = summary["rebalances"]
    print(
        f"{summary['lines']['read']} lines ({summary['skipped_lines']} skipped), {summary['groups']} groups, "
        f"{rebalances['total']} rebalances ({rebalances['total_ms'] / 1000:.1f} s), "
        f"{rebalances['partitions_moved']} partitions moved, "
        f"{summary['membership']['restarts_absorbed']} restarts absorbed, "
        f"{summary['operations']['total']} operations"
    )
    print(f"report: {result.report}")
    return 0


def _say(line: str) -> None:
    """Progress, on stderr: stdout keeps the result alone."""
    print(f"staticfleet analyze: {line}", file=sys.stderr, flush=True)


def _settings(pairs: list[str]) -> dict[str, str]:
    from staticfleet.analytics.inputs import InputError

    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--conf {pair!r}: expected KEY=VALUE")
        settings[key.strip()] = value
    return settings
