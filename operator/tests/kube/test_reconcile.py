"""The reconcile pass and the deletion against in-memory stand-ins for the API server and the coordinator:
the order of the I/O and what ends up in status (the real thing runs in e2e/tests/operator)."""

from __future__ import annotations

import base64
import copy
import time
from typing import Any, cast

import pytest

from staticfleet.admin import (
    AdminError,
    ConfigRejected,
    CoordinatorUnreachable,
    GroupAdmin,
    KafkaConnection,
    KafkaErrorResponse,
)
from staticfleet.admin.model import (
    GroupDescription,
    MemberDescription,
    MemberRemoval,
    Node,
    PartitionOffsets,
    RemovalReport,
)
from staticfleet.kube.applied import REAPPLY_S, AppliedChildren
from staticfleet.kube.claims import Claim
from staticfleet.kube.context import OperatorContext
from staticfleet.kube.fleetstatus import EventSpec
from staticfleet.kube.join_hold import INCREMENTAL_LINGER_S
from staticfleet.kube.kubeapi import KubeApi, KubeError, prune
from staticfleet.kube.lag_reads import LAG_REFRESH_S, LagReads
from staticfleet.kube.limits import Limits
from staticfleet.kube.metrics import OperatorMetrics
from staticfleet.kube.reconcile import Follow, Retry, finalize, reconcile
from staticfleet.kube.spec import OperatorDefaults, parse_group
from staticfleet.kube.steps import DEPARTURE_DELAY_S

from .fixtures import resource

Manifest = dict[str, Any]


class FakeKube:
    def __init__(self, body: Manifest) -> None:
        self.group = copy.deepcopy(body)
        self.group["metadata"].setdefault("resourceVersion", "1")
        self.objects: dict[str, Manifest] = {}
        self.pods: list[Manifest] = []
        self.events: list[Manifest] = []
        self.calls: list[str] = []
        self.reject_statefulset: KubeError | None = None
        self.secrets: dict[str, Manifest] = {}

    def get_group(self, namespace: str, name: str) -> Manifest | None:
        return copy.deepcopy(self.group)

    def apply_group_status(
        self, namespace: str, name: str, status: Manifest, resource_version: str
    ) -> Manifest:
        """Server-side apply of the whole status by its one field manager, as of resource_version."""
        meta = self.group["metadata"]
        if resource_version != meta["resourceVersion"]:
            raise KubeError(409, f"the object has been modified (at {meta['resourceVersion']})")
        before, after = self.group.get("status") or {}, prune(status)
        changed = {k for k in {*before, *after} if before.get(k) != after.get(k)}
        self.calls.append("status(scaleDown)" if changed == {"scaleDown"} else "status")
        self.group["status"] = copy.deepcopy(after)
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return copy.deepcopy(self.group)

    def apply(self, manifest: Manifest) -> Manifest:
        kind = manifest["kind"]
        if kind == "StatefulSet" and self.reject_statefulset is not None:
            raise self.reject_statefulset
        self.calls.append(
            f"apply {kind}" + (f"({manifest['spec']['replicas']})" if kind == "StatefulSet" else "")
        )
        old = self.objects.get(kind)
        generation = (old or {}).get("metadata", {}).get("generation", 0)
        if old is None or old["spec"] != manifest["spec"]:
            generation += 1
        stored = copy.deepcopy(manifest)
        stored["metadata"]["generation"] = generation
        if kind == "StatefulSet":
            replicas = manifest["spec"]["replicas"]
            stored["status"] = {
                "replicas": replicas,
                "readyReplicas": replicas,
                "observedGeneration": generation,
            }
        self.objects[kind] = stored
        return copy.deepcopy(stored)

    def create_secret(self, secret: Manifest) -> bool:
        name = secret["metadata"]["name"]
        self.calls.append(f"create Secret {name}")
        if name in self.secrets:
            return False
        self.secrets[name] = copy.deepcopy(secret)
        return True

    def get_statefulset(self, namespace: str, name: str) -> Manifest | None:
        return copy.deepcopy(self.objects.get("StatefulSet"))

    def scale_statefulset(self, namespace: str, name: str, replicas: int) -> Manifest:
        self.calls.append(f"scale({replicas})")
        self.objects["StatefulSet"]["spec"]["replicas"] = replicas
        return self.objects["StatefulSet"]

    def list_pods(self, namespace: str, label_selector: str) -> list[Manifest]:
        return copy.deepcopy(self.pods)

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        for pod in self.pods:
            if pod["metadata"]["name"] != name:
                continue
            self.calls.append(f"annotate {name}")
            own = pod["metadata"].setdefault("annotations", {})
            for key, value in annotations.items():
                if value is None:
                    own.pop(key, None)
                else:
                    own[key] = value

    def post_event(self, body: Any, event: EventSpec) -> None:
        self.events.append({"type": event.type, "reason": event.reason, "message": event.message})

    def set_pods(self, *ordinals: int) -> None:
        self.pods = [{"metadata": {"name": f"orders-{o}", "labels": {}}, "status": {}} for o in ordinals]


