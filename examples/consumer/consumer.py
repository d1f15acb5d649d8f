"""A stateful Kafka consumer for a StaticConsumerGroup (confluent-kafka).

It reads the operator's environment contract (KAFKA_BOOTSTRAP_SERVERS, KAFKA_GROUP_ID,
KAFKA_GROUP_INSTANCE_ID, KAFKA_TOPICS, KAFKA_SESSION_TIMEOUT_MS, ...), keeps a small state file per
partition in STATE_DIR (a volume that survives restarts), commits offsets after the state is on disk,
and logs every assignment and revocation as a JSON line, and each assigned partition's first fetch (its
first record, or its end when it has none to read): from these lines bench/fleet_ops.py computes how long
each partition went without a consumer.

Several members per pod: KAFKA_MEMBERS_PER_POD=n (the operator sets it from spec.membersPerPod when n > 1)
runs n consumers in this process, one thread each, as Kafka Streams runs one consumer per stream thread,
and names them as Kafka Streams does: KAFKA_GROUP_INSTANCE_ID + "-" + k for k in 1..n.

Lifecycle, as Kubernetes and static membership want it:
- READY_FILE is created once every consumer of the process is in the group (its first assignment), for an
  exec readiness probe.
- SIGTERM: close without LeaveGroup (librdkafka skips it for static members), exit 0; the pod comes back
  with the same instance id and the group does not rebalance.
- Leaving for good: when a scale-down takes its pod away, the operator marks the pod departing, which
  the file STATICFLEET_DEPARTURE_FILE shows (the pod's downwardAPI volume): the moment to leave, the same
  for every departing pod. Every consumer of the process then leaves the group (unsubscribe: librdkafka
  revokes the assignment and sends LeaveGroup, which a static member skips only when it closes), so the
  group rebalances once without all of them before their pods are even stopped, as it would for dynamic
  members; they stay out until SIGTERM. Should the mark go away (the scale-down was called off), they
  join again. With READY_PORT set the process also answers the operator's departure handshake on that
  port (a container port named `departure`): POST /departure {"mark", "signature"} hands it the mark
  itself, signed with the fleet's key (STATICFLEET_DEPARTURE_KEY), before any kubelet shows it; GET
  /departure says which mark it holds, and POST /departure {"mark", "leaveAt"} brings the moment forward
  once the operator has seen every departing pod hold the same mark, so that they leave together sooner
  than the mark's moment, which covers the slowest kubelet. The pods that stay are told to join again
  (POST /departure {"mark", "rejoinAt", "signature"}): first a latest moment, then, once the operator sees
  the departures' rebalance under way, the moment now; with an eager assignor each of their consumers
  then subscribes again, which makes librdkafka join the rebalance at once instead of learning of it
  from its next heartbeat, unless a rebalance has found it since it was first told. librdkafka has no
  such call for cooperative assignors (its subscribe with unchanged topics does not join again), so such
  a consumer refuses and waits for its heartbeat.
- KAFKA_MEMBERSHIP=dynamic runs the same consumer with dynamic membership (no group.instance.id, even
  when KAFKA_GROUP_INSTANCE_ID is set): it sends LeaveGroup when it closes, and every start or stop costs
  the group a rebalance. It is the baseline the benchmarks and the demo compare static membership with.
- KAFKA_PARTITION_ASSIGNMENT_STRATEGY chooses the assignor (librdkafka's names: range, roundrobin,
  cooperative-sticky). With cooperative-sticky a rebalance stops only the partitions that move: the
  callbacks then name the partitions added and taken away, not the whole assignment, and the log says so.
- KAFKA_GROUP_PROTOCOL=consumer uses Kafka 4's consumer protocol (KIP-848): the broker assigns, and the
  session timeout, heartbeat interval and assignor are the broker's, so the client's own are not set.
- Heartbeats at the interval set: the poll loop wakes librdkafka's main thread every WAKE_S, which
  sends a classic group's heartbeats only when it wakes (see WAKE_S). A member then learns of a
  rebalance within its heartbeat interval, not at the next 500 ms tick of an idle client. A member whose
  pod is marked departing is not woken: it leaves within a second, with the others, and polls every
  MARKED_POLL_S until then, so that it sees a sooner moment at once.
- A fatal error exits non-zero so that Kubernetes restarts the pod; FENCED_INSTANCE_ID (another process
  took this instance id) exits with 82, the Kafka error code, which the operator reports as InstanceFenced.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

FENCED_EXIT_CODE = 82
# How often the loop looks at the stop flag and the departure mark. librdkafka (confluent-kafka) serves
# no other call on a consumer while its poll waits, so another thread cannot make it act sooner.
POLL_S = 0.1
# While the pod holds a departure mark, the loop polls this briefly instead: the handshake's sooner moment
# (at most 0.1 s ahead when sent) is then seen within this, not after a whole POLL_S, so every departing
# consumer leaves at the moment itself; one that left later met the rebalance the others had started, and
# joined it before its own leave went out (a second rebalance).
MARKED_POLL_S = 0.01
# librdkafka sends a classic group's heartbeat from its main thread, and only when that thread wakes: in a
# consumer with nothing to read, every 500 ms (its max.poll.interval.ms check), whatever
# heartbeat.interval.ms says. A call that thread serves wakes it; the loop makes one this often.
WAKE_S = 0.05
# How long leaving waits for the revocation, after which librdkafka sends the LeaveGroup.
LEAVE_WAIT_S = 2.0
STATIC, DYNAMIC = "static", "dynamic"
MAX_MEMBERS = 64
CLASSIC, CONSUMER = "classic", "consumer"
# Settings a consumer-protocol member leaves to the broker (librdkafka refuses them with that protocol).
BROKER_SIDE = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")
INCREMENTAL_ASSIGNORS = ("cooperative-sticky",)
# The operator's departure handshake, on the READY_PORT server.
DEPARTURE_PATH = "/departure"
MAX_REQUEST_BYTES = 1024
# A mark handed to the pod (signed) counts until its file shows it, or for this long after its moment if
# the file never does (the operator wrote the annotation, which the kubelet shows within seconds).
HANDED_MARK_S = 10.0
# The operator's marks are a second ahead: one much further ahead is not one of its own.
HANDED_MARK_AHEAD_S = 5.0
# A moment to join again that a member first sees this long after it has passed is not acted on (a member
# started since, or one busy that long): the rebalance it was for has found it by then.
REJOIN_LATE_S = 1.0


class Rejoin(NamedTuple):
    """A pod that stays is to join the group again at `moment`, as the pods marked `mark` leave; `told` is
    when it was first told so for that mark (a rebalance that found a member since makes it moot)."""

    mark: float
    moment: float
    told: float


# One line at a time: print writes a line and its newline separately, so the members of a pod (a thread
# each) would otherwise interleave their lines.
LOG_LOCK = threading.Lock()


def log(event: str, **fields: Any) -> None:
    record = {"ts": round(time.time(), 3), "event": event, **fields}
    line = json.dumps(record, sort_keys=True)
    with LOG_LOCK:
        print(line, flush=True)


def required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        log("config_error", message=f"environment variable {name} is not set")
        sys.exit(2)
    return value


def choice(name: str, choices: tuple[str, str]) -> str:
    """The environment variable `name`, one of `choices` (the first when unset), or exit 2."""
    value = os.environ.get(name, "").strip().lower() or choices[0]
    if value not in choices:
        log("config_error", message=f"{name} must be {choices[0]} or {choices[1]}, not {value!r}")
        sys.exit(2)
    return value


def membership() -> str:
    return choice("KAFKA_MEMBERSHIP", (STATIC, DYNAMIC))


def members_per_pod() -> int:
    text = os.environ.get("KAFKA_MEMBERS_PER_POD", "").strip() or "1"
    if not text.isdigit() or not 1 <= int(text) <= MAX_MEMBERS:
        log("config_error", message=f"KAFKA_MEMBERS_PER_POD must be 1 to {MAX_MEMBERS}, not {text!r}")
        sys.exit(2)
    return int(text)


def member_names(base: str, members: int) -> list[str]:
    """Kafka Streams' names for its threads' consumers (StreamsConfig.getMainConsumerConfigs), the rule
    the operator expects: the process's own id for one member, else `<id>-1` .. `<id>-<n>`."""
    return [base] if members == 1 else [f"{base}-{k}" for k in range(1, members + 1)]


