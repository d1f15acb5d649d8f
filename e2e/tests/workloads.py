"""Manifests and small programs shared by the local-cluster e2e tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

Manifest = dict[str, Any]

# A long-running pod program: records its start (pid + environment) in its working directory, and on
# SIGTERM writes a marker file before exiting. Optional: DATA_DIR gets a start counter. Each record
# appears whole (written aside, then renamed), so a test that polls for it never reads half of one.
SERVER = r"""
import json, os, signal, sys, time
from pathlib import Path
def record(path, text):
    part = path.with_name("." + path.name + ".part")
    part.write_text(text)
    os.replace(part, path)
pid = os.getpid()
record(Path(f"started-{pid}.json"), json.dumps(dict(os.environ)))
data = os.environ.get("DATA_DIR")
if data:
    counter = Path(data) / "starts"
    record(counter, str(int(counter.read_text()) + 1 if counter.exists() else 1))
def stop(signum, frame):
    Path(f"sigterm-{pid}").write_text(os.environ.get("HOSTNAME", ""))
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    time.sleep(0.1)
"""


def container(source: str, name: str = "app", **extra: Any) -> Manifest:
    spec: Manifest = {
        "name": name,
        "image": "python:3.11-slim",
        "command": ["python", "-u", "-c", source],
    }
    spec.update(extra)
    return spec


def statefulset(name: str, replicas: int, app: Manifest, *, claims: list[Manifest] | None = None) -> Manifest:
    """A Parallel StatefulSet with one container and a short grace period."""
    manifest: Manifest = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 2, "containers": [app]},
            },
        },
    }
    if claims:
        manifest["spec"]["volumeClaimTemplates"] = claims
    return manifest


def claim_template(name: str, size: str = "1Mi") -> Manifest:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def pod(name: str, app: Manifest, *, restart_policy: str = "Always", grace_seconds: int = 2) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": grace_seconds,
            "containers": [app],
        },
    }


def starts(pod_directory: Path) -> dict[int, dict[str, str]]:
    """pid -> environment of every SERVER process that started in this pod directory."""
    found: dict[int, dict[str, str]] = {}
    for path in pod_directory.glob("started-*.json"):
        found[int(path.stem.split("-", 1)[1])] = json.loads(path.read_text())
    return found


def sigterm_received(pod_directory: Path, pid: int) -> bool:
    return (pod_directory / f"sigterm-{pid}").exists()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    # A zombie has exited; only its parent has not collected it yet.
    return "\nState:\tZ" not in status


def condition(manifest: Manifest, kind: str) -> str | None:
    for entry in manifest.get("status", {}).get("conditions", []):
        if entry.get("type") == kind:
            return str(entry.get("status"))
    return None
