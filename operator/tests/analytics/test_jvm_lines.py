"""The strict line parser in Spark's JVM (staticfleet.analytics.jvm_lines) against Spark's JSON reader:
the lines it takes read to the same rows, the others are flagged, and an input with a flagged line is
read again by the reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from staticfleet.analytics import jvm_lines, pipeline
from staticfleet.analytics import lines as read_lines
from staticfleet.analytics import schema as s
from staticfleet.analytics.inputs import resolve

from .handwritten import BAD_LINES, FLEET, ORDERS_ROTATED, PAYMENTS

MALFORMED = s.STATUS_CODES[s.MALFORMED]


def _rc(members: object, **extra: object) -> str:
    event = {
        "v": 1,
        "ts": 10,
        "type": "rebalance_completed",
        "group": "g",
        "generation": 2,
        "members": members,
    }
    return json.dumps({**event, **extra})


TAKEN = [
    *ORDERS_ROTATED,
    *PAYMENTS,
    *FLEET,
    # Fields in another order, unknown ones of any shape, nulls, escapes and text beyond ASCII.
    '{"members": [{"member_id": "m-1", "assignment": {"t": [0, 1]}}], "type": "rebalance_completed", '
    '"group": "g\\u00e9", "v": 1, "ts": 20, "x": {"deep": [1, {"y": null}]}, "generation": 3}',
    '{"v": 1, "ts": 30, "type": "group_loaded", "group": "g", "members": 4, "state": null, "z": 1.5e3}',
    '{"v": 1, "ts": 31, "type": "join_completed", "group": "g\\"q", "members": [{"member_id": "a"}]}',
    '  {"v": 1, "ts": 32, "type": "member_left", "group": "ü", "member_id": "日本", "rebalance": true}  ',
    _rc([{"member_id": "m", "instance_id": None, "assignment": None}]),
    _rc([{"member_id": None, "instance_id": "i", "assignment": {}, "other": [1]}]),
    _rc([]),
    _rc(None),
    _rc('[{"member_id": "m", "assignment": {"t": [3]}}]'),
    json.dumps({"v": 1, "ts": 2**40, "type": "member_joined", "group": "g", "duration_ms": 2**62}),
]

FLAGGED = [
    '{"v": 1.0, "ts": 1, "type": "member_left", "group": "g"}',
    '{"v": "1", "ts": 1, "type": "member_left", "group": "g"}',
    '{"v": 1, "ts": 1, "type": "member_left", "group": "g", "generation": 2147483648}',
    '{"v": 1, "ts": 1, "type": "member_left", "group": "g", "rebalance": "true"}',
    '{"v": 1, "ts": 1, "type": "member_left", "group": "g", "member_id": 1.5}',
    '{"v": 1, "ts": 1, "type": "member_left", "group": "g", "member_id": false}',
    '{"v": 1, "ts": 1, "type": "member_left", "group": "g", "group": "h"}',
    '{"v": 1, "ts": 1, "type": "member_left", "group": "g"} trailing',
    '{"v": 1, "ts": 1, "type": "member_left", "group": "g"',
    "{'v': 1, 'ts': 1, 'type': 'member_left', 'group': 'g'}",
    '[{"v": 1, "ts": 1, "type": "member_left", "group": "g"}]',
    '{"v": 1, "ts": NaN, "type": "member_left", "group": "g"}',
    '{"v": 1, "ts": 99999999999999999999, "type": "member_left", "group": "g"}',
    '{"v": 1, "ts": 1, "type": "member_left", "group": "\ufffd"}',
    '"just text"',
    _rc([None]),
    _rc([{"member_id": 7}]),
    _rc([{"member_id": "m"}]).replace('"member_id": "m"', '"member_id": "m", "member_id": "n"'),
    _rc([{"member_id": "m", "assignment": {"t": [1.0]}}]),
    _rc([{"member_id": "m", "assignment": {"t": [None]}}]),
    _rc([{"member_id": "m", "assignment": {"t": 1}}]),
    _rc([{"member_id": "m", "assignment": [1]}]),
    _rc({"member_id": "m"}),
    _rc(5),
    _rc([{"member_id": "m", "assignment": {"t": [1]}}]).replace('{"t": [1]}', '{"t": [1], "t": [2]}'),
]


def _written(directory: Path, name: str, lines: list[str]) -> Path:
    path = directory / f"{name}.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _rows(spark: SparkSession, path: Path, strict: bool) -> DataFrame:
    return read_lines.read(spark, resolve([str(path)], "auto"), strict=strict).frame


def _status(row_frame: DataFrame) -> list[int]:
    return [
        row[0] for row in row_frame.select(F.col("core.status")).orderBy(F.col("core.source_row")).collect()
    ]


@pytest.fixture(scope="module")
def registered(spark: SparkSession) -> SparkSession:
    assert jvm_lines.register(spark), "the strict line parser's jar was not in the test session"
    return spark


def test_lines_it_takes_read_to_the_rows_of_sparks_reader(registered: SparkSession, tmp_path: Path) -> None:
    path = _written(tmp_path, "taken", TAKEN)
    strict, reader = _rows(registered, path, True), _rows(registered, path, False)
    assert MALFORMED not in _status(strict), "a line the parser should take was flagged"
    assert strict.count() == reader.count() == len(TAKEN)
    assert strict.exceptAll(reader).count() == 0
    assert reader.exceptAll(strict).count() == 0


@pytest.mark.parametrize("line", FLAGGED)
def test_a_line_it_does_not_take_is_flagged_with_its_text(
    registered: SparkSession, tmp_path: Path, line: str
) -> None:
    path = _written(tmp_path, "flagged", [line])
    (row,) = _rows(registered, path, True).select("core.status", "raw_line").collect()
    assert row["status"] == MALFORMED
    assert row["raw_line"] == line


def test_an_input_with_a_line_it_does_not_take_is_read_again_by_sparks_reader(
    registered: SparkSession, tmp_path: Path
) -> None:
    path = _written(tmp_path, "mixed", [*PAYMENTS, *BAD_LINES])
    sources = resolve([str(path)], "auto")
    lines, census = pipeline._read(registered, sources)
    try:
        reader = read_lines.read(registered, sources, lines.salt, strict=False).frame
        assert lines.frame.exceptAll(reader).count() == 0
        assert reader.exceptAll(lines.frame).count() == 0
        assert census.lines.get(s.MALFORMED, 0) > 0
    finally:
        lines.frame.unpersist()


def test_an_input_of_lines_it_takes_is_read_by_it_alone(registered: SparkSession, tmp_path: Path) -> None:
    path = _written(tmp_path, "taken", TAKEN)
    sources = resolve([str(path)], "auto")
    lines, census = pipeline._read(registered, sources)
    try:
        assert jvm_lines.FUNCTION in lines.frame._jdf.queryExecution().analyzed().toString()
        assert MALFORMED not in [s.STATUS_CODES[name] for name in census.lines]
    finally:
        lines.frame.unpersist()


def test_without_a_jdk_or_when_turned_off_there_is_no_jar(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STATICFLEET_CACHE", str(tmp_path))
    monkeypatch.setattr(jvm_lines, "javac", lambda: None)
    assert jvm_lines.jar() is None
    monkeypatch.setenv(jvm_lines.SWITCH, "off")
    assert jvm_lines.jar() is None


def test_the_jar_is_compiled_once_and_kept_by_its_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STATICFLEET_CACHE", str(tmp_path))
    first = jvm_lines.jar()
    assert first is not None and first.parent == tmp_path / "spark-jars"
    assert first.read_bytes()[:2] == b"PK"
    monkeypatch.setattr(jvm_lines, "javac", lambda: None)  # found in the cache, not compiled again
    assert jvm_lines.jar() == first
    assert list(first.parent.glob("*.part")) == []
