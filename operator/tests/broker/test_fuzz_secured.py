"""Malformed and mutated frames of the SASL, ACL and SCRAM credential APIs, before, during and after
authentication, on the SASL_PLAINTEXT listener and on the SASL_SSL listener (garbage before the TLS
handshake and inside an established TLS session): the server stays up, its memory stays bounded, and a
client that logged in before keeps its session and its group."""

from __future__ import annotations

import asyncio
import os
import random
import ssl
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from conformance import driver as d
from conformance import security as sec
from conformance.backends import StaticfleetBackend
from conformance.scenario import SECURED
from staticfleet.broker.security.plain import plain_token
from staticfleet.broker.security.scram import ScramClient, ScramMechanism, salted_password
from staticfleet.broker.server import KAFKA_IDLE_POLL_S

from .fuzzing import mutate

FRAMES = 6_000
WORKERS = 12
CATEGORIES = ("sasl-before", "sasl-during", "sasl-after", "tls-before", "tls-during", "tls-after")
# Garbage in a SCRAM exchange mostly fails the login, answered only after the failed-authentication
# delay (a Kafka poll or more): waited for there, so that answer is seen, not taken for silence.
WAIT_S = {"sasl-during": 3 * KAFKA_IDLE_POLL_S}


def security_seeds() -> list[bytes]:
    salt = os.urandom(16)
    upsertion = d.ScramUpsertion(
        "fuzz-user", 2, 4096, salt, salted_password(ScramMechanism.SCRAM_SHA_512, "fuzz-pw", salt, 4096)
    )
    acl = d.Acl(
        d.RESOURCE_GROUP, "fuzz-", d.PATTERN_PREFIXED, "User:fuzz", "*", d.OP_READ, d.PERMISSION_ALLOW
    )
    acl_filter = d.Acl(
        d.RESOURCE_GROUP, "fuzz-", d.PATTERN_ANY, "User:fuzz", None, d.OP_ANY, d.PERMISSION_ANY
    )
    scram_first = ScramClient(ScramMechanism.SCRAM_SHA_512, "fuzz-user", "fuzz-pw").first()
    requests = [
        d.api_versions(3),
        d.sasl_handshake(0, sec.PLAIN),
        d.sasl_handshake(1, sec.SCRAM_SHA_512),
        d.sasl_authenticate(0, plain_token("fuzz-user", "fuzz-pw")),
        d.sasl_authenticate(1, scram_first),
        d.sasl_authenticate(2, scram_first),
        *(d.create_acls(v, acl) for v in (1, 2, 3)),
        *(d.describe_acls(v, acl_filter) for v in (1, 2, 3)),
        *(d.delete_acls(v, acl_filter) for v in (1, 2, 3)),
        d.alter_user_scram_credentials(deletions=[("fuzz-user", 1)], upsertions=[upsertion]),
        d.describe_user_scram_credentials(["fuzz-user"]),
        d.describe_user_scram_credentials(None),
        d.describe_groups(5, "fuzz-group"),
    ]
    return [d.request_frame(r, i, "fuzz") for i, r in enumerate(requests)]


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StaticfleetBackend]:
    backend = StaticfleetBackend(SECURED, tmp_path_factory.mktemp("fuzz-secured") / "coordinator")
    asyncio.run(backend.start())
    yield backend
    backend.stop()


