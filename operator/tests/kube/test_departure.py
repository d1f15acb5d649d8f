"""The departure handshake (departure.py): which pods answer it, and when the departing pods leave."""

from __future__ import annotations

from typing import Any

from staticfleet.kube import departure
from staticfleet.kube.departure import Endpoint, endpoint, every_endpoint, hasten

MARK_MS = 1_000_000_000


def pod(name: str, ip: str | None = "10.1.0.7", *ports: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "sidecar"}, {"name": "consumer", "ports": list(ports)}]},
        "status": {"podIP": ip} if ip else {},
    }


DEPARTURE_PORT = {"name": "departure", "containerPort": 8080}


def test_a_pod_answers_on_its_address_and_the_container_port_named_departure() -> None:
    assert endpoint(
        pod("p-1", "10.1.0.7", {"name": "http", "containerPort": 80}, DEPARTURE_PORT)
    ) == Endpoint("p-1", "10.1.0.7", 8080)
    assert endpoint(pod("p-1", "10.1.0.7", {"name": "http", "containerPort": 8080})) is None
    assert endpoint(pod("p-1", None, DEPARTURE_PORT)) is None  # not given an address yet


def test_the_pods_leave_sooner_together_or_not_at_all() -> None:
    both = every_endpoint([pod("p-1", "10.1.0.1", DEPARTURE_PORT), pod("p-2", "10.1.0.2", DEPARTURE_PORT)])
    assert [e.pod for e in both] == ["p-1", "p-2"]
    assert every_endpoint([pod("p-1", "10.1.0.1", DEPARTURE_PORT), pod("p-2", "10.1.0.2")]) == ()
    assert every_endpoint([]) == ()


class FakePods:
    """Pods that read the mark at given moments, and take or refuse a sooner moment."""

    def __init__(
        self,
        read_at: dict[str, float],
        refuses: frozenset[str] = frozenset(),
        silent: frozenset[str] = frozenset(),
    ) -> None:
        self.read_at = read_at
        self.refuses = refuses
        self.silent = silent
        self.now = MARK_MS / 1000 - 1.0  # the mark is one second ahead
        self.sent: dict[str, tuple[int, int]] = {}
        self.told: dict[str, int] = {}  # the pods that stay, and the moment each was told to join again

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def read(self, target: Endpoint) -> int | departure.NoAnswer | None:
        if target.pod in self.silent:
            return departure.NO_ANSWER
        return MARK_MS if self.now >= self.read_at[target.pod] else None

    def send(self, target: Endpoint, mark_ms: int, leave_at_ms: int) -> bool:
        self.sent[target.pod] = (mark_ms, leave_at_ms)
        return target.pod not in self.refuses

    def rejoin(self, target: Endpoint, mark_ms: int, rejoin_at_ms: int) -> bool:
        assert mark_ms == MARK_MS
        self.told[target.pod] = rejoin_at_ms
        return target.pod not in self.refuses

    def hasten(
        self, targets: list[Endpoint], held: frozenset[str] = frozenset(), staying: tuple[Endpoint, ...] = ()
    ) -> departure.Handshake:
        return hasten(
            targets,
            MARK_MS,
            held=held,
            staying=staying,
            read=self.read,
            send=self.send,
            rejoin=self.rejoin,
            clock=self.clock,
            sleep=self.sleep,
        )


TARGETS = [Endpoint("p-1", "10.1.0.1", 8080), Endpoint("p-2", "10.1.0.2", 8080)]


def test_once_every_pod_has_read_the_mark_all_get_one_moment_lead_s_ahead() -> None:
    start = MARK_MS / 1000 - 1.0
    pods = FakePods({"p-1": start + 0.05, "p-2": start + 0.15})
    handshake = pods.hasten(TARGETS)
    sooner = handshake.sooner
    assert handshake.result == "sooner" and sooner is not None
    # p-2 read it within a poll of 0.15 s; the moment is LEAD_S after that, far before the mark's.
    assert start + 0.15 + departure.LEAD_S <= sooner <= start + 0.15 + departure.POLL_S + departure.LEAD_S
    assert pods.sent == {"p-1": (MARK_MS, round(sooner * 1000)), "p-2": (MARK_MS, round(sooner * 1000))}


def test_pods_handed_their_mark_are_not_asked_and_get_their_moment_at_once() -> None:
    start = MARK_MS / 1000 - 1.0
    never = {"p-1": float("inf"), "p-2": float("inf")}  # no kubelet has shown the mark yet
    pods = FakePods(never)
    handshake = pods.hasten(TARGETS, held=frozenset({"p-1", "p-2"}))
    assert handshake == departure.Handshake("sooner", start + departure.LEAD_S)
    # One handed, the other read from its file once its kubelet shows it.
    pods = FakePods({"p-1": float("inf"), "p-2": start + 0.05})
    handshake = pods.hasten(TARGETS, held=frozenset({"p-1"}))
    sooner = handshake.sooner
    assert handshake.result == "sooner" and sooner is not None
    assert start + 0.05 + departure.LEAD_S <= sooner <= start + 0.05 + departure.POLL_S + departure.LEAD_S


