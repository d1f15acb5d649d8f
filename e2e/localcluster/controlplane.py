"""A real Kubernetes control plane made of local processes: etcd, kube-apiserver, kube-controller-manager.

Everything binds 127.0.0.1 on free ports, lives under one run directory, and dies with the process
that started it (process groups + PR_SET_PDEATHSIG, see procs.py).

  run_dir/etcd/            etcd data (--unsafe-no-fsync: durability is not wanted here)
  run_dir/pki/             the apiserver's self-signed serving cert (--cert-dir), SA keys, token file
  run_dir/logs/<name>.log  each component's output
  run_dir/kubeconfig       bearer token of a system:masters user; TLS verified against the serving cert
  run_dir/kubeconfig-<user>  the same for each of `users` (so that an audit log can tell them apart)
"""

from __future__ import annotations

import contextlib
import json
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.localcluster import kubeconfig, pki, procs
from e2e.localcluster.ports import free_port

# Controllers the e2e suite relies on; everything else in kube-controller-manager stays off.
CONTROLLERS = (
    "statefulset-controller",
    "deployment-controller",
    "replicaset-controller",
    "job-controller",
    "garbage-collector-controller",  # ownerReference cascades
    "namespace-controller",  # namespace deletion finishes
    "serviceaccount-controller",  # the `default` ServiceAccount that pod admission requires
    "disruption-controller",  # PodDisruptionBudget status
    "persistentvolumeclaim-protection-controller",  # removes the pvc-protection finalizer
    "clusterrole-aggregation-controller",  # aggregate-to-view/edit/admin labels fill the default roles
)


class ClusterStartError(RuntimeError):
    pass


def wait_for(
    check: Callable[[], bool], *, timeout: float, what: str, alive: Callable[[], str | None] | None = None
) -> float:
    """Polls check() until True; raises after timeout or as soon as alive() names a dead process."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(OSError, ValueError):
            if check():
                return time.monotonic() - started
        dead = alive() if alive else None
        if dead:
            raise ClusterStartError(f"{dead} while waiting for {what}")
        if time.monotonic() - started > timeout:
            raise ClusterStartError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


def _log_tail(path: Path, lines: int = 25) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


@dataclass
class LocalCluster:
    bin_dir: Path
    run_dir: Path
    controllers: tuple[str, ...] = CONTROLLERS
    start_timeout_seconds: float = 90.0
    users: tuple[str, ...] = ()
    """More system:masters users, each with its own token and kubeconfig (kubeconfig_for)."""
    apiserver_args: tuple[str, ...] = ()
    """Extra kube-apiserver flags (e.g. an audit log)."""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    api_port: int = 0
    token: str = ""
    _user_tokens: dict[str, str] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig_path(self) -> Path:
        return self.run_dir / "kubeconfig"

    def kubeconfig_for(self, user: str) -> Path:
        assert user in self.users, f"{user} is not one of this cluster's users"
        return self.run_dir / f"kubeconfig-{user}"

    @property
    def logs_dir(self) -> Path:
        return self.run_dir / "logs"

    # -- start / stop

    def start(self, attempts: int = 3) -> None:
        """Starts etcd, kube-apiserver and kube-controller-manager; retries with new ports on failure."""
        for attempt in range(1, attempts + 1):
            try:
                self._start_once()
                return
            except ClusterStartError:
                self.stop()
                if attempt == attempts:
                    raise

    def _start_once(self) -> None:
        began = time.monotonic()
        for sub in ("pki", "logs"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        etcd_client, etcd_peer, self.api_port = free_port(), free_port(), free_port()
        self._start_etcd(etcd_client, etcd_peer)
        self.timings["etcd"] = wait_for(
            lambda: _http_ok(f"http://127.0.0.1:{etcd_client}/health"),
            timeout=30,
            what="etcd /health",
            alive=self._dead_process,
        )
        self._start_apiserver(f"http://127.0.0.1:{etcd_client}")
        self.timings["kube-apiserver"] = wait_for(
            lambda: self._api_get("/readyz", verify=False)[0] == 200,
            timeout=self.start_timeout_seconds,
            what="kube-apiserver /readyz",
            alive=self._dead_process,
        )
        ca_pem = (self.run_dir / "pki" / "apiserver.crt").read_bytes()
        kubeconfig.write(self.kubeconfig_path, kubeconfig.kubeconfig(self.server, self.token, ca_pem))
        for user, token in self._user_tokens.items():
            kubeconfig.write(self.kubeconfig_for(user), kubeconfig.kubeconfig(self.server, token, ca_pem))
        self._start_controller_manager()
        self.timings["default-serviceaccount"] = wait_for(
            lambda: self._api_get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
            timeout=self.start_timeout_seconds,
            what="the default ServiceAccount (kube-controller-manager)",
            alive=self._dead_process,
        )
        self.timings["total"] = time.monotonic() - began

    def stop(self) -> None:
        """Stops the components in reverse order of their start: SIGTERM, then SIGKILL after 10 s."""
        for name in reversed(list(self.processes)):
            procs.stop(self.processes[name], grace_seconds=10)
        self.processes.clear()
        # etcd preallocates 64 MB WAL segments; logs and pod files stay for inspection.
        shutil.rmtree(self.run_dir / "etcd", ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # -- components

    def _spawn(self, name: str, argv: list[str]) -> None:
        log_path = self.logs_dir / f"{name}.log"
        with log_path.open("ab") as log_file:
            self.processes[name] = procs.spawn(argv, log=log_file, env={"PATH": "/usr/bin:/bin"})

    def _dead_process(self) -> str | None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = _log_tail(self.logs_dir / f"{name}.log")
                return f"{name} exited with {process.returncode}; last lines of its log:\n{tail}"
        return None

    def _start_etcd(self, client_port: int, peer_port: int) -> None:
        client_url, peer_url = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=local",
                f"--data-dir={self.run_dir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=local={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",
                "--listen-metrics-urls=",
                "--log-level=warn",
            ],
        )

    def _start_apiserver(self, etcd_url: str) -> None:
        pki_dir = self.run_dir / "pki"
        sa_private, sa_public = pki.write_service_account_keys(pki_dir)
        self.token = pki.new_token()
        self._user_tokens = {user: pki.new_token() for user in self.users}
        tokens = pki_dir / "tokens.csv"
        tokens.write_text(
            pki.token_file_line(self.token)
            + "".join(pki.token_file_line(token, user, user) for user, token in self._user_tokens.items())
        )
        tokens.chmod(0o600)
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                f"--cert-dir={pki_dir}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={sa_public}",
                f"--service-account-signing-key-file={sa_private}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                # No kube-proxy or nodes with real addresses: keep the `kubernetes` Endpoints out of it.
                "--endpoint-reconciler-type=none",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                *self.apiserver_args,
            ],
        )

    def _start_controller_manager(self) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig_path}",
                f"--controllers={','.join(self.controllers)}",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                "--kube-api-qps=100",
                "--kube-api-burst=200",
                "--concurrent-statefulset-syncs=10",
            ],
        )

    # -- HTTP

    def _api_get(self, path: str, *, verify: bool = True) -> tuple[int, Any]:
        if verify:
            context = ssl.create_default_context(cafile=str(self.run_dir / "pki" / "apiserver.crt"))
        else:
            context = ssl._create_unverified_context()  # the serving cert may not exist yet
        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                body = response.read()
                return int(response.status), json.loads(body) if body.startswith(b"{") else body.decode()
        except urllib.error.HTTPError as error:
            return int(error.code), None


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return int(response.status) == 200