class Stream:
    """One raw connection of a fuzz worker."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def exchange(self, frame: bytes, wait: float = 0.05) -> bytes:
        """Sends a frame and reads one answer (TimeoutError if none comes within `wait`)."""
        self.writer.write(frame)
        await self.writer.drain()
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), wait))
        return await asyncio.wait_for(self.reader.readexactly(size), 2)

    def close(self) -> None:
        self.writer.close()


async def _open(
    backend: StaticfleetBackend, category: str, tls: ssl.SSLContext, rng: random.Random
) -> Stream:
    """A connection in the state the category fuzzes: fresh, mid-exchange or logged in, TLS or not."""
    over_tls = category.startswith("tls") and category != "tls-before"
    port = backend.listener_ports[sec.SASL_SSL if category.startswith("tls") else sec.SASL_PLAINTEXT]
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls if over_tls else None, server_hostname="" if over_tls else None
    )
    stream = Stream(reader, writer)
    if category.endswith("-during"):  # a SCRAM exchange begun, then garbage where its messages go
        answer = await stream.exchange(d.request_frame(d.sasl_handshake(1, sec.SCRAM_SHA_512), 1), 5)
        assert struct.unpack_from(">h", answer, 4)[0] == 0
    elif category.endswith("-after"):  # logged in as the super user, so ACL changes reach the log
        answer = await stream.exchange(d.request_frame(d.sasl_handshake(1, sec.PLAIN), 1), 5)
        assert struct.unpack_from(">h", answer, 4)[0] == 0
        token = plain_token("admin", "admin-secret")
        answer = await stream.exchange(d.request_frame(d.sasl_authenticate(2, token), 2), 5)
        assert struct.unpack_from(">h", answer, 5)[0] == 0  # after the flexible header: the error code
    return stream


def _garbage(category: str, seeds: list[bytes], rng: random.Random) -> bytes:
    if category == "tls-before" and rng.random() < 0.3:
        # What a confused TLS client might send: a handshake record header over random bytes.
        return b"\x16\x03" + bytes([rng.randrange(5)]) + rng.randbytes(rng.randint(0, 300))
    if rng.random() < 0.05:
        return rng.randbytes(rng.randint(1, 200))
    return mutate(rng.choice(seeds), rng)


async def _fuzz(backend: StaticfleetBackend, total: int) -> Counter[str]:
    assert backend.ca_file is not None
    tls = sec.client_tls(backend.ca_file)
    seeds = security_seeds()
    counts: Counter[str] = Counter()

    async def worker(seed: int) -> None:
        rng = random.Random(seed)
        stream: Stream | None = None
        category = CATEGORIES[seed % len(CATEGORIES)]
        while counts["sent"] < total:
            if stream is None:
                category = CATEGORIES[rng.randrange(len(CATEGORIES))]
                stream = await _open(backend, category, tls, rng)
            counts["sent"] += 1
            try:
                await stream.exchange(_garbage(category, seeds, rng), WAIT_S.get(category, 0.05))
                counts[f"{category} answered"] += 1
                continue
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                counts[f"{category} closed"] += 1
            except TimeoutError:
                counts[f"{category} silent"] += 1  # waiting for bytes a lying size prefix promised
            stream.close()
            stream = None
        if stream is not None:
            stream.close()

    await asyncio.gather(*(worker(i) for i in range(WORKERS)))
    return counts


async def _good_client(backend: StaticfleetBackend, stop: asyncio.Event) -> int:
    """The super user over SASL_SSL with SCRAM-SHA-512, logged in before the fuzz: a static member that
    joins, syncs and heartbeats every 50 ms until told to stop; returns how many heartbeats it made."""
    assert backend.ca_file is not None
    conn = await d.Connection.open(
        "127.0.0.1", backend.listener_ports[sec.SASL_SSL], name="good", tls=sec.client_tls(backend.ca_file)
    )
    await sec.sasl_login(conn, sec.SCRAM_SHA_512, "admin", "admin-secret")
    protocols = (("range", d.subscription("fuzz-topic")),)
    joined = await conn.request(d.join_group(9, "good-group", instance_id="good", protocols=protocols))
    assert joined.error_code == ErrorCode.none, joined
    synced = await conn.request(
        d.sync_group(5, "good-group", generation=joined.generation_id, member_id=joined.member_id,
                     instance_id="good", protocol_type="consumer", protocol_name="range",
                     assignments=[(joined.member_id, d.assignment({"fuzz-topic": [0]}))])
    )  # fmt: skip
    assert synced.error_code == ErrorCode.none, synced
    heartbeats = 0
    while not stop.is_set():
        response = await conn.request(
            d.heartbeat(4, "good-group", generation=joined.generation_id, member_id=joined.member_id,
                        instance_id="good"),
            timeout=10,
        )  # fmt: skip
        assert response.error_code == ErrorCode.none, response
        heartbeats += 1
        await asyncio.sleep(0.05)
    described = await conn.request(d.describe_groups(5, "good-group"))
    await conn.close()
    group = described.groups[0]
    assert (group.group_state, len(group.members)) == ("Stable", 1), group
    return heartbeats


def _rss_kib(backend: StaticfleetBackend) -> int:
    process = backend._process
    assert process is not None  # setpriv execs the coordinator: this pid is the coordinator's
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_garbage_on_the_sasl_acl_and_scram_apis_and_the_tls_listener_while_a_client_keeps_its_session(
    coordinator: StaticfleetBackend,
) -> None:
    async def run() -> tuple[Counter[str], int, int]:
        stop = asyncio.Event()
        good = asyncio.create_task(_good_client(coordinator, stop))
        await asyncio.sleep(1.0)
        rss_before = _rss_kib(coordinator)
        counts = await _fuzz(coordinator, FRAMES)
        growth = _rss_kib(coordinator) - rss_before
        stop.set()
        return counts, await good, growth

    counts, heartbeats, growth = asyncio.run(run())
    process = coordinator._process
    assert process is not None and process.poll() is None, "the server is still running"
    assert counts["sent"] >= FRAMES
    for category in CATEGORIES:
        assert counts[f"{category} closed"] > 0, (category, counts)
    for category in ("sasl-before", "sasl-after", "tls-after", "sasl-during"):
        assert counts[f"{category} answered"] > 0, (category, counts)
    assert heartbeats > 20, "the good client kept heartbeating throughout"
    assert growth < 200 * 1024, f"memory grew by {growth} KiB"

    async def after() -> list[str]:
        # New clients log in with every mechanism, and the ACL APIs still answer.
        for mechanism, user in (
            (sec.SCRAM_SHA_512, "bob"),
            (sec.SCRAM_SHA_256, "carol"),
            (sec.PLAIN, "admin"),
        ):
            conn = await d.Connection.open("127.0.0.1", coordinator.listener_ports[sec.SASL_PLAINTEXT])
            await sec.sasl_login(conn, mechanism, user, sec.SecurityProfile().password(user))
            await conn.close()
        conn = await d.Connection.open("127.0.0.1", coordinator.listener_ports[sec.SASL_PLAINTEXT])
        await sec.sasl_login(conn, sec.PLAIN, "admin", "admin-secret")
        described = await conn.request(
            d.describe_acls(
                3, d.Acl(d.RESOURCE_ANY, None, d.PATTERN_ANY, None, None, d.OP_ANY, d.PERMISSION_ANY)
            )
        )
        await conn.close()
        assert described.error_code == ErrorCode.none
        return [r.resource_name for r in described.resources]

    asyncio.run(after())
    print(dict(counts))