def group_protocol() -> str:
    return choice("KAFKA_GROUP_PROTOCOL", (CLASSIC, CONSUMER))


def consumer_config() -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": required("KAFKA_BOOTSTRAP_SERVERS"),
        "group.id": required("KAFKA_GROUP_ID"),
        "session.timeout.ms": int(os.environ.get("KAFKA_SESSION_TIMEOUT_MS", "45000")),
        "enable.auto.commit": False,
        "auto.offset.reset": os.environ.get("AUTO_OFFSET_RESET", "earliest"),
        "security.protocol": os.environ.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT").lower(),
        "client.id": os.environ.get("KAFKA_GROUP_INSTANCE_ID") or os.environ.get("HOSTNAME") or "consumer",
        # An event when a fetch reaches a partition's end: a partition with nothing to read still shows
        # when its new owner first fetched it.
        "enable.partition.eof": True,
    }
    if membership() == STATIC:
        config["group.instance.id"] = required("KAFKA_GROUP_INSTANCE_ID")
    optional = {
        "KAFKA_HEARTBEAT_INTERVAL_MS": "heartbeat.interval.ms",
        "KAFKA_REBALANCE_TIMEOUT_MS": "max.poll.interval.ms",
        "KAFKA_SASL_MECHANISM": "sasl.mechanism",
        "KAFKA_SASL_USERNAME": "sasl.username",
        "KAFKA_SASL_PASSWORD": "sasl.password",
        "KAFKA_SSL_CA_LOCATION": "ssl.ca.location",
        "KAFKA_SSL_CERTIFICATE_LOCATION": "ssl.certificate.location",
        "KAFKA_SSL_KEY_LOCATION": "ssl.key.location",
        "PARTITION_ASSIGNMENT_STRATEGY": "partition.assignment.strategy",  # the older name
        "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "partition.assignment.strategy",
        "FETCH_WAIT_MAX_MS": "fetch.wait.max.ms",
    }
    for env, key in optional.items():
        if os.environ.get(env):
            value = os.environ[env]
            config[key] = int(value) if key.endswith(".ms") else value
    if "sasl.username" not in config and os.environ.get("KAFKA_SASL_JAAS_CONFIG"):
        config.update(jaas_login(os.environ["KAFKA_SASL_JAAS_CONFIG"]))
    if group_protocol() == CONSUMER:
        config["group.protocol"] = CONSUMER
        for key in BROKER_SIDE:
            config.pop(key, None)
    return config


