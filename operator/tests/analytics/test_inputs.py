"""Inputs: paths, globs, directories and formats are resolved before Spark starts; Parquet reads like
JSON lines; bad input fails with a message that says what is wrong."""

from __future__ import annotations

import datetime
import os
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from staticfleet.analytics import lines
from staticfleet.analytics.inputs import InputError, resolve
from staticfleet.analytics.pipeline import AnalysisResult, analyze
from staticfleet.cli import main
from tests.analytics import handwritten

COMPARED = (
    "status",
    "ts",
    "type",
    "group",
    "generation",
    "member_count",
    "assignment",
    "reason",
    "rebalance",
    "cause",
)


def test_directories_are_walked_and_hidden_files_skipped(tmp_path: Path) -> None:
    handwritten.write(tmp_path)
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "coordinator" / ".events.jsonl.crc").write_text("x")
    sources = resolve([str(tmp_path)])
    assert [Path(p).name for p in sources.json] == ["events-000001.jsonl", "events.jsonl", "fleet.jsonl"]
    assert sources.parquet == ()


def test_globs_and_file_urls(tmp_path: Path) -> None:
    handwritten.write(tmp_path)
    assert len(resolve([str(tmp_path / "coordinator" / "events*.jsonl")]).json) == 2
    assert len(resolve([f"file://{tmp_path}/operator/fleet.jsonl"]).json) == 1


def test_remote_paths_go_to_spark_as_given() -> None:
    sources = resolve(["hdfs://nn:8020/logs/events*.jsonl", "s3a://bucket/tables/events.parquet"])
    assert sources.json == ("hdfs://nn:8020/logs/events*.jsonl",)
    assert sources.parquet == ("s3a://bucket/tables/events.parquet",)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: str(d / "nope.jsonl"), "no such file or directory"),
        (lambda d: str(d / "*.jsonl"), "no file matches"),
        (lambda d: str(d), "holds no data files"),
    ],
)
def test_missing_inputs_are_refused(tmp_path: Path, make: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        resolve([make(tmp_path)])  # type: ignore[operator]


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown format"):
        resolve([str(tmp_path)], "avro")


def test_cli_reports_a_missing_file_without_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "out")]) == 2
    assert "missing.jsonl: no such file or directory" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_refuses_bad_simulation_parameters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--out", str(tmp_path), "--heartbeat-interval-ms", "90000"]) == 2
    assert "heartbeat interval" in capsys.readouterr().err


def test_parquet_logs_read_like_json_lines(spark: SparkSession, tmp_path: Path) -> None:
    handwritten.write(tmp_path / "log")
    from_json = lines.unpacked(lines.read(spark, resolve([str(tmp_path / "log")])))
    ok = from_json.filter("status = 'ok'")
    # A Parquet log as another tool would write it: Spark's own JSON inference, no source columns.
    inferred = spark.read.json(str(tmp_path / "log" / "coordinator" / "events.jsonl"))
    inferred.filter("group is not null and ts is not null").write.parquet(
        str(tmp_path / "pq" / "events.parquet")
    )
    sources = resolve([str(tmp_path / "pq")])
    assert sources.parquet and not sources.json  # told apart by content, not name
    from_parquet = lines.unpacked(lines.read(spark, sources)).filter("status = 'ok'")
    active = ok.filter(ok.source_file.endswith("/coordinator/events.jsonl"))
    rows = sorted(tuple(r) for r in from_parquet.select(*COMPARED).collect() if r["status"] == "ok")
    expected = sorted(tuple(r) for r in active.select(*COMPARED).collect())
    assert len(rows) == len(expected) > 30
    assert rows == expected
    assert any(r["assignment"] is not None for r in from_parquet.select("assignment").collect())


def test_an_events_table_can_be_read_again_in_its_original_order(spark: SparkSession, tmp_path: Path) -> None:
    handwritten.write(tmp_path / "log")
    read = lines.read(spark, resolve([str(tmp_path / "log")]))
    first = lines.unpacked(read).filter("status is not null")
    first.write.parquet(str(tmp_path / "events"))
    again = lines.unpacked(lines.read(spark, resolve([str(tmp_path / "events")])))
    columns = ["status", "ts", "group", "type", "source_file", "source_offset", "source_row"]
    assert Counter(map(tuple, again.select(*columns).collect())) == Counter(
        map(tuple, first.select(*columns).collect())
    )


