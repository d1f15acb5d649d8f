"""The departure handshake: leaving together sooner than the mark's moment.

A scale-down marks the pods it takes away with a moment to leave (steps.MarkDeparting), far enough ahead
for the slowest kubelet to show the mark in every pod's downwardAPI file. A pod whose container declares
a port named `departure` also answers over HTTP which mark it has read (GET /departure) and accepts a
sooner moment for that mark (POST /departure). Once every departing pod has read the mark, the operator
names one moment LEAD_S ahead and they all leave then, together, as they would have at the mark's
moment: one rebalance, without the margin.

The operator need not wait for the kubelet to show the mark: it also hands each pod the mark itself,
before it writes the annotation (POST /departure {"mark", "signature"}). The signature is an
HMAC-SHA256, under the fleet's departure key, of the pod's name and the mark; the key is in a Secret the
operator makes for the fleet (owned by it) and each consumer container reads from STATICFLEET_DEPARTURE_KEY.
A pod that checks the signature holds that mark as if its file showed it, so the sooner moment can follow
at once, and the annotations are written only once the pods have left and the pods that stay were told
to join again (steps.MarkDeparting). A pod without the key, or one that does not check, answers
otherwise and is asked for the mark its file holds, as before.

Once every departing pod has taken the sooner moment, the pods that stay are told to join the group again
(POST /departure {"mark", "rejoinAt", "signature"}, signed the same way): a member that stays learns of the
rebalance the departures start from its next heartbeat, up to a heartbeat interval later, and the join
phase waits for the last of them. Told, it joins right away instead, once the operator has seen the group
rebalancing: it is first told a latest moment (REJOIN_LATEST_S after the departing pods', which it keeps
to only if no rebalance has found it by then), and polls briefly until then; then, as soon as a
DescribeGroups shows the departures' rebalance under way, the moment now. Not sooner: a static member
that joins a Stable group gets its assignment back and starts nothing (the group's leader starts a
rebalance of its own), and a LeaveGroup goes out tens of milliseconds after its consumer decides to leave
on a busy node. A consumer that cannot join again on demand (librdkafka with a cooperative assignor)
refuses, and its members wait for their heartbeat as before.

Nothing here can make a pod leave that the operator has not marked: a pod takes the sooner moment only
for a mark its own file holds or that came signed with its fleet's key. A pod that does not answer, or
answers late, keeps the mark's moment; should some pods confirm the sooner moment and others not, the
step still waits for the mark's moment before the StatefulSet shrinks (a second rebalance at worst, never
a lost departure).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum

from staticfleet.kube.spec import Manifest

log = logging.getLogger(__name__)

PORT_NAME = "departure"
PATH = "/departure"
# The sooner moment is this far ahead when it is sent: the requests to every pod go out at once (ten
# pods of a fleet of twenty on a busy two-core node: all answered within about 25 ms), and a consumer
# looks at its mark and its moment between polls (a librdkafka client serves no other call on a consumer
# while its poll waits, so nothing can cut that wait short): the example consumer's polls are 0.1 s long,
# 0.01 s while it holds a mark. A pod the request reaches after the moment leaves at once, a little after
# the others, and may meet the rebalance they started (a second one: 0.03 s was too short on Apache
# Kafka); one it does not reach keeps the mark's.
LEAD_S = 0.07
# The latest moment the pods that stay are first told to join again, this long after the departing pods'
# moment; the operator brings it forward as soon as it sees the group rebalancing. By then any member still
# in the group has found the rebalance by its heartbeat (and drops the moment), unless none has started.
REJOIN_LATEST_S = 1.0
# How often the group is described from the departing pods' moment until it is seen rebalancing.
REBALANCING_POLL_S = 0.01
# Between rounds of asking which mark each pod has read (a kubelet shows an annotation within a second).
POLL_S = 0.02
REQUEST_TIMEOUT_S = 0.25
THREADS = 16
SOONER, UNREAD, UNANSWERED, REFUSED = "sooner", "unread", "unanswered", "refused"

# The fleet's departure key: a Secret the operator makes for each fleet (owned by it), which every
# consumer container reads as an environment variable.
KEY_SECRET_SUFFIX = "-departure-key"
KEY_SECRET_ENTRY = "key"
KEY_ENV = "STATICFLEET_DEPARTURE_KEY"


def key_secret_name(fleet: str) -> str:
    return f"{fleet}{KEY_SECRET_SUFFIX}"


def fleet_key(signing_key: bytes, namespace: str, name: str, uid: str) -> str:
    """The fleet's departure key, derived from the operator's signing key and the resource's identity:
    every replica of the operator derives the same one without reading a Secret back, and a resource
    created again under the same name gets another."""
    return hmac.new(signing_key, f"{namespace}/{name}/{uid}".encode(), hashlib.sha256).hexdigest()


def _hmac(key: str, *parts: object) -> str:
    """HMAC-SHA256 under the fleet's key of the parts, one per line (the first names what is signed)."""
    return hmac.new(key.encode(), "\n".join(map(str, parts)).encode(), hashlib.sha256).hexdigest()


