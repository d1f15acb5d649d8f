"""The dashboard's pure views: pods beside members, lag, the timeline and what each operation cost."""

from __future__ import annotations

from typing import Any

from staticfleet.admin.model import PartitionOffsets, lag_summary
from staticfleet.ui.views import (
    CoordinatorView,
    FleetInputs,
    Rebalance,
    alerts,
    fleet_detail,
    fleet_ids,
    fleet_summary,
    members_beside_pods,
    operations,
    partitions_moved,
)

from .fixtures import T0, event, fleet, group, iso, member, offsets, pod


def test_lag_counts_only_committed_partitions_and_names_the_worst() -> None:
    summary = lag_summary(offsets(("orders", 0, 10, 15), ("orders", 1, 3, 30), ("orders", 2, None, 7)))
    assert summary.total == 5 + 27
    assert summary.worst is not None and (summary.worst.topic, summary.worst.partition) == ("orders", 1)
    assert summary.uncommitted == 1
    assert summary.to_json()["worstPartition"] == {"topic": "orders", "partition": 1, "lag": 27}


def test_a_committed_offset_beyond_the_log_end_is_no_negative_lag() -> None:
    assert PartitionOffsets("t", 0, 12, 10).lag == 0


def test_each_pod_sits_beside_the_member_with_its_instance_id() -> None:
    described = group(
        member("orders-1", "10.0.0.2", {"orders": [2, 3]}), member("orders-0", "10.0.0.1", {"orders": [0, 1]})
    )
    rows = members_beside_pods(
        "orders", [pod("orders", 1, ip="10.0.0.2", restarts=2), pod("orders", 0)], described
    )
    assert [(r["ordinal"], r["pod"], r["instanceId"], r["partitions"]) for r in rows] == [
        (0, "orders-0", "orders-0", ["orders-0", "orders-1"]),
        (1, "orders-1", "orders-1", ["orders-2", "orders-3"]),
    ]
    assert rows[1]["restarts"] == 2 and rows[1]["host"] == "10.0.0.2" and rows[1]["memberId"] == "orders-1-m"


def test_a_member_without_a_pod_and_a_pod_without_a_member_are_both_shown() -> None:
    rows = members_beside_pods("orders", [pod("orders", 0)], group(member("orders-7", "10.9.9.9", {})))
    assert [(r["pod"], r["instanceId"]) for r in rows] == [("orders-0", None), (None, "orders-7")]
    assert [a["kind"] for a in alerts(rows, fleet())] == ["unknown-member"]


def test_a_member_held_from_another_address_than_its_pod_is_a_duplicate_instance_alert() -> None:
    rows = members_beside_pods(
        "orders", [pod("orders", 0, ip="10.0.0.1")], group(member("orders-0", "10.0.0.66", {"orders": [0]}))
    )
    (found,) = alerts(rows, fleet())
    assert found["kind"] == "duplicate-instance" and "10.0.0.66" in found["message"]
    # A pod at a loopback address shares its machine's network: its consumer may come from any of them.
    for ip in ("127.16.0.9", "::1"):
        rows = members_beside_pods(
            "orders", [pod("orders", 0, ip=ip)], group(member("orders-0", "127.0.0.1", {"orders": [0]}))
        )
        assert alerts(rows, fleet()) == []


def test_a_pod_that_exited_fenced_is_an_alert() -> None:
    rows = members_beside_pods("orders", [pod("orders", 0, exit_code=82)], group())
    assert [a["kind"] for a in alerts(rows, fleet())] == ["fenced"]


def test_partitions_moved_counts_owned_partitions_whose_owner_changed() -> None:
    before = {("t", 0): "a", ("t", 1): "a", ("t", 2): "b"}
    after = {("t", 0): "a", ("t", 1): "b", ("t", 2): "b", ("t", 3): "b"}
    assert partitions_moved(before, after) == 1
    assert partitions_moved({}, after) == 0, "a first assignment moves nothing"


def test_operations_come_from_scaled_events_revisions_and_deletion_in_time_order() -> None:
    body = fleet()
    body["metadata"]["deletionTimestamp"] = iso(T0 + 90_000)
    events = [
        event("Scaled", "scaling down from 3 to 2", T0 + 60_000),
        event(
            "Scaled", "scaling up from 0 to 3; new instances pre-registered with the coordinator", T0 + 1_000
        ),
        event("MembersRemoved", "scale-down: removed orders-2", T0 + 62_000),
    ]
    revisions = [
        {"revision": 2, "metadata": {"creationTimestamp": iso(T0 + 30_000)}},
        {"revision": 1, "metadata": {"creationTimestamp": iso(T0)}},
    ]
    ops = operations(body, events, revisions)
    assert [(o["kind"], o.get("from"), o.get("to")) for o in ops] == [
        ("create", 0, 3),
        ("rollout", None, None),
        ("scale down", 3, 2),
        ("delete", None, None),
    ]


