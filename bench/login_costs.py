"""What an attacker without a password costs, against the embedded coordinator and Apache Kafka in one run.

    .venv/bin/python bench/login_costs.py [--attempts N] [--produces N] [--no-publish]

Both servers run with the conformance suite's secured settings (SCRAM-SHA-512 users on a SASL_PLAINTEXT
listener, StandardAuthorizer), staticfleet first, then Kafka, and each gets:
  * guessing: N wrong SCRAM-SHA-512 passwords in a row, one connection each (handshake, both SCRAM
    rounds, the failure answer, the close): the seconds in all, and per attempt the time to the final
    SCRAM message, the wait from there to the failure answer, and from the answer to the close;
  * stalled logins: an authenticated producer (kafka-python, SCRAM-SHA-512, acks=1) sends 200 KB records
    one at a time, first alone, then while three unauthenticated connections have sent a 4-byte size
    (the largest frame allowed before a login, sasl.server.max.receive.size) and nothing more: the
    latency of each produce, and whether the stalled connections were still open at the end.
The load average is read before and after each server. Results go to bench/results/login_costs.json
and a section of docs/security.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT))

from kio.schema.errors import ErrorCode  # noqa: E402

from bench.coordinator_server import FastKafka  # noqa: E402
from bench.report import publish, table  # noqa: E402
from conformance import driver as d  # noqa: E402
from conformance import security as sec  # noqa: E402
from conformance.kafka_broker import GroupSettings, java_executable, kafka_version  # noqa: E402
from staticfleet.broker.connections import SASL_SERVER_MAX_RECEIVE_SIZE  # noqa: E402
from staticfleet.broker.security.scram import ScramClient, ScramMechanism  # noqa: E402

USER, PASSWORD = "admin", "admin-secret"
RECORD_BYTES = 200_000
STALLED = 3
TOPIC = "login-costs"


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


async def wrong_password(port: int) -> tuple[float, float, float]:
    """One guess on a new connection: the seconds from opening it to sending the final SCRAM message,
    from there to the failure answer, and from the answer to the close."""
    opened = time.perf_counter()
    conn = await d.Connection.open("127.0.0.1", port, name="guess")
    try:
        handshake = await conn.request(d.sasl_handshake(1, sec.SCRAM_SHA_512))
        assert handshake.error_code == ErrorCode.none, handshake
        client = ScramClient(ScramMechanism.SCRAM_SHA_512, USER, "not-the-password")
        first = await conn.request(d.sasl_authenticate(2, client.first()))
        assert first.error_code == ErrorCode.none, first
        final = client.final(bytes(first.auth_bytes))
        sent = time.perf_counter()
        answer = await conn.send(d.sasl_authenticate(2, final)).result(30)
        answered = time.perf_counter()
        assert answer.error_code == ErrorCode.sasl_authentication_failed, answer
        assert await conn.closed_within(10), "the connection stayed open after a failed login"
        return sent - opened, answered - sent, time.perf_counter() - answered
    finally:
        await conn.close()


async def guessing(port: int, attempts: int) -> dict[str, Any]:
    await wrong_password(port)  # warm-up, not counted
    started = time.perf_counter()
    steps = [await wrong_password(port) for _ in range(attempts)]
    total = time.perf_counter() - started
    return {
        "attempts": attempts,
        "total_s": total,
        "until_final_s": [s[0] for s in steps],
        "answer_waits_s": [s[1] for s in steps],
        "close_after_answer_s": [s[2] for s in steps],
    }


def producer(port: int) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=sec.SCRAM_SHA_512,
        sasl_plain_username=USER,
        sasl_plain_password=PASSWORD,
        acks=1,
        linger_ms=0,
        max_request_size=1_048_576,
    )


def produce_latencies(client: Any, count: int) -> list[float]:
    value = b"x" * RECORD_BYTES
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        client.send(TOPIC, value).get(timeout=120)
        latencies.append(time.perf_counter() - started)
    return latencies


def _still_open(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def stalled_logins(port: int, produces: int) -> dict[str, Any]:
    client = producer(port)
    try:
        produce_latencies(client, 5)  # the topic is created, the connection warm
        alone = produce_latencies(client, produces)
        stalled = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(STALLED)]
        try:
            for s in stalled:
                s.sendall(SASL_SERVER_MAX_RECEIVE_SIZE.to_bytes(4, "big"))
            time.sleep(0.5)
            beside = produce_latencies(client, produces)
            open_at_end = sum(_still_open(s) for s in stalled)
        finally:
            for s in stalled:
                s.close()
    finally:
        client.close(timeout=10)
    return {"alone_s": alone, "beside_stalled_s": beside, "stalled_open_at_end": open_at_end}


def measure(port: int, attempts: int, produces: int) -> dict[str, Any]:
    result: dict[str, Any] = {"load_before": load()}
    result["guessing"] = asyncio.run(guessing(port, attempts))
    result["stalled"] = stalled_logins(port, produces)
    result["load_after"] = load()
    return result


def run(attempts: int, produces: int) -> dict[str, Any]:
    from conformance.backends import StaticfleetBackend

    settings = GroupSettings(
        initial_rebalance_delay_ms=3_000,
        min_session_timeout_ms=1_000,
        max_session_timeout_ms=1_800_000,
        security=sec.SecurityProfile(),
    )
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ours = StaticfleetBackend(settings, Path(tmp) / "staticfleet")
        asyncio.run(ours.start())
        try:
            results["staticfleet"] = measure(ours.listener_ports[sec.SASL_PLAINTEXT], attempts, produces)
        finally:
            ours.stop()
        (Path(tmp) / "kafka").mkdir()
        kafka = FastKafka(settings, Path(tmp) / "kafka")
        try:
            asyncio.run(kafka.start())
            results["kafka"] = measure(kafka.listener_ports[sec.SASL_PLAINTEXT], attempts, produces)
        finally:
            kafka.stop()
    return results


def _ms(values: list[float], q: float | None = None) -> str:
    if q is None:
        return f"{statistics.median(values) * 1000:.0f}"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.0f}"


def report(results: dict[str, Any]) -> str:
    labels = (("staticfleet", "staticfleet"), ("kafka", f"Apache Kafka {kafka_version()}"))
    guess_rows = []
    stall_rows = []
    for key, label in labels:
        g = results[key]["guessing"]
        waits = g["answer_waits_s"]
        guess_rows.append(
            [label, f"{g['total_s']:.1f}", f"{g['total_s'] / g['attempts'] * 1000:.0f}",
             _ms(g["until_final_s"]), _ms(waits), f"{min(waits) * 1000:.0f} to {max(waits) * 1000:.0f}",
             _ms(g["close_after_answer_s"])]
        )  # fmt: skip
        s = results[key]["stalled"]
        stall_rows.append(
            [label, _ms(s["alone_s"]), _ms(s["alone_s"], 0.9), _ms(s["beside_stalled_s"]),
             _ms(s["beside_stalled_s"], 0.9), f"{s['stalled_open_at_end']} of {STALLED}",
             f"{results[key]['load_before']} / {results[key]['load_after']}"]
        )  # fmt: skip
    attempts = results["staticfleet"]["guessing"]["attempts"]
    produces = len(results["staticfleet"]["stalled"]["alone_s"])
    body = f"**{attempts} wrong SCRAM-SHA-512 passwords in a row**, one connection each:\n\n"
    body += table(
        ["server", "seconds in all", "ms per attempt", "connect to final SCRAM message (median ms)",
         "then the failure answer (median ms)", "its range (ms)", "then the close (median ms)"],
        guess_rows,
    )  # fmt: skip
    body += (
        f"\n\n**An authenticated 200 KB produce** (kafka-python, acks=1, {produces} one after another), "
        f"alone and while {STALLED} unauthenticated connections had sent a 4-byte size of "
        f"{SASL_SERVER_MAX_RECEIVE_SIZE} bytes and nothing more:\n\n"
    )
    body += table(
        ["server", "alone: median ms", "alone: p90 ms", "beside stalled: median ms", "beside stalled: p90 ms",
         "stalled still open", "load average before / after (1, 5, 15 min)"],
        stall_rows,
    )  # fmt: skip
    body += (
        f"\n\nBoth servers with the conformance suite's secured settings on loopback, staticfleet first, "
        f"then Apache Kafka on {java_executable()} with its default JIT. One run on a shared 2-core "
        "machine: the per-attempt times of the failed logins are set by the servers' waits, the produce "
        "latencies are noisy."
    )
    return body


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--attempts", type=int, default=200)
    parser.add_argument("--produces", type=int, default=20)
    parser.add_argument("--no-publish", action="store_true")
    args = parser.parse_args()
    results = run(args.attempts, args.produces)
    body = report(results)
    print(body)
    if args.no_publish:
        return
    publish(
        "login_costs",
        "What logins cost an attacker, staticfleet and Kafka in one run",
        ".venv/bin/python bench/login_costs.py",
        body,
        results,
        doc=ROOT / "docs" / "security.md",
    )


if __name__ == "__main__":
    main()