def signature(key: str, pod: str, mark_ms: int) -> str:
    """What a pod checks before it holds a mark it was handed: HMAC-SHA256 of its name and the mark."""
    return _hmac(key, "departure", pod, mark_ms)


def rejoin_signature(key: str, pod: str, mark_ms: int, rejoin_at_ms: int) -> str:
    """What a pod that stays checks before it joins again at a moment: HMAC-SHA256 of its name, the
    departing pods' mark and the moment, apart from a mark's (it never makes a pod leave)."""
    return _hmac(key, "rejoin", pod, mark_ms, rejoin_at_ms)


class NoAnswer(Enum):
    """A pod that did not answer the handshake (nothing listens, a NetworkPolicy drops it, a timeout)."""

    NO_ANSWER = "no answer"


NO_ANSWER = NoAnswer.NO_ANSWER


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one departing pod answers the handshake."""

    pod: str
    host: str
    port: int


def departure_port(container: Manifest) -> int | None:
    """The container's port named `departure`: where it answers the handshake, if it does."""
    for port in container.get("ports") or []:
        if port.get("name") == PORT_NAME and isinstance(port.get("containerPort"), int):
            return int(port["containerPort"])
    return None


def answers_handshake(pod_spec: Manifest) -> bool:
    return any(departure_port(c) is not None for c in pod_spec.get("containers") or [])


def endpoint(pod: Manifest) -> Endpoint | None:
    """The pod's handshake endpoint: its IP and the container port named `departure`, if it has both."""
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        return None
    for container in (pod.get("spec") or {}).get("containers") or []:
        port = departure_port(container)
        if port is not None:
            return Endpoint(str(pod["metadata"]["name"]), str(ip), port)
    return None


def every_endpoint(pods: Iterable[Manifest]) -> tuple[Endpoint, ...]:
    """The endpoints of all these pods, or none if any of them has none: they leave together or not at all
    sooner."""
    found = [endpoint(pod) for pod in pods]
    return tuple(e for e in found if e is not None) if all(found) else ()


# -- the wire ------------------------------------------------------------------------------------------------


def _request(
    target: Endpoint, method: str, body: Mapping[str, int | str] | None = None
) -> tuple[int, Manifest]:
    """One request, without proxies (the pod network is reached directly); (status, JSON answer)."""
    connection = http.client.HTTPConnection(target.host, target.port, timeout=REQUEST_TIMEOUT_S)
    try:
        payload = None if body is None else json.dumps(body).encode()
        headers = {} if payload is None else {"Content-Type": "application/json"}
        connection.request(method, PATH, body=payload, headers=headers)
        answer = connection.getresponse()
        data = answer.read(4096)
        try:
            value = json.loads(data) if data else {}
        except ValueError:
            value = {}
        return answer.status, value if isinstance(value, dict) else {}
    finally:
        connection.close()


def read_mark(target: Endpoint) -> int | NoAnswer | None:
    """The mark (epoch ms) the pod has read, None if it has read none, NO_ANSWER if it did not answer."""
    try:
        status, value = _request(target, "GET")
    except (OSError, http.client.HTTPException):
        return NO_ANSWER
    mark = value.get("mark")
    if status != 200:
        return NO_ANSWER
    return mark if isinstance(mark, int) else None


def _echoed(target: Endpoint, body: Mapping[str, int | str], field: str) -> bool | NoAnswer:
    """POSTs `body`; True if the pod answered 200 with the same `field`, NO_ANSWER if it did not answer."""
    try:
        status, value = _request(target, "POST", body)
    except (OSError, http.client.HTTPException):
        return NO_ANSWER
    return status == 200 and value.get(field) == body[field]


def hand_mark(target: Endpoint, key: str, mark_ms: int) -> int | NoAnswer | None:
    """Hands the pod its mark, signed: `mark_ms` if it took it, None if not (no key, another key, a
    consumer that does not take marks this way: it is then asked for the mark its file shows), NO_ANSWER
    if it did not answer."""
    took = _echoed(target, {"mark": mark_ms, "signature": signature(key, target.pod, mark_ms)}, "mark")
    return NO_ANSWER if took is NO_ANSWER else (mark_ms if took else None)


