"""One Spark session for every analytics test: local[2], loopback only, UTC, UI off, no Hive."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from staticfleet.analytics.pipeline import AnalysisResult
from staticfleet.analytics.session import build_session

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under pytest-xdist the Spark tests stay on one worker: one Spark JVM for all of them, not one each.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Spark needs a Java runtime (17 or 21) on PATH or in JAVA_HOME")
    session = build_session(
        master="local[2]",
        app_name="staticfleet-tests",
        shuffle_partitions=2,
        driver_memory="1g",
        warehouse_dir=str(tmp_path_factory.mktemp("spark-warehouse")),
    )
    # Small inputs: compiling generated code costs more than it saves, and adaptive planning adds jobs.
    session.conf.set("spark.sql.codegen.wholeStage", "false")
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.default.parallelism", "2")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def analytics_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("analytics")


SIMULATION_ARGS = ["--groups", "2", "--members", "4", "--partitions", "8", "--seed", "11"]


@pytest.fixture(scope="session")
def simulated_dir(analytics_tmp: Path) -> Path:
    """Every mode through every scenario, written by `staticfleet simulate`."""
    from staticfleet.cli import main

    out = analytics_tmp / "simulated-log"
    assert main(["simulate", "--out", str(out), *SIMULATION_ARGS]) == 0
    return out


@pytest.fixture(scope="session")
def simulated_analysis(
    spark: SparkSession, simulated_dir: Path, analytics_tmp: Path
) -> tuple[Path, list[StructType]]:
    """`staticfleet analyze` over the simulated log (it reuses the test session rather than start one),
    and the schemas the pipeline read its written tables back with, recorded as it ran."""
    from staticfleet.analytics import pipeline
    from staticfleet.cli import main

    given: list[StructType] = []
    as_written = pipeline._as_written

    def recorded(schema: StructType) -> StructType:
        given.append(as_written(schema))
        return given[-1]

    out = analytics_tmp / "simulated-report"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "_as_written", recorded)
        assert main(["analyze", str(simulated_dir), "--out", str(out), "--master", "local[2]"]) == 0
    return out, given


@pytest.fixture(scope="session")
def simulated_report(simulated_analysis: tuple[Path, list[StructType]]) -> Path:
    return simulated_analysis[0]


@pytest.fixture(scope="session")
def handwritten_log(analytics_tmp: Path) -> Path:
    """The small hand-written log (tests/analytics/handwritten.py), written once."""
    from tests.analytics import handwritten

    directory = analytics_tmp / "handwritten-log"
    handwritten.write(directory)
    return directory


@pytest.fixture(scope="session")
def handwritten_result(spark: SparkSession, handwritten_log: Path, analytics_tmp: Path) -> AnalysisResult:
    """The pipeline over the hand-written log, run once for every test that reads what it wrote."""
    from staticfleet.analytics.pipeline import analyze

    return analyze(spark, [str(handwritten_log)], analytics_tmp / "handwritten-report")