def test_a_scale_whose_event_is_posted_after_its_rebalance_still_owns_it() -> None:
    # The operator saw the new size at +60 s; its Scaled Event was posted at +63 s, after the dashboard
    # had already observed the new assignment at +61.5 s.
    body = fleet(
        lastScale={
            "fromReplicas": 2,
            "toReplicas": 1,
            "startedAt": iso(T0 + 60_000),
            "completedAt": iso(T0 + 64_000),
        }
    )
    inputs = FleetInputs(
        body=body,
        now_ms=T0 + 70_000,
        events=[
            event("Scaled", "scaling up from 0 to 2", T0 + 1_000),
            event("Scaled", "scaling down from 2 to 1", T0 + 63_000),
        ],
        observed=(
            Rebalance(None, T0 + 2_000, "observed", None, 2, 0, "observed"),
            Rebalance(None, T0 + 61_500, "observed", None, 1, 3, "observed"),
        ),
    )
    create, scale_down = fleet_detail(inputs)["operations"]
    assert (create["rebalances"], scale_down["rebalances"]) == (1, 1)
    assert (scale_down["startedMs"], scale_down["completedMs"], scale_down["partitionsMoved"]) == (
        T0 + 60_000,
        T0 + 64_000,
        3,
    )


def test_an_older_scale_of_the_same_sizes_is_not_taken_for_the_last_one() -> None:
    body = fleet(lastScale={"fromReplicas": 2, "toReplicas": 1, "startedAt": iso(T0 + 60_000)})
    events = [event("Scaled", "scaling down from 2 to 1", T0 + 10_000)]  # the new one's Event is not out
    (older,) = operations(body, events, [])
    assert older["startedMs"] == T0 + 10_000 and "completedMs" not in older


def test_each_rebalance_is_charged_to_the_operation_before_it() -> None:
    body = fleet(lastScale={"startedAt": iso(T0 + 60_000), "completedAt": iso(T0 + 64_000)})
    history = (
        Rebalance(T0 + 1_500, T0 + 2_000, "initial join", 1, 3),
        Rebalance(T0 + 62_000, T0 + 62_850, "removed orders-2 by admin request", 2, 2),
    )
    inputs = FleetInputs(
        body=body,
        now_ms=T0 + 70_000,
        events=[
            event("Scaled", "scaling up from 0 to 3", T0 + 1_000),
            event("Scaled", "scaling down from 3 to 2", T0 + 60_000),
        ],
        coordinator=CoordinatorView("Stable", 2, "orders-0", 2, None, history),
        coordinator_api="http://coordinator:8080",
        moved_by_generation={2: 2},
    )
    detail = fleet_detail(inputs)
    create, scale_down = detail["operations"]
    assert (create["rebalances"], create["rebalanceMs"], create["generations"]) == (1, 500, [1])
    assert (scale_down["rebalances"], scale_down["rebalanceMs"], scale_down["partitionsMoved"]) == (1, 850, 2)
    assert scale_down["completedMs"] == T0 + 64_000
    assert [r["reason"] for r in detail["rebalances"]] == [
        "initial join",
        "removed orders-2 by admin request",
    ]
    assert detail["rebalances"][1]["durationMs"] == 850
    assert detail["group"]["rebalancesLastHour"] == 2 and detail["group"]["generation"] == 2


def test_a_coordinator_that_does_not_answer_is_shown_as_down_with_why() -> None:
    inputs = FleetInputs(
        body=fleet(),
        now_ms=T0,
        group_error="coordinator at kafka:9092 unreachable",
        offsets_error="the cluster did not answer",
        coordinator_api="http://coordinator:8080",
        coordinator_error="coordinator API unreachable",
    )
    summary = fleet_summary(inputs)
    assert summary["coordinator"] == {
        "up": False,
        "error": "coordinator at kafka:9092 unreachable",
        "api": {"url": "http://coordinator:8080", "up": False, "error": "coordinator API unreachable"},
    }
    assert summary["group"]["state"] is None and summary["lag"] is None


def test_without_the_coordinator_history_the_observed_rebalances_are_shown() -> None:
    observed = (Rebalance(None, T0 + 5_000, "observed", None, 2, 3, source="observed"),)
    detail = fleet_detail(FleetInputs(body=fleet(), now_ms=T0 + 6_000, observed=observed))
    assert detail["group"]["rebalancesSource"] == "observed"
    assert detail["rebalances"][0]["partitionsMoved"] == 3 and detail["rebalances"][0]["durationMs"] is None


