"""Helpers for e2e tests: a kubectl runner, a bounded wait, and a report of pods for failure messages."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from e2e.localcluster.controlplane import LocalCluster
from e2e.localcluster.podspec import claim_dir, pod_dir

T = TypeVar("T")
Manifest = dict[str, Any]


class KubectlError(RuntimeError):
    pass


@dataclass(frozen=True)
class Kubectl:
    """Runs one kubectl binary against one kubeconfig."""

    binary: Path | str
    kubeconfig: Path

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args]
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def wait_established(self, *crds: str, timeout: float = 60) -> None:
        """Until every CRD named is Established. Polled: `kubectl wait --for=condition=Established` fails at
        once, instead of waiting, while a new CRD has no status.conditions yet."""
        wait_until(
            lambda: all(established(self.json("get", "crd", name)) for name in crds),
            timeout=timeout,
            what=f"{', '.join(crds)} to be Established",
        )

    def get(self, kind: str, name: str, namespace: str) -> Manifest:
        found: Manifest = self.json("get", kind, name, "-n", namespace)
        return found

    def get_or_none(self, kind: str, name: str, namespace: str) -> Manifest | None:
        done = self.run("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found", check=False)
        if done.returncode != 0:
            raise KubectlError(done.stderr.strip())
        if not done.stdout.strip():
            return None
        found: Manifest = json.loads(done.stdout)
        return found

    def items(self, kind: str, namespace: str, *selector: str) -> list[Manifest]:
        found: list[Manifest] = self.json("get", kind, "-n", namespace, *selector)["items"]
        return found

    def apply(self, manifests: Manifest | Sequence[Manifest], namespace: str) -> None:
        documents = [manifests] if isinstance(manifests, dict) else list(manifests)
        body = {"apiVersion": "v1", "kind": "List", "items": documents}
        self.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")


@contextmanager
def port_forward(
    kubectl: Kubectl, namespace: str, target: str, port: int, timeout: float = 30
) -> Iterator[int]:
    """`kubectl port-forward` from a port of the kernel's choosing on 127.0.0.1 to `port` of `target`
    (pod/NAME or svc/NAME), for as long as the context lasts; yields the local port. One forward serves
    many requests, where each `kubectl exec` starts processes in the pod and on this machine."""
    argv = [
        str(kubectl.binary), f"--kubeconfig={kubectl.kubeconfig}", "port-forward", "-n", namespace,
        "--address", "127.0.0.1", target, f":{port}",
    ]  # fmt: skip
    # stderr to a file, not a pipe: nothing has to read it while the forward runs.
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True
        )
        try:
            yield _forwarded_port(process, errors, timeout, f"kubectl port-forward {target} :{port}")
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _forwarded_port(process: subprocess.Popen[str], errors: IO[str], timeout: float, what: str) -> int:
    """The local port `kubectl port-forward` says it listens on; its stdout read on to the end after that,
    as it writes a line per connection and a full pipe would stop it."""
    lines: queue.Queue[str | None] = queue.Queue()
    announced = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if not announced.is_set():
                lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        found = _FORWARDING.search(line or "")
        if found:
            announced.set()
            return int(found.group(1))
        if line is None:
            process.kill()
            process.wait(timeout=10)
            errors.seek(0)
            raise KubectlError(f"{what} did not start: {errors.read().strip() or 'no answer'}")


def established(crd: Manifest) -> bool:
    """A CustomResourceDefinition the API server serves."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def wait_until(probe: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.2) -> T:
    """Calls probe() until it returns something truthy and returns that; raises TimeoutError after timeout."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}; last value: {last!r}")
        time.sleep(interval)


@dataclass(frozen=True)
class Cluster:
    """What the `cluster` fixture gives a test."""

    kubeconfig: Path
    kubectl: Kubectl
    local: LocalCluster | None  # None on an external cluster

    def run_dir(self) -> Path:
        if self.local is None:
            raise RuntimeError("pod files are on this host only with the local cluster")
        return self.local.run_dir

    def pod_dir(self, namespace: str, pod: str) -> Path:
        return pod_dir(self.run_dir(), namespace, pod)

    def claim_dir(self, namespace: str, claim: str) -> Path:
        return claim_dir(self.run_dir(), namespace, claim)


def pod_runner_log(
    kubectl: Kubectl, namespace: str, pod: str, status: Manifest, log_lines: int = 80
) -> str | None:
    """The last lines of a container's output as the local pod runner keeps it, every run of the container
    marked, in its run directory beside the kubeconfig; None elsewhere. The runner serves no kubelet API,
    so `kubectl logs` cannot reach its pods."""
    path = pod_dir(Path(kubectl.kubeconfig).parent, namespace, pod) / f"{status['name']}.log"
    if not path.is_file():
        return None
    runs = 1 + int(status.get("restartCount") or 0)
    return "\n".join(path.read_text(errors="replace").splitlines()[-log_lines * min(runs, 2) :])


def pod_report(
    kubectl: Kubectl, namespaces: Iterable[str], log_lines: int = 40, every_event: bool = False
) -> str:
    """Each pod's phase, container states and last log lines (and the previous container's, after a
    restart), and the namespace's warning events: what a failure in the image looks like from outside.
    With `every_event`, all of the namespace's events in time order instead: when each pod was killed,
    scheduled and started, for a failure that depends on how long a pod took to come back."""
    lines: list[str] = []
    for namespace in namespaces:
        try:
            pods = kubectl.items("pods", namespace)
        except KubectlError as exc:
            lines.append(f"[{namespace}] pods: {exc}")
            continue
        for pod in pods:
            name = pod["metadata"]["name"]
            lines.append(f"--- pod {namespace}/{name}: {pod.get('status', {}).get('phase')}")
            for status in pod.get("status", {}).get("containerStatuses", []) or []:
                state = json.dumps(status.get("state"), sort_keys=True)
                last = json.dumps(status.get("lastState") or {}, sort_keys=True)
                lines.append(
                    f"    container {status['name']}: ready={status.get('ready')} "
                    f"restarts={status.get('restartCount')} state={state} lastState={last}"
                )
                restarted = bool(status.get("restartCount"))
                for previous in (False, True) if restarted else (False,):
                    args = ["logs", "-n", namespace, name, "-c", status["name"], f"--tail={log_lines}"]
                    done = kubectl.run(*args, *(["--previous"] if previous else []), check=False)
                    label = "previous log" if previous else "log"
                    body = (done.stdout or done.stderr).rstrip()
                    kept = (
                        None
                        if done.returncode == 0
                        else pod_runner_log(kubectl, namespace, name, status, log_lines)
                    )
                    if kept is not None:
                        label, body = "log (the pod runner's file: every run of the container)", kept
                    lines.append(f"    {label}:\n" + "\n".join(f"      {line}" for line in body.splitlines()))
                    if kept is not None:
                        break
        columns = "OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message"
        if every_event:
            timed = f"FIRST:.firstTimestamp,LAST:.lastTimestamp,COUNT:.count,{columns}"
            query = ["--sort-by=.lastTimestamp", "-o", f"custom-columns={timed}"]
        else:
            query = ["--field-selector=type=Warning", "-o", f"custom-columns={columns}"]
        done = kubectl.run("get", "events", "-n", namespace, *query, check=False)
        if done.stdout.strip():
            kind = "events" if every_event else "warning events"
            lines.append(f"--- {kind} in {namespace}:\n{done.stdout.rstrip()}")
    return "\n".join(lines)