def jaas_login(jaas: str) -> dict[str, str]:
    """sasl.username (and sasl.password, unless given) from a Kafka JAAS line, as a Strimzi KafkaUser's
    Secret holds it: librdkafka takes no sasl.jaas.config."""
    found = dict(re.findall(r'(username|password)\s*=\s*"((?:\\.|[^"\\])*)"', jaas))
    login = {"sasl.username": found.get("username", "")}
    if not os.environ.get("KAFKA_SASL_PASSWORD") and "password" in found:
        login["sasl.password"] = found["password"]
    return login


def incremental(config: dict[str, Any]) -> bool:
    """Whether rebalance callbacks name only the partitions that change hands (cooperative assignors
    and the consumer protocol) rather than the whole assignment (eager assignors)."""
    strategy = str(config.get("partition.assignment.strategy", ""))
    return config.get("group.protocol") == CONSUMER or strategy in INCREMENTAL_ASSIGNORS


class PartitionState:
    """Per-partition state on the volume: messages seen and the next offset to read."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def path(self, topic: str, partition: int) -> Path:
        return self.directory / f"{topic}-{partition}.json"

    def load(self, topic: str, partition: int) -> dict[str, int]:
        try:
            data: dict[str, int] = json.loads(self.path(topic, partition).read_text())
            return data
        except (OSError, ValueError):
            return {"messages": 0, "next_offset": -1}

    def save(self, topic: str, partition: int, state: dict[str, int]) -> None:
        target = self.path(topic, partition)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, target)


def departure(path: str | None) -> float | None:
    """When to leave the group for good (epoch seconds), if the operator marked this pod as departing:
    the file (the pod's downwardAPI view of the staticfleet.io/departing annotation) holds the moment
    in epoch milliseconds, the same for every departing pod, and is empty while the pod is not marked.
    Any other mark means now."""
    if not path:
        return None
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    if not text:
        return None
    return int(text) / 1000 if text.isdigit() else 0.0


class Departure:
    """This pod's departure: the operator's mark (the file, or the same mark handed to it signed with the
    fleet's departure key, POST /departure {"mark", "signature"}), and the sooner moment the operator may
    send once every departing pod holds that same mark (POST /departure {"mark", "leaveAt"}). A request
    can bring forward a departure the operator marked, never start one: the sooner moment counts only
    for the mark the pod holds, and it lapses with the mark. A handed mark lapses once the file has shown
    it and no longer does (the scale-down was called off), or if the file never shows it within
    HANDED_MARK_S of its moment."""

    def __init__(
        self,
        path: str | None,
        key: str | None = None,
        pod: str | None = None,
        clock: Any = time.time,
        rejoins: bool = False,
    ) -> None:
        self.path = path
        self.key = key.encode() if key else None
        self.pod = pod
        self.clock = clock
        self.rejoins = rejoins  # whether this process's consumers can join again on demand
        self.guard = threading.Lock()
        self.sooner: tuple[float, float] | None = None  # (the mark it was sent for, the moment)
        # A mark handed to the pod, and whether the file has shown it since.
        self.handed: tuple[float, bool] | None = None
        self.rejoin: Rejoin | None = None  # when to join again, as the pod stays and others leave

    def signed(self, signature: str, what: str, *values: int) -> bool:
        """Whether the operator signed `what` and the values for this pod with the fleet's key."""
        if self.key is None or self.pod is None:
            return False
        message = "\n".join([what, self.pod, *map(str, values)]).encode()
        expected = hmac.new(self.key, message, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, signature)

    def mark(self) -> float | None:
        filed = departure(self.path)
        with self.guard:
            if self.handed is None:
                return filed
            handed, shown = self.handed
            if filed == handed:
                self.handed = (handed, True)
                return filed
            if filed is None and not shown and self.clock() < handed + HANDED_MARK_S:
                return handed
            self.handed = None  # unmarked, marked again, or never shown
            return filed

    def leave_at(self) -> float | None:
        return self.moment(self.mark())

    def moment(self, mark: float | None) -> float | None:
        """When to leave, given the mark the pod holds: its moment, or the sooner one sent for it."""
        if mark is None:
            return None
        with self.guard:
            sooner = self.sooner
        return min(mark, sooner[1]) if sooner is not None and sooner[0] == mark else mark

    def hand(self, mark_ms: int, signature: str) -> bool:
        """Holds `mark_ms` as if the file showed it, if the operator signed it for this pod, the mark's
        moment has not come (an old request sent again counts for nothing) and is at most
        HANDED_MARK_AHEAD_S ahead, and the file holds no other mark."""
        if self.path is None or not self.signed(signature, "departure", mark_ms):
            return False
        mark, now = mark_ms / 1000, self.clock()
        filed = departure(self.path)
        if not now < mark <= now + HANDED_MARK_AHEAD_S or filed not in (None, mark):
            return False
        with self.guard:
            self.handed = (mark, filed == mark)
        return True

    def hasten(self, mark: float, leave_at: float) -> bool:
        """Leave at `leave_at` instead, if the pod holds `mark`; False if it does not (not yet read)."""
        if self.mark() != mark:
            return False
        with self.guard:
            self.sooner = (mark, leave_at)
        return True

    def tell_rejoin(self, mark_ms: int, rejoin_at_ms: int, signature: str) -> bool:
        """Joins the group again at `rejoin_at_ms`, as the pods marked `mark_ms` leave, if this process's
        consumers can, the operator signed it for this pod, the pod is not itself departing, and the
        moment is at most HANDED_MARK_AHEAD_S ahead and has not long passed. A later moment for the
        same mark replaces the one held (the operator brings it forward once the group rebalances)."""
        if not self.rejoins or not self.signed(signature, "rejoin", mark_ms, rejoin_at_ms):
            return False
        mark, moment, now = mark_ms / 1000, rejoin_at_ms / 1000, self.clock()
        if not now - REJOIN_LATE_S < moment <= now + HANDED_MARK_AHEAD_S or self.mark() is not None:
            return False
        with self.guard:
            told = self.rejoin.told if self.rejoin is not None and self.rejoin.mark == mark else now
            self.rejoin = Rejoin(mark, moment, told)
        return True

    def rejoin_at(self) -> Rejoin | None:
        """When this pod's consumers are to join again, if they were told and it has not long passed."""
        with self.guard:
            rejoin = self.rejoin
        return rejoin if rejoin is not None and self.clock() <= rejoin.moment + REJOIN_LATE_S else None


def is_fenced(error: KafkaError) -> bool:
    text = error.str().lower()
    return error.code() == KafkaError.FENCED_INSTANCE_ID or "fenced" in text or "fenced_instance_id" in text


class Readiness:
    """READY_FILE for the whole process: there once every consumer of the pod is in the group, gone as
    soon as one of them leaves it. `ready` says the same, for the HTTP endpoint."""

    def __init__(self, ready_file: Path, members: list[str]) -> None:
        self.ready_file = ready_file
        self.members = frozenset(members)
        self.joined: set[str] = set()
        self.guard = threading.Lock()
        self.ready = False
        ready_file.unlink(missing_ok=True)

    def assigned(self, instance: str) -> None:
        with self.guard:
            self.joined.add(instance)
            if self.joined == self.members:
                self.ready_file.parent.mkdir(parents=True, exist_ok=True)
                self.ready_file.touch()
                self.ready = True

    def left(self, instance: str) -> None:
        with self.guard:
            self.joined.discard(instance)
            self.ready = False
            self.ready_file.unlink(missing_ok=True)


def serve_readiness(
    readiness: Readiness, port: int, host: str = "", departure_mark: Departure | None = None
) -> ThreadingHTTPServer:
    """GET /ready on `port` (every address of the pod, where the kubelet probes it): 200 while the pod is
    ready, else 503, for an httpGet readiness probe, which the kubelet makes itself where an exec probe
    starts a process in the container at every period. With `departure_mark`, also the operator's
    departure handshake: GET /departure answers {"mark": epoch ms or null}, the mark this pod has read;
    POST /departure {"mark": ms, "leaveAt": ms} moves the moment to leave to leaveAt if the pod holds
    that mark (200), else 409 (not read yet, or no longer marked); POST /departure {"mark": ms,
    "rejoinAt": ms, "signature": hex} has a pod that stays join again at that moment as the pods marked
    `mark` leave (200), else 409 (Departure.tell_rejoin says when)."""

    class Handler(BaseHTTPRequestHandler):
        def answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def answer_json(self, status: int, value: dict[str, Any]) -> None:
            self.answer(status, json.dumps(value).encode() + b"\n", "application/json")

        def do_GET(self) -> None:
            if self.path == "/ready":
                self.answer(*((200, b"ready\n") if readiness.ready else (503, b"not ready\n")))
            elif self.path == DEPARTURE_PATH and departure_mark is not None:
                mark = departure_mark.mark()
                self.answer_json(200, {"mark": None if mark is None else round(mark * 1000)})
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            if self.path != DEPARTURE_PATH or departure_mark is None:
                self.send_error(404)
                return
            try:
                length = int(self.headers.get("Content-Length") or "0")
                if not 0 < length <= MAX_REQUEST_BYTES:
                    raise ValueError(f"a body of 1 to {MAX_REQUEST_BYTES} bytes, not {length}")
                request = json.loads(self.rfile.read(length))
                signature = request.get("signature")
                rejoin_at = int(request["rejoinAt"]) if "rejoinAt" in request else None
                mark = int(request["mark"])
                leave_at = None if isinstance(signature, str) else int(request["leaveAt"])
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                expected = (
                    '{"mark": ms, "leaveAt": ms}, {"mark": ms, "signature": hex} '
                    'or {"mark": ms, "rejoinAt": ms, "signature": hex}'
                )
                self.answer_json(400, {"error": f"expected {expected}: {exc}"})
                return
            if rejoin_at is not None:  # a pod that stays: join again right after the others leave
                if departure_mark.tell_rejoin(mark, rejoin_at, str(signature)):
                    log("rejoin_told", mark=mark / 1000, rejoin_at=rejoin_at / 1000)
                    self.answer_json(200, {"rejoinAt": rejoin_at})
                else:
                    why = "not a moment signed for this pod, or a consumer that cannot join again on demand"
                    self.answer_json(409, {"error": why})
                return
            if leave_at is None:  # the operator hands the pod its mark
                if departure_mark.hand(mark, str(signature)):
                    log("handed", mark=mark / 1000)
                    self.answer_json(200, {"mark": mark})
                else:
                    self.answer_json(403, {"error": "not a mark signed for this pod with its fleet's key"})
                return
            if departure_mark.hasten(mark / 1000, leave_at / 1000):
                log("hastened", mark=mark / 1000, leave_at=leave_at / 1000)
                self.answer_json(200, {"leaveAt": leave_at})
            else:
                self.answer_json(409, {"error": "this pod does not hold that mark"})

        def log_message(self, format: str, *args: Any) -> None:  # stdout is for the JSON lines
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="readiness", daemon=True).start()
    return server


def run_member(
    config: dict[str, Any],
    topics: list[str],
    state: PartitionState,
    instance: str,
    readiness: Readiness,
    stop: threading.Event,
    departure_mark: Departure,
) -> int:
    """One consumer until `stop` is set or it fails for good; returns its exit code. Every member of
    the process reads the same departure mark, so all of a departing pod's members leave together."""
    fatal: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        if error.fatal() or error.code() == KafkaError._FATAL:
            fatal.append(error)
            stop.set()  # the whole process exits, so that Kubernetes restarts it
        log("client_error", instance=instance, code=error.name(), message=error.str(), fatal=error.fatal())

    consumer = Consumer({**config, "error_cb": on_error})
    changes_only = incremental(config)
    unfetched: set[str] = set()  # assigned, and not fetched since
    rebalanced = [0.0]  # when a rebalance last called back: one that found this member since it was told

    def names(partitions: list[TopicPartition]) -> list[str]:
        return [f"{p.topic}-{p.partition}" for p in partitions]

    # The client takes the partitions given (assign, or incremental_assign for cooperative assignors)
    # after each callback returns; the callbacks only record what changed hands.
    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        rebalanced[0] = time.time()
        unfetched.update(names(partitions))
        log("assigned", instance=instance, partitions=names(partitions), incremental=changes_only)
        readiness.assigned(instance)

    revocations = [0]

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        revocations[0] += 1
        rebalanced[0] = time.time()
        unfetched.difference_update(names(partitions))
        log("revoked", instance=instance, partitions=names(partitions), incremental=changes_only)

    def on_lost(c: Consumer, partitions: list[TopicPartition]) -> None:
        """Taken away without a revocation (the session ran out, the member was removed): another
        member may already own them."""
        unfetched.difference_update(names(partitions))
        log("lost", instance=instance, partitions=names(partitions))

    def fetched(topic: str, partition: int, record: bool) -> None:
        name = f"{topic}-{partition}"
        if name in unfetched:
            unfetched.discard(name)
            log("first_fetch", instance=instance, partition=name, record=record)

    def subscribe() -> None:
        consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    def leave(why: str) -> None:
        """Out of the group for good, now: unsubscribing revokes the assignment, then librdkafka sends
        the LeaveGroup. Waits (bounded) for the revocation, so that a close right after it does not
        cut the LeaveGroup short."""
        before = revocations[0]
        consumer.unsubscribe()
        readiness.left(instance)
        log("departing", instance=instance, reason=why)
        deadline = time.monotonic() + LEAVE_WAIT_S
        while revocations[0] == before and time.monotonic() < deadline:
            consumer.poll(POLL_S)
        consumer.poll(POLL_S)

    subscribe()
    subscribed = True
    log(
        "started",
        instance=instance,
        group=config["group.id"],
        topics=topics,
        membership=membership(),
        protocol=config.get("group.protocol", CLASSIC),
        assignor=config.get("partition.assignment.strategy"),
    )
    exit_code = 0
    marked_at: float | None = None  # the moment of the mark last read, logged once per mark
    rejoined_for: float | None = None  # the mark of the last departures this member joined again for
    woke = 0.0
    try:
        while not stop.is_set() and not fatal:
            mark = departure_mark.mark()
            if mark != marked_at:
                marked_at = mark
                if mark is not None:  # when each pod reads its mark: how long the moment must be
                    log("marked", instance=instance, leave_at=mark)
            leave_at = departure_mark.moment(mark)  # the mark's, or the handshake's sooner one
            rejoin_at = departure_mark.rejoin_at()
            wait = POLL_S
            if leave_at is not None and subscribed:
                wait = min(MARKED_POLL_S, leave_at - time.time())
                if wait <= 0:  # the departing pods leave together: one rebalance takes them all
                    leave("the pod is marked departing")
                    subscribed = False
                    continue
            elif leave_at is None and not subscribed:
                subscribe()
                subscribed = True
                log("rejoining", instance=instance)
            elif subscribed and rejoin_at is not None and rejoin_at.mark != rejoined_for:
                wait = min(MARKED_POLL_S, rejoin_at.moment - time.time())
                if rebalanced[0] > rejoin_at.told:  # its heartbeat found the departures' rebalance first
                    rejoined_for = rejoin_at.mark
                elif wait <= 0:  # the others' rebalance is under way: join it without waiting for a heartbeat
                    rejoined_for = rejoin_at.mark
                    subscribe()  # an eager assignor's subscribe joins the group again at once
                    log("rejoined", instance=instance, mark=rejoin_at.mark, rejoin_at=rejoin_at.moment)
                    continue
            # A short poll: the stop flag set by SIGTERM is seen within POLL_S, so a departing pod
            # closes (and, dynamic, leaves) at once instead of up to half a second later.
            message: Message | None = consumer.poll(min(POLL_S, wait))
            # Woken, the member heartbeats at its interval; not while it is about to leave, where a
            # heartbeat sent as the first of the departing members leave would make it join the
            # rebalance they start before its own LeaveGroup goes out (and cost a second one).
            if leave_at is None and time.monotonic() - woke >= WAKE_S:
                consumer.assignment()
                woke = time.monotonic()
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.fatal() or error.code() == KafkaError._FATAL:
                    fatal.append(error)
                    stop.set()
                elif error.code() == KafkaError._PARTITION_EOF:
                    eof_topic, eof_partition = message.topic(), message.partition()
                    if eof_topic is not None and eof_partition is not None:
                        fetched(eof_topic, eof_partition, record=False)
                else:
                    log("consume_error", instance=instance, code=error.name(), message=error.str())
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None
            fetched(topic, partition, record=True)
            current = state.load(topic, partition)
            current["messages"] += 1
            current["next_offset"] = offset + 1
            state.save(topic, partition, current)  # state first, then the offset: at-least-once
            consumer.commit(message=message, asynchronous=False)
        if fatal:
            error = fatal[0]
            exit_code = FENCED_EXIT_CODE if is_fenced(error) else 1
            log("fatal", instance=instance, code=error.name(), message=error.str(), exit_code=exit_code)
            termination_log = Path("/dev/termination-log")
            if termination_log.exists():  # Kubernetes shows it as the container's termination message
                with termination_log.open("a") as out:
                    out.write(
                        f"{'FENCED_INSTANCE_ID' if exit_code == FENCED_EXIT_CODE else error.name()}: "
                        f"{error.str()}\n"
                    )
    finally:
        readiness.left(instance)
        if subscribed and not fatal and departure_mark.mark() is not None:  # marked, then stopped
            leave("the pod is marked departing")
        # A static member's close sends no LeaveGroup: the coordinator keeps its partitions for it.
        # A dynamic member's close sends one: the group rebalances without it right away.
        consumer.close()
        log("stopped", instance=instance, exit_code=exit_code)
    return exit_code


def main() -> int:
    config = consumer_config()
    topics = [t.strip() for t in required("KAFKA_TOPICS").split(",") if t.strip()]
    state = PartitionState(Path(os.environ.get("STATE_DIR", "./state")))
    base = config.get("group.instance.id") or config["client.id"]
    names = member_names(base, members_per_pod())
    readiness = Readiness(Path(os.environ.get("READY_FILE", "./ready")), names)
    # LEAVE_WHEN_DEPARTING=false: behave as a consumer that does not read the mark (the operator then
    # removes its members once its pod has stopped).
    leaves = os.environ.get("LEAVE_WHEN_DEPARTING", "true").strip().lower() != "false"
    departure_mark = Departure(
        os.environ.get("STATICFLEET_DEPARTURE_FILE") if leaves else None,
        key=os.environ.get("STATICFLEET_DEPARTURE_KEY"),
        pod=os.environ.get("STATICFLEET_POD_NAME"),
        rejoins=not incremental(config),
    )
    if os.environ.get("READY_PORT"):
        # READY_HOST: one address of the machine (a pod of the local pod runner, which shares the host's)
        host = os.environ.get("READY_HOST", "")
        serve_readiness(readiness, int(os.environ["READY_PORT"]), host, departure_mark)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    codes: dict[str, int] = {}

    def run(instance: str) -> None:
        member = {**config, "client.id": instance}
        if "group.instance.id" in config:
            member["group.instance.id"] = instance
        try:
            codes[instance] = run_member(member, topics, state, instance, readiness, stop, departure_mark)
        except Exception as exc:  # one consumer's failure stops the process, so Kubernetes restarts it
            log("fatal", instance=instance, message=repr(exc), exit_code=1)
            codes[instance] = 1
            stop.set()

    try:
        if len(names) == 1:  # one member: the main thread polls, as a single consumer always has
            run(names[0])
        else:
            threads = [threading.Thread(target=run, args=(n,), name=n) for n in names]
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(timeout=POLL_S)  # the main thread stays free for the signal handlers
    finally:
        readiness.ready_file.unlink(missing_ok=True)
    return next((codes[n] for n in names if codes.get(n, 1) != 0), 0)


if __name__ == "__main__":
    code = main()
    # Every consumer is closed and every line logged: the process ends without the interpreter's teardown
    # (about 0.03 s of CPU, several times that on a busy node), since a StatefulSet starts a pod's successor
    # only once the pod has stopped, and a restarted static member's partitions wait for that successor.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