def _rejected(spark: SparkSession, read: lines.Lines) -> list[tuple[str, str]]:
    census = lines.Census.of(lines.splits(read).collect(), read)
    table = lines.rejected(spark, read, census)
    return sorted((r["status"], r["raw_line"]) for r in table.collect())


def test_every_value_read_is_one_event_or_one_rejected_line(spark: SparkSession, tmp_path: Path) -> None:
    event = '{"v":1,"ts":5,"type":"group_loaded","group":"g","generation":2,"state":"Stable","members":3}'
    array = f"[{event},{event}]"
    (tmp_path / "log.jsonl").write_text("\n".join([event, array, "", " \t", "42", "{}", event, "[]"]) + "\n")
    events = lines.read(spark, resolve([str(tmp_path)]))
    rows = lines.unpacked(events).orderBy("source_row").collect()
    # As Spark reads JSON lines: an array holds its values, blank lines and empty arrays hold none.
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "malformed", "missing-fields", "ok"]
    assert [r["member_count"] for r in rows if r["status"] == "ok"] == [3, 3, 3, 3]
    # The reader keeps the text of what does not parse; the other rejected lines are read again.
    assert [r["raw_line"] for r in rows if r["status"] != "ok"] == ["42", None]
    assert _rejected(spark, events) == [("malformed", "42"), ("missing-fields", "{}")]


def test_rejected_lines_read_again_are_the_ones_counted(spark: SparkSession, tmp_path: Path) -> None:
    good = '{"v":1,"ts":5,"type":"member_left","group":"g","member_id":"m"}'
    future = '{"v":2,"ts":6,"type":"member_left","group":"g"}'
    no_group = '{"v":1,"ts":7,"type":"member_left"}'
    wrong_type = '{"v":1,"ts":"soon","type":"member_left","group":"g"}'
    written = [
        good,
        f"  [{future}, {good}]",
        no_group,
        wrong_type,
        f"[{no_group}, 5]",
        f'[{no_group}, {{"v": 3}}]',
        "{truncated",
        future,
    ]
    (tmp_path / "a.jsonl").write_text("\n".join(written) + "\n")
    (tmp_path / "b.jsonl").write_text(good + "\n\n" + good + "\n")
    events = lines.read(spark, resolve([str(tmp_path)]))
    counted = Counter(r["status"] for r in lines.unpacked(events).collect() if r["status"] != "ok")
    assert counted == {"unsupported-version": 2, "missing-fields": 3, "malformed": 3}
    found = _rejected(spark, events)
    assert Counter(status for status, _ in found) == counted
    assert sorted(line for status, line in found if status == "malformed") == sorted(
        [wrong_type, f"[{no_group}, 5]", "{truncated"]
    )
    assert sorted(line for status, line in found if status == "missing-fields") == sorted(
        [no_group, f'[{no_group}, {{"v": 3}}]', f'[{no_group}, {{"v": 3}}]']
    )
    assert sorted(line for status, line in found if status == "unsupported-version") == sorted(
        [f"  [{future}, {good}]", future]
    )


