"""Probes, restart policies and graceful deletion as the local pod runner implements them."""

from __future__ import annotations

import subprocess
import time

import pytest

from e2e.helpers import Cluster, Manifest, wait_until
from e2e.localcluster.ports import free_port
from e2e.tests.workloads import SERVER, condition, container, pod, process_alive, starts

pytestmark = pytest.mark.localcluster

# Exits with 1 on its first two runs and 0 on the third (the pod directory survives restarts).
FLAKY = r"""
from pathlib import Path
runs = Path("runs")
count = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(count))
raise SystemExit(0 if count >= 3 else 1)
"""

# Serves HTTP 200 on $PORT/healthz; ignores SIGTERM so that only SIGKILL ends it.
STUBBORN_HTTP = r"""
import http.server, os, signal
from pathlib import Path
signal.signal(signal.SIGTERM, lambda *_: Path("sigterm-ignored").write_text("yes"))
Path(f"started-{os.getpid()}.json").write_text("{}")
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Health).serve_forever()
"""


def _pod(cluster: Cluster, namespace: str, name: str) -> Manifest:
    return cluster.kubectl.get("pod", name, namespace)


def _phase(cluster: Cluster, namespace: str, name: str, *phases: str) -> Manifest:
    def reached() -> Manifest | None:
        found = _pod(cluster, namespace, name)
        return found if found.get("status", {}).get("phase") in phases else None

    return wait_until(reached, timeout=60, what=f"{name} to reach {phases}")


def _ready(cluster: Cluster, namespace: str, name: str, want: str) -> None:
    wait_until(
        lambda: condition(_pod(cluster, namespace, name), "Ready") == want,
        timeout=30,
        what=f"{name} Ready={want}",
    )


def test_exec_readiness_probe_gates_ready(cluster: Cluster, namespace: str) -> None:
    probe = {"exec": {"command": ["test", "-f", "ready-flag"]}, "periodSeconds": 1, "failureThreshold": 1}
    cluster.kubectl.apply(pod("gated", container(SERVER, readinessProbe=probe)), namespace)
    _phase(cluster, namespace, "gated", "Running")
    time.sleep(2.5)  # several probe periods
    assert condition(_pod(cluster, namespace, "gated"), "Ready") == "False"

    flag = cluster.pod_dir(namespace, "gated") / "ready-flag"
    flag.write_text("")
    _ready(cluster, namespace, "gated", "True")

    flag.unlink()
    _ready(cluster, namespace, "gated", "False")
    assert _pod(cluster, namespace, "gated")["status"]["phase"] == "Running"


def test_http_readiness_probe_and_sigkill_after_grace_period(cluster: Cluster, namespace: str) -> None:
    port = free_port()
    probe = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1, "initialDelaySeconds": 1}
    app = container(
        STUBBORN_HTTP,
        env=[{"name": "PORT", "value": str(port)}],
        ports=[{"name": "http", "containerPort": port}],
        readinessProbe=probe,
    )
    cluster.kubectl.apply(pod("stubborn", app, grace_seconds=2), namespace)
    _ready(cluster, namespace, "stubborn", "True")
    directory = cluster.pod_dir(namespace, "stubborn")
    (pid,) = starts(directory)

    began = time.monotonic()
    cluster.kubectl.run("delete", "pod", "stubborn", "-n", namespace, "--wait=true", "--timeout=60s")
    took = time.monotonic() - began

    assert (directory / "sigterm-ignored").exists()
    assert not process_alive(pid)
    assert took >= 1.8, f"deleted after {took:.1f}s, before the 2 s grace period"


