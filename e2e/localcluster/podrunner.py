"""A process runner that plays the kubelet for one Node.

It registers a Ready Node, binds unscheduled pods to it (it is also the scheduler), runs every
container's command+args as a local process with the pod's environment, reports pod status
(phase, container states, restart counts, Ready from probes), restarts containers by the pod's
restartPolicy with a crash-loop backoff, and on deletion sends SIGTERM, waits the grace period,
SIGKILLs, writes the terminal phase, then removes the pod object (grace 0) as a kubelet does.

Images are ignored: the command must exist on this machine. PATH starts with the directory of the
Python interpreter running the runner, so `python` and the project's console scripts resolve.

Layout under the run directory (see docs/local-cluster.md):
  pods/<namespace>/<pod>/                   cwd of the pod's processes; HOME
  pods/<namespace>/<pod>/<container>.log    stdout+stderr of every run of that container
  pods/<namespace>/<pod>/volumes/<volume>/  emptyDir and other per-pod volumes (fresh per pod UID)
  volumes/<namespace>/<claim>/              PersistentVolumeClaim volumes (fresh per claim UID)

Design: one watch thread keeps a cache of pods and wakes the sync loop; the sync loop (one thread,
which also forks every pod process so PR_SET_PDEATHSIG stays tied to a long-lived thread) reconciles
each pod level-based every tick without blocking; probes run on a small thread pool.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Protocol

from e2e.localcluster import procs
from e2e.localcluster.kubeapi import KubeApi, WatchExpired
from e2e.localcluster.podspec import (
    LOCAL_IP,
    SERVICE_ACCOUNT_KUBECONFIG,
    EnvResolutionError,
    Manifest,
    Mount,
    OwnIps,
    ProbeError,
    VolumePlan,
    container_argv,
    container_mounts,
    downward_api_files,
    in_network_namespace,
    kubeconfig_for_container,
    network_namespace,
    parse_probe,
    plan_volumes,
    pod_dir,
    projected_files,
    resolve_env,
    restart_delay,
    rewrite_path,
    schedulable_here,
    service_account_files,
    service_account_kubeconfig,
    should_restart,
    termination_grace_seconds,
    token_specs,
    volume_env_name,
    wants_own_ip,
)
from e2e.localcluster.podstatus import ContainerSnapshot, Terminated, pod_status, rfc3339
from e2e.localcluster.probes import ProbeTracker, run_probe

log = logging.getLogger("podrunner")

RUNNER_MARKER = "STATICFLEET_POD_RUNNER"
DEFAULT_NODE_NAME = "staticfleet-node"
# Environment passed through from the runner to pods; everything else a pod sees comes from its spec.
PASSTHROUGH_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM")


class RunnerApi(Protocol):
    """The Kubernetes calls the runner makes (KubeApi in production, fakes in unit tests)."""

    def list_pods(self) -> tuple[list[Manifest], str]: ...

    def watch_pods(self, resource_version: str, timeout_seconds: int) -> Iterator[tuple[str, Manifest]]: ...

    def bind_pod(self, namespace: str, name: str, uid: str, node_name: str) -> None: ...

    def patch_pod_status(self, namespace: str, name: str, status: Manifest) -> bool: ...

    def force_delete_pod(self, namespace: str, name: str, uid: str) -> None: ...

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None: ...

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None: ...

    def claim(self, namespace: str, name: str) -> Manifest | None: ...

    def mark_claim_bound(self, namespace: str, name: str, claim: Manifest) -> None: ...

    def ensure_node(self, name: str, labels: Mapping[str, str], status: Manifest) -> None: ...

    def service_account_token(
        self,
        namespace: str,
        service_account: str,
        pod_name: str,
        pod_uid: str,
        audience: str | None,
        expiration_seconds: int,
    ) -> str | None: ...

    def api_server(self) -> tuple[str, str | None]: ...


def pod_key(pod: Manifest) -> str:
    metadata = pod["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class RunnerConfig:
    kubeconfig: Path
    run_dir: Path
    node_name: str = DEFAULT_NODE_NAME
    tick_seconds: float = 0.2
    backoff_base_seconds: float = 1.0
    backoff_cap_seconds: float = 20.0
    backoff_reset_seconds: float = 60.0  # a run at least this long clears the crash-loop backoff
    watch_timeout_seconds: int = 30
    node_heartbeat_seconds: float = 30.0
    shutdown_grace_seconds: float = 5.0
    python_bin_dir: Path = field(default_factory=lambda: Path(sys.executable).parent)
    extra_env: Mapping[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- containers


@dataclass
class ContainerRun:
    spec: Manifest
    restart_count: int = 0
    process: subprocess.Popen[bytes] | None = None
    log_file: IO[bytes] | None = None
    running_since: datetime | None = None
    started_mono: float = 0.0
    last_termination: Terminated | None = None
    previous_termination: Terminated | None = None
    crash_streak: int = 0
    next_start_at: float = 0.0
    done: bool = False
    has_run: bool = False
    waiting_reason: str | None = None
    waiting_message: str = ""
    kill_deadline: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = Path(".")
    mounts: list[Mount] = field(default_factory=list)
    readiness: ProbeTracker | None = None
    liveness: ProbeTracker | None = None
    startup: ProbeTracker | None = None

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def started(self) -> bool:
        return self.startup is None or self.startup.passing

    def ready(self) -> bool:
        if self.process is None or not self.started():
            return False
        return self.readiness is None or self.readiness.passing

    def snapshot(self) -> ContainerSnapshot:
        return ContainerSnapshot(
            name=self.name,
            image=str(self.spec.get("image", "")),
            restart_count=self.restart_count,
            running_since=self.running_since if self.process is not None else None,
            waiting_reason=self.waiting_reason,
            waiting_message=self.waiting_message,
            last_termination=self.last_termination,
            previous_termination=self.previous_termination,
            will_restart=not self.done,
            ready=self.ready(),
            started=self.started(),
            pid=self.process.pid if self.process is not None else None,
        )


@dataclass
class PodRun:
    uid: str
    key: str
    pod: Manifest
    directory: Path
    containers: list[ContainerRun]
    created_at: datetime
    init_containers: list[ContainerRun] = field(default_factory=list)
    prepared: bool = False
    retry_prepare_at: float = 0.0
    terminate_deadline: float | None = None
    last_status: Manifest | None = None
    ip: str = LOCAL_IP  # the pod's address: this machine's, or one of its own (podspec.OWN_IP_ANNOTATION)

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    def every_container(self) -> list[ContainerRun]:
        return [*self.init_containers, *self.containers]

    def running(self) -> list[ContainerRun]:
        return [c for c in self.every_container() if c.process is not None]


def _previous_restart_counts(pod: Manifest) -> dict[str, int]:
    """A runner that restarts finds its pods' processes gone: count that as one restart each."""
    counts: dict[str, int] = {}
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if "running" in (status.get("state") or {}) or "terminated" in (status.get("state") or {}):
            counts[str(status["name"])] = int(status.get("restartCount", 0)) + 1
    return counts