def test_a_pod_that_has_not_read_the_mark_in_time_keeps_everyone_on_the_marks_moment() -> None:
    start = MARK_MS / 1000 - 1.0
    pods = FakePods({"p-1": start, "p-2": start + 0.95})  # its kubelet is slow
    assert pods.hasten(TARGETS) == departure.Handshake("unread", pods=("p-2",))
    assert pods.sent == {}  # nobody was given a sooner moment
    assert pods.now <= MARK_MS / 1000 - 2 * departure.LEAD_S + departure.POLL_S


def test_a_pod_that_never_answers_is_named_apart_from_one_whose_kubelet_is_slow() -> None:
    start = MARK_MS / 1000 - 1.0
    pods = FakePods({"p-1": start + 0.95, "p-2": start}, silent=frozenset({"p-2"}))
    assert pods.hasten(TARGETS) == departure.Handshake("unanswered", pods=("p-2",))
    assert pods.sent == {}


def test_a_pod_that_refuses_the_sooner_moment_makes_the_step_wait_for_the_marks() -> None:
    start = MARK_MS / 1000 - 1.0
    pods = FakePods({"p-1": start, "p-2": start}, refuses=frozenset({"p-2"}))
    assert pods.hasten(TARGETS, staying=STAYING) == departure.Handshake("refused", pods=("p-2",))
    assert set(pods.sent) == {"p-1", "p-2"}
    assert pods.told == {}  # no departure is certain: the pods that stay join again at their heartbeat


STAYING = (Endpoint("p-0", "10.1.0.3", 8080), Endpoint("p-3", "10.1.0.4", 8080))


def test_once_every_departing_pod_took_the_moment_the_pods_that_stay_are_told_a_latest_moment() -> None:
    start = MARK_MS / 1000 - 1.0
    pods = FakePods({"p-1": start, "p-2": start}, refuses=frozenset({"p-3"}))  # p-3 cannot (cooperative)
    handshake = pods.hasten(TARGETS, held=frozenset({"p-1", "p-2"}), staying=STAYING)
    sooner = start + departure.LEAD_S
    assert handshake == departure.Handshake("sooner", sooner, rejoining=("p-0",), staying=2)
    latest_ms = int(sooner * 1000) + int(departure.REJOIN_LATEST_S * 1000)
    assert pods.told == {"p-0": latest_ms, "p-3": latest_ms}
    message = handshake.message(["p-1", "p-2"], MARK_MS / 1000)
    assert message.endswith("1 of the 2 pods that stay join again right after")
    none_can = departure.Handshake("sooner", sooner, staying=2).message(["p-1", "p-2"], MARK_MS / 1000)
    assert none_can.endswith("; the 2 pods that stay cannot join again on demand")
    # None to tell: the message says nothing of them.
    assert "stay" not in pods.hasten(TARGETS, held=frozenset({"p-1", "p-2"})).message(["p-1"], MARK_MS / 1000)


class FakeGroup:
    """A group described at a fake clock: Stable with the departing members until `rebalancing_at`."""

    def __init__(self, rebalancing_at: float, state: str = "PreparingRebalance") -> None:
        self.now = 100.0
        self.rebalancing_at = rebalancing_at
        self.state = state
        self.described = 0

    def describe(self) -> tuple[str, frozenset[str]] | None:
        self.described += 1
        if self.now < self.rebalancing_at:
            return "Stable", frozenset({"p-0", "p-1"})
        return self.state, frozenset({"p-0"} if self.state == "Stable" else {"p-0", "p-1"})

    def sleep(self, seconds: float) -> None:
        self.now += seconds


Told = dict[str, tuple[int, int]]


def rejoin_when_rebalancing(group: FakeGroup, told: Told) -> int:
    def rejoin(target: Endpoint, mark_ms: int, rejoin_at_ms: int) -> bool:
        told[target.pod] = (mark_ms, rejoin_at_ms)
        return target.pod != "p-3"

    return departure.rejoin_when_rebalancing(
        group.describe, ["p-1"], STAYING, MARK_MS, rejoin, clock=lambda: group.now, sleep=group.sleep
    )


