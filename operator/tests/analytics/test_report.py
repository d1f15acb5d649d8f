"""The report people look at: real PNG images with the expected panels, and an HTML page that holds
the tables (parsed back and compared with the Parquet tables) with the charts inlined."""

from __future__ import annotations

import base64
import io
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimg
from matplotlib.colors import to_rgb
from pyspark.sql import SparkSession

from staticfleet.analytics.charts import OPERATION_COLOR, STATE_COLORS, StateSpan, bucket_size_ms, state_spans
from staticfleet.analytics.pipeline import UNIQUE_VALUED
from staticfleet.analytics.report import format_time
from tests.analytics.helpers import table


class _Page(HTMLParser):
    """Tables by id (rows of cell texts) and images (id, src)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: dict[str, str] = {}
        self.sources: list[str] = []
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        for name in ("src", "href"):
            if attributes.get(name):
                self.sources.append(attributes[name] or "")
        if tag == "table":
            self._table = attributes.get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "img":
            self.images[attributes.get("id") or ""] = attributes.get("src") or ""

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None


@pytest.fixture(scope="module")
def page(simulated_report: Path) -> _Page:
    parser = _Page()
    parser.feed((simulated_report / "report.html").read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def summary(simulated_report: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((simulated_report / "summary.json").read_text())
    return loaded


def _pixels(png: bytes) -> Any:
    return mpimg.imread(io.BytesIO(png), format="png")


def _has_color(pixels: Any, color: str, tolerance: float = 0.02) -> bool:
    rgb = np.array(to_rgb(color))
    return bool((np.abs(pixels[:, :, :3] - rgb) < tolerance).all(axis=2).any())


@pytest.mark.parametrize("name", ["group_states", "rebalances_over_time", "partitions_moved"])
def test_charts_are_real_images(simulated_report: Path, summary: dict[str, Any], name: str) -> None:
    chart = summary["outputs"]["charts"][name]
    pixels = _pixels((simulated_report / chart["file"]).read_bytes())
    height, width = pixels.shape[:2]
    assert width >= 800 and height >= 150
    colors = {tuple(p) for p in (pixels[::4, ::4, :3] * 255).astype(int).reshape(-1, 3).tolist()}
    assert len(colors) > 20  # axes, text, bars: not a blank canvas


def test_state_timeline_shows_stable_groups_and_their_rebalances(
    simulated_report: Path, summary: dict[str, Any]
) -> None:
    chart = summary["outputs"]["charts"]["group_states"]
    assert chart["panels"] == ["group states"] and "6 groups" in chart["title"]
    pixels = _pixels((simulated_report / chart["file"]).read_bytes())
    assert _has_color(pixels, STATE_COLORS["Stable"])
    assert _has_color(pixels, STATE_COLORS["PreparingRebalance"])
    assert _has_color(pixels, OPERATION_COLOR)  # operation windows above the rows


def test_partitions_moved_chart_has_both_panels(simulated_report: Path, summary: dict[str, Any]) -> None:
    chart = summary["outputs"]["charts"]["partitions_moved"]
    assert chart["panels"] == ["partitions moved over time", "distribution"]
    pixels = _pixels((simulated_report / chart["file"]).read_bytes())
    assert _has_color(pixels, "#d62728", tolerance=0.15)  # scatter points (drawn with alpha)
    assert _has_color(pixels, "#8c564b")  # histogram bars


def test_html_is_self_contained_with_every_chart_inlined(page: _Page, simulated_report: Path) -> None:
    assert page.sources and all(src.startswith("data:image/png;base64,") for src in page.sources)
    for name in ("group_states", "rebalances_over_time", "partitions_moved"):
        inlined = base64.b64decode(page.images[f"chart-{name}"].split(",", 1)[1])
        assert inlined == (simulated_report / f"{name}.png").read_bytes()


def test_html_tables_hold_the_parquet_rows(spark: SparkSession, simulated_report: Path, page: _Page) -> None:
    operations = table(spark, simulated_report, "operations")
    header, *rows = page.tables["operations"]
    assert len(rows) == len(operations) == 30
    by_id = {row[header.index("operation_id")]: row for row in rows}
    for op in operations:
        row = by_id[op["operation_id"]]
        assert row[header.index("rebalances")] == str(op["rebalances"])
        assert row[header.index("partitions_moved")] == str(op["partitions_moved"])
        assert row[header.index("start_ts")] == format_time(op["start_ts"])
    groups = table(spark, simulated_report, "groups")
    header, *rows = page.tables["groups"]
    assert sorted((r[0], r[header.index("rebalances")]) for r in rows) == sorted(
        (g["group"], str(g["rebalances"])) for g in groups
    )
    rebalances = table(spark, simulated_report, "rebalances")
    header, *rows = page.tables["rebalances"]
    assert len(rows) == len(rebalances)
    durations = [int(r[header.index("duration_ms")]) for r in rows]
    assert durations == sorted(durations, reverse=True)


def test_html_comparison_and_summary_cards(page: _Page, summary: dict[str, Any]) -> None:
    header, *rows = page.tables["comparison"]
    assert header[:3] == ["mode", "operation", "operations"] and len(rows) == 15
    rollout = {r[0]: r for r in rows if r[1] == "rollout"}
    assert rollout["static"][header.index("rebalances")] == "0"
    assert page.tables["skipped"] == [["file", "status", "lines"]]


def test_state_spans_merge_repeats_and_end_at_the_last_event() -> None:
    changes = [
        (0, "Empty"),
        (0, "PreparingRebalance"),
        (3, "Stable"),
        (5, "Stable"),
        (9, "PreparingRebalance"),
    ]
    assert state_spans(changes, 12) == [
        StateSpan("Empty", 0, 0),
        StateSpan("PreparingRebalance", 0, 3),
        StateSpan("Stable", 3, 9),
        StateSpan("PreparingRebalance", 9, 12),
    ]


def test_bucket_size_is_round_and_bounded() -> None:
    assert bucket_size_ms(50_000) == 1_000
    assert bucket_size_ms(600_000) == 10_000
    assert 3_600_000 * 24 * 10 / bucket_size_ms(3_600_000 * 24 * 10) <= 60


@pytest.mark.parametrize("name", sorted(UNIQUE_VALUED))
def test_tables_written_without_a_dictionary_name_their_own_columns(
    spark: SparkSession, simulated_report: Path, name: str
) -> None:
    # A renamed column would silently go back to being dictionary-encoded.
    columns = spark.read.parquet(str(simulated_report / name)).columns
    assert set(UNIQUE_VALUED[name]) <= set(columns)