def test_the_same_fleet_read_at_two_moments_gives_the_same_page() -> None:
    """The stream sends a snapshot only when it changed: the clock alone must not change it."""
    history = (Rebalance(T0 + 1_500, T0 + 2_000, "member-joined", 1, 3),)
    view = CoordinatorView("Stable", 1, "orders-0", 1, None, history)
    first = fleet_detail(FleetInputs(body=fleet(), now_ms=T0 + 10_000, coordinator=view))
    later = fleet_detail(FleetInputs(body=fleet(), now_ms=T0 + 20_000, coordinator=view))
    assert first == later


def test_the_coordinator_view_is_read_with_the_coordinators_own_json_reader() -> None:
    from staticfleet.coordinator.group import RebalanceRecord
    from staticfleet.coordinator.group_view import rebalance_to_json
    from staticfleet.ui.sources import parse_coordinator_view

    record = RebalanceRecord(
        generation=4, reason="member-removed", started_ms=T0, completed_ms=T0 + 850, members=2
    )
    view = parse_coordinator_view(
        {
            "state": "Stable",
            "generation": 4,
            "leaderInstanceId": "orders-0",
            "rebalances": 4,
            "rebalanceInProgress": None,
            "recentRebalances": [rebalance_to_json(record)],
        }
    )
    (rebalance,) = view.history
    assert (rebalance.generation, rebalance.reason, rebalance.duration_ms, rebalance.members) == (
        4,
        "member-removed",
        850,
        2,
    )
    assert view.rebalance_in_progress is None and view.leader_instance_id == "orders-0"


def test_a_cluster_the_operator_refuses_is_never_contacted_by_the_dashboard() -> None:
    import asyncio
    from typing import cast

    from staticfleet.kube.kubeapi import KubeApi
    from staticfleet.kube.spec import GroupSpec
    from staticfleet.ui.sources import LiveSource

    def connect(spec: GroupSpec) -> Any:
        raise AssertionError(f"connected to {spec.bootstrap_servers}")

    why = "bootstrap servers kafka:9092 are not among the allowed ones"
    source = LiveSource(cast(KubeApi, None), connect=connect, refusal=lambda spec: why)
    inputs = asyncio.run(source.read(fleet(), detail=True))
    assert inputs.group_error == why and inputs.group is None and not inputs.pods


def test_a_fleets_page_reads_the_resource_again_after_its_events() -> None:
    """The operator writes a pass's status, then posts its Events. A page that showed the Scaled Event
    beside the status from before it would start the scale at the Event, after the rebalance it caused:
    the resource is read again once the Events are in, and its lastScale anchors the scale."""
    import asyncio
    from typing import cast

    from staticfleet.kube.kubeapi import KubeApi
    from staticfleet.kube.spec import GroupSpec, SpecError
    from staticfleet.ui.sources import LiveSource

    before = fleet(lastScale={"fromReplicas": 0, "toReplicas": 2, "startedAt": iso(T0)})
    after = fleet(lastScale={"fromReplicas": 2, "toReplicas": 1, "startedAt": iso(T0 + 60_000)})
    reads: list[str] = []

    class Kube:
        def list_pods(self, namespace: str, selector: str) -> list[Any]:
            reads.append("pods")
            return []

        def request(self, method: str, path: str, query: Any = None) -> dict[str, Any]:
            reads.append("events")
            return {"items": [event("Scaled", "scaling down from 2 to 1", T0 + 63_000)]}

        def list_items(self, path: str, selector: str | None = None) -> list[Any]:
            reads.append("revisions")
            return []

        def get(self, path: str) -> dict[str, Any]:
            reads.append(f"get {path}")
            return after

    def connect(spec: GroupSpec) -> Any:
        raise SpecError("no cluster in this test")

    inputs = asyncio.run(LiveSource(cast(KubeApi, Kube()), connect=connect).read(before, detail=True))
    assert reads.index("events") < reads.index(
        "get /apis/staticfleet.io/v1alpha1/namespaces/shop/staticconsumergroups/orders"
    )
    assert inputs.body is after
    (scale_down,) = fleet_detail(inputs)["operations"]
    assert scale_down["startedMs"] == T0 + 60_000, "anchored to the lastScale the Event follows"


def test_the_coordinator_view_is_read_with_the_coordinators_bearer_token(tmp_path: Any) -> None:
    """A coordinator started with --http-token-file answers /api/* only with its token; the dashboard
    sends the token the operator would send, and says why when it has none."""
    import asyncio
    from typing import cast

    from aiohttp import web

    from staticfleet.broker.security.http_auth import TokenSource, bearer_middleware
    from staticfleet.kube.kubeapi import KubeApi
    from staticfleet.ui.sources import LiveSource

    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")

    async def group(request: web.Request) -> web.Response:
        return web.json_response({"state": "Stable", "generation": 7, "rebalances": 7})

    async def scenario() -> tuple[Any, Any]:
        app = web.Application(middlewares=[bearer_middleware(TokenSource(token_file))])
        app.add_routes([web.get("/api/groups/{group_id}", group)])
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        base = f"http://127.0.0.1:{port}"
        source = LiveSource(cast(KubeApi, None))
        try:
            with_token = await source._coordinator(base, "shop.orders", "s3cret")
            without = await source._coordinator(base, "shop.orders")
        finally:
            await source.close()
            await runner.cleanup()
        return with_token, without

    (view, error), (no_view, refusal) = asyncio.run(scenario())
    assert error is None and view is not None and view.generation == 7
    assert no_view is None and refusal is not None and "HTTP 401" in refusal


