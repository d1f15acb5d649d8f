"""PNG charts with matplotlib (no pyplot: no global state, no display), from plain Python data."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

STATE_COLORS: Final = {
    "Stable": "#2ca02c",
    "PreparingRebalance": "#ff7f0e",
    "CompletingRebalance": "#1f77b4",
    "Empty": "#b0b0b0",
    "Dead": "#303030",
}
_OTHER_COLOR: Final = "#9467bd"
_DPI: Final = 100


@dataclass(frozen=True, slots=True)
class StateSpan:
    state: str
    start_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class Chart:
    name: str
    title: str
    panels: tuple[str, ...]
    png: bytes


def state_spans(changes: Sequence[tuple[int, str]], end_ms: int) -> list[StateSpan]:
    """Spans of constant state from (time, state after the event) in log order, up to end_ms."""
    spans: list[StateSpan] = []
    for index, (start, state) in enumerate(changes):
        stop = changes[index + 1][0] if index + 1 < len(changes) else max(end_ms, start)
        if spans and spans[-1].state == state:
            spans[-1] = StateSpan(state, spans[-1].start_ms, stop)
        else:
            spans.append(StateSpan(state, start, stop))
    return [span for span in spans if span.end_ms >= span.start_ms]


def _time_axis(axes: Axes, label: str) -> None:
    locator = AutoDateLocator(tz=dt.UTC)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=dt.UTC))  # type: ignore[no-untyped-call]
    axes.set_xlabel(label)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


def _empty_note(figure: Figure, text: str) -> None:
    axes = figure.add_subplot()
    axes.set_axis_off()
    axes.text(0.5, 0.5, text, ha="center", va="center", fontsize=12)


OPERATION_COLOR: Final = "#404040"


def group_states_chart(
    timelines: Mapping[str, Sequence[StateSpan]],
    total_groups: int,
    operations: Mapping[str, Sequence[tuple[int, int]]] | None = None,
) -> Chart:
    """One row per group, coloured by state, with the group's operation windows as a thin bar above.
    Short rebalances are drawn at least a pixel wide."""
    groups = list(timelines)
    height = 1.2 + 0.38 * max(1, len(groups))
    figure = Figure(figsize=(11, height), layout="constrained")
    shown = (
        f"{len(groups)} of {total_groups} groups" if total_groups > len(groups) else f"{len(groups)} groups"
    )
    title = f"Group state over time ({shown}, most rebalances first)"
    if not groups:
        _empty_note(figure, "no group events")
        return Chart("group_states", title, ("group states",), _png(figure))
    axes = figure.add_subplot()
    starts = [span.start_ms for spans in timelines.values() for span in spans]
    ends = [span.end_ms for spans in timelines.values() for span in spans]
    low, high = min(starts), max(ends)
    minimum_width = max(1.0, (high - low) / 900)
    day = 86_400_000
    for row, group in enumerate(groups):
        # One collection per state and row: thousands of spans stay cheap to draw.
        by_state: dict[str, list[tuple[float, float]]] = {}
        for span in timelines[group]:
            width = max(float(span.end_ms - span.start_ms), minimum_width)
            by_state.setdefault(span.state, []).append((_date_number(span.start_ms), width / day))
        # Long quiet states first, so the (widened) short rebalances are drawn over them.
        for state in sorted(by_state, key=lambda name: name not in ("Stable", "Empty")):
            color = STATE_COLORS.get(state, _OTHER_COLOR)
            axes.broken_barh(by_state[state], (row - 0.35, 0.7), facecolors=color)
        windows = [
            (_date_number(start), max(float(end - start), minimum_width) / day)
            for start, end in (operations or {}).get(group, ())
        ]
        if windows:
            axes.broken_barh(windows, (row - 0.48, 0.1), facecolors=OPERATION_COLOR)
    drawn = {span.state for spans in timelines.values() for span in spans}
    handles = [Patch(color=color, label=state) for state, color in STATE_COLORS.items() if state in drawn]
    if drawn - set(STATE_COLORS):
        handles.append(Patch(color=_OTHER_COLOR, label="other"))
    if any((operations or {}).values()):
        handles.append(Patch(color=OPERATION_COLOR, label="operation"))
    axes.set_yticks(range(len(groups)), labels=groups, fontsize=8)
    _time_axis(axes, "time (UTC)")
    axes.set_title(title)
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="state")
    axes.set_ylim(len(groups) - 0.4, -0.6)
    return Chart("group_states", title, ("group states",), _png(figure))


def _date_number(ms: int) -> float:
    """matplotlib's date axis unit: days since 1970-01-01 (its default epoch)."""
    return ms / 86_400_000


