"""Heartbeat latency of the embedded coordinator while clients read its HTTP API's group listing.

    .venv/bin/python bench/coordinator_http.py [--groups 100000] [--readers 8] [--seconds 20] [--quick]
    .venv/bin/python bench/coordinator_http.py --compare-tree DIR [--compare-name NAME]

One coordinator holds `--groups` groups (simple groups, made by offset commits) and a static group of
1,000 members that heartbeat every 3 s, spread over the interval (the load of
bench/coordinator_server.py's latency figure). Heartbeat latency is measured for `--seconds` without
readers, then for `--seconds` while `--readers` processes read `/api/groups` to its end in a loop (every
page, as the admin client does), then for `--seconds` without readers again, in one run on the same
members. The coordinator runs on a core of its own (`cores_apart`); the readers (bench/http_reader.py)
run beside the load generator at a lower priority and only read the pages and look for the `continue`
token. Every phase, the set-up and each reader are bounded in time; a reader still running at the end
is killed.

With --compare-tree, the coordinator of another checkout serves the same run (readers of an
unpaginated `/api/groups` read its one page), and is published beside this one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT))

from bench.coordinator_server import (  # noqa: E402
    GROUP_SIZE,
    Member,
    RawConnection,
    _request,
    collector_paused,
    cores_apart,
    form_group,
    frame,
    heartbeat_error,
)
from bench.report import publish, table  # noqa: E402
from conformance import driver as d  # noqa: E402

HEARTBEAT_INTERVAL_S = 3.0
READERS_START_S = 2.0
"""The first phase starts this long after the readers are up."""
READER_NICENESS = 10
SETUP_TIMEOUT_S = 600.0
COMMITS_IN_FLIGHT = 64
COMMIT_CONNECTIONS = 8


# --- the groups ------------------------------------------------------------------------------------------


async def make_groups(bootstrap: str, count: int) -> float:
    """`count` simple groups, one offset commit each, pipelined over a few connections; seconds taken."""
    started = time.perf_counter()
    host, port = bootstrap.split(":")
    admin = await d.Connection.open(host, int(port), name="setup")
    await d.ensure_topic(admin, "bench-offsets", 1)
    await admin.close()

    async def commit_range(first: int, last: int) -> None:
        conn = await RawConnection.open(bootstrap)
        try:
            pending = 0
            for i in range(first, last):
                request = d.offset_commit(8, f"listed-{i:06d}", offsets={"bench-offsets": {0: i}})
                conn.writer.write(frame(request, i))
                pending += 1
                if pending >= COMMITS_IN_FLIGHT:
                    await conn.read()
                    pending -= 1
            for _ in range(pending):
                await conn.read()
        finally:
            conn.close()

    step = -(-count // COMMIT_CONNECTIONS)
    await asyncio.gather(*(commit_range(start, min(start + step, count)) for start in range(0, count, step)))
    return time.perf_counter() - started


# --- the readers -----------------------------------------------------------------------------------------


def start_readers(count: int, base: str, start: float, until: float) -> list[subprocess.Popen[str]]:
    """`count` bench/http_reader.py processes reading from `start` to `until`, on the load generator's
    core and at a lower priority than it (readers stand for clients on other machines); returns once
    every one has started."""
    cores = sorted(os.sched_getaffinity(0))
    generator = [str(min(cores))] if len(cores) > 1 else []
    command = [sys.executable, str(ROOT / "bench" / "http_reader.py"), base, str(start), str(until)]
    command += ["--nice", str(READER_NICENESS)] + (["--cores", ",".join(generator)] if generator else [])
    readers = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    for reader in readers:
        assert reader.stdout is not None
        if reader.stdout.readline().strip() != "ready":
            raise RuntimeError("a reader did not start")
    return readers


def reader_reports(readers: list[subprocess.Popen[str]], timeout_s: float) -> list[dict[str, Any]]:
    """What each reader did; one still running after `timeout_s` is killed and reports nothing."""
    reports = []
    for reader in readers:
        try:
            out, _ = reader.communicate(timeout=timeout_s)
            reports.append(json.loads(out))
        except (subprocess.TimeoutExpired, ValueError):
            reader.kill()
            reader.communicate()
    return reports


# --- heartbeats ------------------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    latencies: list[float]
    failures: int = 0


async def heartbeat_phases(
    bootstrap: str, members: list[Member], phases: list[tuple[str, float]], start: float
) -> list[Phase]:
    """From `start` (time.time()), every member heartbeats every 3 s through the phases, one after the
    other. A heartbeat counts in the phase in which it was sent."""
    connections = [await RawConnection.open(bootstrap) for _ in range(100)]
    results = [Phase(name, []) for name, _ in phases]
    bounds = []
    at = start
    for _, seconds in phases:
        at += seconds
        bounds.append(at)
    await asyncio.sleep(max(0.0, start - time.time()))

    def phase_now() -> Phase | None:
        now = time.time()
        for phase, bound in zip(results, bounds, strict=True):
            if now < bound:
                return phase
        return None

    async def member_loop(index: int, m: Member, conn: RawConnection) -> None:
        await asyncio.sleep(HEARTBEAT_INTERVAL_S * index / len(members))
        request = d.heartbeat(
            4, "heartbeating", generation=m.generation, member_id=m.member_id, instance_id=m.instance
        )
        while (phase := phase_now()) is not None:
            started = time.perf_counter()
            response = await _request(conn, request)
            phase.latencies.append((time.perf_counter() - started) * 1000)
            if heartbeat_error(response):
                phase.failures += 1
            await asyncio.sleep(max(0.0, HEARTBEAT_INTERVAL_S - (time.perf_counter() - started)))

    with collector_paused():
        await asyncio.gather(
            *(member_loop(i, m, connections[i % len(connections)]) for i, m in enumerate(members))
        )
    for c in connections:
        c.close()
    return results


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * q) - 1)]


# --- one run ---------------------------------------------------------------------------------------------


async def run(root: Path, workdir: Path, groups: int, readers: int, seconds: float) -> dict[str, Any]:
    from tests.broker.processes import CoordinatorProcess

    workdir.mkdir(parents=True, exist_ok=True)
    process = CoordinatorProcess(
        workdir / "coordinator", "--group-initial-rebalance-delay-ms", "3000", root=root
    )
    await asyncio.to_thread(process.start)
    try:
        assert process.process is not None
        setup_s = await asyncio.wait_for(make_groups(process.bootstrap, groups), SETUP_TIMEOUT_S)
        members = await asyncio.wait_for(
            form_group(process.bootstrap, "heartbeating", GROUP_SIZE), SETUP_TIMEOUT_S
        )
        base = f"http://127.0.0.1:{process.http_port}"
        phases = [("no readers", seconds), (f"{readers} readers", seconds), ("no readers, after", seconds)]
        start = time.time() + READERS_START_S
        started = start_readers(readers, base, start + seconds, start + 2 * seconds)
        try:
            with cores_apart(process.process.pid):
                measured = await heartbeat_phases(process.bootstrap, members, phases, start)
        finally:
            reports = reader_reports(started, 30.0)
        # What else ran on the machine meanwhile: the 1-minute load average at the end of the phases.
        load_average = os.getloadavg()[0]
    finally:
        await asyncio.to_thread(process.stop)
    result: dict[str, Any] = {
        "load_average": round(load_average, 1),
        "groups": groups,
        "readers": readers,
        "setup_s": round(setup_s, 1),
        "phases": [],
    }
    for phase in measured:
        result["phases"].append(
            {
                "name": phase.name,
                "heartbeats": len(phase.latencies),
                "failures": phase.failures,
                "p50_ms": round(statistics.median(phase.latencies), 2),
                "p99_ms": round(percentile(phase.latencies, 0.99), 2),
                "max_ms": round(max(phase.latencies), 2),
            }
        )
    listing_seconds = [s for r in reports for s in r["listing_seconds"]]
    result["reading"] = {
        "listings": sum(r["listings"] for r in reports),
        "pages": sum(r["pages"] for r in reports),
        "megabytes": round(sum(r["bytes"] for r in reports) / 1e6, 1),
        "listing_s_median": round(statistics.median(listing_seconds), 2) if listing_seconds else None,
        "slowest_page_s": round(max((r["slowest_page_s"] for r in reports), default=0.0), 3),
    }
    return result


def render(results: dict[str, dict[str, Any]]) -> str:
    rows = []
    for tree, result in results.items():
        for phase in result["phases"]:
            rows.append(
                [
                    tree,
                    phase["name"],
                    phase["heartbeats"],
                    phase["failures"],
                    phase["p50_ms"],
                    phase["p99_ms"],
                    phase["max_ms"],
                ]
            )
    body = table(["coordinator", "phase", "heartbeats", "failed", "p50 ms", "p99 ms", "max ms"], rows)
    reading = [
        [
            tree,
            r["load_average"],
            r["reading"]["listings"],
            r["reading"]["pages"],
            r["reading"]["megabytes"],
            r["reading"]["listing_s_median"],
            r["reading"]["slowest_page_s"],
        ]
        for tree, r in results.items()
    ]
    body += "\n\n" + table(
        [
            "coordinator",
            "load average",
            "complete listings",
            "pages",
            "MB read",
            "one listing, median s",
            "slowest page s",
        ],
        reading,
    )
    return body


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="10,000 groups, 6 s phases, not published")
    parser.add_argument("--compare-tree", type=Path, help="also run the coordinator of this checkout")
    parser.add_argument("--compare-name", help="what to call that checkout in the table (default: its path)")
    args = parser.parse_args()
    groups, seconds = (10_000, 6.0) if args.quick else (args.groups, args.seconds)
    trees = {"this tree": ROOT}
    if args.compare_tree is not None:
        trees[args.compare_name or str(args.compare_tree)] = args.compare_tree.resolve()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        for i, (name, root) in enumerate(trees.items()):
            results[name] = asyncio.run(run(root, Path(tmp) / str(i), groups, args.readers, seconds))
            print(name, results[name], flush=True)
    body = render(results)
    print(body)
    if args.quick:
        return
    command = ".venv/bin/python bench/coordinator_http.py" + (
        f" --compare-tree DIR --compare-name {args.compare_name}" if args.compare_tree is not None else ""
    )
    publish(
        "coordinator_http",
        "Heartbeats while the HTTP API lists 100,000 groups",
        command,
        f"{groups:,} groups; a static group of {GROUP_SIZE:,} members heartbeating every 3 s; "
        f"{args.readers} processes read `/api/groups` to its end in a loop during the second phase "
        f"({seconds:.0f} s each phase).\n\n" + body,
        {"results": results},
    )


if __name__ == "__main__":
    main()
