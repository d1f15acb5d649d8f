"""Conformance scenarios: what one is, the registry, and the context a scenario runs in.

A scenario is an async function `(ScenarioContext) -> Outcome`. It drives a backend (Apache Kafka or the
staticfleet coordinator) with raw protocol requests and records every answer, normalised, under a label.
The differential test runs the same scenario on both backends with identical group settings and compares
the outcomes; a scenario asserts nothing about the coordinator itself.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from conformance import driver as d
from conformance import security as sec
from conformance.certs import Issued
from conformance.kafka_broker import GroupSettings

if TYPE_CHECKING:
    from conformance.backends import Backend

Outcome = dict[str, d.Json]
ScenarioFn = Callable[["ScenarioContext"], Awaitable[Outcome]]
SanityFn = Callable[[Outcome], None]

# Settings most scenarios share (one broker serves them all).
DEFAULT = GroupSettings()
# Kafka's own defaults for the session bounds and the initial delay.
KAFKA_DEFAULTS = GroupSettings(
    initial_rebalance_delay_ms=3000, min_session_timeout_ms=6000, max_session_timeout_ms=1_800_000
)
MAX_SIZE_2 = GroupSettings(max_size=2)
# The secured pair: SASL_PLAINTEXT and SASL_SSL listeners, SCRAM and PLAIN users, ACLs, a super user.
SECURED = GroupSettings(security=sec.SecurityProfile())


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    rule: str
    run: ScenarioFn
    settings: GroupSettings = DEFAULT
    # Needs a backend of its own (it restarts it).
    exclusive: bool = False
    sanity: SanityFn | None = None


REGISTRY: dict[str, Scenario] = {}


def scenario(
    description: str,
    *,
    rule: str,
    settings: GroupSettings = DEFAULT,
    exclusive: bool = False,
    sanity: SanityFn | None = None,
) -> Callable[[ScenarioFn], ScenarioFn]:
    """Registers a scenario under its function name."""

    def register(fn: ScenarioFn) -> ScenarioFn:
        name = fn.__name__
        if name in REGISTRY:
            raise ValueError(f"duplicate scenario {name}")
        REGISTRY[name] = Scenario(name, description, rule, fn, settings, exclusive, sanity)
        return fn

    return register


def all_scenarios() -> list[Scenario]:
    import conformance.scenarios  # noqa: F401  (registers every scenario)

    return sorted(REGISTRY.values(), key=lambda s: s.name)


# --------------------------------------------------------------------------------------------------

_UNIQUE = itertools.count(1)

# Apache Kafka answers a JoinGroup that creates a group before the group's first record is committed,
# and DescribeGroups reads committed state: for that moment the new group is not found (Dead).
COMMIT_WINDOW_S = 5.0


def unique_group_id(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name)[:40]
    return f"cf-{slug}-{next(_UNIQUE)}-{uuid.uuid4().hex[:8]}"


DEFAULT_PROTOCOLS: d.Protocols = (("range", d.subscription("t1")), ("roundrobin", d.subscription("t1")))


class ScenarioContext:
    """What a scenario gets: a backend, a fresh group id, a normaliser and the outcome being recorded."""

    def __init__(self, backend: Backend, scenario: Scenario) -> None:
        self.backend = backend
        self.scenario = scenario
        self.settings = backend.settings
        self.group = unique_group_id(scenario.name)
        self.norm = d.Normaliser({self.group: "<group>"})
        self.outcome: Outcome = {}
        self._driver = d.Driver(backend.host, backend.port)
        self._observer: d.Connection | None = None
        self._admin: d.Connection | None = None
        self._extra_groups = 0
        self._topics = 0
        self._members: list[Member] = []
        self._seen: set[str] = set()  # groups DescribeGroups has found

    # --- connections and members

    async def connect(
        self,
        name: str = "conn",
        *,
        client_id: str | None = d.DEFAULT_CLIENT_ID,
        listener: str | None = None,
        certificate: Issued | None = None,
    ) -> d.Connection:
        """A connection to the bootstrap listener, or to the named one (TLS for SASL_SSL and SSL, with
        `certificate` as the client certificate)."""
        if listener is None:
            return await self._driver.connect(name, client_id=client_id)
        port = self.backend.listener_ports[listener]
        tls = None
        if listener in (sec.SASL_SSL, sec.SSL):
            assert self.backend.ca_file is not None, "the backend has no TLS listener"
            tls = sec.client_tls(self.backend.ca_file, certificate)
        return await self._driver.connect(name, client_id=client_id, port=port, tls=tls)

    async def login(
        self,
        user: str,
        *,
        mechanism: str = sec.SCRAM_SHA_512,
        listener: str = sec.SASL_PLAINTEXT,
        name: str | None = None,
        client_id: str | None = d.DEFAULT_CLIENT_ID,
    ) -> d.Connection:
        """A connection authenticated as `user` (ApiVersions, SaslHandshake v1, SaslAuthenticate v2)."""
        security = self.settings.security
        assert security is not None, "login needs the secured settings"
        connection = await self.connect(name or f"{user}-{mechanism}", client_id=client_id, listener=listener)
        await connection.request(d.api_versions(3))
        await sec.sasl_login(connection, mechanism, user, security.password(user))
        return connection

    async def admin(self) -> d.Connection:
        """A connection authenticated as the super user `admin`."""
        if self._admin is None:
            self._admin = await self.login("admin", name="admin")
        return self._admin

    async def grant(self, *acls: d.Acl) -> None:
        """Creates ACLs as the super user and waits until the broker's authorizer applies them."""
        admin = await self.admin()
        created = await admin.request(d.create_acls(3, *acls))
        failed = [r for r in created.results if r.error_code != ErrorCode.none]
        assert not failed, f"CreateAcls failed: {failed}"
        await self._wait_acls(acls, present=True)

    async def revoke(self, *acls: d.Acl) -> None:
        """Deletes exactly these ACLs as the super user and waits until the authorizer drops them."""
        admin = await self.admin()
        await admin.request(d.delete_acls(3, *acls))
        await self._wait_acls(acls, present=False)

    async def _wait_acls(self, acls: Sequence[d.Acl], *, present: bool, timeout: float = 10.0) -> None:
        admin = await self.admin()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for acl in acls:
            while True:
                found = await admin.request(d.describe_acls(3, acl))
                if bool(found.resources) == present:
                    break
                if loop.time() > deadline:
                    raise TimeoutError(f"ACL {acl} {'never appeared' if present else 'stayed'}")
                await asyncio.sleep(0.02)

    def new_topic(self) -> str:
        """A fresh topic name, normalised as <topic>, <topic2>, ..."""
        self._topics += 1
        raw = unique_group_id(f"{self.scenario.name}-topic-{self._topics}")
        self.norm.add_group(raw, "<topic>" if self._topics == 1 else f"<topic{self._topics}>")
        return raw

    async def member(
        self,
        instance_id: str | None,
        *,
        client_id: str | None = None,
        protocols: d.Protocols = DEFAULT_PROTOCOLS,
        session_ms: int = 10_000,
        rebalance_ms: int = 10_000,
        group: str | None = None,
        user: str | None = None,
    ) -> Member:
        """A simulated client on a connection of its own (client id defaults to the instance id), logged in
        as `user` with SCRAM-SHA-512 when one is given."""
        cid = client_id or instance_id or "dyn"
        if user is not None:
            connection = await self.login(user, name=f"member-{cid}", client_id=cid)
        else:
            connection = await self.connect(f"member-{cid}", client_id=cid)
        member = Member(
            conn=connection,
            group=group or self.group,
            instance_id=instance_id,
            protocols=protocols,
            session_ms=session_ms,
            rebalance_ms=rebalance_ms,
        )
        self._members.append(member)
        return member

    async def restart(self, member: Member) -> Member:
        """Models a client restart: `member` gets a new connection (and will join with a new identity);
        the returned copy is the old incarnation, still on the old connection.

        Kafka serves one request per connection at a time, so a restarted client must not share a connection
        with a request its previous incarnation left parked.
        """
        old = member.incarnation()
        cid = member.conn.client_id
        member.conn = await self.connect(f"{member.conn.name}-restarted", client_id=cid)
        return old

    def new_group(self) -> str:
        """A second (third, ...) fresh group id, normalised as <group2>, <group3>, ..."""
        self._extra_groups += 1
        raw = unique_group_id(f"{self.scenario.name}-{self._extra_groups + 1}")
        self.norm.add_group(raw, f"<group{self._extra_groups + 1}>")
        return raw

    async def observer(self) -> d.Connection:
        if self._observer is None:
            self._observer = await self.connect("observer")
        return self._observer

    # --- recording

    def record(self, label: str, value: object) -> None:
        """Stores the normalised `value` under `label` (labels are unique; a repeat gets a suffix)."""
        key = label
        n = 2
        while key in self.outcome:
            key = f"{label}#{n}"
            n += 1
        self.outcome[key] = self.norm.value(value)

    def record_each(self, labels: Sequence[str], values: Sequence[object]) -> None:
        """Records values under labels, pairwise."""
        for label, value in zip(labels, values, strict=True):
            self.record(label, value)

    def fact(self, label: str, value: d.Json) -> None:
        """Records an already-plain observation (a boolean, a count)."""
        self.record(label, value)

    async def describe(self, *, version: int = 5, group: str | None = None) -> d.GroupDescription:
        observer = await self.observer()
        raw = await observer.request(d.describe_groups(version, group or self.group))
        return d.GroupDescription.of(raw)

    async def settled(self, *, version: int = 5, group: str | None = None) -> d.GroupDescription:
        """The group as DescribeGroups shows it once the JoinGroup that created it is committed: while a
        group that one of this scenario's joins created has never been found, it is described again,
        for up to COMMIT_WINDOW_S; a group that is not there is still not found then."""
        target = group or self.group
        description = await self.describe(version=version, group=target)
        if target not in self._seen and any(m.group == target and m.created for m in self._members):
            deadline = asyncio.get_running_loop().time() + COMMIT_WINDOW_S
            while description.state == "Dead" and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
                description = await self.describe(version=version, group=target)
        if description.state != "Dead":
            self._seen.add(target)
        return description

    async def snapshot(self, label: str, *, version: int = 5, group: str | None = None) -> d.GroupDescription:
        """Records the group as DescribeGroups shows it (`settled`)."""
        description = await self.settled(version=version, group=group)
        self.record(label, description.raw)
        return description

    async def state(self, label: str, *, group: str | None = None) -> str:
        """Records only the group state (and member count), `settled`."""
        description = await self.settled(group=group)
        self.fact(label, {"state": description.state, "members": len(description.members)})
        return description.state

    async def wait_members(self, count: int, *, timeout: float = 10.0, group: str | None = None) -> None:
        """Waits until DescribeGroups lists `count` members, so that the next join arrives after them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            description = await self.describe(group=group)
            if len(description.members) >= count:
                return
            if loop.time() > deadline:
                raise TimeoutError(f"group never reached {count} members (has {len(description.members)})")
            await asyncio.sleep(0.02)

    async def wait_state(self, state: str, *, timeout: float = 10.0, group: str | None = None) -> float:
        """Waits until the group is in `state`; returns the seconds it took."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while True:
            description = await self.describe(group=group)
            if description.state == state:
                return loop.time() - start
            if loop.time() - start > timeout:
                raise TimeoutError(f"group state stayed {description.state}, expected {state}")
            await asyncio.sleep(0.02)

    async def ensure_topic(self, name: str = "t1", partitions: int = 4) -> None:
        """Creates a topic if needed and waits until it is usable (nothing is recorded)."""
        await d.ensure_topic(await self.observer(), name, partitions)

    async def close(self) -> None:
        await self._driver.close()