def _clashing_under_salt_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file name gets the same key under salt 0, as if 64-bit hashes clashed."""
    hashed, hashed_here = lines.file_key, lines.file_key_of

    def clashing(salt: int, name: Column) -> Column:
        return F.lit(7).cast("long") if salt == 0 else hashed(salt, name)

    monkeypatch.setattr(lines, "file_key", clashing)
    monkeypatch.setattr(lines, "file_key_of", lambda salt, name: 7 if salt == 0 else hashed_here(salt, name))


def _tables(spark: SparkSession, out: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {
        name: sorted((tuple(r) for r in spark.read.parquet(str(out / name)).collect()), key=repr)
        for name in ("rebalances", "membership", "operations", "groups")
    }


def test_files_whose_keys_clash_are_keyed_with_another_salt(
    spark: SparkSession,
    handwritten_log: Path,
    handwritten_result: AnalysisResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _clashing_under_salt_zero(monkeypatch)
    read = lines.read(spark, resolve([str(handwritten_log)]))
    assert read.salt == 1 and len(read.files) == 3
    analyze(spark, [str(handwritten_log)], tmp_path / "salted")
    assert _tables(spark, tmp_path / "salted") == _tables(spark, Path(handwritten_result.out_dir))


def test_an_events_table_whose_file_keys_clash_is_read_again_with_another_salt(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file names of an events table are known only once it is read: a clash among them shows in
    the first pass, and the lines are read again."""
    handwritten.write(tmp_path / "log")
    lines.unpacked(lines.read(spark, resolve([str(tmp_path / "log")]))).write.parquet(
        str(tmp_path / "events")
    )
    analyze(spark, [str(tmp_path / "events")], tmp_path / "plain")
    _clashing_under_salt_zero(monkeypatch)
    first = lines.read(spark, resolve([str(tmp_path / "events")]))
    assert first.salt == 0  # nothing listed to choose a salt by
    assert lines.Census.of(lines.splits(first).collect(), first).ambiguous
    analyze(spark, [str(tmp_path / "events")], tmp_path / "salted")
    assert _tables(spark, tmp_path / "salted") == _tables(spark, tmp_path / "plain")


@pytest.mark.parametrize("salt", [0, 1, -5, 2**40])
def test_file_keys_are_computed_here_as_spark_computes_them(spark: SparkSession, salt: int) -> None:
    names = [
        "file:///tmp/odd%20dir/a%20b%2520c.jsonl",
        "file:///x/%C3%A9%20%C3%BC.jsonl",
        "é ü",
        "",
        "x" * 100,
    ]
    frame = spark.createDataFrame([(name,) for name in names], "name string")
    by_spark = [row[0] for row in frame.select(lines.file_key(salt, F.col("name"))).collect()]
    assert by_spark == [lines.file_key_of(salt, name) for name in names]


def test_files_with_odd_names_are_named_and_timed(spark: SparkSession, tmp_path: Path) -> None:
    event = '{"v":1,"ts":5,"type":"group_loaded","group":"g","generation":2,"state":"Stable","members":3}'
    directory = tmp_path / "odd dir"
    directory.mkdir()
    for name, mtime in (
        ("a b%20c.jsonl", 1_600_000_000),
        ("x#y.jsonl", 1_600_000_100),
        ("é ü.jsonl", 1_600_000_200),
    ):
        (directory / name).write_text(event + "\n")
        os.utime(directory / name, (mtime, mtime))
    read = lines.read(spark, resolve([str(directory)]))
    rows = lines.unpacked(read).select("source_file", "source_mtime").collect()
    named = {Path(unquote(urlparse(r["source_file"]).path)).name: r["source_mtime"] for r in rows}
    utc = datetime.UTC
    assert named == {
        "a b%20c.jsonl": datetime.datetime.fromtimestamp(1_600_000_000, utc).replace(tzinfo=None),
        "x#y.jsonl": datetime.datetime.fromtimestamp(1_600_000_100, utc).replace(tzinfo=None),
        "é ü.jsonl": datetime.datetime.fromtimestamp(1_600_000_200, utc).replace(tzinfo=None),
    }


def test_spark_lists_the_modification_times_the_file_system_gives(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Remote inputs are timed from Spark's listing, local ones from the file system: both name the
    files as the reader does, odd names included, with the same times."""
    event = '{"v":1,"ts":5,"type":"group_loaded","group":"g","generation":2,"state":"Stable","members":3}'
    nested = tmp_path / "a dir" / "b#c"
    nested.mkdir(parents=True)
    for number, name in enumerate(("x y.jsonl", "p%41q.jsonl", "ü.jsonl")):
        (nested / name).write_text(event + "\n")
        os.utime(nested / name, (1_600_000_000 + number, 1_600_000_000 + number))
    names = lines.read(spark, resolve([str(tmp_path)])).files.values()
    from_spark = lines.listed_modification_times(spark, list(names), [str(nested)])
    assert from_spark == lines.local_modification_times(list(names))
    assert sorted(from_spark.values()) == [1_600_000_000_000, 1_600_000_001_000, 1_600_000_002_000]