class FakeAdmin:
    def __init__(self, members: set[str], accepts_configs: bool = True) -> None:
        self.members = set(members)
        self.accepts_configs = accepts_configs
        self.configs: dict[str, str] = {}
        self.removals: list[list[str]] = []
        self.offsets: tuple[PartitionOffsets, ...] = ()
        self.offsets_fail = False
        self.holds: dict[str, tuple[str, str, int]] = {}
        self.hold_refused: AdminError | None = None
        self.released: list[str] = []
        self.state, self.protocol = "Stable", "range"

    def describe_group(self, group_id: str) -> GroupDescription:
        return GroupDescription(
            group_id,
            self.state,
            "consumer",
            self.protocol,
            tuple(
                MemberDescription(f"{i}-m", i, i, "/h", {"orders": [n]})
                for n, i in enumerate(sorted(self.members))
            ),
            Node(1, "h", 9092),
        )

    def partition_offsets(self, group_id: str, topics: Any) -> tuple[PartitionOffsets, ...]:
        if self.offsets_fail:
            raise CoordinatorUnreachable("offsets unavailable")
        return self.offsets

    def remove_members(self, group_id: str, ids: Any, reason: str | None = None) -> RemovalReport:
        ids = list(ids)
        self.removals.append(ids)
        results = tuple(MemberRemoval(i, 0 if i in self.members else 25) for i in ids)
        self.members -= set(ids)
        return RemovalReport(group_id, results)

    def cluster_id(self) -> str:
        return "cluster-1"

    def missing_topics(self, topics: Any) -> list[str]:
        return []

    def set_group_config(self, group_id: str, name: str, value: str | None) -> None:
        if not self.accepts_configs:
            raise ConfigRejected(
                40, f"group {group_id} config {name}: INVALID_CONFIG: Unknown group config name"
            )
        if value is None:
            self.configs.pop(name, None)
        else:
            self.configs[name] = value

    def hold_join_phase(
        self, group_id: str, *, protocol_type: str, protocol: str, session_timeout_ms: int
    ) -> str:
        if self.hold_refused is not None:
            raise self.hold_refused
        member_id = f"staticfleet-admin-{len(self.holds)}"
        self.holds[member_id] = (protocol_type, protocol, session_timeout_ms)
        return member_id

    def release_join_phase(self, group_id: str, member_id: str) -> bool:
        self.released.append(member_id)
        return self.holds.pop(member_id, None) is not None


class Context(OperatorContext):
    fake_admin: FakeAdmin
    watched: list[tuple[str, tuple[str, ...]]]
    lingers: list[float]

    def __post_init__(self) -> None:
        super().__post_init__()
        self.watched, self.lingers = [], []

    def admin(self, connection: KafkaConnection) -> GroupAdmin:
        return cast(GroupAdmin, self.fake_admin)


def context(kube: FakeKube, admin: FakeAdmin) -> Context:
    ctx = Context(
        api=cast(KubeApi, kube),
        defaults=OperatorDefaults(),
        metrics=OperatorMetrics(),
        events=kube.post_event,
    )
    ctx.fake_admin = admin

    def watch(
        admin: Any, group_id: str, member_id: str, ids: tuple[str, ...], bound: float, linger: float
    ) -> None:
        ctx.watched.append((member_id, ids))
        ctx.lingers.append(linger)

    ctx.hold_watcher = watch
    return ctx


def conditions(kube: FakeKube) -> dict[str, Manifest]:
    return {c["type"]: c for c in kube.group["status"]["conditions"]}


def reasons(kube: FakeKube) -> list[str]:
    return [e["reason"] for e in kube.events]


def test_the_first_pass_pre_registers_then_creates_the_children() -> None:
    kube, admin = FakeKube(resource()), FakeAdmin(set())
    reconcile(context(kube, admin), "shop", "orders", {})
    # The pre-registration is recorded in status before the StatefulSet exists.
    assert kube.calls[:4] == ["status", "apply Service", "apply PodDisruptionBudget", "apply StatefulSet(3)"]
    assert admin.configs == {"staticfleet.expected.instance.ids": "orders-0,orders-1,orders-2"}
    status = kube.group["status"]
    assert status["preRegistration"]["result"] == "Accepted"
    assert status["lastScale"]["direction"] == "Up" and status["lastScale"]["toReplicas"] == 3
    assert "Scaled" in reasons(kube)


