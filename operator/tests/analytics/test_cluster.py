"""`staticfleet analyze --master spark://...` on a real Spark standalone cluster (a master and two
workers on 127.0.0.1, from the pyspark package's own jars), with the input and the output as
`file://` URIs: the same tables, row for row, and the same summary as the analysis in local mode.
And the same analysis submitted with `spark-submit`, as docs/analytics.md shows it: spark-submit's
master and settings stand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import staticfleet.cli
from staticfleet.analytics.pipeline import SUMMARY_FILE, TABLES

from .spark_cluster import LOOPBACK, SHORT_LIVED_JVM, SPARK_HOME, standalone_cluster

# Differ from run to run by nature: when it ran and how long each step took.
UNSTABLE_SUMMARY_KEYS = ("generated_at", "timings_s")


def row_digests(frame: DataFrame) -> list[str]:
    """A hash of every row over every column, sorted: equal lists mean the same rows."""
    everything = F.to_json(F.struct(*[F.col(f"`{c}`") for c in frame.columns]))
    return sorted(r[0] for r in frame.select(F.sha2(everything, 256)).collect())


def stable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k not in UNSTABLE_SUMMARY_KEYS}


def assert_as_local_mode_wrote(spark: SparkSession, out: Path, local_report: Path) -> None:
    for name in TABLES:
        local_table = spark.read.parquet(str(local_report / name))
        cluster_table = spark.read.parquet(str(out / name))
        assert cluster_table.schema == local_table.schema, name
        assert row_digests(cluster_table) == row_digests(local_table), name
    assert spark.read.parquet(str(out / "rebalances")).count() > 0
    local_summary = json.loads((local_report / SUMMARY_FILE).read_text())
    cluster_summary = json.loads((out / SUMMARY_FILE).read_text())
    assert stable(cluster_summary) == stable(local_summary)
    for name in ("report.html", "group_states.png", "rebalances_over_time.png", "partitions_moved.png"):
        assert (out / name).stat().st_size > 0, name
    assert not list(out.glob(".*.crc")), "the driver's own files are written without checksum files"


def test_a_standalone_cluster_writes_what_local_mode_writes(
    spark: SparkSession, simulated_dir: Path, simulated_report: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cluster-report"
    submitted_out = tmp_path / "submitted-report"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": LOOPBACK,  # the driver, too, on the loopback interface only
        # No Python on the executors: the analysis is Spark SQL only, and a Python worker would fail.
        "PYSPARK_PYTHON": str(tmp_path / "no-python-here"),
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "JAVA_TOOL_OPTIONS": SHORT_LIVED_JVM,
    }
    env.pop("PYSPARK_GATEWAY_PORT", None)
    spark_dir = tmp_path / "spark"
    with standalone_cluster(spark_dir, workers=2, worker_memory="768m") as master:
        # The input exactly as the local analysis was given it, so that the summaries name the same input.
        done = subprocess.run(
            [
                *(sys.executable, "-m", "staticfleet.cli", "analyze", str(simulated_dir)),
                *("--out", out.as_uri(), "--master", master),
                *("--conf", "spark.executor.memory=512m", "--conf", "spark.driver.host=" + LOOPBACK),
                *("--shuffle-partitions", "4"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        # docs/analytics.md's spark-submit command: no --master given to the analysis.
        submitted = subprocess.run(
            [
                *(str(SPARK_HOME / "bin" / "spark-submit"), "--master", master, "--deploy-mode", "client"),
                *("--name", "analysis-as-submitted", "--executor-memory", "512m"),
                *("--conf", "spark.driver.host=" + LOOPBACK, "--conf", "spark.sql.shuffle.partitions=4"),
                *(str(Path(staticfleet.cli.__file__)), "analyze", str(simulated_dir)),
                *("--out", submitted_out.as_uri()),
            ],
            env={**env, "SPARK_HOME": str(SPARK_HOME)},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert submitted.returncode == 0, submitted.stderr[-4000:]
    assert f"report: {out.as_uri()}/report.html" in done.stdout
    assert_as_local_mode_wrote(spark, out, simulated_report)
    # It ran on the cluster under the name spark-submit gave it: the master registered it so.
    registered = re.findall(r"Registering app (\S+)", (spark_dir / "master.log").read_text())
    assert registered == ["staticfleet-analyze", "analysis-as-submitted"]
    assert f"report: {submitted_out.as_uri()}/report.html" in submitted.stdout
    assert_as_local_mode_wrote(spark, submitted_out, simulated_report)