class Unset:
    """Marker for `Member` methods: use the member's own value."""


UNSET = Unset()


@dataclass
class Member:
    """One simulated group member: its connection, identity and what the coordinator last told it."""

    conn: d.Connection
    group: str
    instance_id: str | None
    protocols: d.Protocols = DEFAULT_PROTOCOLS
    session_ms: int = 10_000
    rebalance_ms: int = 10_000
    member_id: str = ""
    generation: int = -1
    protocol_name: str | None = None
    leader: str = ""
    joined: list[d.JoinResult] = field(default_factory=list)
    created: bool = False  # a JoinGroup with no member id was answered: it creates an unknown group

    def join(
        self,
        version: int = 9,
        *,
        member_id: str | None = None,
        instance_id: str | Unset | None = UNSET,
        protocols: d.Protocols | None = None,
        protocol_type: str = "consumer",
        session_ms: int | None = None,
        rebalance_ms: int | None = None,
    ) -> d.Pending[d.JoinResult]:
        """Sends JoinGroup with this member's identity (overridable); the answer updates the member."""
        instance = self.instance_id if isinstance(instance_id, Unset) else instance_id
        sent_member_id = self.member_id if member_id is None else member_id
        request = d.join_group(
            version,
            self.group,
            member_id=sent_member_id,
            instance_id=instance,
            protocol_type=protocol_type,
            protocols=self.protocols if protocols is None else protocols,
            session_timeout_ms=self.session_ms if session_ms is None else session_ms,
            rebalance_timeout_ms=self.rebalance_ms if rebalance_ms is None else rebalance_ms,
        )
        if protocols is not None:
            self.protocols = protocols

        def update(result: d.JoinResult) -> d.JoinResult:
            self.joined.append(result)
            self.created = self.created or sent_member_id == ""
            if result.ok:
                self.member_id = result.member_id
                self.generation = result.generation
                self.protocol_name = result.protocol_name
                self.leader = result.leader
            elif result.error == ErrorCode.member_id_required:
                self.member_id = result.member_id
            return result

        return self.conn.send(request).then(d.JoinResult.of).then(update)

    def sync(
        self,
        version: int = 5,
        *,
        assignments: Sequence[tuple[str, bytes]] = (),
        generation: int | None = None,
        member_id: str | None = None,
        protocol_type: str | None = "consumer",
        protocol_name: str | Unset | None = UNSET,
    ) -> d.Pending[d.SyncResult]:
        name = self.protocol_name if isinstance(protocol_name, Unset) else protocol_name
        request = d.sync_group(
            version,
            self.group,
            generation=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            instance_id=self.instance_id if version >= 3 else None,
            protocol_type=protocol_type if version >= 5 else None,
            protocol_name=name if version >= 5 else None,
            assignments=assignments,
        )
        return self.conn.send(request).then(d.SyncResult.of)

    def heartbeat(
        self, version: int = 4, *, generation: int | None = None, member_id: str | None = None
    ) -> d.Pending[Any]:
        request = d.heartbeat(
            version,
            self.group,
            generation=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            instance_id=self.instance_id if version >= 3 else None,
        )
        return self.conn.send(request)

    def commit(
        self,
        version: int = 9,
        *,
        offsets: d.Offsets | None = None,
        generation: int | None = None,
        member_id: str | None = None,
    ) -> d.Pending[Any]:
        request = d.offset_commit(
            version,
            self.group,
            generation=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            instance_id=self.instance_id if version >= 7 else None,
            offsets=offsets or {"t1": {0: 5}},
        )
        return self.conn.send(request)

    def incarnation(self) -> Member:
        """A copy holding the current identity: a stale incarnation once this member is replaced."""
        return replace(self, joined=[])