def send_sooner(target: Endpoint, mark_ms: int, leave_at_ms: int) -> bool:
    """True if the pod took the sooner moment for this mark."""
    return _echoed(target, {"mark": mark_ms, "leaveAt": leave_at_ms}, "leaveAt") is True


def send_rejoin(target: Endpoint, key: str, mark_ms: int, rejoin_at_ms: int) -> bool:
    """True if the pod, which stays, will join the group again at `rejoin_at_ms` as the pods marked
    `mark_ms` leave."""
    body: dict[str, int | str] = {
        "mark": mark_ms,
        "rejoinAt": rejoin_at_ms,
        "signature": rejoin_signature(key, target.pod, mark_ms, rejoin_at_ms),
    }
    return _echoed(target, body, "rejoinAt") is True


# -- the handshake -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Handshake:
    """How a handshake ended: `sooner` is the moment every pod took (epoch s), or None."""

    result: str  # SOONER, UNREAD, UNANSWERED or REFUSED
    sooner: float | None = None
    pods: tuple[str, ...] = ()  # the pods that kept the others on the mark's moment
    rejoining: tuple[str, ...] = ()  # the pods that stay and will join again when told
    staying: int = 0  # how many pods that stay were told

    def message(self, pods: Sequence[str], mark_s: float) -> str:
        """For the fleet's Event: what the departing pods did."""
        if self.sooner is not None:
            text = f"{', '.join(pods)} leave together {mark_s - self.sooner:.2f} s before their mark's moment"
            if self.rejoining:
                text += f"; {len(self.rejoining)} of the {self.staying} pods that stay join again right after"
            elif self.staying:  # e.g. a cooperative assignor, which librdkafka cannot make join on demand
                text += f"; the {self.staying} pods that stay cannot join again on demand"
            return text
        why = {
            UNREAD: "had not read the mark in time",
            UNANSWERED: "did not answer on the port named departure",
            REFUSED: "did not take the sooner moment",
        }[self.result]
        return f"{', '.join(self.pods)} {why}: the departing pods leave at their mark's moment"


def hand_marks(targets: Sequence[Endpoint], key: str, mark_ms: int) -> frozenset[str]:
    """Hands every target its mark at once (hand_mark); the pods that took it."""
    if not targets:
        return frozenset()
    with ThreadPoolExecutor(max_workers=min(THREADS, len(targets))) as pool:
        marks = list(pool.map(lambda target: hand_mark(target, key, mark_ms), targets))
    return frozenset(t.pod for t, mark in zip(targets, marks, strict=True) if mark == mark_ms)