# ------------------------------------------------------------------------------------------- runner


class PodRunner:
    def __init__(self, config: RunnerConfig, api: RunnerApi) -> None:
        self.config = config
        self.api = api
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self._pods: dict[str, Manifest] = {}
        self._wake: queue.Queue[str] = queue.Queue()
        self._runs: dict[str, PodRun] = {}
        self._bind_attempts: dict[str, float] = {}
        self._probes = ThreadPoolExecutor(max_workers=4, thread_name_prefix="probe")
        # Stopped pods are finished (terminal status, then deletion) beside the sync loop, as a
        # kubelet's pod workers do: a scale-down's pods do not wait for each other's API calls.
        self._finishers = ThreadPoolExecutor(max_workers=16, thread_name_prefix="finish")
        self._finishing: set[str] = set()
        self._own_ips = OwnIps()
        self._next_heartbeat = 0.0
        self.node_labels = {
            "kubernetes.io/hostname": config.node_name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": _architecture(),
        }

    # -- lifecycle

    def run(self) -> None:
        """Runs until stop_event is set, then stops every pod process it started."""
        self.config.run_dir.mkdir(parents=True, exist_ok=True)
        leftovers = procs.sweep(RUNNER_MARKER, str(self.config.run_dir))
        if leftovers:
            log.warning("killed %d pod processes left by an earlier runner", leftovers)
        self._register_node()
        watcher = threading.Thread(target=self._watch_loop, name="pod-watch", daemon=True)
        watcher.start()
        try:
            while not self.stop_event.is_set():
                self._tick()
        finally:
            self._shutdown()

    def stop(self) -> None:
        self.stop_event.set()
        self._wake.put("")

    def _shutdown(self) -> None:
        containers = [c for run in self._runs.values() for c in run.every_container()]
        procs.stop_all(
            [c.process for c in containers if c.process is not None],
            grace_seconds=self.config.shutdown_grace_seconds,
        )
        for container in containers:
            _close_log(container)
        procs.sweep(RUNNER_MARKER, str(self.config.run_dir))
        self._probes.shutdown(wait=False, cancel_futures=True)
        self._finishers.shutdown(wait=True)
        log.info("pod runner stopped")

    # -- node

    def _node_status(self) -> Manifest:
        now = rfc3339(_now())
        capacity = {
            "cpu": str(os.cpu_count() or 1),
            "memory": f"{_memory_kib()}Ki",
            "pods": "110",
            "ephemeral-storage": f"{shutil.disk_usage(self.config.run_dir).total // 1024}Ki",
        }

        def condition(kind: str, status: str, reason: str) -> Manifest:
            return {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": f"staticfleet pod runner: {reason}",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }

        return {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": LOCAL_IP},
                {"type": "Hostname", "address": self.config.node_name},
            ],
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": platform.release(),
                "osImage": "local processes",
                "containerRuntimeVersion": "local-process://1",
                "kubeletVersion": "staticfleet-podrunner",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": _architecture(),
            },
        }

    def _register_node(self) -> None:
        self.api.ensure_node(self.config.node_name, self.node_labels, self._node_status())
        self._next_heartbeat = time.monotonic() + self.config.node_heartbeat_seconds
        log.info("node %s registered", self.config.node_name)

    # -- watch

    def _watch_loop(self) -> None:
        resource_version: str | None = None
        while not self.stop_event.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                for kind, pod in self.api.watch_pods(resource_version, self.config.watch_timeout_seconds):
                    resource_version = str(pod.get("metadata", {}).get("resourceVersion") or resource_version)
                    if kind == "BOOKMARK":
                        continue
                    key = pod_key(pod)
                    with self._lock:
                        if kind == "DELETED":
                            self._pods.pop(key, None)
                        else:
                            self._pods[key] = pod
                    self._wake.put(key)
                    if self.stop_event.is_set():
                        return
            except WatchExpired:
                log.info("pod watch expired; listing again")
                resource_version = None
            except Exception:
                if self.stop_event.is_set():
                    return
                log.exception("pod watch failed; listing again in 1 s")
                resource_version = None
                self.stop_event.wait(1.0)

    def _relist(self) -> str:
        items, resource_version = self.api.list_pods()
        fresh = {pod_key(pod): pod for pod in items}
        with self._lock:
            stale = set(self._pods) - set(fresh)
            self._pods = fresh
        for key in stale | set(fresh):
            self._wake.put(key)
        return resource_version

    # -- sync loop

    def _tick(self) -> None:
        woken: list[str] = []
        with contextlib.suppress(queue.Empty):
            woken.append(self._wake.get(timeout=self.config.tick_seconds))
        woken += self._woken()
        with self._lock:
            rest = sorted(set(self._pods) | set(self._runs))
        synced: set[str] = set()
        # The pods that woke the loop (an event, a process that exited) first, and those woken while
        # it syncs the others before the next of them, as a kubelet's pod worker acts on its own pod
        # without waiting for the others. Every pod is synced at least once per tick.
        while woken or rest:
            if self.stop_event.is_set():
                return
            if woken:
                key = woken.pop(0)
                if key in woken:  # woken again since: synced then
                    continue
            else:
                key = rest.pop(0)
                if key in synced:
                    continue
            synced.add(key)
            with self._lock:
                pod = self._pods.get(key)
            if pod is None and key not in self._runs:
                continue
            try:
                self._sync(key, pod)
            except Exception:
                log.exception("sync of pod %s failed; retrying next tick", key)
            woken += self._woken()
        if time.monotonic() >= self._next_heartbeat:
            try:
                self._register_node()
            except Exception:
                log.exception("node heartbeat failed")

    def _woken(self) -> list[str]:
        """The keys put on the wake queue since it was last read, without waiting."""
        keys: list[str] = []
        while True:
            try:
                keys.append(self._wake.get_nowait())
            except queue.Empty:
                return keys

    def _sync(self, key: str, pod: Manifest | None) -> None:
        with self._lock:
            if key in self._finishing:
                return
        run = self._runs.get(key)
        if run is not None and (pod is None or pod["metadata"]["uid"] != run.uid):
            # The object this run belongs to is gone (deleted elsewhere, or replaced by a new pod).
            if not self._terminate(run, grace_seconds=termination_grace_seconds(run.pod)):
                return
            self._forget(run)
            run = None
        if pod is None:
            return
        spec = pod.get("spec", {})
        if not spec.get("nodeName"):
            self._maybe_bind(pod)
            return
        if spec["nodeName"] != self.config.node_name:
            return
        uid = str(pod["metadata"]["uid"])
        if pod["metadata"].get("deletionTimestamp"):
            if run is None:
                self.api.force_delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"], uid)
            elif self._terminate(run, grace_seconds=termination_grace_seconds(pod)):
                self._forget(run)
                with self._lock:
                    self._finishing.add(key)
                self._finishers.submit(self._finish, run)
            return
        if run is None:
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                return
            run = self._new_run(key, pod)
        relabelled = _labels_and_annotations(run.pod) != _labels_and_annotations(pod)
        run.pod = pod
        if relabelled and run.prepared:
            # As a kubelet does on a pod update: the downwardAPI volumes show the new metadata.
            self._refresh_downward_api(run)
        self._drive(run)
        self._report(run)

    def _maybe_bind(self, pod: Manifest) -> None:
        if not schedulable_here(pod, self.node_labels):
            return
        uid = str(pod["metadata"]["uid"])
        if time.monotonic() < self._bind_attempts.get(uid, 0.0):
            return
        self._bind_attempts[uid] = time.monotonic() + 5.0
        metadata = pod["metadata"]
        self.api.bind_pod(metadata["namespace"], metadata["name"], uid, self.config.node_name)
        log.info("bound %s to %s", pod_key(pod), self.config.node_name)

    def _new_run(self, key: str, pod: Manifest) -> PodRun:
        metadata = pod["metadata"]
        counts = _previous_restart_counts(pod)
        containers = [
            ContainerRun(spec=spec, restart_count=counts.get(str(spec["name"]), 0))
            for spec in pod.get("spec", {}).get("containers", [])
        ]
        run = PodRun(
            uid=str(metadata["uid"]),
            key=key,
            pod=pod,
            directory=pod_dir(self.config.run_dir, str(metadata["namespace"]), str(metadata["name"])),
            containers=containers,
            created_at=_now(),
            init_containers=[
                ContainerRun(spec=spec) for spec in pod.get("spec", {}).get("initContainers", [])
            ],
            ip=self._own_ips.take() if wants_own_ip(pod) else LOCAL_IP,
        )
        self._runs[key] = run
        return run

    def _finish(self, run: PodRun) -> None:
        """A deleted pod whose containers have all stopped: its terminal phase, every container
        terminated, is written before the object goes, as a kubelet (1.27+) does."""
        try:
            self._report(run)
            log.info("stopped %s: pod phase %s", run.key, (run.last_status or {}).get("phase"))
            self.api.force_delete_pod(run.namespace, run.name, run.uid)
        except Exception:
            log.exception("finishing pod %s failed; retrying next tick", run.key)
        finally:
            with self._lock:
                self._finishing.discard(run.key)
            self._wake.put(run.key)

    def _forget(self, run: PodRun) -> None:
        for container in run.every_container():
            _close_log(container)
        self._runs.pop(run.key, None)
        self._bind_attempts.pop(run.uid, None)

    # -- volumes

    def _prepare(self, run: PodRun) -> str | None:
        """Creates the pod's directories and volumes; returns why it cannot yet, or None."""
        run.directory.mkdir(parents=True, exist_ok=True)
        uid_file = run.directory / ".pod-uid"
        if not uid_file.exists() or uid_file.read_text() != run.uid:
            # A new pod under an old name starts with empty per-pod volumes, like a new emptyDir.
            shutil.rmtree(run.directory / "volumes", ignore_errors=True)
            uid_file.write_text(run.uid)
        for plan in plan_volumes(run.pod, self.config.run_dir):
            problem = self._prepare_volume(run, plan)
            if problem:
                return problem
        return None

    def _prepare_volume(self, run: PodRun, plan: VolumePlan) -> str | None:
        if plan.kind == "claim":
            return self._prepare_claim(run.namespace, str(plan.source["claimName"]), plan.host_dir)
        if plan.kind == "serviceAccount":
            return self._prepare_service_account(run, plan)
        plan.host_dir.mkdir(parents=True, exist_ok=True)
        if plan.kind == "downwardAPI":
            return self._write_downward_api(run, plan)
        if plan.kind in ("configMap", "secret"):
            name = str(plan.source.get("name") or plan.source.get("secretName") or "")
            lookup = self.api.config_map if plan.kind == "configMap" else self.api.secret
            data = lookup(run.namespace, name)
            if data is None:
                return None if plan.source.get("optional") else f'{plan.kind} "{name}" not found'
            try:
                files = projected_files(data, plan.source)
            except EnvResolutionError as error:
                return str(error)
            for relative, content in files.items():
                target = plan.host_dir / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content)
        return None

    def _write_downward_api(self, run: PodRun, plan: VolumePlan) -> str | None:
        try:
            files = downward_api_files(plan.source, run.pod, node_name=self.config.node_name, pod_ip=run.ip)
        except EnvResolutionError as error:
            return str(error)
        for relative, content in files.items():
            _write_atomically(plan.host_dir / relative, content)
        return None

    def _refresh_downward_api(self, run: PodRun) -> None:
        for plan in plan_volumes(run.pod, self.config.run_dir):
            if plan.kind == "downwardAPI":
                problem = self._write_downward_api(run, plan)
                if problem:
                    log.warning("pod %s: volume %s not refreshed: %s", run.key, plan.name, problem)

    def _prepare_service_account(self, run: PodRun, plan: VolumePlan) -> str | None:
        """The admission plugin's kube-api-access volume: a pod-bound token, the CA bundle, the namespace,
        and a kubeconfig reading them (containers that mount the volume get it as KUBECONFIG, since a
        process here cannot see /var/run/secrets/kubernetes.io/serviceaccount)."""
        account = str(run.pod.get("spec", {}).get("serviceAccountName") or "default")
        tokens: dict[str, str] = {}
        for wanted in token_specs(plan.source):
            token = self.api.service_account_token(
                run.namespace, account, run.name, run.uid, wanted.audience, wanted.expiration_seconds
            )
            if token is None:
                return f'serviceaccount "{account}" not found'
            tokens[wanted.path] = token
        server, ca_pem = self.api.api_server()
        try:
            files = service_account_files(
                plan.source,
                run.pod,
                tokens,
                self.api,
                ca_pem=ca_pem or "",
                node_name=self.config.node_name,
                pod_ip=run.ip,
            )
        except EnvResolutionError as error:
            return str(error)
        plan.host_dir.mkdir(parents=True, exist_ok=True)
        for relative, content in files.items():
            _write_private(plan.host_dir / relative, content)
        token_file = plan.host_dir / next(iter(tokens))
        document = service_account_kubeconfig(server, run.namespace, token_file, ca_pem)
        _write_private(plan.host_dir / SERVICE_ACCOUNT_KUBECONFIG, json.dumps(document, indent=2) + "\n")
        return None

    def _prepare_claim(self, namespace: str, name: str, host_dir: Path) -> str | None:
        claim = self.api.claim(namespace, name)
        if claim is None:
            return f'persistentvolumeclaim "{name}" not found'
        if claim.get("metadata", {}).get("deletionTimestamp"):
            return f'persistentvolumeclaim "{name}" is being deleted'
        marker = host_dir.parent / f".{name}.claim-uid"
        claim_uid = str(claim["metadata"]["uid"])
        if not marker.exists() or marker.read_text() != claim_uid:
            # A new claim under an old name gets a new, empty volume.
            shutil.rmtree(host_dir, ignore_errors=True)
            host_dir.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(claim_uid)
        host_dir.mkdir(parents=True, exist_ok=True)
        if claim.get("status", {}).get("phase") != "Bound":
            self.api.mark_claim_bound(namespace, name, claim)
        return None

    # -- containers

    def _drive(self, run: PodRun) -> None:
        now = time.monotonic()
        if not run.prepared:
            if now < run.retry_prepare_at:
                return
            problem = self._prepare(run)
            if problem:
                run.retry_prepare_at = now + 1.0
                for container in run.every_container():
                    container.waiting_reason, container.waiting_message = "ContainerCreating", problem
                return
            run.prepared = True
        policy = str(run.pod.get("spec", {}).get("restartPolicy", "Always"))
        if not self._initialize(run, policy, now):
            return
        for container in run.containers:
            self._reap(container, policy, now)
            if container.process is None and not container.done and now >= container.next_start_at:
                self._start(run, container)
            if container.process is not None:
                self._probe(run, container, now)

    def _initialize(self, run: PodRun, policy: str, now: float) -> bool:
        """Runs the init containers one after another; True once all of them have succeeded."""
        # An init container is retried on failure unless the pod never restarts anything.
        init_policy = "Never" if policy == "Never" else "OnFailure"
        for init in run.init_containers:
            self._reap(init, init_policy, now)
            if init_succeeded(init):
                continue
            if init.done:
                return False  # failed for good: the pod is Failed
            if init.process is None and now >= init.next_start_at:
                self._start(run, init)
            for container in run.containers:
                container.waiting_reason = "PodInitializing"
            return False
        return True

    def _reap(self, container: ContainerRun, policy: str, now: float) -> None:
        process = container.process
        if process is None:
            return
        code = process.poll()
        if code is None:
            if container.kill_deadline is not None and now >= container.kill_deadline:
                procs.signal_group(process.pid, signal.SIGKILL)
            return
        procs.signal_group(process.pid, signal.SIGKILL)  # a container ends with its main process
        exit_code, sig = (code, 0) if code >= 0 else (128 - code, -code)
        container.previous_termination = container.last_termination
        container.last_termination = Terminated(
            exit_code=exit_code,
            started_at=container.running_since or _now(),
            finished_at=_now(),
            signal=sig,
        )
        ran_for = now - container.started_mono
        container.process, container.running_since, container.kill_deadline = None, None, None
        _close_log(container)
        container.readiness = container.liveness = container.startup = None
        if not should_restart(policy, exit_code):
            container.done = True
            return
        container.crash_streak = (
            1 if ran_for >= self.config.backoff_reset_seconds else container.crash_streak + 1
        )
        delay = restart_delay(
            container.crash_streak,
            base_seconds=self.config.backoff_base_seconds,
            cap_seconds=self.config.backoff_cap_seconds,
        )
        container.next_start_at = now + delay
        container.waiting_reason = "CrashLoopBackOff"
        container.waiting_message = f"back-off {delay:g}s restarting failed container={container.name}"

    def _base_env(self, run: PodRun) -> dict[str, str]:
        env = {name: os.environ[name] for name in PASSTHROUGH_ENV if name in os.environ}
        env["PATH"] = os.pathsep.join([str(self.config.python_bin_dir), os.environ.get("PATH", os.defpath)])
        env["HOME"] = str(run.directory)
        env["HOSTNAME"] = str(run.pod.get("spec", {}).get("hostname") or run.name)
        env.update(self.config.extra_env)
        for plan in plan_volumes(run.pod, self.config.run_dir):
            env[volume_env_name(plan.name)] = str(plan.host_dir)
        return env

    def _start(self, run: PodRun, container: ContainerRun) -> None:
        now = time.monotonic()
        mounts = container_mounts(container.spec, plan_volumes(run.pod, self.config.run_dir))
        try:
            own_env = resolve_env(
                container.spec, run.pod, self.api, node_name=self.config.node_name, pod_ip=run.ip
            )
        except EnvResolutionError as error:
            container.waiting_reason, container.waiting_message = "CreateContainerConfigError", str(error)
            container.next_start_at = now + 2.0
            return
        env = self._base_env(run)
        kubeconfig = kubeconfig_for_container(container.spec, plan_volumes(run.pod, self.config.run_dir))
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        env.update({name: rewrite_path(value, mounts) for name, value in own_env.items()})
        env[RUNNER_MARKER] = str(self.config.run_dir)
        argv = in_network_namespace(container_argv(container.spec, env, mounts), network_namespace(run.pod))
        if not argv:
            container.waiting_reason = "RunContainerError"
            container.waiting_message = "the local pod runner needs a command: images are not run"
            container.next_start_at = now + 5.0
            return
        working_dir = container.spec.get("workingDir")
        cwd = Path(rewrite_path(str(working_dir), mounts)) if working_dir else run.directory
        if not cwd.is_dir():
            cwd = run.directory
        log_path = run.directory / f"{container.name}.log"
        if container.has_run:
            container.restart_count += 1
        container.has_run = True
        log_file = log_path.open("ab")
        log_file.write(
            f"--- {rfc3339(_now())} pod {run.uid} restartCount {container.restart_count}\n".encode()
        )
        log_file.flush()
        try:
            process = procs.spawn(argv, log=log_file, env=env, cwd=cwd)
        except OSError as error:
            log_file.write(f"cannot start {argv[0]!r}: {error}\n".encode())
            log_file.close()
            container.previous_termination = container.last_termination
            container.last_termination = Terminated(127, _now(), _now())
            container.crash_streak += 1
            container.next_start_at = now + restart_delay(
                container.crash_streak,
                base_seconds=self.config.backoff_base_seconds,
                cap_seconds=self.config.backoff_cap_seconds,
            )
            container.waiting_reason, container.waiting_message = "RunContainerError", str(error)
            if not should_restart(str(run.pod.get("spec", {}).get("restartPolicy", "Always")), 127):
                container.done = True
            return
        container.process, container.log_file = process, log_file
        container.running_since, container.started_mono = _now(), now
        container.waiting_reason, container.waiting_message = None, ""
        container.env, container.cwd, container.mounts = env, cwd, mounts
        try:
            spec = container.spec
            container.startup = ProbeTracker.start(
                parse_probe(spec.get("startupProbe"), spec, run.ip), initially=False, now=now
            )
            container.readiness = ProbeTracker.start(
                parse_probe(spec.get("readinessProbe"), spec, run.ip), initially=False, now=now
            )
            container.liveness = ProbeTracker.start(
                parse_probe(spec.get("livenessProbe"), spec, run.ip), initially=True, now=now
            )
        except ProbeError as error:
            log.warning("%s/%s: %s; probe ignored", run.key, container.name, error)
        log.info("started %s/%s pid %d: %s", run.key, container.name, process.pid, " ".join(argv))

    def _probe(self, run: PodRun, container: ContainerRun, now: float) -> None:
        if container.startup is not None and not container.startup.passing:
            trackers = [container.startup]
        else:
            trackers = [t for t in (container.readiness, container.liveness) if t is not None]
        for tracker in trackers:
            if tracker.pending is not None:
                if not tracker.pending.done():
                    continue
                tracker.record(bool(tracker.pending.result()), now)
                tracker.pending = None
                self._wake.put(run.key)
            elif now >= tracker.next_due:
                tracker.pending = self._probes.submit(
                    run_probe, tracker.probe, env=container.env, cwd=container.cwd, mounts=container.mounts
                )
        failed_liveness = container.liveness is not None and not container.liveness.passing
        failed_startup = (
            container.startup is not None
            and not container.startup.passing
            and container.startup.failures >= container.startup.probe.failure_threshold
        )
        if (failed_liveness or failed_startup) and container.kill_deadline is None and container.process:
            log.info(
                "%s/%s failed its %s probe: killing it",
                run.key,
                container.name,
                "liveness" if failed_liveness else "startup",
            )
            procs.signal_group(container.process.pid, signal.SIGTERM)
            container.kill_deadline = now + termination_grace_seconds(run.pod)

    def _terminate(self, run: PodRun, *, grace_seconds: float) -> bool:
        """Non-blocking graceful stop of every container; True once all processes are gone."""
        now = time.monotonic()
        if run.terminate_deadline is None:
            run.terminate_deadline = now + grace_seconds
            for container in run.every_container():
                container.done = True
                if container.process is not None:
                    procs.signal_group(container.process.pid, signal.SIGTERM)
                    self._wake_on_exit(run.key, container.process)
            log.info("stopping %s (grace %gs)", run.key, grace_seconds)
        elif now >= run.terminate_deadline:
            for container in run.running():
                procs.signal_group(container.process.pid, signal.SIGKILL)  # type: ignore[union-attr]
        for container in run.every_container():
            self._reap(container, "Never", now)
        return not run.running()

    def _wake_on_exit(self, key: str, process: subprocess.Popen[bytes]) -> None:
        """Wakes the sync loop for `key` the moment the process exits (a kubelet's StopContainer returns
        then), instead of at the next tick that looks at it."""

        def wait() -> None:
            with contextlib.suppress(Exception):
                process.wait()
            self._wake.put(key)

        threading.Thread(target=wait, name=f"exit-{key}", daemon=True).start()

    # -- status

    def _report(self, run: PodRun) -> None:
        previous = run.last_status or run.pod.get("status") or {}
        status = pod_status(
            [c.snapshot() for c in run.containers],
            init_containers=[c.snapshot() for c in run.init_containers],
            pod_uid=run.uid,
            previous_status=previous,
            started_at=run.created_at,
            now=_now(),
            pod_ip=run.ip,
        )
        if status == run.last_status:
            return
        if self.api.patch_pod_status(run.namespace, run.name, status):
            run.last_status = status