def rebalances_over_time_chart(
    buckets: Sequence[tuple[int, str, int]], bucket_ms: int, reasons: Sequence[str]
) -> Chart:
    """Stacked bars: rebalances started per time bucket, by reason. buckets: (bucket start ms, reason, n)."""
    title = f"Rebalances started per {_duration(bucket_ms)}, by reason"
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    if not buckets:
        _empty_note(figure, "no rebalances")
        return Chart("rebalances_over_time", title, ("rebalances over time",), _png(figure))
    axes = figure.add_subplot()
    starts = sorted({start for start, _, _ in buckets})
    counts = {(start, reason): n for start, reason, n in buckets}
    bottoms = [0] * len(starts)
    width = bucket_ms / 86_400_000 * 0.9
    x = [_date_number(start) for start in starts]
    palette = _palette(len(reasons))
    for color, reason in zip(palette, reasons, strict=True):
        heights = [counts.get((start, reason), 0) for start in starts]
        axes.bar(x, heights, width=width, bottom=bottoms, align="edge", color=color, label=reason)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    _time_axis(axes, "time (UTC)")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("rebalances")
    axes.set_title(title)
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="reason")
    return Chart("rebalances_over_time", title, ("rebalances over time",), _png(figure))


def partitions_moved_chart(
    points: Sequence[tuple[int, int]], histogram: Sequence[tuple[int, int]], sampled_from: int
) -> Chart:
    """Left: partitions moved by each rebalance over time; right: how many rebalances moved how many."""
    title = "Partitions moved per rebalance"
    panels = ("partitions moved over time", "distribution")
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    if not histogram:
        _empty_note(figure, "no rebalance with a known assignment before and after")
        return Chart("partitions_moved", title, panels, _png(figure))
    left, right = figure.subplots(1, 2, width_ratios=(2, 1))
    left.scatter(
        [_date_number(t) for t, _ in points], [n for _, n in points], s=10, color="#d62728", alpha=0.6
    )
    _time_axis(left, "rebalance start (UTC)")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_ylabel("partitions moved")
    sample = f" (sample of {len(points)} of {sampled_from})" if sampled_from > len(points) else ""
    left.set_title(panels[0] + sample)
    right.bar([moved for moved, _ in histogram], [n for _, n in histogram], color="#8c564b", width=0.8)
    right.set_xlabel("partitions moved")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.yaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_ylabel("rebalances")
    right.set_title(panels[1])
    figure.suptitle(title)
    return Chart("partitions_moved", title, panels, _png(figure))


def _palette(n: int) -> list[str]:
    base = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
    return [base[i % len(base)] for i in range(n)]


def _duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def bucket_size_ms(span_ms: int, target_buckets: int = 60) -> int:
    """A round bucket size giving at most about `target_buckets` buckets over the span."""
    steps = [
        1_000,
        5_000,
        10_000,
        30_000,
        60_000,
        300_000,
        600_000,
        1_800_000,
        3_600_000,
        21_600_000,
        86_400_000,
    ]
    for step in steps:
        if span_ms / step <= target_buckets:
            return step
    return 86_400_000 * max(1, -(-span_ms // (86_400_000 * target_buckets)))
