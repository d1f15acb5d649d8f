"""Unit tests of the pure parts of the pod runner: env resolution, volumes, probes, restarts, status."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from e2e.localcluster.kubeconfig import kubeconfig
from e2e.localcluster.podspec import (
    OWN_IP_BLOCK,
    EnvResolutionError,
    Manifest,
    OwnIps,
    Probe,
    ProbeError,
    TokenSpec,
    container_argv,
    container_mounts,
    decode_secret_data,
    downward_api_files,
    expand_references,
    field_value,
    kubeconfig_for_container,
    parse_probe,
    plan_volumes,
    probe_url,
    resolve_env,
    restart_delay,
    rewrite_word,
    schedulable_here,
    service_account_files,
    service_account_kubeconfig,
    should_restart,
    termination_grace_seconds,
    token_specs,
    volume_env_name,
    wants_own_ip,
)
from e2e.localcluster.podstatus import ContainerSnapshot, Terminated, pod_phase, pod_status


class FakeSources:
    def __init__(
        self, maps: Mapping[str, Mapping[str, str]], secrets: Mapping[str, Mapping[str, str]]
    ) -> None:
        self.maps, self.secrets = maps, secrets

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.maps.get(f"{namespace}/{name}")

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.secrets.get(f"{namespace}/{name}")


SOURCES = FakeSources({"ns/cfg": {"color": "blue", "bad key": "x"}}, {"ns/sec": {"password": "hunter2"}})
POD: Manifest = {
    "metadata": {
        "name": "web-2",
        "namespace": "ns",
        "uid": "u-1",
        "labels": {"apps.kubernetes.io/pod-index": "2", "app": "web"},
        "annotations": {"note": "hi"},
    },
    "spec": {"nodeName": "n1", "serviceAccountName": "default"},
}


def _env(*entries: Manifest, env_from: list[Manifest] | None = None) -> dict[str, str]:
    return resolve_env({"env": list(entries), "envFrom": env_from or []}, POD, SOURCES, node_name="n1")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("$(A)-$(B)", "1-two"),
        ("$$(A)", "$(A)"),
        ("$(MISSING)", "$(MISSING)"),
        ("cost $5 and $", "cost $5 and $"),
        ("$(A", "$(A"),
        ("$$$(A)", "$1"),
    ],
)
def test_expand_references_follows_kubelet_rules(raw: str, expected: str) -> None:
    assert expand_references(raw, {"A": "1", "B": "two"}) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.name", "web-2"),
        ("metadata.namespace", "ns"),
        ("metadata.uid", "u-1"),
        ("metadata.labels['apps.kubernetes.io/pod-index']", "2"),
        ("metadata.labels['absent']", ""),
        ("metadata.annotations['note']", "hi"),
        ("spec.nodeName", "n1"),
        ("spec.serviceAccountName", "default"),
        ("status.podIP", "127.0.0.1"),
        ("status.hostIP", "127.0.0.1"),
    ],
)
def test_field_refs(path: str, expected: str) -> None:
    assert field_value(POD, path, node_name="n1") == expected


def test_unsupported_field_ref_is_an_error() -> None:
    with pytest.raises(EnvResolutionError):
        field_value(POD, "metadata.labels", node_name="n1")


def test_env_literals_refs_and_expansion_in_order() -> None:
    env = _env(
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "color"}}},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
        {"name": "GREETING", "value": "$(NAME) likes $(COLOR), not $(LATER)"},
        {"name": "LATER", "value": "x"},
        {"name": "EMPTY"},
    )
    assert env == {
        "NAME": "web-2",
        "COLOR": "blue",
        "PASSWORD": "hunter2",
        "GREETING": "web-2 likes blue, not $(LATER)",
        "LATER": "x",
        "EMPTY": "",
    }


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": True}}},
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope", "optional": True}}},
        {"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": True}}},
    ],
)
def test_optional_missing_refs_leave_the_variable_unset(entry: Manifest) -> None:
    assert "X" not in _env(entry)


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}},
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope"}}},
        {"name": "X", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "nope", "optional": False}}},
        {"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
    ],
)
def test_required_missing_refs_fail(entry: Manifest) -> None:
    with pytest.raises(EnvResolutionError):
        _env(entry)


def test_env_from_with_prefix_skips_invalid_names_and_env_overrides() -> None:
    env = _env(
        {"name": "P_color", "value": "red"},
        env_from=[
            {"configMapRef": {"name": "cfg"}, "prefix": "P_"},
            {"secretRef": {"name": "sec"}},
            {"configMapRef": {"name": "missing", "optional": True}},
        ],
    )
    assert env == {"P_color": "red", "password": "hunter2"}
    with pytest.raises(EnvResolutionError):
        _env(env_from=[{"secretRef": {"name": "missing"}}])


def test_secret_data_is_decoded() -> None:
    assert decode_secret_data({"k": base64.b64encode(b"v\n").decode()}) == {"k": "v\n"}


def test_volume_plans_and_mount_rewriting(tmp_path: Path) -> None:
    pod: Manifest = {
        "metadata": {"name": "p-0", "namespace": "ns"},
        "spec": {
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-p-0"}},
                {"name": "scratch-space", "emptyDir": {}},
                {"name": "settings", "configMap": {"name": "cfg"}},
                {"name": "info", "downwardAPI": {"items": []}},
            ]
        },
    }
    plans = {plan.name: plan for plan in plan_volumes(pod, tmp_path)}
    assert plans["info"].kind == "downwardAPI"
    assert plans["info"].host_dir == tmp_path / "pods/ns/p-0/volumes/info"
    assert plans["data"].host_dir == tmp_path / "volumes/ns/data-p-0"
    assert plans["scratch-space"].host_dir == tmp_path / "pods/ns/p-0/volumes/scratch-space"
    assert plans["settings"].kind == "configMap"
    assert volume_env_name("scratch-space") == "STATICFLEET_VOLUME_SCRATCH_SPACE"

    app: Manifest = {
        "command": ["serve", "--dir=/var/lib/app/db", "/var/lib/application"],
        "args": ["/etc/cfg/x", "$(HOME_DIR)"],
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/app"},
            {"name": "settings", "mountPath": "/etc/cfg/"},
            {"name": "scratch-space", "mountPath": "/var/lib/app/tmp", "subPath": "t"},
        ],
    }
    mounts = container_mounts(app, list(plans.values()))
    assert [m.mount_path for m in mounts] == ["/var/lib/app/tmp", "/var/lib/app", "/etc/cfg"]
    argv = container_argv(app, {"HOME_DIR": "/var/lib/app/tmp/h"}, mounts)
    data, settings, scratch = (plans[n].host_dir for n in ("data", "settings", "scratch-space"))
    assert argv == [
        "serve",
        f"--dir={data}/db",
        "/var/lib/application",  # a sibling path, not under the mount
        f"{settings}/x",
        f"{scratch}/t/h",
    ]
    assert rewrite_word("/var/lib/app", mounts) == str(data)


def test_a_downward_api_volume_has_a_file_per_field_and_an_empty_one_for_an_absent_annotation() -> None:
    pod: Manifest = {"metadata": {"name": "p-0", "namespace": "ns", "annotations": {"a/b": "yes"}}}
    source = {
        "items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "flag", "fieldRef": {"fieldPath": "metadata.annotations['a/b']"}},
            {"path": "sub/other", "fieldRef": {"fieldPath": "metadata.annotations['a/c']"}},
        ]
    }
    assert downward_api_files(source, pod, node_name="n") == {"name": "p-0", "flag": "yes", "sub/other": ""}
    with pytest.raises(EnvResolutionError, match="other than fieldRef"):
        downward_api_files(
            {"items": [{"path": "cpu", "resourceFieldRef": {"resource": "limits.cpu"}}]}, pod, node_name="n"
        )


def test_parse_probes_with_defaults_and_named_ports() -> None:
    container: Manifest = {"ports": [{"name": "http", "containerPort": 8080}]}
    http = parse_probe({"httpGet": {"path": "healthz", "port": "http"}, "periodSeconds": 2}, container)
    assert http == Probe("http", port=8080, path="healthz", period_seconds=2)
    assert http is not None and probe_url(http) == "http://127.0.0.1:8080/healthz"
    exec_probe = parse_probe(
        {"exec": {"command": ["true"]}, "failureThreshold": 1, "initialDelaySeconds": 3}, {}
    )
    assert exec_probe == Probe("exec", command=("true",), failure_threshold=1, initial_delay_seconds=3)
    assert parse_probe({"tcpSocket": {"port": 9000}}, {}) == Probe("tcp", port=9000)
    assert parse_probe(None, {}) is None
    with pytest.raises(ProbeError):
        parse_probe({"httpGet": {"port": "nope"}}, container)
    with pytest.raises(ProbeError):
        parse_probe({"exec": {"command": []}}, container)


@pytest.mark.parametrize(
    ("policy", "code", "expected"),
    [
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 0, False),
        ("OnFailure", 2, True),
        ("Never", 1, False),
    ],
)
def test_restart_policy(policy: str, code: int, expected: bool) -> None:
    assert should_restart(policy, code) is expected


def test_restart_delay_doubles_to_a_cap() -> None:
    delays = [restart_delay(n, base_seconds=1, cap_seconds=5) for n in range(6)]
    assert delays == [0, 1, 2, 4, 5, 5]


def test_grace_period_prefers_the_deletion_value() -> None:
    assert termination_grace_seconds({"spec": {}}) == 30
    assert termination_grace_seconds({"spec": {"terminationGracePeriodSeconds": 5}}) == 5
    deleting = {"metadata": {"deletionGracePeriodSeconds": 0}, "spec": {"terminationGracePeriodSeconds": 5}}
    assert termination_grace_seconds(deleting) == 0


def test_only_unbound_default_scheduler_pods_matching_the_node_are_bound() -> None:
    labels = {"kubernetes.io/os": "linux"}
    assert schedulable_here({"spec": {}}, labels)
    assert schedulable_here({"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}, labels)
    assert not schedulable_here({"spec": {"nodeSelector": {"disk": "ssd"}}}, labels)
    assert not schedulable_here({"spec": {"nodeName": "other"}}, labels)
    assert not schedulable_here({"spec": {"schedulerName": "custom"}}, labels)
    assert not schedulable_here({"metadata": {"deletionTimestamp": "x"}, "spec": {}}, labels)


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _snapshot(**changes: object) -> ContainerSnapshot:
    values: dict[str, object] = {
        "name": "app",
        "image": "img",
        "restart_count": 0,
        "running_since": T0,
        "waiting_reason": None,
        "waiting_message": "",
        "last_termination": None,
        "previous_termination": None,
        "will_restart": True,
        "ready": True,
        "started": True,
        "pid": 42,
    }
    values.update(changes)
    return ContainerSnapshot(**values)  # type: ignore[arg-type]


def test_pod_phase() -> None:
    done_ok = Terminated(0, T0, T0)
    done_bad = Terminated(1, T0, T0)
    assert pod_phase([]) == "Pending"
    assert pod_phase([_snapshot(running_since=None, pid=None)]) == "Pending"
    assert pod_phase([_snapshot()]) == "Running"
    waiting = _snapshot(
        running_since=None, pid=None, last_termination=done_bad, waiting_reason="CrashLoopBackOff"
    )
    assert pod_phase([waiting]) == "Running"
    finished = {"running_since": None, "pid": None, "will_restart": False}
    assert pod_phase([_snapshot(last_termination=done_ok, **finished)]) == "Succeeded"
    assert (
        pod_phase(
            [
                _snapshot(last_termination=done_bad, **finished),
                _snapshot(last_termination=done_ok, **finished),
            ]
        )
        == "Failed"
    )


def test_init_containers_hold_the_pod_pending_or_fail_it() -> None:
    finished = {"running_since": None, "pid": None, "will_restart": False}
    ok = _snapshot(name="init", last_termination=Terminated(0, T0, T0), **finished)
    failed = _snapshot(name="init", last_termination=Terminated(1, T0, T0), **finished)
    running_init = _snapshot(name="init")
    not_started = _snapshot(running_since=None, pid=None, waiting_reason="PodInitializing")
    assert pod_phase([not_started], [running_init]) == "Pending"
    assert pod_phase([not_started], [failed]) == "Failed"
    assert pod_phase([_snapshot()], [ok]) == "Running"
    status = pod_status(
        [not_started], init_containers=[running_init], pod_uid="u", previous_status={}, started_at=T0, now=T0
    )
    assert {c["type"]: c["status"] for c in status["conditions"]}["Initialized"] == "False"
    assert status["initContainerStatuses"][0]["state"]["running"]
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}


def test_pod_status_keeps_transition_times_until_a_condition_changes() -> None:
    first = pod_status([_snapshot(ready=False)], pod_uid="u", previous_status={}, started_at=T0, now=T0)
    ready = {c["type"]: c for c in first["conditions"]}["Ready"]
    assert ready["status"] == "False" and ready["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    later = T0 + timedelta(seconds=5)
    same = pod_status([_snapshot(ready=False)], pod_uid="u", previous_status=first, started_at=T0, now=later)
    assert same == first
    flipped = pod_status(
        [_snapshot(ready=True)], pod_uid="u", previous_status=first, started_at=T0, now=later
    )
    conditions = {c["type"]: c for c in flipped["conditions"]}
    assert conditions["Ready"]["status"] == "True"
    assert conditions["Ready"]["lastTransitionTime"] == "2026-01-01T00:00:05Z"
    assert conditions["PodScheduled"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    (container,) = flipped["containerStatuses"]
    assert container["state"] == {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    assert container["containerID"] == "local://u/app/42"
    assert flipped["podIP"] == "127.0.0.1" and flipped["phase"] == "Running"


def test_container_status_shows_the_previous_termination_as_last_state() -> None:
    first, second = Terminated(1, T0, T0), Terminated(0, T0, T0 + timedelta(seconds=1))
    snapshot = _snapshot(
        running_since=None, pid=None, last_termination=second, previous_termination=first, will_restart=False
    )
    (container,) = pod_status([snapshot], pod_uid="u", previous_status={}, started_at=T0, now=T0)[
        "containerStatuses"
    ]
    assert container["state"]["terminated"]["exitCode"] == 0
    assert container["lastState"]["terminated"]["exitCode"] == 1


def test_kubeconfig_verifies_tls_when_given_a_ca() -> None:
    verified = kubeconfig("https://127.0.0.1:1", "t", b"PEM")
    assert (
        verified["clusters"][0]["cluster"]["certificate-authority-data"] == base64.b64encode(b"PEM").decode()
    )
    assert verified["users"][0]["user"] == {"token": "t"}
    assert kubeconfig("https://127.0.0.1:1", "t", None)["clusters"][0]["cluster"]["insecure-skip-tls-verify"]


# -- service-account volumes -------------------------------------------------------------------------------

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# The volume the ServiceAccount admission plugin adds to every pod that does not opt out.
KUBE_API_ACCESS: Manifest = {
    "name": "kube-api-access-x7k2p",
    "projected": {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [
                        {
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            "path": "namespace",
                        }
                    ]
                }
            },
        ],
    },
}


def test_a_projected_volume_with_a_token_is_a_service_account_volume(tmp_path: Path) -> None:
    pod: Manifest = {
        "metadata": {"name": "op-0", "namespace": "ns"},
        "spec": {
            "volumes": [
                KUBE_API_ACCESS,
                {"name": "other", "projected": {"sources": [{"configMap": {"name": "c"}}]}},
            ]
        },
    }
    plans = {plan.name: plan for plan in plan_volumes(pod, tmp_path)}
    assert plans["kube-api-access-x7k2p"].kind == "serviceAccount"
    assert plans["other"].kind == "pod"  # other projections stay plain directories
    assert token_specs(plans["kube-api-access-x7k2p"].source) == [TokenSpec("token", None, 3607)]
    app: Manifest = {"volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": SA_MOUNT}]}
    assert kubeconfig_for_container(app, list(plans.values())) == (
        tmp_path / "pods/ns/op-0/volumes/kube-api-access-x7k2p/kubeconfig"
    )
    assert kubeconfig_for_container({"volumeMounts": []}, list(plans.values())) is None


def test_service_account_files_hold_the_token_the_ca_and_the_namespace() -> None:
    pod: Manifest = {"metadata": {"name": "op-0", "namespace": "shop"}, "spec": {}}
    projected = KUBE_API_ACCESS["projected"]
    # The kube-root-ca.crt ConfigMap's publisher does not run here: the runner's CA stands in.
    files = service_account_files(
        projected, pod, {"token": "jwt"}, FakeSources({}, {}), ca_pem="PEM", node_name="n"
    )
    assert files == {"token": "jwt", "ca.crt": "PEM", "namespace": "shop"}
    # A ConfigMap that exists wins; a missing one that is not the root CA is an error.
    published = FakeSources({"shop/kube-root-ca.crt": {"ca.crt": "PUBLISHED"}}, {})
    assert (
        service_account_files(projected, pod, {"token": "t"}, published, ca_pem="PEM", node_name="n")[
            "ca.crt"
        ]
        == "PUBLISHED"
    )
    other = {"sources": [{"serviceAccountToken": {"path": "t"}}, {"configMap": {"name": "gone"}}]}
    with pytest.raises(EnvResolutionError, match='configmap "gone" not found'):
        service_account_files(other, pod, {"t": "x"}, FakeSources({}, {}), ca_pem="PEM", node_name="n")


def test_the_service_account_kubeconfig_reads_the_token_file_and_verifies_the_server(tmp_path: Path) -> None:
    document = service_account_kubeconfig("https://127.0.0.1:6443", "shop", tmp_path / "token", "PEM")
    (cluster,) = document["clusters"]
    assert cluster["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority-data": base64.b64encode(b"PEM").decode(),
    }
    assert document["users"] == [{"name": "service-account", "user": {"tokenFile": str(tmp_path / "token")}}]
    assert document["contexts"][0]["context"]["namespace"] == "shop"
    unverified = service_account_kubeconfig("https://h", "ns", tmp_path / "token", None)
    assert unverified["clusters"][0]["cluster"]["insecure-skip-tls-verify"] is True


def test_a_pod_with_an_address_of_its_own_is_seen_and_probed_there() -> None:
    annotated: Manifest = {"metadata": {"name": "p-0", "annotations": {"ip.e2e.staticfleet.io/own": "true"}}}
    assert wants_own_ip(annotated) and not wants_own_ip(POD)
    ips = OwnIps(start=0)
    first, second = ips.take(), ips.take()
    assert first == "127.16.0.1" and second == "127.16.0.2"
    assert OwnIps(start=OWN_IP_BLOCK.num_addresses - 3).take() == "127.31.255.254"  # never the last
    assert field_value(POD, "status.podIP", node_name="n1", pod_ip=first) == first
    env = resolve_env(
        {"env": [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]},
        POD,
        SOURCES,
        node_name="n1",
        pod_ip=first,
    )
    assert env == {"IP": first}
    source = {"items": [{"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}]}
    assert downward_api_files(source, POD, node_name="n1", pod_ip=first) == {"ip": first}
    container: Manifest = {"ports": [{"name": "departure", "containerPort": 8080}]}
    probe = parse_probe({"httpGet": {"path": "/ready", "port": "departure"}}, container, first)
    assert probe is not None and probe_url(probe) == f"http://{first}:8080/ready"
    explicit = parse_probe({"tcpSocket": {"port": 9, "host": "127.0.0.1"}}, {}, first)
    assert explicit is not None and explicit.host == "127.0.0.1"
    status = pod_status(
        [_snapshot(ready=True)], pod_uid="u", previous_status={}, started_at=T0, now=T0, pod_ip=first
    )
    assert (
        status["podIP"] == first and status["podIPs"] == [{"ip": first}] and status["hostIP"] == "127.0.0.1"
    )