def test_the_pre_registration_is_withdrawn_once_the_group_has_every_instance() -> None:
    kube, admin = FakeKube(resource()), FakeAdmin(set())
    ctx = context(kube, admin)
    # In force until withdrawn: the next pass follows the new pods' readiness, not every step of their
    # start (handlers.Wake).
    assert reconcile(ctx, "shop", "orders", {}) is Follow.READINESS
    # The version its status write left is remembered: that version's watch event needs no pass.
    assert ctx.own_writes.version(("shop", "orders"), kube.group["metadata"]["resourceVersion"])
    assert ctx.own_writes.status(("shop", "orders"), kube.group["status"])
    admin.members = {"orders-0", "orders-1", "orders-2"}
    kube.set_pods(0, 1, 2)
    assert reconcile(ctx, "shop", "orders", {}) is Follow.NOTHING
    assert admin.configs == {}
    assert "preRegistration" not in kube.group["status"]
    assert conditions(kube)["Ready"]["status"] == "True"
    assert kube.group["status"]["lastScale"]["completedAt"]
    written = kube.group["metadata"]["resourceVersion"]
    ctx.forget("shop", "orders")  # the resource is gone: nothing of it is kept
    assert not ctx.own_writes.version(("shop", "orders"), written)
    assert not ctx.own_writes.status(("shop", "orders"), kube.group["status"])


def steady(replicas: int) -> tuple[FakeKube, FakeAdmin, Context]:
    kube = FakeKube(resource(replicas=replicas))
    admin = FakeAdmin({f"orders-{i}" for i in range(replicas)})
    ctx = context(kube, admin)
    kube.set_pods(*range(replicas))
    reconcile(ctx, "shop", "orders", {})
    reconcile(ctx, "shop", "orders", {})
    kube.calls.clear()
    kube.events.clear()
    return kube, admin, ctx


def lag_clock(ctx: Context) -> list[float]:
    """The time the fleet's lag reads go by, which the test moves (from 0, nothing read yet)."""
    clock = [0.0]
    ctx.lag_reads = LagReads(clock=lambda: clock[0])
    return clock


def fleet_of_two_on_a_lag_clock() -> tuple[FakeKube, FakeAdmin, Context, list[float]]:
    kube = FakeKube(resource(replicas=2))
    admin = FakeAdmin({"orders-0", "orders-1"})
    ctx = context(kube, admin)
    kube.set_pods(0, 1)
    return kube, admin, ctx, lag_clock(ctx)


def test_lag_is_written_to_status_and_exported_per_fleet_and_kept_while_unreadable() -> None:
    kube, admin, ctx, clock = fleet_of_two_on_a_lag_clock()
    admin.offsets = (PartitionOffsets("orders", 0, 10, 14), PartitionOffsets("orders", 1, 3, 12))
    reconcile(ctx, "shop", "orders", {})
    lag = kube.group["status"]["lag"]
    assert lag == {
        "total": 13,
        "partitions": 2,
        "uncommittedPartitions": 0,
        "worstPartition": {"topic": "orders", "partition": 1, "lag": 9},
    }
    registry = ctx.metrics.registry
    labels = {"group": "shop.orders"}
    assert registry.get_sample_value("staticfleet_fleet_lag_messages", labels) == 13
    assert registry.get_sample_value("staticfleet_fleet_max_partition_lag_messages", labels) == 9
    admin.offsets_fail = True
    clock[0] = LAG_REFRESH_S
    reconcile(ctx, "shop", "orders", {})
    assert kube.group["status"]["lag"] == lag
    assert registry.get_sample_value("staticfleet_fleet_lag_messages", labels) == 13


def test_the_lag_is_read_again_only_once_it_is_lag_refresh_s_old() -> None:
    """A pass that follows a pod's change does not wait on ListOffsets and OffsetFetch each time; the
    status keeps the lag it shows until the next read."""
    kube, admin, ctx, clock = fleet_of_two_on_a_lag_clock()
    admin.offsets = (PartitionOffsets("orders", 0, 10, 14),)
    reconcile(ctx, "shop", "orders", {})
    assert kube.group["status"]["lag"]["total"] == 4
    admin.offsets = (PartitionOffsets("orders", 0, 13, 14),)
    clock[0] = LAG_REFRESH_S - 0.1
    reconcile(ctx, "shop", "orders", {})
    assert kube.group["status"]["lag"]["total"] == 4  # not read again yet
    clock[0] = LAG_REFRESH_S
    reconcile(ctx, "shop", "orders", {})
    assert kube.group["status"]["lag"]["total"] == 1
    ctx.forget("shop", "orders")  # the resource is gone: its next pass reads the lag at once
    admin.offsets = (PartitionOffsets("orders", 0, 14, 14),)
    reconcile(ctx, "shop", "orders", {})
    assert kube.group["status"]["lag"]["total"] == 0


