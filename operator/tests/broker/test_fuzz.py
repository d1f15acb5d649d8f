"""Malformed and mutated Kafka frames never crash the server, never grow its memory without bound, and
never stop it from serving a well-behaved client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from staticfleet.broker import apis  # noqa: F401 (registers the handlers)
from staticfleet.broker.codec import FrameError, parse_request
from staticfleet.broker.registry import is_supported

from .fuzzing import fuzz_connections, good_member, log_problems
from .processes import ROOT, CoordinatorProcess

FRAMES = 20_000  # the CI-sized run; bench/fuzz_frames.py sends 1,000,000
WORKERS = 24


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    process = CoordinatorProcess(tmp_path_factory.mktemp("fuzz") / "data", "--no-fsync")
    process.start()
    yield process
    process.stop()


PARSER_FUZZ = """
import json, random, sys
from tests.broker.fuzzing import mutate, seed_frames
from staticfleet.broker import apis  # noqa: F401 (registers the handlers)
from staticfleet.broker.registry import UnsupportedVersion, is_supported
from staticfleet.broker.codec import FrameError, parse_request

rng = random.Random(int(sys.argv[1]))
seeds = seed_frames()
outcomes = {"parsed": 0, "frame-error": 0, "unsupported": 0}
for _ in range(int(sys.argv[2])):
    frame = mutate(rng.choice(seeds), rng)[4:]
    try:
        parse_request(frame, is_supported)
        outcomes["parsed"] += 1
    except FrameError:
        outcomes["frame-error"] += 1
    except UnsupportedVersion:
        outcomes["unsupported"] += 1
print(json.dumps(outcomes))
"""


def test_the_parser_survives_every_mutation() -> None:
    """Every mutated frame is parsed or rejected; none aborts the process (run apart, so an abort is seen)."""
    result = subprocess.run(
        [sys.executable, "-c", PARSER_FUZZ, "1", "50000"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(ROOT / "operator"),
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "operator"), str(ROOT)])),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = json.loads(result.stdout)
    assert all(outcomes.values()), outcomes


def test_a_length_bomb_is_a_frame_error_not_an_allocation() -> None:
    # A FindCoordinator v4 whose key array claims 2**36 elements.
    bomb = bytes.fromhex("000f0005000000140004" + "66757a7a" + "00929089877a7a2d67726f75700000")
    with pytest.raises(FrameError, match="cannot fit"):
        parse_request(bomb, is_supported)


def test_malformed_frames_leave_no_traceback_and_a_good_client_is_served_throughout(
    coordinator: CoordinatorProcess,
) -> None:
    host, port = coordinator.bootstrap.split(":")

    async def run() -> tuple[dict[str, int], list[float]]:
        stop = asyncio.Event()
        good = asyncio.create_task(good_member(host, int(port), stop))
        await asyncio.sleep(0.5)
        rss_before = coordinator.rss_kib()
        counts = dict(await fuzz_connections(host, int(port), FRAMES, workers=WORKERS, seed=1))
        counts["rss_growth_kib"] = coordinator.rss_kib() - rss_before
        stop.set()
        return counts, await good

    counts, latencies = asyncio.run(run())
    assert coordinator.process is not None and coordinator.process.poll() is None, (
        "the server is still running"
    )
    assert counts["sent"] >= FRAMES
    assert counts["closed"] > 0 and counts["answered"] > 0, counts
    assert counts["rss_growth_kib"] < 200 * 1024, f"memory grew by {counts['rss_growth_kib']} KiB"
    # Garbage closes a connection or gets an error answer, never an exception the server did not expect.
    assert log_problems(coordinator.log_path) == []
    assert len(latencies) > 20, "the good client kept heartbeating throughout"
    # Served in time: a heartbeat later than the session timeout would have cost the member its place.
    group = coordinator.group("good-group")
    assert group is not None and group["state"] == "Stable" and group["generation"] == 1
    slowest = f"slowest heartbeat {max(latencies):.3f} s"
    Path(coordinator.data_dir.parent / "fuzz-counts.txt").write_text(f"{counts} {slowest}\n")
