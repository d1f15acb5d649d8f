"""A Kafka Streams fleet on kind, on both coordinators: what each operation costs it, beside a plain dynamic
fleet of the same application.

    make kind-up && .venv/bin/python bench/streams_fleet.py [--no-publish]

Runs e2e/tests/kind/test_streams_on_kind.py (examples/streams.yaml at 4 pods x 2 stream threads, each pod a
RocksDB store on its own volume, and the same StatefulSet in dynamic membership as the baseline) on the
kind cluster `make kind-up` made, on the chart's embedded coordinator and on Apache Kafka 4.3.1, and
publishes what the module measured: per operation and fleet, the rebalances the coordinator saw (those of
membership, and Kafka Streams' own follow-ups), the seconds from the command to a settled group, and the
records restored into the stores. The module's assertions hold as in `make test`; a failure publishes
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report import machine, publish, replace_block, table  # noqa: E402

MODULE = "e2e/tests/kind/test_streams_on_kind.py"
RESULTS_ENV = "STATICFLEET_STREAMS_RESULTS"  # the module's record_outcomes
README = ROOT / "README.md"


def _kind_env() -> dict[str, str]:
    """What `make kind-e2e` gives pytest: the kind cluster's kubeconfig and the project's kubectl."""

    def output(*command: str) -> str:
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    kubeconfig = output("e2e/kind/cluster.sh", "kubeconfig")
    if not Path(kubeconfig).exists():
        raise SystemExit("no kind cluster: run `make kind-up` first")
    kubectl = Path(output("e2e/cluster/build.sh", "--print")) / "kubectl"
    return {"E2E_CLUSTER": "kind", "E2E_KUBECONFIG": kubeconfig, "E2E_KUBECTL": str(kubectl)}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def session_timeouts(rows: list[dict[str, Any]]) -> str:
    """Each fleet's session timeout, as the module recorded it with its outcomes."""
    seen: dict[str, int] = {}
    for row in rows:
        if row.get("session_timeout_ms") is not None:
            seen.setdefault(row["fleet"], int(row["session_timeout_ms"]))
    return ", ".join(f"{fleet} {ms / 1000:g} s" for fleet, ms in seen.items()) or "not recorded"


def report(rows: list[dict[str, Any]]) -> str:
    """The table, one row per coordinator, fleet and operation, in the order the module ran them."""
    body = table(
        ["coordinator", "fleet", "operation", "membership rebalances", "follow-ups", "s to Stable",
         "records restored"],
        [
            [r["coordinator"], r["fleet"], r["operation"], r["membership_rebalances"], r["follow_ups"],
             _seconds(r["seconds_to_stable"]), r["records_restored"]]
            for r in rows
        ],
    )  # fmt: skip
    about = (
        "4 pods x 2 stream threads (8 static members) counting per key into a RocksDB store on each pod's "
        "volume, at least once, while the example producer writes; session timeout: "
        f"{session_timeouts(rows)} (the fleet's outlasts a pod's restart; the dynamic fleet's is Kafka's "
        "default, as its users run it). A follow-up is a rebalance Kafka Streams asks for itself after an "
        "assignment that moves a task (cooperative rebalancing revokes it first). The plain dynamic fleet is "
        "the same StatefulSet in dynamic membership, scaled at the same moment: Kafka Streams sends no "
        "LeaveGroup on close, so its departed members go when their session times out; records restored "
        "count the departed pods' tasks rebuilt on the pods left, from the changelog. After every operation "
        "the last count of each key equals the records of that key in the input. The dynamic fleet runs the "
        "scale-down only, and is deleted after it. Either fleet rebuilds the departed pods' stores on the "
        "pods left, so records restored on a scale-down depend on what those stores held when they moved, "
        "not on the membership: in some runs the dynamic fleet restored fewer."
    )
    return textwrap.fill(about, width=100) + "\n\n" + body


def readme_table(rows: list[dict[str, Any]], date: str) -> str:
    """The README's short form: each coordinator's operations, staticfleet's cost beside the dynamic
    fleet's where both ran."""

    def cost(row: dict[str, Any] | None) -> str:
        if row is None:
            return "-"
        follow = f" + {row['follow_ups']} follow-up" if row["follow_ups"] else ""
        return (
            f"{row['membership_rebalances']}{follow} / {_seconds(row['seconds_to_stable'])} s / "
            f"{row['records_restored']}"
        )

    lines = []
    for r in rows:
        if r["fleet"] != "staticfleet":
            continue
        dynamic = next(
            (d for d in rows if d["fleet"] != "staticfleet" and (d["coordinator"], d["operation"])
             == (r["coordinator"], r["operation"])),
            None,
        )  # fmt: skip
        lines.append([r["coordinator"], r["operation"], cost(r), cost(dynamic)])
    body = table(
        ["coordinator", "operation", "staticfleet: rebalances / s to Stable / records restored",
         "plain dynamic (scaled alongside)"],
        lines,
    )  # fmt: skip
    fewer = sorted(
        {
            d["coordinator"]
            for d in rows
            for r in rows
            if d["fleet"] != "staticfleet"
            and r["fleet"] == "staticfleet"
            and (d["coordinator"], d["operation"]) == (r["coordinator"], r["operation"])
            and d["records_restored"] < r["records_restored"]
        }
    )
    baseline_won = f" (here the dynamic fleet restored fewer records on: {', '.join(fewer)})" if fewer else ""
    return (
        f"{body}\n\n4 pods x 2 stream threads of examples/streams.yaml, measured on kind by "
        f"`bench/streams_fleet.py` on {date}; the dynamic fleet runs the scale-down only, and on a "
        f"scale-down either fleet restores the departed pods' stores{baseline_won}; the full table is in "
        "[docs/benchmarks.md](docs/benchmarks.md#a-kafka-streams-fleet-on-kind)."
    )


def publish_readme(body: str) -> None:
    if not replace_block(README, "streams_fleet", body):
        raise SystemExit(f"{README} has no bench:streams_fleet markers")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-publish", action="store_true", help="print the result only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "outcomes.jsonl"
        env = {**os.environ, **_kind_env(), RESULTS_ENV: str(results)}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-s", MODULE],
            cwd=ROOT,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{MODULE} failed ({done.returncode}): nothing published")
        rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    body = report(rows)
    print(body)
    if not args.no_publish:
        publish(
            "streams-fleet",
            "A Kafka Streams fleet on kind",
            ".venv/bin/python bench/streams_fleet.py",
            body,
            {"outcomes": rows},
        )
        publish_readme(readme_table(rows, machine()["date"]))


if __name__ == "__main__":
    main()
