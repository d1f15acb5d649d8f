"""A million malformed Kafka frames against `staticfleet coordinator`, while a static member heartbeats.

    .venv/bin/python bench/fuzz_frames.py [--frames N] [--workers N] [--max-minutes M] [--seed S]

Valid requests of every API the coordinator serves, at old and new versions, are mutated (bits flipped,
truncated, trailing garbage, any API key and version, length bombs, nulls where a length or count goes,
random bodies, size prefixes that lie) and sent by many connections at once to a coordinator process,
each connection reconnecting when the server closes it. Reported: what became of the frames (answered,
connection closed, no answer within 20 ms), the rate, the coordinator's memory growth, every traceback
or ERROR line in its log (there must be none), the slowest answer the heartbeating member got, and
whether its group stayed Stable in its first generation. The run stops at --max-minutes even if fewer
frames were sent (the figure says how many were).

The fuzz test (operator/tests/broker/test_fuzz.py) runs the same with 20,000 frames on every CI run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT))

from bench.report import publish, table  # noqa: E402
from tests.broker.fuzzing import fuzz_connections, good_member, log_problems  # noqa: E402
from tests.broker.processes import CoordinatorProcess  # noqa: E402


async def _run(
    process: CoordinatorProcess, frames: int, workers: int, seed: int, limit_s: float
) -> dict[str, Any]:
    host, port = process.bootstrap.split(":")
    stop = asyncio.Event()
    good = asyncio.create_task(good_member(host, int(port), stop))
    await asyncio.sleep(0.5)
    rss_before = process.rss_kib()
    started = time.monotonic()

    def progress(sent: int) -> None:
        if sent % 100_000 == 0:
            print(f"  {sent:,} frames, {time.monotonic() - started:.0f} s", flush=True)

    fuzz = asyncio.create_task(
        fuzz_connections(host, int(port), frames, workers=workers, seed=seed, progress=progress)
    )
    done, _ = await asyncio.wait({fuzz}, timeout=limit_s)
    if not done:
        fuzz.cancel()  # the time bound: report what was sent so far
        await asyncio.gather(fuzz, return_exceptions=True)
        counts: dict[str, int] = {"stopped_at_time_limit": 1}
    else:
        counts = dict(fuzz.result())
    elapsed = time.monotonic() - started
    rss_growth = process.rss_kib() - rss_before
    stop.set()
    latencies = await good
    return {
        **counts,
        "seconds": round(elapsed, 1),
        "rss_growth_kib": rss_growth,
        "heartbeats": len(latencies),
        "slowest_heartbeat_s": round(max(latencies), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-minutes", type=float, default=60.0)
    parser.add_argument("--no-publish", action="store_true", help="print the result only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="staticfleet-fuzz-") as tmp:
        process = CoordinatorProcess(Path(tmp) / "data", "--no-fsync")
        process.start()
        try:
            result = asyncio.run(_run(process, args.frames, args.workers, args.seed, args.max_minutes * 60))
            alive = process.process is not None and process.process.poll() is None
            group = process.group("good-group") if alive else None
        finally:
            process.stop()
        problems = log_problems(process.log_path)
    sent = result.get("sent", 0)
    result.update(
        alive=alive,
        group_state=None if group is None else group["state"],
        group_generation=None if group is None else group["generation"],
        log_problems=len(problems),
        first_problems=problems[:3],
        frames_per_second=round(sent / result["seconds"]) if result["seconds"] else 0,
    )
    for key, value in result.items():
        print(f"{key}: {value}")
    if args.no_publish:
        return
    rows = [
        ("frames sent", f"{sent:,}"),
        ("answered / connection closed / no answer in 20 ms",
         f"{result.get('answered', 0):,} / {result.get('closed', 0):,} / {result.get('silent', 0):,}"),
        ("time, rate", f"{result['seconds']:.0f} s, {result['frames_per_second']:,} frames/s"),
        ("tracebacks and ERROR lines in the coordinator's log", result["log_problems"]),
        ("coordinator memory growth", f"{result['rss_growth_kib'] / 1024:.1f} MiB"),
        ("heartbeats of the static member meanwhile, slowest answer",
         f"{result['heartbeats']:,}, {result['slowest_heartbeat_s']:.3f} s"),
        ("its group afterwards", f"{result['group_state']}, generation {result['group_generation']}"),
    ]  # fmt: skip
    publish(
        "fuzz_frames",
        "A million malformed frames",
        "python bench/fuzz_frames.py",
        table(["", "result"], rows),
        {"arguments": vars(args), "result": result},
    )


if __name__ == "__main__":
    main()