def test_the_live_group_and_the_status_are_both_given_and_whether_they_agree() -> None:
    """The summary reads the group now; the conditions come from the status the operator last wrote.
    While a rebalance has just ended they differ, and the page says which is which."""
    behind = fleet(group={"state": "PreparingRebalance", "generation": 1})
    view = CoordinatorView("Stable", 2, "orders-0", 2, None, ())
    summary = fleet_summary(FleetInputs(body=behind, now_ms=T0, group=group(), coordinator=view))
    assert (summary["group"]["state"], summary["group"]["generation"]) == ("Stable", 2)
    assert summary["group"]["status"] == {"state": "PreparingRebalance", "generation": 1}
    assert summary["group"]["statusAgrees"] is False

    caught_up = fleet(group={"state": "Stable", "generation": 2})
    summary = fleet_summary(FleetInputs(body=caught_up, now_ms=T0, group=group(), coordinator=view))
    assert summary["group"]["statusAgrees"] is True
    # Without a generation from the coordinator (Apache Kafka), the states alone are compared.
    summary = fleet_summary(FleetInputs(body=caught_up, now_ms=T0, group=group(state="CompletingRebalance")))
    assert summary["group"]["statusAgrees"] is False


def two_per_pod(replicas: int = 2) -> dict[str, Any]:
    body = fleet(replicas=replicas)
    body["spec"]["membersPerPod"] = 2
    return body


def test_a_pod_of_two_members_sits_beside_both_and_names_the_one_missing() -> None:
    described = group(
        member("orders-0-2", "10.0.0.1", {"orders": [1]}),
        member("orders-0-1", "10.0.0.1", {"orders": [0]}),
        member("orders-1-1", "10.0.0.2", {"orders": [2]}),
    )
    pods = [pod("orders", 1, ip="10.0.0.2"), pod("orders", 0)]
    rows = members_beside_pods("orders", pods, described, fleet_ids(two_per_pod()))
    assert [(r["pod"], r["podRows"], r["expectedInstanceId"], r["instanceId"]) for r in rows] == [
        ("orders-0", 2, "orders-0-1", "orders-0-1"),
        ("orders-0", 0, "orders-0-2", "orders-0-2"),
        ("orders-1", 2, "orders-1-1", "orders-1-1"),
        ("orders-1", 0, "orders-1-2", None),
    ]
    assert rows[1]["partitions"] == ["orders-1"]
    assert alerts(rows, two_per_pod()) == []


def test_members_of_a_two_member_fleet_that_no_pod_runs_say_which_pod_they_are_named_after() -> None:
    described = group(
        member("orders-0-1", "10.0.0.1", {}),
        member("orders-0-2", "10.0.0.1", {}),
        member("orders-0", "10.0.0.1", {}),  # the pod's own id: left from one member per pod
        member("orders-5-1", "10.0.0.9", {}),  # a departed pod's
        member("billing-0", "10.0.0.9", {}),
    )
    body = two_per_pod(replicas=1)
    rows = members_beside_pods("orders", [pod("orders", 0)], described, fleet_ids(body))
    strays = [(r["instanceId"], r["namedPod"]) for r in rows if r["pod"] is None]
    assert strays == [("orders-0", "orders-0"), ("orders-5-1", "orders-5"), ("billing-0", None)]
    messages = [a["message"] for a in alerts(rows, body) if a["kind"] == "unknown-member"]
    assert "named after pod orders-0 but is not one of the members it runs" in messages[0]
    assert "named after pod orders-5, which this fleet does not run" in messages[1]
    assert "has no pod in this fleet" in messages[2]


def test_the_fleet_page_pairs_pods_and_members_by_the_resources_own_naming_rule() -> None:
    body = fleet(replicas=1)
    body["spec"]["instanceIdTemplate"] = "{namespace}-{pod}"
    described = group(member("shop-orders-0", "10.0.0.1", {"orders": [0]}))
    detail = fleet_detail(FleetInputs(body=body, now_ms=T0, pods=[pod("orders", 0)], group=described))
    assert [(m["pod"], m["instanceId"]) for m in detail["members"]] == [("orders-0", "shop-orders-0")]
