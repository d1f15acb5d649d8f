"""The pod runner gives each process the environment its pod spec describes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from e2e.helpers import Cluster, wait_until
from e2e.tests.workloads import SERVER, container, starts, statefulset

pytestmark = pytest.mark.localcluster


def _started_env(directory: Path) -> dict[str, str]:
    """The environment of the one process started in this pod directory."""
    started = wait_until(lambda: starts(directory), timeout=60, what=f"a process to start in {directory}")
    (env,) = started.values()
    return env


def _field(name: str, path: str) -> dict[str, object]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def test_env_resolves_field_refs_config_maps_secrets_and_volumes(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    kubectl.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings"},
                "data": {"color": "blue", "size": "7"},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "credentials"},
                "stringData": {"password": "hunter2"},
            },
        ],
        namespace,
    )
    env = [
        _field("POD_NAME", "metadata.name"),
        _field("POD_NAMESPACE", "metadata.namespace"),
        _field("POD_UID", "metadata.uid"),
        _field("POD_INDEX", "metadata.labels['apps.kubernetes.io/pod-index']"),
        _field("APP_LABEL", "metadata.labels['app']"),
        _field("NODE", "spec.nodeName"),
        _field("POD_IP", "status.podIP"),
        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "credentials", "key": "password"}}},
        {
            "name": "ABSENT",
            "valueFrom": {"configMapKeyRef": {"name": "no-such-map", "key": "x", "optional": True}},
        },
        {"name": "GREETING", "value": "hello-$(POD_NAME)-$$(POD_NAME)"},
        {"name": "SCRATCH_FILE", "value": "/scratch/notes.txt"},
    ]
    app = container(
        SERVER,
        env=env,
        envFrom=[{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
        volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}],
    )
    sts = statefulset("envy", 2, app)
    sts["spec"]["template"]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    kubectl.apply(sts, namespace)

    for ordinal in (0, 1):
        name = f"envy-{ordinal}"
        directory = cluster.pod_dir(namespace, name)
        seen = _started_env(directory)
        pod = kubectl.get("pod", name, namespace)
        assert seen["POD_NAME"] == name
        assert seen["POD_NAMESPACE"] == namespace
        assert seen["POD_UID"] == pod["metadata"]["uid"]
        assert seen["POD_INDEX"] == str(ordinal)
        assert seen["APP_LABEL"] == "envy"
        assert seen["NODE"] == "staticfleet-node"
        assert seen["POD_IP"] == "127.0.0.1"
        assert seen["COLOR"] == "blue"
        assert seen["PASSWORD"] == "hunter2"
        assert "ABSENT" not in seen
        assert seen["GREETING"] == f"hello-{name}-$(POD_NAME)"
        assert seen["CFG_color"] == "blue" and seen["CFG_size"] == "7"
        scratch = directory / "volumes" / "scratch"
        assert seen["STATICFLEET_VOLUME_SCRATCH"] == str(scratch)
        assert seen["SCRATCH_FILE"] == str(scratch / "notes.txt")
        assert seen["PATH"].split(":")[0] == str(Path(sys.executable).parent)


def test_missing_config_map_holds_the_container_until_it_exists(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    app = container(
        SERVER, env=[{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "mode"}}}]
    )
    kubectl.apply(statefulset("late", 1, app), namespace)

    def waiting_reason() -> str | None:
        pod = kubectl.get_or_none("pod", "late-0", namespace)
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or [{}]
        return str(statuses[0].get("state", {}).get("waiting", {}).get("reason", "")) or None

    assert wait_until(waiting_reason, timeout=60, what="a waiting reason") == "CreateContainerConfigError"
    assert not starts(cluster.pod_dir(namespace, "late-0"))

    late_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}, "data": {"mode": "on"}}
    kubectl.apply(late_map, namespace)

    seen = _started_env(cluster.pod_dir(namespace, "late-0"))
    assert seen["MODE"] == "on"


def test_a_downward_api_volume_shows_an_annotation_added_while_the_pod_runs(
    cluster: Cluster, namespace: str
) -> None:
    kubectl = cluster.kubectl
    app = container(SERVER, volumeMounts=[{"name": "info", "mountPath": "/etc/info"}])
    sts = statefulset("noted", 1, app)
    note = {"path": "note", "fieldRef": {"fieldPath": "metadata.annotations['example.com/note']"}}
    sts["spec"]["template"]["spec"]["volumes"] = [
        {
            "name": "info",
            "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}, note]},
        }
    ]
    kubectl.apply(sts, namespace)
    directory = cluster.pod_dir(namespace, "noted-0")
    _started_env(directory)
    info = directory / "volumes" / "info"
    assert (info / "name").read_text() == "noted-0"
    assert (info / "note").read_text() == ""  # not annotated (yet): an empty file
    kubectl.run("annotate", "pod", "noted-0", "example.com/note=leaving", "-n", namespace)
    wait_until(
        lambda: (info / "note").read_text() == "leaving", timeout=30, what="the annotation in the file"
    )
    assert len(starts(directory)) == 1  # the same process saw it: no restart