def hasten(
    targets: Sequence[Endpoint],
    mark_ms: int,
    *,
    held: frozenset[str] = frozenset(),
    staying: Sequence[Endpoint] = (),
    read: Callable[[Endpoint], int | NoAnswer | None] = read_mark,
    send: Callable[[Endpoint, int, int], bool] = send_sooner,
    rejoin: Callable[[Endpoint, int, int], bool] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Handshake:
    """Waits until every target has read the mark `mark_ms` (those in `held` took it by hand_marks and
    are not asked), then gives them all one sooner moment LEAD_S ahead. Ends `unread` (or `unanswered`,
    if some of those never answered) once a sooner moment would no longer come well before the mark's;
    `refused` if a target did not take it (they leave at the mark's moment, or some at either). Once all
    took it, and only then, each pod in `staying` is told to join again REJOIN_LATEST_S after the moment
    at the latest (`rejoin`, e.g. send_rejoin with the fleet's key; rejoin_when_rebalancing brings it
    forward): told before every departure was certain, a pod that stays could start a rebalance of its
    own."""
    latest_start = mark_ms / 1000 - 2 * LEAD_S  # past this, a sooner moment gains little and risks much
    pending = [t for t in targets if t.pod not in held]
    answered: set[str] = set(held)
    with ThreadPoolExecutor(max_workers=max(1, min(THREADS, max(len(targets), len(staying))))) as pool:
        while pending:
            if clock() > latest_start:
                silent = tuple(t.pod for t in pending if t.pod not in answered)
                if silent:
                    return Handshake(UNANSWERED, pods=silent)
                return Handshake(UNREAD, pods=tuple(t.pod for t in pending))
            marks = list(pool.map(read, pending))
            answered.update(t.pod for t, mark in zip(pending, marks, strict=True) if mark is not NO_ANSWER)
            pending = [t for t, mark in zip(pending, marks, strict=True) if mark != mark_ms]
            if pending:
                sleep(POLL_S)
        leave_at_ms = int((clock() + LEAD_S) * 1000)
        taken = list(pool.map(lambda t: send(t, mark_ms, leave_at_ms), targets))
        if all(taken):
            latest_ms = leave_at_ms + int(REJOIN_LATEST_S * 1000)
            tell = rejoin
            told = list(pool.map(lambda t: tell(t, mark_ms, latest_ms), staying)) if tell and staying else []
            rejoining = tuple(t.pod for t, ok in zip(staying, told, strict=False) if ok)
            return Handshake(SOONER, leave_at_ms / 1000, rejoining=rejoining, staying=len(told))
    return Handshake(REFUSED, pods=tuple(t.pod for t, ok in zip(targets, taken, strict=True) if not ok))


# -- after the moment ----------------------------------------------------------------------------------------


def rejoin_when_rebalancing(
    describe: Callable[[], tuple[str, frozenset[str]] | None],
    leaving: Iterable[str],
    targets: Sequence[Endpoint],
    mark_ms: int,
    rejoin: Callable[[Endpoint, int, int], bool],
    *,
    bound_s: float = REJOIN_LATEST_S,
    poll_s: float = REBALANCING_POLL_S,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """From the departing pods' moment: describes the group (`describe`, as for wait_until_settled) until it
    is no longer Stable or has lost a `leaving` member, then tells every target (the pods that stay and
    will join again) to do it now. Gives up after `bound_s` or when the group cannot be described: the
    targets then keep their latest moment. Returns how many took the moment now."""
    gone = frozenset(leaving)
    deadline = clock() + bound_s
    while True:
        found = describe()
        if found is None:
            return 0
        state, members = found
        if state != "Stable" or not members & gone:
            break
        if clock() + poll_s > deadline:
            return 0
        sleep(poll_s)
    now_ms = int(clock() * 1000)
    with ThreadPoolExecutor(max_workers=max(1, min(THREADS, len(targets)))) as pool:
        return sum(pool.map(lambda t: rejoin(t, mark_ms, now_ms), targets))


# How often the group is described while the operator waits for it to settle without the departed members.
SETTLED_POLL_S = 0.05
# The wait is bounded: members learn of the rebalance from their next heartbeat, so it takes a heartbeat
# interval or two; past the bound the StatefulSet shrinks anyway, as it would have without the wait.
SETTLED_BOUND_S = 3.0
CLIENT_HEARTBEAT_MS = 3000  # heartbeat.interval.ms when the fleet sets none (librdkafka's and Java's)
# Settled, the members left behind have yet to fetch the partitions they were given: each looks up the
# committed offset, then adds them to its next fetch, which waits for the one in flight (fetch.wait.max.ms,
# 500 ms by default in librdkafka and Java). Pods stopping on the same node in that time slow those first
# fetches (processes closing, the kubelet's and the API server's work); a second later they cost nothing.
HANDOVER_S = 1.0


def settle_bound_s(heartbeat_ms: int | None) -> float:
    """How long to wait for the group to settle after the departing members left: two heartbeats and a
    second, at most SETTLED_BOUND_S."""
    return min(SETTLED_BOUND_S, 2 * (heartbeat_ms or CLIENT_HEARTBEAT_MS) / 1000 + 1.0)


def wait_until_settled(
    describe: Callable[[], tuple[str, frozenset[str]] | None],
    leaving: Iterable[str],
    bound_s: float,
    *,
    poll_s: float = SETTLED_POLL_S,
    handover_s: float = HANDOVER_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Waits until the group (`describe`: its state and its members' instance ids, None when it cannot be
    described) is Stable with none of the `leaving` instance ids, then `handover_s` more; or until
    `bound_s` passes, or the group cannot be described. True if it settled.

    The departing consumers left at the sooner moment; their pods stop once the StatefulSet shrinks. Shrunk
    at the moment, their pods' shutdown (the processes closing, the kubelet's work) came while the members
    left behind joined again and the leader sent its assignment, and slowed that rebalance. Shrunk as the
    group settled, it came while those members made their first fetches of the partitions they were given,
    and slowed those (HANDOVER_S): after both, the shutdown costs the group nothing."""
    gone = frozenset(leaving)
    deadline = clock() + bound_s
    while True:
        found = describe()
        if found is None:  # the coordinator moving or unreachable: shrink now, as before
            return False
        state, members = found
        if state == "Stable" and not members & gone:
            sleep(handover_s)
            return True
        if clock() + poll_s > deadline:
            return False
        sleep(poll_s)