def test_on_failure_restarts_until_success(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl.apply(pod("flaky", container(FLAKY), restart_policy="OnFailure"), namespace)
    done = _phase(cluster, namespace, "flaky", "Succeeded")
    (status,) = done["status"]["containerStatuses"]
    assert status["restartCount"] == 2
    assert status["state"]["terminated"]["exitCode"] == 0
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert (cluster.pod_dir(namespace, "flaky") / "runs").read_text() == "3"


def test_never_restart_reports_failure(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl.apply(pod("broken", container("raise SystemExit(3)"), restart_policy="Never"), namespace)
    done = _phase(cluster, namespace, "broken", "Failed", "Succeeded")
    assert done["status"]["phase"] == "Failed"
    (status,) = done["status"]["containerStatuses"]
    assert status["restartCount"] == 0
    assert status["state"]["terminated"]["exitCode"] == 3
    assert status["state"]["terminated"]["reason"] == "Error"


def test_always_restarts_a_crashing_container_with_backoff(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl.apply(pod("crashy", container("raise SystemExit(2)")), namespace)

    def restarted_twice() -> Manifest | None:
        statuses = _pod(cluster, namespace, "crashy").get("status", {}).get("containerStatuses") or [{}]
        return statuses[0] if statuses[0].get("restartCount", 0) >= 2 else None

    status = wait_until(restarted_twice, timeout=30, what="two restarts")
    assert _pod(cluster, namespace, "crashy")["status"]["phase"] == "Running"
    assert status["lastState"]["terminated"]["exitCode"] == 2
    log = (cluster.pod_dir(namespace, "crashy") / "app.log").read_text()
    assert log.count("--- ") >= 3  # one header per start


def test_init_containers_run_in_order_before_the_app(cluster: Cluster, namespace: str) -> None:
    first = container("from pathlib import Path; Path('order').write_text('first ')", name="first")
    second = container(
        "from pathlib import Path; p = Path('order'); p.write_text(p.read_text() + 'second')", name="second"
    )
    manifest = pod("initialized", container(SERVER))
    manifest["spec"]["initContainers"] = [first, second]
    cluster.kubectl.apply(manifest, namespace)

    _ready(cluster, namespace, "initialized", "True")
    done = _pod(cluster, namespace, "initialized")
    assert condition(done, "Initialized") == "True"
    assert [s["state"]["terminated"]["exitCode"] for s in done["status"]["initContainerStatuses"]] == [0, 0]
    assert (cluster.pod_dir(namespace, "initialized") / "order").read_text() == "first second"
    assert starts(cluster.pod_dir(namespace, "initialized"))


def test_failed_init_container_fails_a_never_restarting_pod(cluster: Cluster, namespace: str) -> None:
    manifest = pod("uninitialized", container(SERVER), restart_policy="Never")
    manifest["spec"]["initContainers"] = [container("raise SystemExit(4)", name="setup")]
    cluster.kubectl.apply(manifest, namespace)

    done = _phase(cluster, namespace, "uninitialized", "Failed", "Running", "Succeeded")
    assert done["status"]["phase"] == "Failed"
    assert condition(done, "Initialized") == "False"
    (init,) = done["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 4
    assert done["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "PodInitializing"
    assert not starts(cluster.pod_dir(namespace, "uninitialized"))


def test_a_deleted_pod_reports_its_terminal_phase_before_it_goes(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl.apply(pod("leaving", container(SERVER)), namespace)
    _phase(cluster, namespace, "leaving", "Running")
    kubectl = cluster.kubectl
    argv = [
        str(kubectl.binary),
        f"--kubeconfig={kubectl.kubeconfig}",
        "get",
        "pod",
        "leaving",
        "-n",
        namespace,
    ]
    columns = "-o=custom-columns=PHASE:.status.phase,STATES:.status.containerStatuses[*].state"
    with subprocess.Popen(
        [*argv, "--watch", "--no-headers", columns], stdout=subprocess.PIPE, text=True
    ) as watch:
        try:
            time.sleep(1)  # the watch is established
            kubectl.run("delete", "pod", "leaving", "-n", namespace, "--wait=true", "--timeout=60s")
            time.sleep(1)
        finally:
            watch.terminate()
        seen = [line.split(None, 1) for line in (watch.stdout.read() if watch.stdout else "").splitlines()]
    phases = [cells[0] for cells in seen]
    assert phases[0] == "Running"
    # SERVER exits 0 on SIGTERM: the last version of the pod says so, with its container terminated.
    assert phases[-1] == "Succeeded", seen
    assert "terminated" in seen[-1][1] and "running" not in seen[-1][1]