# ---------------------------------------------------------------------------------------- helpers


def init_succeeded(container: ContainerRun) -> bool:
    return (
        container.done
        and container.last_termination is not None
        and container.last_termination.exit_code == 0
    )


def _write_private(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    path.chmod(0o600)


def _write_atomically(path: Path, content: str) -> None:
    """A reader sees the old content or the new, never a partial file (the kubelet swaps a symlink)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(content)
    os.replace(staged, path)


def _labels_and_annotations(pod: Manifest) -> tuple[object, object]:
    metadata = pod.get("metadata", {})
    return metadata.get("labels") or {}, metadata.get("annotations") or {}


def _close_log(container: ContainerRun) -> None:
    if container.log_file is not None and container.process is None:
        with contextlib.suppress(OSError):
            container.log_file.close()
        container.log_file = None


def _architecture() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _memory_kib() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    return 4 * 1024 * 1024


def runner_command(kubeconfig: Path, run_dir: Path, node_name: str = DEFAULT_NODE_NAME) -> list[str]:
    """argv that runs the pod runner as its own process (what the launcher and fixtures use)."""
    return [
        sys.executable,
        "-m",
        "e2e.localcluster.podrunner",
        "--kubeconfig",
        str(kubeconfig),
        "--run-dir",
        str(run_dir),
        "--node-name",
        node_name,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run pods of one Kubernetes node as local processes.")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--node-name", default=DEFAULT_NODE_NAME)
    parser.add_argument("--api-host", default="", help="exported to pods as KUBERNETES_SERVICE_HOST/PORT")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    extra_env: dict[str, str] = {}
    if options.api_host:
        host, _, port = str(options.api_host).rpartition(":")
        extra_env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    config = RunnerConfig(
        kubeconfig=options.kubeconfig,
        run_dir=options.run_dir,
        node_name=options.node_name,
        extra_env=extra_env,
    )
    runner = PodRunner(config, KubeApi(config.kubeconfig))
    for sig in (signal.SIGTERM, signal.SIGINT):
        # Only set the event here: the loop notices it within one tick.
        signal.signal(sig, lambda _signum, _frame: runner.stop_event.set())
    runner.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