# --------------------------------------------------------------------------------------------------
# Shared set-ups


class SetUpRaced(Exception):
    """A set-up's members were meant to join one generation, but the join phase ended before the last of
    them arrived: on a loaded machine a join can come later than the group's initial rebalance delay
    after the one before it. The scenario is worth running again (with a new group); its outcome says
    nothing about the backend."""


async def join_all(
    ctx: ScenarioContext, members: Sequence[Member], *, version: int = 9
) -> list[d.JoinResult]:
    """Joins members in order (each one arrives after the previous is registered) and awaits them all.
    Those answered without an error must share one generation (else `SetUpRaced`)."""
    pending = []
    for i, member in enumerate(members):
        pending.append(member.join(version))
        await ctx.wait_members(i + 1, group=member.group)
    results = [await p.result() for p in pending]
    generations = sorted({result.generation for result in results if result.ok})
    if len(generations) > 1:
        raise SetUpRaced(
            f"members joined generations {generations} of {ctx.norm.text(members[0].group)}, "
            "not one: a join arrived after the join phase had ended"
        )
    return results


def partition_plan(ctx: ScenarioContext, leader: d.JoinResult) -> list[tuple[str, bytes]]:
    """The leader's assignment: the k-th member (by instance id, then symbolic id) gets partition k of t1."""
    ordered = sorted(leader.members, key=lambda m: (m.instance_id or "", ctx.norm.member(m.member_id)))
    return [(m.member_id, d.assignment({"t1": [k]})) for k, m in enumerate(ordered)]


