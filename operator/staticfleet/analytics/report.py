"""The HTML report: one self-contained page, tables and charts (PNG as data: URIs), no external assets."""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from staticfleet.analytics.charts import Chart

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } td.text { text-align: left; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 9em; }
.card .value { font-size: 22px; font-weight: 600; } .card .label { color: #666; font-size: 12px; }
.note { color: #666; font-size: 13px; } img { max-width: 100%; border: 1px solid #eee; }
"""


@dataclass(frozen=True, slots=True)
class Table:
    key: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    total_rows: int
    note: str = ""


def format_cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and (column.endswith("_ts") or column in ("ts", "first", "last")):
        return format_time(value)
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def format_time(ms: int) -> str:
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def _table(table: Table) -> str:
    shown = len(table.rows)
    count = (
        f"{shown} of {table.total_rows} rows"
        if table.total_rows > shown
        else f"{shown} row{'s' * (shown != 1)}"
    )
    note = f" {html.escape(table.note)}" if table.note else ""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = []
    for row in table.rows:
        cells = []
        for column, value in zip(table.columns, row, strict=True):
            css = ' class="text"' if isinstance(value, str) else ""
            cells.append(f"<td{css}>{html.escape(format_cell(column, value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<h2 id="{table.key}-title">{html.escape(table.title)}</h2>\n'
        f'<p class="note">{count}.{note}</p>\n'
        f'<table id="{table.key}"><thead><tr>{head}</tr></thead>\n<tbody>\n'
        + "\n".join(body)
        + "\n</tbody></table>"
    )


def _chart(chart: Chart) -> str:
    data = base64.b64encode(chart.png).decode("ascii")
    return (
        f'<h2 id="{chart.name}-title">{html.escape(chart.title)}</h2>\n'
        f'<img id="chart-{chart.name}" alt="{html.escape(chart.title)}" src="data:image/png;base64,{data}">'
    )


def _cards(cards: Mapping[str, Any]) -> str:
    items = [
        f'<div class="card"><div class="value">{html.escape(str(value))}</div>'
        f'<div class="label">{html.escape(label)}</div></div>'
        for label, value in cards.items()
    ]
    return '<div class="cards" id="cards">' + "".join(items) + "</div>"


def render(
    title: str,
    subtitle: str,
    cards: Mapping[str, Any],
    tables: Sequence[Table],
    charts: Sequence[Chart],
) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">{html.escape(subtitle)}</p>',
        _cards(cards),
    ]
    parts += [_chart(chart) for chart in charts]
    parts += [_table(table) for table in tables]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
