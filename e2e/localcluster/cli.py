"""`python -m e2e.localcluster up|down|status`: a local cluster that outlives the command.

`up` builds the binaries if needed, then starts a background `serve` process that owns the control
plane and the pod runner (they die with it) and records itself in <home>/state.json; `down` stops
that process; `status` reports on it. <home> defaults to $STATICFLEET_CACHE/localcluster.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2e.localcluster import binaries, procs
from e2e.localcluster.controlplane import LocalCluster
from e2e.localcluster.podrunner import DEFAULT_NODE_NAME, RUNNER_MARKER, runner_command

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def default_home() -> Path:
    return binaries.cache_dir() / "localcluster"


def state_path(home: Path) -> Path:
    return home / "state.json"


def read_state(home: Path) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads(state_path(home).read_text())
    except (OSError, ValueError):
        return None
    return state


def _running_state(home: Path) -> dict[str, Any] | None:
    state = read_state(home)
    if state and procs.pid_alive(int(state["pid"])):
        return state
    return None


def _python_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


# -- up


def up(home: Path, *, pod_runner: bool, timeout: float) -> int:
    running = _running_state(home)
    if running:
        print(f"export KUBECONFIG={running['kubeconfig']}")
        return 0
    binaries.ensure_binaries()
    home.mkdir(parents=True, exist_ok=True)
    state_path(home).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "e2e.localcluster", "--home", str(home), "serve"]
    if not pod_runner:
        argv.append("--no-pod-runner")
    log_path = home / "serve.log"
    with log_path.open("wb") as log_file:
        # Detached on purpose: this process must outlive `up`.
        server = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=_python_env(),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = read_state(home)
        if state and state.get("ready"):
            print(f"local cluster up in {state['start_seconds']:.1f}s: {state['server']}", file=sys.stderr)
            print(f"export KUBECONFIG={state['kubeconfig']}")
            return 0
        if server.poll() is not None:
            break
        time.sleep(0.2)
    print(f"local cluster did not start; see {log_path}:", file=sys.stderr)
    print(log_path.read_text(errors="replace")[-4000:], file=sys.stderr)
    procs.stop(server, grace_seconds=10)
    return 1


# -- serve (the background process)


def serve(home: Path, *, pod_runner: bool) -> int:
    stop_requested = False

    def request_stop(_signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    run_dir = home / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cluster = LocalCluster(binaries.ensure_binaries(), run_dir)
    children: dict[str, subprocess.Popen[bytes]] = {}
    started = time.monotonic()
    exit_code = 0
    try:
        cluster.start()
        if pod_runner:
            argv = [
                *runner_command(cluster.kubeconfig_path, run_dir),
                f"--api-host=127.0.0.1:{cluster.api_port}",
            ]
            with (cluster.logs_dir / "podrunner.log").open("ab") as log_file:
                children["podrunner"] = procs.spawn(
                    argv, log=log_file, env=_python_env(), cwd=REPO_ROOT, parent_death_signal=signal.SIGTERM
                )
        state = {
            "pid": os.getpid(),
            "ready": True,
            "server": cluster.server,
            "kubeconfig": str(cluster.kubeconfig_path),
            "run_dir": str(run_dir),
            "bin_dir": str(cluster.bin_dir),
            "node": DEFAULT_NODE_NAME if pod_runner else None,
            "components": {name: p.pid for name, p in {**cluster.processes, **children}.items()},
            "start_seconds": time.monotonic() - started,
            "timings": cluster.timings,
        }
        state_path(home).write_text(json.dumps(state, indent=2) + "\n")
        print(json.dumps(state, indent=2), flush=True)
        while not stop_requested:
            everything = {**cluster.processes, **children}
            dead = [name for name, p in everything.items() if p.poll() is not None]
            if dead:
                print(f"{', '.join(dead)} exited; stopping the local cluster", flush=True)
                exit_code = 1
                break
            time.sleep(0.5)
    finally:
        for child in children.values():
            procs.stop(child, grace_seconds=30)
        procs.sweep(RUNNER_MARKER, str(run_dir))
        cluster.stop()
        state_path(home).unlink(missing_ok=True)
        print("local cluster stopped", flush=True)
    return exit_code


# -- down / status


def down(home: Path, *, timeout: float) -> int:
    state = read_state(home)
    if state is None:
        print("local cluster is not running", file=sys.stderr)
        return 0
    pid = int(state["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while procs.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if procs.pid_alive(pid):
        # Its children have PR_SET_PDEATHSIG; the explicit kills cover a platform without it.
        for target in [pid, *state.get("components", {}).values()]:
            procs.signal_group(int(target), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(target), signal.SIGKILL)
    procs.sweep(RUNNER_MARKER, str(state.get("run_dir", "")))
    state_path(home).unlink(missing_ok=True)
    print("local cluster stopped", file=sys.stderr)
    return 0


def status(home: Path) -> int:
    state = _running_state(home)
    if state is None:
        print("local cluster is not running")
        return 1
    kubectl = Path(state["bin_dir"]) / "kubectl"
    readyz = subprocess.run(
        [str(kubectl), f"--kubeconfig={state['kubeconfig']}", "get", "--raw", "/readyz"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    healthy = readyz.returncode == 0 and readyz.stdout.strip() == "ok"
    print(f"server:     {state['server']} ({'ready' if healthy else 'NOT READY'})")
    print(f"kubeconfig: {state['kubeconfig']}")
    print(f"run dir:    {state['run_dir']}")
    print(f"node:       {state.get('node') or '(no pod runner)'}")
    for name, pid in state["components"].items():
        print(f"  {name:<24} pid {pid:<8} {'running' if procs.pid_alive(int(pid)) else 'EXITED'}")
    return 0 if healthy else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.localcluster", description=__doc__)
    parser.add_argument(
        "--home", type=Path, default=None, help="state and run dir (default: cache/localcluster)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="start in the background; prints `export KUBECONFIG=...`")
    start.add_argument("--no-pod-runner", action="store_true", help="control plane only")
    start.add_argument("--timeout", type=float, default=180)
    run = commands.add_parser("serve", help="run in the foreground (what `up` starts)")
    run.add_argument("--no-pod-runner", action="store_true")
    stop = commands.add_parser("down", help="stop it")
    stop.add_argument("--timeout", type=float, default=60)
    commands.add_parser("status", help="is it running and ready")
    options = parser.parse_args(argv)
    home: Path = options.home or default_home()
    if options.command == "up":
        return up(home, pod_runner=not options.no_pod_runner, timeout=options.timeout)
    if options.command == "serve":
        return serve(home, pod_runner=not options.no_pod_runner)
    if options.command == "down":
        return down(home, timeout=options.timeout)
    return status(home)
