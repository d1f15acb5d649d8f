"""Hand-written wire codecs against the library that could replace them, side by side in one run.

Two hot paths carry bytes a library also reads:
  * record batches on Produce: the broker checks each batch's framing and CRC (broker/recordbatch.py);
    kio's record reader (`kio.records.readers.read_batch`) does the same and decodes every record;
  * the consumer protocol on JoinGroup/SyncGroup and in the HTTP view: subscriptions and assignments
    (coordinator/consumer_protocol.py) are read with kio; `--baseline` names a git revision whose
    hand-written reader is measured beside it, so the replacement is compared with what it replaced.
    Writing them (the group leader's job, and the simulation's) is measured against kio's writer.

Each operation runs in interleaved rounds (baseline, candidate, baseline, ...) and the median per call
is reported, so both sides see the same machine load.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "operator"), str(ROOT)]

from bench.report import publish, table  # noqa: E402
from staticfleet.broker import recordbatch  # noqa: E402
from staticfleet.coordinator import consumer_protocol  # noqa: E402

CONSUMER_PROTOCOL = "operator/staticfleet/coordinator/consumer_protocol.py"
HAND_WRITTEN = "f308e2a"  # the last revision whose consumer-protocol reader was hand-written


def module_at(revision: str, path: str, name: str) -> types.ModuleType:
    """The module `path` as it was at git `revision`, loaded under `name`."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    exec(compile(source, f"{revision}:{path}", "exec"), module.__dict__)
    return module


def per_call_us(work: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        work()
    return (time.perf_counter() - started) / calls * 1e6


def side_by_side(
    baseline: Callable[[], object], candidate: Callable[[], object], calls: int, rounds: int
) -> tuple[float, float]:
    base, cand = [], []
    for _ in range(rounds):
        base.append(per_call_us(baseline, calls))
        cand.append(per_call_us(candidate, calls))
    return statistics.median(base), statistics.median(cand)


def produce_batch(records: int, value_bytes: int) -> bytes:
    """A record batch as a producer sends it (kafka-python's own builder)."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
    for i in range(records):
        builder.append(timestamp=1_700_000_000_000 + i, key=None, value=b"v" * value_bytes, headers=[])
    builder.close()
    return bytes(builder.buffer())


def kio_encode_assignment(partitions: dict[str, tuple[int, ...]]) -> bytes:
    """What writing an assignment through kio's schema costs: the entity, then kio's writer."""
    from kio.schema.consumer_protocol_assignment.v0 import data as v0
    from kio.schema.types import TopicName
    from kio.serial import entity_writer
    from kio.static.primitive import i32

    entity = v0.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            v0.TopicPartition(topic=TopicName(t), partitions=tuple(i32(p) for p in ps))
            for t, ps in partitions.items()
        ),
        user_data=None,
    )
    out = io.BytesIO()
    out.write(b"\x00\x00")  # version 0
    entity_writer(v0.ConsumerProtocolAssignment)(out, entity)
    return out.getvalue()


def measure(baseline_revision: str, calls: int, rounds: int) -> list[dict[str, Any]]:
    from kio.records.readers import read_batch

    old_protocol = module_at(baseline_revision, CONSUMER_PROTOCOL, "baseline_consumer_protocol")
    rows = []

    def row(operation: str, ours: str, library: str, times: tuple[float, float]) -> None:
        base, cand = times
        rows.append(
            {"operation": operation, "baseline": ours, "candidate": library,
             "baseline_us": round(base, 2), "candidate_us": round(cand, 2), "ratio": round(cand / base, 2)}
        )  # fmt: skip

    batch = produce_batch(64, 1024)
    row(
        "Produce: check one batch of 64 x 1 KiB records",
        "recordbatch.validate_produce_records",
        "kio read_batch",
        side_by_side(
            lambda: recordbatch.validate_produce_records(batch, max_message_bytes=2**24),
            lambda: read_batch(batch, 0),
            max(1, calls // 20),
            rounds,
        ),
    )

    topics = tuple(f"topic-{i}" for i in range(10))
    owned = {t: tuple(range(4)) for t in topics}
    old_sub = old_protocol.encode_subscription(old_protocol.Subscription(1, topics, b"ud", owned))
    new_sub = consumer_protocol.encode_subscription(consumer_protocol.Subscription(1, topics, b"ud", owned))
    assert old_sub == new_sub, "both codecs must write the same bytes"
    label = f"@{baseline_revision}"
    row(
        "JoinGroup: decode a v1 subscription (10 topics, 40 owned partitions)",
        f"consumer_protocol{label}",
        "consumer_protocol (working tree)",
        side_by_side(
            lambda: old_protocol.decode_subscription(old_sub),
            lambda: consumer_protocol.decode_subscription(new_sub),
            calls,
            rounds,
        ),
    )
    assignment = {t: tuple(range(0, 32, 4)) for t in topics}
    old_assignment = old_protocol.encode_assignment(old_protocol.Assignment(0, assignment))
    new_assignment = consumer_protocol.encode_assignment(consumer_protocol.Assignment(0, assignment))
    assert old_assignment == new_assignment, "both codecs must write the same bytes"
    row(
        "SyncGroup/HTTP view: decode an assignment (10 topics, 80 partitions)",
        f"consumer_protocol{label}",
        "consumer_protocol (working tree)",
        side_by_side(
            lambda: old_protocol.assignment_partitions(old_assignment),
            lambda: consumer_protocol.assignment_partitions(new_assignment),
            calls,
            rounds,
        ),
    )
    row(
        "Leader/simulation: encode that assignment",
        "consumer_protocol (working tree)",
        "kio entity_writer",
        side_by_side(
            lambda: consumer_protocol.encode_assignment(consumer_protocol.Assignment(0, assignment)),
            lambda: kio_encode_assignment(assignment),
            calls,
            rounds,
        ),
    )
    assert kio_encode_assignment(assignment) == new_assignment, "both codecs must write the same bytes"
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--baseline", default=HAND_WRITTEN, help=f"git revision of the hand-written reader [{HAND_WRITTEN}]"
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per round of each operation [2000]")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds; the median is kept [7]")
    parser.add_argument("--publish", action="store_true", help="write bench/results and docs/benchmarks.md")
    args = parser.parse_args(argv)
    rows = measure(args.baseline, args.calls, args.rounds)
    body = table(
        ["operation", "baseline", "µs/call", "candidate", "µs/call", "candidate / baseline"],
        [
            [r["operation"], r["baseline"], r["baseline_us"], r["candidate"], r["candidate_us"], r["ratio"]]
            for r in rows
        ],
    )
    print(body)
    if args.publish:
        command = f"python bench/wire_codecs.py --baseline {args.baseline} --publish"
        publish(
            "wire_codecs",
            "Wire codecs: hand-written and library, side by side",
            command,
            body,
            {"rows": rows},
        )


if __name__ == "__main__":
    main()
