"""docs/conformance.md: every scenario, Kafka's answer, staticfleet's answer and whether they match."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from conformance.driver import Json
from conformance.runner import Result
from conformance.scenario import Outcome, Scenario

REPORT_PATH = Path(__file__).resolve().parent.parent / "docs" / "conformance.md"

# staticfleet behaviour that goes beyond Kafka on purpose. None of it is reachable from the scenarios:
# each needs something a Kafka client never sends or a setting Kafka does not have.
DELIBERATE_DIFFERENCES = (
    (
        "Pre-registered scale-up",
        "A group can be told which `group.instance.id`s to expect (IncrementalAlterConfigs on the GROUP "
        "resource, config `staticfleet.expected.instance.ids`). The join phase then waits, bounded by the "
        "rebalance timeout, until every expected instance has joined, so scaling up by k members costs one "
        "rebalance. Apache Kafka rejects that config, and without it staticfleet behaves as Kafka does.",
    ),
    (
        "Rebalance on partition growth",
        "The coordinator parses consumer-protocol subscriptions and starts a rebalance itself when a "
        "subscribed topic gains partitions. Kafka leaves this to the group leader, which misses it when it "
        "was offline or does not support KIP-814. "
        "`staticfleet coordinator --no-rebalance-on-partition-growth` turns it off.",
    ),
)

_RENAMES = {
    "error_code": "",
    "generation_id": "gen",
    "member_id": "id",
    "group_instance_id": "inst",
    "skip_assignment": "skip",
    "protocol_name": "proto",
    "protocol_data": "proto",
    "group_state": "state",
    "member_metadata": "meta",
    "member_assignment": "assign",
    "metadata": "meta",
    "assignment": "assign",
    "committed_offset": "offset",
    "partition_index": "p",
}
_QUIET = frozenset({"authorized_operations", "client_id", "committed_leader_epoch", "error_message"})
_UNWRAP = frozenset({"groups", "results", "coordinators"})


def compact(value: Json) -> str:
    """A one-line rendering of normalised data: empty and default-ish fields left out."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        if len(value) > 40:
            return f"{value[:12]}…({len(value)} chars)"
        return value if value else '""'
    if isinstance(value, list):
        return "[" + "; ".join(compact(v) for v in value) + "]"
    if "consumer_protocol" in value and isinstance(value["consumer_protocol"], dict):
        inner = value["consumer_protocol"]
        if "topics" in inner:
            return "sub(" + ",".join(str(t) for t in _as_list(inner["topics"])) + ")"
        partitions = inner.get("partitions")
        if isinstance(partitions, dict):
            return "asg(" + " ".join(f"{t}{_as_list(ps)}" for t, ps in partitions.items()) + ")"
    if len(value) == 1:
        (key, inner_value), *_ = value.items()
        if key in _UNWRAP and isinstance(inner_value, list):
            return compact(inner_value[0]) if len(inner_value) == 1 else compact(inner_value)
    parts = []
    for key, item in value.items():
        if (
            key in _QUIET
            or item is None
            or item == []
            or item == {}
            or (item is False and key == "skip_assignment")
        ):
            continue
        name = _RENAMES.get(key, key)
        rendered = compact(item)
        parts.append(rendered if name == "" else f"{name}={rendered}")
    return "{" + ", ".join(parts) + "}"


def _as_list(value: Json) -> list[Json]:
    return value if isinstance(value, list) else [value]


def _steps(outcome: Outcome) -> list[str]:
    return [f"{label}: {compact(value)}" for label, value in outcome.items()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _status(result: Result | None) -> str:
    if result is None:
        return "not run"
    if result.error is not None:
        return "error"
    return "ran"


def render(
    scenarios: Sequence[Scenario],
    kafka: Mapping[str, Result],
    staticfleet: Mapping[str, Result],
    *,
    kafka_version: str,
    staticfleet_note: str,
) -> str:
    matches = sum(
        1
        for s in scenarios
        if s.name in kafka
        and s.name in staticfleet
        and kafka[s.name].outcome is not None
        and kafka[s.name].outcome == staticfleet[s.name].outcome
    )
    ran_staticfleet = sum(1 for s in scenarios if s.name in staticfleet)
    out: list[str] = [
        "# Conformance: staticfleet against Apache Kafka",
        "",
        "This page is written by the differential suite (`make conformance`, i.e. `pytest conformance`). "
        "Every",
        "scenario drives a coordinator with raw Kafka protocol requests at chosen API versions and records "
        "the",
        "answers, normalised: generated member ids become `<instance or client id>#<n>` (n counts distinct "
        "ids",
        "per prefix, so a replaced member shows as `A#2`), group ids become `<group>`, throttle times and "
        "client",
        "hosts are dropped. The same scenario runs on both coordinators with identical group settings, and "
        "the",
        "outcomes must be equal.",
        "",
        f"* Oracle: **Apache Kafka {kafka_version}** (single-node KRaft, the Java group coordinator of "
        f"Kafka 4).",
        f"* staticfleet: {staticfleet_note}.",
        f"* Scenarios: {len(scenarios)}; staticfleet ran {ran_staticfleet}, matching {matches}.",
        "",
        "| scenario | rule | checks | Kafka | staticfleet | match |",
        "|---|---|---|---|---|---|",
    ]
    for s in scenarios:
        k = kafka.get(s.name)
        f = staticfleet.get(s.name)
        if k is None or f is None or k.outcome is None or f.outcome is None:
            mark = "-"
        else:
            mark = "✓" if k.outcome == f.outcome else "✗"
        out.append(
            f"| [{s.name}](#{s.name}) | {_cell(s.rule)} | {_cell(s.description)} "
            f"| {_status(k)} | {_status(f)} | {mark} |"
        )
    out += ["", "## Answers", ""]
    for s in scenarios:
        k = kafka.get(s.name)
        f = staticfleet.get(s.name)
        out += [
            f"### {s.name}",
            "",
            f"{s.description} Rule: {s.rule}. Settings: {s.settings.describe()}.",
            "",
        ]
        out.append("Kafka:")
        out.append("")
        out += _block(k)
        out.append("staticfleet:")
        out.append("")
        if f is None:
            out += ["not run", ""]
        elif k is not None and f.outcome is not None and f.outcome == k.outcome:
            out += ["same answers ✓", ""]
        else:
            out += _block(f)
    out += ["## Deliberate differences", ""]
    out.append("staticfleet extensions; none of them changes an answer to a request Kafka would accept.")
    out.append("")
    for title, text in DELIBERATE_DIFFERENCES:
        out += [f"* **{title}.** {text}"]
    out.append("")
    return "\n".join(out)


def _block(result: Result | None) -> list[str]:
    if result is None:
        return ["not run", ""]
    if result.error is not None or result.outcome is None:
        last = (result.error or "no outcome").strip().splitlines()[-1]
        return ["```", f"error: {last}", "```", ""]
    return ["```", *_steps(result.outcome), "```", ""]


def write(
    scenarios: Sequence[Scenario],
    kafka: Mapping[str, Result],
    staticfleet: Mapping[str, Result],
    *,
    kafka_version: str,
    staticfleet_note: str,
    path: Path = REPORT_PATH,
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        render(scenarios, kafka, staticfleet, kafka_version=kafka_version, staticfleet_note=staticfleet_note)
    )
    return path


def dump(outcome: Outcome) -> str:
    return json.dumps(outcome, indent=1, sort_keys=True)