async def sync_all(
    ctx: ScenarioContext, members: Sequence[Member], *, version: int = 5
) -> list[d.SyncResult]:
    """Syncs every member; the leader (who holds the member list) sends the plan."""
    pending = []
    for member in members:
        last = member.joined[-1] if member.joined else None
        plan = partition_plan(ctx, last) if last is not None and last.is_leader and last.members else []
        pending.append(member.sync(version, assignments=plan))
    return [await p.result() for p in pending]


async def setup_s2(
    ctx: ScenarioContext,
    *,
    group: str | None = None,
    version: int = 9,
    protocols: d.Protocols = DEFAULT_PROTOCOLS,
    session_ms: int = 10_000,
    rebalance_ms: int = 10_000,
    record: bool = True,
) -> tuple[Member, Member]:
    """Reference set-up S2: static members A (leader) and B, same protocols, synced; Stable, generation 1."""
    a = await ctx.member(
        "A", protocols=protocols, session_ms=session_ms, rebalance_ms=rebalance_ms, group=group
    )
    b = await ctx.member(
        "B", protocols=protocols, session_ms=session_ms, rebalance_ms=rebalance_ms, group=group
    )
    ja, jb = await join_all(ctx, [a, b], version=version)
    sa, sb = await sync_all(ctx, [a, b])
    if record:
        prefix = "s2" if group in (None, ctx.group) else f"s2{ctx.norm.text(group or '')}"
        ctx.record(f"{prefix}.join.A", ja)
        ctx.record(f"{prefix}.join.B", jb)
        ctx.record(f"{prefix}.sync.A", sa)
        ctx.record(f"{prefix}.sync.B", sb)
    return a, b


def expect(outcome: Outcome, label: str, **expected: d.Json) -> None:
    """Oracle sanity: fields of one recorded answer (used by scenarios' `sanity` checks)."""
    value = outcome.get(label)
    assert isinstance(value, dict), f"{label}: not recorded (have {sorted(outcome)})"
    for key, want in expected.items():
        got = value.get(key)
        assert got == want, f"{label}.{key} = {got!r}, expected {want!r}"


def expect_all(*checks: tuple[str, dict[str, d.Json]]) -> SanityFn:
    """A sanity check made of several `expect` calls."""

    def check(outcome: Outcome) -> None:
        for label, fields in checks:
            expect(outcome, label, **fields)

    return check
