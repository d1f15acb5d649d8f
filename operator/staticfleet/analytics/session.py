"""The Spark session: local mode by default, bound to the loopback interface, quiet and UTC."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

LOCAL_HOST = "127.0.0.1"


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def local_jvm_options(driver_memory: str | None, small_input: bool = False) -> list[str]:
    """JVM options of a local-mode driver, which is the whole of a local analysis. It is one batch job:
    the throughput collector does the same work with fewer pauses than the default G1, and a heap
    taken whole from the start is never resized, which would cost full collections while the cache
    grows. Over a `small_input` the run is mostly Spark planning each of its jobs once: compiling that
    code again at the top tier (C2) costs more CPU than it saves, so C1 alone compiles it."""
    options = ["-XX:+UseParallelGC"]
    if small_input:
        options.append("-XX:TieredStopAtLevel=1")
    if driver_memory:
        options.append(f"-Xms{driver_memory}")
    return options


def submitted_settings() -> SparkConf | None:
    """What `spark-submit` gave this process's JVM (master, name, --conf, spark-defaults.conf), when
    this process was started by it; None otherwise. They live in that JVM's system properties, and a
    SparkConf made before the JVM is joined is an empty one of Python's own, so it is joined first."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # joins the running JVM; starts nothing
    return SparkConf()


def build_session(
    master: str | None = "local[*]",
    app_name: str = "staticfleet-analyze",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    warehouse_dir: str | None = None,
    settings: dict[str, str] | None = None,
    writes_class_archive: bool = False,
    small_input: bool = False,
) -> SparkSession:
    """A session on `master`; with None, the one `spark-submit` was given, else local[*]. Under
    `spark-submit`, the settings it was given stand over the ones chosen here. Outside
    local mode nothing here assumes the driver's host: the cluster's settings (spark-submit's, or
    spark-defaults.conf) decide where it listens. A local JVM started here uses the archive of Spark's
    classes (`class_archive`); one that `writes_class_archive` (a session for an analysis) writes it
    when there is none yet."""
    from pyspark.sql import SparkSession

    submitted = submitted_settings()
    master = master or (submitted.get("spark.master") if submitted else None) or "local[*]"
    builder = SparkSession.builder.master(master)
    if is_local(master):
        # Nothing listens beyond the loopback interface, whatever the host name resolves to.
        os.environ["SPARK_LOCAL_IP"] = LOCAL_HOST
        builder = builder.config("spark.driver.bindAddress", LOCAL_HOST).config(
            "spark.driver.host", LOCAL_HOST
        )
        cores = os.cpu_count() or 2
        partitions = shuffle_partitions or max(2, 2 * cores)
    else:
        partitions = shuffle_partitions or 200
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warehouse = warehouse_dir
    if warehouse is None:
        # Nothing is stored there (no tables are created); it only must not be the working directory.
        warehouse = tempfile.mkdtemp(prefix="staticfleet-spark-warehouse-")
        atexit.register(shutil.rmtree, warehouse, True)
    chosen = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.warehouse.dir": warehouse,
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
    }
    if is_local(master):
        options = local_jvm_options(driver_memory, small_input)
        if submitted is None:  # this process starts the JVM
            from staticfleet.analytics import class_archive

            options += class_archive.local_options(writes_class_archive)
        chosen["spark.driver.extraJavaOptions"] = " ".join(options)
    if driver_memory:
        chosen["spark.driver.memory"] = driver_memory
    if submitted is None:  # the line parser's jar, shipped to the executors too
        from staticfleet.analytics import jvm_lines

        parser_jar = jvm_lines.jar()
        if parser_jar is not None:
            given_jars = (settings or {}).get("spark.jars")
            chosen["spark.jars"] = f"{given_jars},{parser_jar}" if given_jars else str(parser_jar)
    else:
        chosen = {key: value for key, value in chosen.items() if not submitted.contains(key)}
    given_settings = dict(settings or {})
    if "spark.jars" in chosen:
        given_settings.pop("spark.jars", None)  # merged with the parser's above
    chosen.update(given_settings)
    for key, value in chosen.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
