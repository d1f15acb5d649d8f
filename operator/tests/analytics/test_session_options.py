"""The local driver's JVM options: one batch job, and over a small input C1 alone."""

from __future__ import annotations

from staticfleet.analytics.session import local_jvm_options


def test_a_local_analysis_runs_the_throughput_collector_on_a_heap_taken_whole() -> None:
    assert local_jvm_options(None) == ["-XX:+UseParallelGC"]
    assert local_jvm_options("4g") == ["-XX:+UseParallelGC", "-Xms4g"]


def test_over_a_small_input_only_c1_compiles() -> None:
    assert "-XX:TieredStopAtLevel=1" in local_jvm_options(None, small_input=True)
    assert "-XX:TieredStopAtLevel=1" not in local_jvm_options("1g")
