"""Malformed and mutated Kafka frames never crash the server, never grow its memory without bound, and
never stop it from serving a well-behaved client."""

from __future__ import annotations

import asyncio
import json
import os
import random
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance import driver as d
from staticfleet.broker import apis  # noqa: F401 (registers the handlers)
from staticfleet.broker.codec import FrameError, parse_request
from staticfleet.broker.registry import is_supported

from .processes import ROOT, CoordinatorProcess

FRAMES = 100_000
WORKERS = 24


def seed_frames() -> list[bytes]:
    protocols = (("range", d.subscription("fuzz-topic")),)
    requests = [
        d.api_versions(0),
        d.api_versions(3),
        d.metadata(1, ["fuzz-topic"]),
        d.metadata(12, ["fuzz-topic"]),
        d.find_coordinator(0, "fuzz-group"),
        d.find_coordinator(4, "fuzz-group"),
        d.join_group(0, "fuzz-group", protocols=protocols),
        d.join_group(5, "fuzz-group", instance_id="i", protocols=protocols),
        d.join_group(9, "fuzz-group", member_id="m", instance_id="i", protocols=protocols),
        d.sync_group(0, "fuzz-group", generation=1, member_id="m"),
        d.sync_group(5, "fuzz-group", generation=1, member_id="m", instance_id="i", protocol_type="consumer",
                     protocol_name="range", assignments=[("m", d.assignment({"fuzz-topic": [0]}))]),
        d.heartbeat(0, "fuzz-group", generation=1, member_id="m"),
        d.heartbeat(4, "fuzz-group", generation=1, member_id="m", instance_id="i"),
        d.leave_group(0, "fuzz-group", member_id="m"),
        d.leave_group(5, "fuzz-group", members=[("", "i"), ("m", None)]),
        d.offset_commit(2, "fuzz-group", offsets={"fuzz-topic": {0: 5}}),
        d.offset_commit(9, "fuzz-group", offsets={"fuzz-topic": {0: 5}}),
        d.offset_fetch(1, "fuzz-group", partitions={"fuzz-topic": [0]}),
        d.offset_fetch(8, "fuzz-group", partitions={"fuzz-topic": [0]}),
        d.describe_groups(0, "fuzz-group"),
        d.describe_groups(5, "fuzz-group"),
        d.list_groups(0),
        d.list_groups(5),
        d.delete_groups(2, "fuzz-group"),
    ]  # fmt: skip
    return [d.request_frame(r, i, "fuzz") for i, r in enumerate(requests)]


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One malformed variant of a valid frame."""
    body = bytearray(frame[4:])
    kind = rng.randrange(9)
    if kind == 0:  # flip bits
        for _ in range(rng.randint(1, 8)):
            body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncate the body, fix the size
        body = body[: rng.randrange(len(body))]
    elif kind == 2:  # trailing garbage
        body += rng.randbytes(rng.randint(1, 64))
    elif kind == 3:  # any api key and version
        struct.pack_into(">hh", body, 0, rng.randint(-5, 80), rng.randint(-3, 30))
    elif kind == 4:  # a varint or length bomb in the middle
        at = rng.randrange(8, len(body)) if len(body) > 8 else 0
        body[at:at] = b"\xff" * rng.randint(1, 12)
    elif kind == 5:  # random bytes under a valid header
        body = body[:8] + rng.randbytes(rng.randint(0, 200))
    elif kind == 6:  # a size prefix that lies (smaller than the body)
        return struct.pack(">i", max(0, len(body) - rng.randint(1, len(body)))) + bytes(body)
    elif kind == 7:  # absurd sizes: zero, negative, enormous
        return struct.pack(">i", rng.choice([0, -1, -(2**31), 2**31 - 1, 200 * 1024 * 1024])) + bytes(
            body[:32]
        )
    else:  # overwrite a run of bytes
        at = rng.randrange(len(body))
        body[at : at + 4] = rng.randbytes(4)
    return struct.pack(">i", len(body)) + bytes(body)


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    process = CoordinatorProcess(tmp_path_factory.mktemp("fuzz") / "data", "--no-fsync")
    process.start()
    yield process
    process.stop()


PARSER_FUZZ = """
import json, random, sys
from tests.broker.test_fuzz import mutate, seed_frames
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


async def _good_client(bootstrap: str, stop: asyncio.Event) -> list[float]:
    """A static member that joins, syncs and then heartbeats every 50 ms, timing each answer."""
    host, port = bootstrap.split(":")
    async with d.Driver(host, int(port)) as driver:
        conn = await driver.connect("good")
        protocols = (("range", d.subscription("fuzz-topic")),)
        joined = await conn.request(d.join_group(9, "good-group", instance_id="good", protocols=protocols))
        assert int(joined.error_code) == 0, joined
        synced = await conn.request(
            d.sync_group(5, "good-group", generation=joined.generation_id, member_id=joined.member_id,
                         instance_id="good", protocol_type="consumer", protocol_name="range",
                         assignments=[(joined.member_id, d.assignment({"fuzz-topic": [0]}))])
        )  # fmt: skip
        assert int(synced.error_code) == 0, synced
        latencies = []
        while not stop.is_set():
            started = time.perf_counter()
            response = await conn.request(
                d.heartbeat(4, "good-group", generation=joined.generation_id, member_id=joined.member_id,
                            instance_id="good"),
                timeout=5,
            )  # fmt: skip
            latencies.append(time.perf_counter() - started)
            assert int(response.error_code) == 0, response
            await asyncio.sleep(0.05)
        return latencies


async def _fuzz(bootstrap: str, total: int) -> dict[str, int]:
    host, port = bootstrap.split(":")
    seeds = seed_frames()
    counts = {"sent": 0, "answered": 0, "closed": 0, "silent": 0}

    async def worker(seed: int) -> None:
        rng = random.Random(seed)
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while counts["sent"] < total:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, int(port))
            assert reader is not None
            frame = mutate(rng.choice(seeds), rng)
            counts["sent"] += 1
            try:
                writer.write(frame)
                await writer.drain()
                head = await asyncio.wait_for(reader.readexactly(4), 0.05)
                (size,) = struct.unpack(">i", head)
                await asyncio.wait_for(reader.readexactly(size), 1)
                counts["answered"] += 1
                continue
            except (asyncio.IncompleteReadError, ConnectionError):
                counts["closed"] += 1
            except TimeoutError:
                counts["silent"] += 1  # parked, or waiting for bytes a lying size prefix promised
            writer.close()
            writer = reader = None

    await asyncio.gather(*(worker(i) for i in range(WORKERS)))
    return counts


def test_a_hundred_thousand_malformed_frames_while_a_good_client_is_served(
    coordinator: CoordinatorProcess,
) -> None:
    async def run() -> tuple[dict[str, int], list[float]]:
        stop = asyncio.Event()
        good = asyncio.create_task(_good_client(coordinator.bootstrap, stop))
        await asyncio.sleep(0.5)
        rss_before = coordinator.rss_kib()
        counts = await _fuzz(coordinator.bootstrap, FRAMES)
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
    assert len(latencies) > 20, "the good client kept heartbeating throughout"
    # Served in time: a heartbeat later than the session timeout would have cost the member its place.
    group = coordinator.group("good-group")
    assert group is not None and group["state"] == "Stable" and group["generation"] == 1
    slowest = f"slowest heartbeat {max(latencies):.3f} s"
    Path(coordinator.data_dir.parent / "fuzz-counts.txt").write_text(f"{counts} {slowest}\n")
