"""A failure report on the local pod runner, which serves no kubelet API: each container's output comes
from the runner's own file, since `kubectl logs` cannot reach the pod."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.helpers import Kubectl, pod_report

POD = {
    "metadata": {"name": "orders-1"},
    "status": {
        "phase": "Running",
        "containerStatuses": [
            {"name": "consumer", "ready": True, "restartCount": 1, "state": {"running": {}}, "lastState": {}}
        ],
    },
}


def fake_kubectl(tmp_path: Path) -> Kubectl:
    """A kubectl that lists one pod and, as against the pod runner, fails every `logs`."""
    binary = tmp_path / "kubectl"
    listing = json.dumps({"items": [POD]})
    binary.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  *' get pods '*) echo '{listing}' ;;\n"
        "  *' logs '*) echo 'Error from server: lookup staticfleet-node: no such host' >&2; exit 1 ;;\n"
        "esac\n"
    )
    binary.chmod(0o755)
    return Kubectl(binary, tmp_path / "kubeconfig")


def test_a_pod_runners_container_output_is_read_from_its_file_every_run_marked(tmp_path: Path) -> None:
    kubectl = fake_kubectl(tmp_path)
    log = tmp_path / "pods" / "shop" / "orders-1" / "consumer.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "--- 2026-11-29T15:49:43Z pod u restartCount 0\n"
        '{"event": "fatal", "exit_code": 82}\n'
        "--- 2026-11-29T15:50:03Z pod u restartCount 1\n"
        '{"event": "started"}\n'
    )
    report = pod_report(kubectl, ["shop"])
    assert "log (the pod runner's file: every run of the container):" in report
    assert '{"event": "fatal", "exit_code": 82}' in report and "restartCount 1" in report
    assert "no such host" not in report
    assert report.count("pod runner's file") == 1  # not again as the previous container's


def test_without_the_runners_file_the_answer_of_kubectl_logs_is_shown(tmp_path: Path) -> None:
    report = pod_report(fake_kubectl(tmp_path), ["shop"])
    assert "log:\n      Error from server" in report and "previous log:" in report