def test_each_fleet_is_exported_by_its_group_with_where_it_lives_and_ends_with_it() -> None:
    kube, _admin, ctx = steady(2)
    reconcile(ctx, "shop", "orders", {})
    registry = ctx.metrics.registry
    group = {"group": "shop.orders"}
    info = {**group, "fleet_namespace": "shop", "fleet_name": "orders"}
    assert registry.get_sample_value("staticfleet_fleet_info", info) == 1
    status = kube.group["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert registry.get_sample_value("staticfleet_fleet_ready", group) == (ready["status"] == "True")
    for found in status["conditions"]:
        labels = {**group, "type": found["type"], "reason": found["reason"]}
        assert registry.get_sample_value("staticfleet_fleet_condition", labels) == (found["status"] == "True")
    assert registry.get_sample_value("staticfleet_fleet_replicas", group) == 2
    assert registry.get_sample_value("staticfleet_fleet_members", group) == status["group"]["members"]
    assert (
        registry.get_sample_value("staticfleet_fleet_rebalances_total", group)
        == status["group"]["rebalances"]
    )
    ctx.metrics.forget("shop", "orders")
    assert registry.get_sample_value("staticfleet_fleet_info", info) is None
    assert registry.get_sample_value("staticfleet_fleet_ready", group) is None


def test_scale_down_records_first_shrinks_then_removes_only_after_the_pods_are_gone() -> None:
    kube, admin, ctx = steady(3)
    kube.group["spec"]["replicas"] = 1
    marked_at = time.time()
    # In a scale-down: the daemon follows every change of its pods (handlers.Wake).
    assert reconcile(ctx, "shop", "orders", {}) is Follow.EVERY_CHANGE
    assert kube.calls[0] == "status(scaleDown)"
    # The departing pods are marked (at once) after the record is durable and before the shrink.
    assert sorted(kube.calls[1:3]) == ["annotate orders-1", "annotate orders-2"]
    assert kube.calls[3:7] == [
        "apply StatefulSet(1)",  # the shrink does not wait for the Service and the PDB
        "apply Service",
        "apply PodDisruptionBudget",
        "status",  # the pass's one status write, which records the shrink
    ]
    assert [bool(p["metadata"].get("annotations")) for p in kube.pods] == [False, True, True]
    # Both are told the same moment to leave, a little after the marking, so that they leave together;
    # the StatefulSet shrinks only once that moment has come (the pass waited for it).
    (leave_at,) = {p["metadata"]["annotations"]["staticfleet.io/departing"] for p in kube.pods[1:]}
    assert marked_at < int(leave_at) / 1000 <= marked_at + DEPARTURE_DELAY_S + 0.1
    assert time.time() >= int(leave_at) / 1000
    assert kube.group["status"]["scaleDown"]["phase"] == "WaitingForPods"
    assert admin.removals == []  # orders-1 and orders-2 still exist
    reconcile(ctx, "shop", "orders", {})
    assert admin.removals == []
    kube.set_pods(0)
    kube.calls.clear()
    assert reconcile(ctx, "shop", "orders", {}) is Follow.NOTHING  # the step is over
    assert admin.removals == [["orders-1", "orders-2"]]
    # The acknowledged removal is recorded first thing; the children, unchanged since their last apply,
    # are not applied again.
    assert kube.calls == ["status(scaleDown)", "status"]
    assert "scaleDown" not in kube.group["status"]
    assert reasons(kube).count("MembersRemoved") == 1
    assert [m["instanceId"] for m in kube.group["status"]["members"]] == ["orders-0"]


def test_a_pass_at_rest_applies_nothing_until_the_statefulset_changes_or_a_minute_has_passed() -> None:
    kube, _, ctx = steady(3)
    clock = [0.0]
    ctx.applied = AppliedChildren(clock=lambda: clock[0])
    assert reconcile(ctx, "shop", "orders", {}) is Follow.NOTHING  # this process has applied nothing yet
    assert kube.calls == ["apply StatefulSet(3)", "apply Service", "apply PodDisruptionBudget"]
    kube.calls.clear()
    reconcile(ctx, "shop", "orders", {})
    assert kube.calls == []
    statefulset = kube.objects["StatefulSet"]
    statefulset["metadata"]["resourceVersion"] = "41"  # its controller wrote its status (a rollout)
    statefulset["status"]["readyReplicas"] = 2
    reconcile(ctx, "shop", "orders", {})
    assert not [c for c in kube.calls if c.startswith("apply")]  # the fleet's own status follows it
    statefulset["status"]["readyReplicas"] = 3
    reconcile(ctx, "shop", "orders", {})
    assert not [c for c in kube.calls if c.startswith("apply")]
    kube.calls.clear()
    statefulset["metadata"]["resourceVersion"] = "42"  # kubectl scale statefulset, say
    statefulset["metadata"]["generation"] += 1
    reconcile(ctx, "shop", "orders", {})
    assert kube.calls == ["apply StatefulSet(3)", "apply Service", "apply PodDisruptionBudget"]
    kube.calls.clear()
    clock[0] = REAPPLY_S - 0.1
    reconcile(ctx, "shop", "orders", {})
    assert kube.calls == []
    clock[0] = REAPPLY_S  # a deleted Service or PDB comes back within a minute
    reconcile(ctx, "shop", "orders", {})
    assert kube.calls == ["apply StatefulSet(3)", "apply Service", "apply PodDisruptionBudget"]
    kube.calls.clear()
    kube.group["spec"]["topics"] = ["orders", "returns"]  # what the resource asks changed
    reconcile(ctx, "shop", "orders", {})
    assert kube.calls[:3] == ["apply StatefulSet(3)", "apply Service", "apply PodDisruptionBudget"]


def test_pods_that_answer_the_handshake_get_their_fleets_departure_key_created_once_per_process() -> None:
    body = resource()
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "departure", "containerPort": 8080}
    ]
    kube, admin = FakeKube(body), FakeAdmin(set())
    ctx = context(kube, admin)
    reconcile(ctx, "shop", "orders", {})
    # Before the StatefulSet, whose pods read it as they start.
    secret_call = kube.calls.index("create Secret orders-departure-key")
    assert secret_call < kube.calls.index("apply StatefulSet(3)")
    secret = kube.secrets["orders-departure-key"]
    key = ctx.departure_key(parse_group(body))
    assert base64.b64decode(secret["data"]["key"]).decode() == key
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    (container,) = kube.objects["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    (ref,) = [e for e in container["env"] if e["name"] == "STATICFLEET_DEPARTURE_KEY"]
    assert ref["valueFrom"]["secretKeyRef"] == {
        "name": "orders-departure-key",
        "key": "key",
        "optional": True,
    }
    kube.calls.clear()
    kube.objects["StatefulSet"]["metadata"]["resourceVersion"] = "42"  # the children are applied again
    kube.objects["StatefulSet"]["metadata"]["generation"] += 1
    reconcile(ctx, "shop", "orders", {})
    assert not [c for c in kube.calls if c.startswith("create Secret")]
    # Another process (a restart, a new leader) tries once: the Secret is there, and left as it is.
    again = context(kube, admin)
    again.departure_signing_key = ctx.departure_signing_key
    reconcile(again, "shop", "orders", {})
    assert [c for c in kube.calls if c.startswith("create Secret")] == ["create Secret orders-departure-key"]
    assert kube.secrets["orders-departure-key"] == secret


def test_pods_that_do_not_answer_the_handshake_get_no_departure_key() -> None:
    kube, admin = FakeKube(resource()), FakeAdmin(set())
    reconcile(context(kube, admin), "shop", "orders", {})
    assert kube.secrets == {}
    (container,) = kube.objects["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    assert "STATICFLEET_DEPARTURE_KEY" not in {e["name"] for e in container["env"]}


def test_a_pass_writes_its_status_once_and_again_only_where_a_later_step_needs_a_record_durable() -> None:
    kube, admin, ctx = steady(3)
    clock = lag_clock(ctx)
    reconcile(ctx, "shop", "orders", {})
    assert [c for c in kube.calls if c.startswith("status")] == []  # at rest: nothing new to write
    admin.offsets = (PartitionOffsets("orders", 0, 10, 14),)
    clock[0] = LAG_REFRESH_S
    reconcile(ctx, "shop", "orders", {})
    assert [c for c in kube.calls if c.startswith("status")] == ["status"]  # the lag changed
    kube.group["spec"]["replicas"] = 1
    kube.calls.clear()
    reconcile(ctx, "shop", "orders", {})
    # The record before the StatefulSet shrinks (the Checkpoint), then the pass's one write.
    assert [c for c in kube.calls if c.startswith("status")] == ["status(scaleDown)", "status"]


def steady_pods_of_two(replicas: int) -> tuple[FakeKube, FakeAdmin, Context]:
    kube = FakeKube(resource(replicas=replicas, membersPerPod=2))
    admin = FakeAdmin({f"orders-{i}-{k}" for i in range(replicas) for k in (1, 2)})
    ctx = context(kube, admin)
    kube.set_pods(*range(replicas))
    reconcile(ctx, "shop", "orders", {})
    reconcile(ctx, "shop", "orders", {})
    kube.events.clear()
    return kube, admin, ctx


def test_a_scale_down_of_two_member_pods_removes_both_members_of_each_departed_pod_in_one_batch() -> None:
    kube, admin, ctx = steady_pods_of_two(3)
    kube.group["spec"]["replicas"] = 1
    reconcile(ctx, "shop", "orders", {})
    assert kube.group["status"]["scaleDown"]["pendingInstanceIds"] == [
        "orders-1-1", "orders-1-2", "orders-2-1", "orders-2-2",
    ]  # fmt: skip
    kube.set_pods(0)
    reconcile(ctx, "shop", "orders", {})
    assert admin.removals == [["orders-1-1", "orders-1-2", "orders-2-1", "orders-2-2"]]
    assert "scaleDown" not in kube.group["status"]
    assert [(m["pod"], m["instanceId"]) for m in kube.group["status"]["members"]] == [
        ("orders-0", "orders-0-1"), ("orders-0", "orders-0-2"),
    ]  # fmt: skip


def test_deleting_a_fleet_of_two_member_pods_removes_every_member_of_every_pod() -> None:
    kube, admin, ctx = steady_pods_of_two(2)
    kube.set_pods()
    with pytest.raises(Retry, match="waiting for the StatefulSet to stop its pods"):
        finalize(ctx, kube.group, {})  # a pod it makes now would run: the members go next time
    finalize(ctx, kube.group, {})
    assert admin.removals == [["orders-0-1", "orders-0-2", "orders-1-1", "orders-1-2"]]


def test_members_of_pods_in_a_terminal_phase_are_removed_before_the_pod_objects_go() -> None:
    kube, admin, ctx = steady(3)
    kube.group["spec"]["replicas"] = 1
    reconcile(ctx, "shop", "orders", {})
    terminating = {"deletionTimestamp": "2026-11-22T10:00:30Z"}
    for pod in kube.pods[1:]:  # being deleted, their consumers still closing
        pod["metadata"].update(terminating)
        pod["status"] = {"phase": "Running"}
    reconcile(ctx, "shop", "orders", {})
    assert admin.removals == []
    kube.pods[1]["status"] = {"phase": "Succeeded"}  # every container of orders-1 stopped
    reconcile(ctx, "shop", "orders", {})
    assert admin.removals == []  # orders-2 may still run
    kube.pods[2]["status"] = {"phase": "Failed"}
    reconcile(ctx, "shop", "orders", {})
    assert admin.removals == [["orders-1", "orders-2"]]
    assert len(kube.pods) == 3  # the pod objects are still there


def test_after_session_timeout_records_the_wait_and_closes_once_the_coordinator_expired_them() -> None:
    kube = FakeKube(resource(replicas=2, scaleDown={"removeMembers": "AfterSessionTimeout"}))
    admin = FakeAdmin({"orders-0", "orders-1"})
    ctx = context(kube, admin)
    kube.set_pods(0, 1)
    reconcile(ctx, "shop", "orders", {})
    kube.group["spec"]["replicas"] = 1
    reconcile(ctx, "shop", "orders", {})
    kube.set_pods(0)
    reconcile(ctx, "shop", "orders", {})
    assert kube.group["status"]["scaleDown"]["phase"] == "WaitingForSessionTimeout"
    assert admin.removals == []
    admin.members = {"orders-0"}  # the coordinator expired orders-1
    reconcile(ctx, "shop", "orders", {})
    assert "scaleDown" not in kube.group["status"]
    assert "MembersExpired" in reasons(kube) and admin.removals == []


def test_a_coordinator_that_refuses_pre_registration_gets_the_join_phase_held_instead() -> None:
    kube, admin, ctx = steady(1)
    admin.accepts_configs = False
    kube.group["spec"]["replicas"] = 3
    reconcile(ctx, "shop", "orders", {})
    assert kube.objects["StatefulSet"]["spec"]["replicas"] == 3
    # The hold copies the group's protocol so that the coordinator takes it, for the fleet's session timeout.
    assert admin.holds == {"staticfleet-admin-0": ("consumer", "range", 120_000)}
    pre = kube.group["status"]["preRegistration"]
    assert pre["result"] == "Accepted" and pre["holdMemberId"] == "staticfleet-admin-0"
    assert "refused pre-registration (INVALID_CONFIG)" in pre["message"]
    assert ctx.watched == [("staticfleet-admin-0", ("orders-0", "orders-1", "orders-2"))]
    progressing = conditions(kube)["Progressing"]
    assert progressing["reason"] == "ScalingUp" and "holds the join phase" in progressing["message"]
    scaled = [e["message"] for e in kube.events if e["reason"] == "Scaled"]
    assert scaled and "join phase is held until the new instances have joined" in scaled[0]

    # Once every instance is a member, the next pass releases the hold (if the watcher has not already).
    admin.members |= {"orders-1", "orders-2"}
    reconcile(ctx, "shop", "orders", {})
    assert admin.released == ["staticfleet-admin-0"] and not admin.holds
    assert "preRegistration" not in kube.group["status"]


def test_a_cooperative_group_is_pre_registered_and_held_until_a_second_after_the_last_join() -> None:
    kube, admin, ctx = steady(1)
    admin.protocol = "cooperative-sticky"  # the group chose it: the spec need not say so
    kube.group["spec"]["replicas"] = 3
    reconcile(ctx, "shop", "orders", {})
    assert admin.configs == {"staticfleet.expected.instance.ids": "orders-0,orders-1,orders-2"}
    assert admin.holds == {"staticfleet-admin-0": ("consumer", "cooperative-sticky", 120_000)}
    assert ctx.watched == [("staticfleet-admin-0", ("orders-0", "orders-1", "orders-2"))]
    assert ctx.lingers == [INCREMENTAL_LINGER_S]
    pre = kube.group["status"]["preRegistration"]
    assert pre["result"] == "Accepted" and pre["holdMemberId"] == "staticfleet-admin-0"
    assert pre["lingerMs"] == 1000 and "1 s after every instance has joined" in pre["message"]
    scaled = [e["message"] for e in kube.events if e["reason"] == "Scaled"]
    assert scaled and "join phase is held until 1 s after the new instances have joined" in scaled[0]

    # Everyone has joined: the hold is the watcher's to release a second later, not this pass's.
    admin.members |= {"orders-1", "orders-2"}
    admin.state = "PreparingRebalance"
    kube.set_pods(0, 1, 2)
    reconcile(ctx, "shop", "orders", {})
    assert not admin.released and "preRegistration" in kube.group["status"]
    # Released (by the watcher), the group settles: the pass withdraws both the hold and the config.
    admin.holds.clear()
    admin.state = "Stable"
    reconcile(ctx, "shop", "orders", {})
    assert admin.released == ["staticfleet-admin-0"] and admin.configs == {}
    assert "preRegistration" not in kube.group["status"]


def test_an_eager_group_on_apache_kafka_is_held_until_the_last_join_and_no_longer() -> None:
    kube, admin, ctx = steady(1)
    admin.accepts_configs = False
    kube.group["spec"]["replicas"] = 2
    reconcile(ctx, "shop", "orders", {})
    assert ctx.lingers == [0.0] and "lingerMs" not in kube.group["status"]["preRegistration"]
    kube.group["spec"]["assignmentStrategy"] = "cooperative-sticky"
    kube.group["spec"]["replicas"] = 3
    reconcile(ctx, "shop", "orders", {})
    assert ctx.lingers == [0.0, INCREMENTAL_LINGER_S]
    assert admin.released == ["staticfleet-admin-0"]  # the first hold, superseded


def test_a_coordinator_that_refuses_pre_registration_and_the_hold_does_not_stop_the_scale_up() -> None:
    kube, admin, ctx = steady(1)
    admin.accepts_configs = False
    admin.hold_refused = KafkaErrorResponse(
        30, "holding the join phase of shop.orders: GROUP_AUTHORIZATION_FAILED"
    )
    kube.group["spec"]["replicas"] = 3
    reconcile(ctx, "shop", "orders", {})
    assert kube.objects["StatefulSet"]["spec"]["replicas"] == 3
    assert kube.group["status"]["preRegistration"]["result"] == "Rejected"
    assert not ctx.watched
    progressing = conditions(kube)["Progressing"]
    assert progressing["reason"] == "ScalingUp" and "pre-registration not supported" in progressing["message"]
    assert "GROUP_AUTHORIZATION_FAILED" in progressing["message"]
    scaled = [e["message"] for e in kube.events if e["reason"] == "Scaled"]
    assert (
        scaled
        and "no pre-registration (the coordinator refused pre-registration (INVALID_CONFIG)" in scaled[0]
    )


def test_a_rejected_statefulset_is_reported_and_the_scale_down_state_kept() -> None:
    kube, _, ctx = steady(3)
    kube.group["spec"]["replicas"] = 1
    kube.reject_statefulset = KubeError(
        422, "StatefulSet.apps is invalid: spec.template.spec.containers[0].image"
    )
    reconcile(ctx, "shop", "orders", {})
    degraded = conditions(kube)["Degraded"]
    assert degraded["reason"] == "InvalidSpec" and "containers[0].image" in degraded["message"]
    assert kube.group["status"]["scaleDown"]["pendingInstanceIds"] == ["orders-1", "orders-2"]


def test_deletion_waits_for_the_pods_then_removes_every_member() -> None:
    kube, admin, ctx = steady(3)
    admin.configs["staticfleet.expected.instance.ids"] = "orders-0"
    body = kube.group
    with pytest.raises(Retry, match="waiting for 3 pods"):
        finalize(ctx, body, {})
    assert kube.objects["StatefulSet"]["spec"]["replicas"] == 0
    kube.set_pods()
    message = finalize(ctx, body, {})
    assert admin.removals == [["orders-0", "orders-1", "orders-2"]]
    assert admin.configs == {}
    assert "removed orders-0, orders-1, orders-2" in message
    assert reasons(kube) == ["MembersRemoved"]


def test_deletion_releases_a_join_phase_the_operator_still_holds() -> None:
    kube, admin, ctx = steady(2)
    kube.group["status"]["preRegistration"] = {
        "instanceIds": ["orders-2"],
        "result": "Rejected",
        "setAt": "2026-01-01T00:00:00Z",
        "holdMemberId": "staticfleet-admin-7",
    }
    kube.objects["StatefulSet"]["spec"]["replicas"] = 0
    kube.set_pods()
    finalize(ctx, kube.group, {})
    assert admin.released == ["staticfleet-admin-7"]


def test_deletion_with_retain_leaves_the_group_alone() -> None:
    kube, admin, ctx = steady(2)
    kube.group["spec"]["deletionPolicy"] = "Retain"
    assert "Retain" in finalize(ctx, kube.group, {})
    assert admin.removals == [] and kube.calls == []


def racing(kube: FakeKube, change: Manifest) -> list[str]:
    """Another writer changes the resource once, between a pass's read and its first status write."""
    apply = kube.apply_group_status
    raced: list[str] = []

    def write(namespace: str, name: str, status: Manifest, resource_version: str) -> Manifest:
        if not raced:
            raced.append(resource_version)
            kube.group["metadata"]["resourceVersion"] = str(int(resource_version) + 1)
            kube.group.update(copy.deepcopy(change))
        return apply(namespace, name, status, resource_version)

    kube.apply_group_status = write  # type: ignore[method-assign]
    return raced


def test_a_status_write_that_meets_a_newer_version_of_the_same_status_is_taken_again() -> None:
    kube, _, ctx = steady(3)
    kube.group["spec"]["replicas"] = 1
    raced = racing(kube, {"metadata": {**kube.group["metadata"], "finalizers": ["staticfleet.io/finalizer"]}})
    reconcile(ctx, "shop", "orders", {})
    assert raced
    assert [c for c in kube.calls if not c.startswith("annotate ")][:5] == [
        "status(scaleDown)",
        "apply StatefulSet(1)",
        "apply Service",
        "apply PodDisruptionBudget",
        "status",
    ]
    assert kube.group["status"]["scaleDown"]["pendingInstanceIds"] == ["orders-1", "orders-2"]


def test_a_status_another_writer_changed_starts_the_pass_again_from_a_fresh_read() -> None:
    kube, _, ctx = steady(3)
    kube.group["spec"]["replicas"] = 1
    status = {**kube.group["status"], "replicas": 7}
    raced = racing(kube, {"status": status})
    reconcile(ctx, "shop", "orders", {})
    assert raced
    assert kube.calls.count("status(scaleDown)") == 1, "the record is written once, by the second attempt"
    assert kube.group["status"]["scaleDown"]["pendingInstanceIds"] == ["orders-1", "orders-2"]
    assert kube.objects["StatefulSet"]["spec"]["replicas"] == 1


def test_a_refused_target_is_a_condition_and_an_event_and_nothing_is_built_or_sent() -> None:
    kube, admin, ctx = steady(3)
    kube.group["spec"]["replicas"] = 10_000_000
    reconcile(ctx, "shop", "orders", {})
    reconcile(ctx, "shop", "orders", {})
    degraded = conditions(kube)["Degraded"]
    assert degraded["reason"] == "ReplicasAboveLimit" and "10000000" in degraded["message"]
    assert reasons(kube) == ["ReplicasAboveLimit"]  # once, not every pass
    # The second pass finds the status as it would write it, and writes nothing.
    assert kube.calls == ["status"] and admin.removals == [] and admin.configs == {}
    assert kube.objects["StatefulSet"]["spec"]["replicas"] == 3


def test_a_cluster_outside_the_allowed_hosts_gets_no_request() -> None:
    kube = FakeKube(resource(kafka={"bootstrapServers": "evil.example:9092"}))
    ctx = context(kube, FakeAdmin(set()))
    ctx.limits = Limits.from_flags(1000, ["kafka"], [], None, None)
    ctx.admins = None  # type: ignore[assignment]  # any request to a cluster would fail here
    reconcile(ctx, "shop", "orders", {})
    assert conditions(kube)["Degraded"]["reason"] == "ClusterNotAllowed"
    assert kube.calls == ["status"] and "StatefulSet" not in kube.objects


def test_a_later_resource_reaching_the_same_cluster_by_another_address_is_a_conflict() -> None:
    kube = FakeKube(resource(kafka={"bootstrapServers": "kafka.shop.svc.cluster.local:9092"}))
    kube.group["metadata"]["creationTimestamp"] = "2026-11-22T11:00:00Z"
    ctx = context(kube, FakeAdmin(set()))
    first = Claim("2026-11-22T10:00:00Z", "shop", "first", "cluster-1", "kafka:9092")
    me = Claim("2026-11-22T11:00:00Z", "shop", "orders", None, "kafka.shop.svc.cluster.local:9092")
    reconcile(ctx, "shop", "orders", {"shop.orders": [first, me]})
    degraded = conditions(kube)["Degraded"]
    assert degraded["reason"] == "GroupIdConflict" and "shop/first" in degraded["message"]
    assert kube.group["status"]["clusterId"] == "cluster-1"
    assert "StatefulSet" not in kube.objects