def test_the_pods_that_stay_join_again_as_soon_as_the_group_is_seen_rebalancing_not_before() -> None:
    group, told = FakeGroup(rebalancing_at=100.045), Told()
    assert rejoin_when_rebalancing(group, told) == 1
    assert group.described == 6  # every 10 ms from the moment until the LeaveGroups started the rebalance
    now_ms = int(group.now * 1000)
    assert 100_045 <= now_ms <= 100_050 and told == {"p-0": (MARK_MS, now_ms), "p-3": (MARK_MS, now_ms)}
    # Already Stable again without the departed member (its heartbeat found the rebalance): told all the
    # same, and a member that has rebalanced since it was first told does nothing.
    group, told = FakeGroup(rebalancing_at=100.0, state="Stable"), Told()
    assert rejoin_when_rebalancing(group, told) == 1 and group.described == 1


def test_a_group_never_seen_rebalancing_or_not_described_leaves_the_pods_their_latest_moment() -> None:
    group, told = FakeGroup(rebalancing_at=float("inf")), Told()
    assert rejoin_when_rebalancing(group, told) == 0 and told == {}
    assert group.now >= 100 + departure.REJOIN_LATEST_S - departure.REBALANCING_POLL_S

    def unreachable() -> tuple[str, frozenset[str]] | None:
        return None

    assert departure.rejoin_when_rebalancing(unreachable, ["p-1"], STAYING, MARK_MS, lambda *_: True) == 0


def test_a_pod_that_does_not_answer_reads_as_unmarked() -> None:
    closed = Endpoint("p-1", "127.0.0.1", 9)  # the discard port: nothing listens there
    assert departure.read_mark(closed) is departure.NO_ANSWER
    assert departure.send_sooner(closed, MARK_MS, MARK_MS - 500) is False
    assert departure.hand_mark(closed, "key", MARK_MS) is departure.NO_ANSWER
    assert departure.hand_marks([closed], "key", MARK_MS) == frozenset()


def test_the_event_says_how_much_sooner_or_which_pods_kept_the_marks_moment() -> None:
    mark_s = MARK_MS / 1000
    pods = ["p-1", "p-2"]
    assert departure.Handshake("sooner", mark_s - 0.62).message(pods, mark_s) == (
        "p-1, p-2 leave together 0.62 s before their mark's moment"
    )
    assert departure.Handshake("unread", pods=("p-2",)).message(pods, mark_s) == (
        "p-2 had not read the mark in time: the departing pods leave at their mark's moment"
    )
    assert "did not take the sooner moment" in departure.Handshake("refused", pods=("p-1",)).message(
        pods, mark_s
    )


class SettlingGroup:
    """A group described at a fake clock: Stable with the departing members until they leave, then
    rebalancing, then Stable without them; None (undescribable) from `gone_at` on."""

    def __init__(self, left_at: float, stable_at: float, gone_at: float = float("inf")) -> None:
        self.left_at, self.stable_at, self.gone_at = left_at, stable_at, gone_at
        self.now = 0.0
        self.described = 0

    def describe(self) -> tuple[str, frozenset[str]] | None:
        self.described += 1
        if self.now >= self.gone_at:
            return None
        if self.now < self.left_at:
            return "Stable", frozenset({"p-0", "p-1", "p-2"})
        return ("Stable" if self.now >= self.stable_at else "PreparingRebalance"), frozenset({"p-0"})

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, bound_s: float) -> bool:
        return departure.wait_until_settled(
            self.describe, ("p-1", "p-2"), bound_s, clock=lambda: self.now, sleep=self.sleep
        )


def test_the_pods_stop_once_the_group_is_stable_without_the_departed_members() -> None:
    group = SettlingGroup(left_at=0.1, stable_at=0.6)
    assert group.wait(1.5)
    # Stable before the leave counts for nothing: it waited for the rebalance after it, then for the
    # members left behind to fetch what they were given.
    settled = group.now - departure.HANDOVER_S
    assert 0.6 <= settled <= 0.6 + departure.SETTLED_POLL_S + 1e-9
    assert group.described == 1 + int(settled / departure.SETTLED_POLL_S + 0.5)  # none after it settled


def test_a_group_that_does_not_settle_in_time_or_cannot_be_described_holds_the_pods_no_longer() -> None:
    slow = SettlingGroup(left_at=0.1, stable_at=9.0)
    assert not slow.wait(1.5)
    assert 1.5 - departure.SETTLED_POLL_S <= slow.now <= 1.5
    unreachable = SettlingGroup(left_at=0.1, stable_at=0.6, gone_at=0.2)
    assert not unreachable.wait(1.5)
    assert unreachable.now < 0.3


def test_the_wait_is_two_heartbeats_and_a_second_at_most_three_seconds() -> None:
    assert departure.settle_bound_s(250) == 1.5
    assert departure.settle_bound_s(None) == departure.SETTLED_BOUND_S == 3.0  # the clients' 3 s default
