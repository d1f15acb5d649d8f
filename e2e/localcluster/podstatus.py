"""Pure construction of a pod's status from what the runner knows about its processes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from e2e.localcluster.podspec import LOCAL_IP

Manifest = dict[str, Any]


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Terminated:
    exit_code: int
    started_at: datetime
    finished_at: datetime
    signal: int = 0

    @property
    def reason(self) -> str:
        return "Completed" if self.exit_code == 0 else "Error"

    def as_state(self) -> Manifest:
        state: Manifest = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": rfc3339(self.started_at),
            "finishedAt": rfc3339(self.finished_at),
        }
        if self.signal:
            state["signal"] = self.signal
        return {"terminated": state}


@dataclass(frozen=True)
class ContainerSnapshot:
    """One container as the runner sees it at one moment."""

    name: str
    image: str
    restart_count: int
    running_since: datetime | None  # set while a process runs
    waiting_reason: str | None  # e.g. ContainerCreating, CrashLoopBackOff, CreateContainerConfigError
    waiting_message: str
    last_termination: Terminated | None
    previous_termination: Terminated | None  # the one before last_termination
    will_restart: bool  # False once the restart policy says this container is done
    ready: bool
    started: bool  # the startup probe (if any) has passed
    pid: int | None

    @property
    def finished(self) -> bool:
        return self.running_since is None and self.last_termination is not None and not self.will_restart

    @property
    def succeeded(self) -> bool:
        return self.finished and self.last_termination is not None and self.last_termination.exit_code == 0


def container_status(snapshot: ContainerSnapshot, pod_uid: str) -> Manifest:
    status: Manifest = {
        "name": snapshot.name,
        "image": snapshot.image,
        "imageID": "",
        "ready": snapshot.ready,
        "restartCount": snapshot.restart_count,
        "started": snapshot.running_since is not None and snapshot.started,
        "lastState": {},
    }
    if snapshot.pid is not None:
        status["containerID"] = f"local://{pod_uid}/{snapshot.name}/{snapshot.pid}"
    previous = snapshot.last_termination
    if snapshot.running_since is not None:
        status["state"] = {"running": {"startedAt": rfc3339(snapshot.running_since)}}
        if previous is not None:
            status["lastState"] = previous.as_state()
    elif snapshot.finished and previous is not None:
        status["state"] = previous.as_state()
        if snapshot.previous_termination is not None:
            status["lastState"] = snapshot.previous_termination.as_state()
    else:
        waiting: Manifest = {"reason": snapshot.waiting_reason or "ContainerCreating"}
        if snapshot.waiting_message:
            waiting["message"] = snapshot.waiting_message
        status["state"] = {"waiting": waiting}
        if previous is not None:
            status["lastState"] = previous.as_state()
    return status


def pod_phase(
    containers: Sequence[ContainerSnapshot], init_containers: Sequence[ContainerSnapshot] = ()
) -> str:
    """Pending until every init container succeeded and every container has run once;
    Succeeded/Failed when all are done; else Running."""
    if any(c.finished and not c.succeeded for c in init_containers):
        return "Failed"
    if not all(c.succeeded for c in init_containers):
        return "Pending"
    if not containers:
        return "Pending"
    if any(c.running_since is None and c.last_termination is None for c in containers):
        return "Pending"
    if all(c.finished for c in containers):
        failed = any(c.last_termination is not None and c.last_termination.exit_code != 0 for c in containers)
        return "Failed" if failed else "Succeeded"
    return "Running"


def _condition(
    kind: str, value: bool, previous: Sequence[Manifest], now: datetime, reason: str = ""
) -> Manifest:
    """A pod condition whose lastTransitionTime moves only when its status changes."""
    status = "True" if value else "False"
    condition: Manifest = {"type": kind, "status": status, "lastProbeTime": None}
    earlier = next((c for c in previous if c.get("type") == kind), None)
    if earlier is not None and earlier.get("status") == status and earlier.get("lastTransitionTime"):
        condition["lastTransitionTime"] = earlier["lastTransitionTime"]
    else:
        condition["lastTransitionTime"] = rfc3339(now)
    if reason and not value:
        condition["reason"] = reason
    return condition


def pod_status(
    containers: Sequence[ContainerSnapshot],
    *,
    init_containers: Sequence[ContainerSnapshot] = (),
    pod_uid: str,
    previous_status: Manifest,
    started_at: datetime,
    now: datetime,
    pod_ip: str = LOCAL_IP,
) -> Manifest:
    """The status block to send as a JSON merge patch (lists inside it replace the server's lists)."""
    phase = pod_phase(containers, init_containers)
    initialized = all(c.succeeded for c in init_containers)
    all_ready = phase == "Running" and all(c.ready for c in containers)
    previous_conditions: list[Manifest] = list(previous_status.get("conditions") or [])
    not_ready_reason = "PodCompleted" if phase in ("Succeeded", "Failed") else "ContainersNotReady"
    conditions = [
        _condition("PodReadyToStartContainers", True, previous_conditions, now),
        _condition("Initialized", initialized, previous_conditions, now, "ContainersNotInitialized"),
        _condition("Ready", all_ready, previous_conditions, now, not_ready_reason),
        _condition("ContainersReady", all_ready, previous_conditions, now, not_ready_reason),
        _condition("PodScheduled", True, previous_conditions, now),
    ]
    status: Manifest = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": LOCAL_IP,
        "hostIPs": [{"ip": LOCAL_IP}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": previous_status.get("startTime") or rfc3339(started_at),
        "containerStatuses": [container_status(c, pod_uid) for c in containers],
    }
    if init_containers:
        status["initContainerStatuses"] = [container_status(c, pod_uid) for c in init_containers]
    return status
