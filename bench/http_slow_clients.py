"""The coordinator's /healthz, probed as a kubelet probes it, while slow clients hold HTTP connections.

    .venv/bin/python bench/http_slow_clients.py [--clients 300] [--seconds 20] [--no-publish]

A real `staticfleet coordinator` process serves. Phase by phase, `--clients` slow clients connect to its
HTTP port and each sends half a request head, then one more header byte a second, and connects again
whenever the server closes it (a slowloris that never gives up): first none, then all from one address,
then spread over 30 addresses (loopback 127.0.0.2 and up). Meanwhile a probe from 127.0.0.1 asks
/healthz five times a second, each with a 1 s timeout (a kubelet probe's default), on a new connection.
The figures: probes answered 200 out of probes sent, and their latency. Bounded: each phase lasts
`--seconds`, and every client stops with it.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT))

from bench.report import publish, table  # noqa: E402

PROBE_INTERVAL_S = 0.2
PROBE_TIMEOUT_S = 1.0
TRICKLE_INTERVAL_S = 1.0
RECONNECT_S = 1.0
"""A slow client closed by the server connects again after this long."""
SPREAD_ADDRESSES = 30
START_TIMEOUT_S = 120.0


async def slow_client(port: int, source: str, stop: asyncio.Event, stats: dict[str, int]) -> None:
    """Holds a connection with a request head that never ends; reconnects whenever it is closed."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        except OSError:
            stats["connect_failures"] += 1
            await asyncio.sleep(RECONNECT_S)
            continue
        stats["connections"] += 1
        try:
            writer.write(b"GET /api/groups HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            while not stop.is_set():
                writer.write(b"a")
                await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(1), TRICKLE_INTERVAL_S) == b"":
                        break  # closed by the server
                except TimeoutError:
                    continue
        except OSError:
            pass
        finally:
            writer.close()
        await asyncio.sleep(RECONNECT_S)


async def probe(port: int) -> float | None:
    """Seconds to a 200 from /healthz on a new connection, or None (refused, closed, late)."""
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), PROBE_TIMEOUT_S)
    except (OSError, TimeoutError):
        return None
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        remaining = PROBE_TIMEOUT_S - (time.perf_counter() - started)
        answer = await asyncio.wait_for(reader.read(), max(remaining, 0.01))
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
    return time.perf_counter() - started if answer.startswith(b"HTTP/1.1 200") else None


async def hold_slow_clients(port: int, sources: list[str], seconds: float) -> dict[str, int]:
    stop = asyncio.Event()
    stats = {"connections": 0, "connect_failures": 0}
    clients = [asyncio.create_task(slow_client(port, source, stop, stats)) for source in sources]
    await asyncio.sleep(seconds)
    stop.set()
    if clients:
        await asyncio.wait(clients, timeout=TRICKLE_INTERVAL_S * 3)
    for task in clients:
        task.cancel()
    return stats


def _slow_clients_process(port: int, sources: list[str], seconds: float, out: Any) -> None:
    out.put(asyncio.run(hold_slow_clients(port, sources, seconds)))


async def phase(port: int, sources: list[str], seconds: float) -> dict[str, Any]:
    """The slow clients run in a process of their own, as they would on another pod, so that the probes
    here wait on the coordinator and not on them."""
    settle_s = min(3.0, seconds / 4)  # the slow clients take their places first
    spawn = multiprocessing.get_context("spawn")  # a fork would inherit this running event loop
    results: Any = spawn.Queue()
    clients = spawn.Process(
        target=_slow_clients_process, args=(port, sources, settle_s + seconds, results), daemon=True
    )
    clients.start()
    await asyncio.sleep(settle_s)
    latencies: list[float | None] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        latencies.append(await probe(port))
        await asyncio.sleep(PROBE_INTERVAL_S)
    stats = await asyncio.to_thread(results.get, True, seconds + 30)
    await asyncio.to_thread(clients.join, 10)
    answered = sorted(s for s in latencies if s is not None)
    return {
        "slow_clients": len(sources),
        "addresses": len(set(sources)),
        "slow_connections_made": stats["connections"],
        "probes": len(latencies),
        "answered": len(answered),
        "p50_ms": round(statistics.median(answered) * 1000, 1) if answered else None,
        "max_ms": round(answered[-1] * 1000, 1) if answered else None,
    }


async def run(clients: int, seconds: float) -> dict[str, Any]:
    from tests.broker.processes import CoordinatorProcess

    with tempfile.TemporaryDirectory(prefix="staticfleet-slow-http-") as workdir:
        process = CoordinatorProcess(Path(workdir) / "coordinator", root=ROOT)
        await asyncio.to_thread(process.start, START_TIMEOUT_S)
        try:
            port = process.http_port
            spread = [f"127.0.0.{2 + i % SPREAD_ADDRESSES}" for i in range(clients)]
            phases = {
                "no slow clients": await phase(port, [], seconds),
                f"{clients} from one address": await phase(port, ["127.0.0.2"] * clients, seconds),
                f"{clients} from {SPREAD_ADDRESSES} addresses": await phase(port, spread, seconds),
            }
        finally:
            await asyncio.to_thread(process.stop)
    return {
        "clients": clients,
        "seconds": seconds,
        "load_average": round(os.getloadavg()[0], 1),
        "phases": phases,
    }


def render(result: dict[str, Any]) -> str:
    rows = [
        [
            name,
            p["slow_connections_made"],
            f"{p['answered']} / {p['probes']}",
            f"{p['p50_ms']} ms" if p["p50_ms"] is not None else "-",
            f"{p['max_ms']} ms" if p["max_ms"] is not None else "-",
        ]
        for name, p in result["phases"].items()
    ]
    headers = ["slow clients", "their connections made", "/healthz answered", "p50", "slowest"]
    return (
        f"A probe every {PROBE_INTERVAL_S} s with a {PROBE_TIMEOUT_S:.0f} s timeout,"
        f" {result['seconds']:.0f} s a phase; load average {result['load_average']} at the end.\n\n"
        + table(headers, rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--no-publish", action="store_true", help="print, do not write docs/security.md")
    args = parser.parse_args()
    result = asyncio.run(run(args.clients, args.seconds))
    body = render(result)
    print(body)
    if not args.no_publish:
        publish(
            "http_slow_clients",
            "Probes while slow HTTP clients hold connections",
            "python bench/http_slow_clients.py",
            body,
            result,
            doc=ROOT / "docs" / "security.md",
        )


if __name__ == "__main__":
    main()
