from __future__ import annotations

from typing import Any

import pytest

from staticfleet.kube import builders
from staticfleet.kube.builders import (
    GROUP_LABEL,
    INSTANCE_LABEL,
    MANAGED_BY_LABEL,
    NAME_LABEL,
    pod_ordinal,
    selector_labels,
    selector_string,
)
from staticfleet.kube.spec import SpecError

from .fixtures import group_spec

SASL = {"secretName": "kafka-user", "mechanism": "SCRAM-SHA-256"}
TLS = {"secretName": "kafka-ca", "caKey": "ca.pem", "certKey": "tls.crt", "keyKey": "tls.key"}


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container["env"]}


def test_statefulset_is_parallel_with_rolling_updates_and_owned_by_the_resource() -> None:
    spec = group_spec()
    sts = builders.statefulset(spec, "kafka:9092", replicas=2)
    assert sts["metadata"]["name"] == "orders" and sts["metadata"]["namespace"] == "shop"
    assert sts["spec"]["replicas"] == 2
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert sts["spec"]["serviceName"] == "orders"
    (owner,) = sts["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "name": "orders",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_the_selector_uses_only_stable_labels_never_the_parents_labels() -> None:
    spec = group_spec()
    sts = builders.statefulset(spec, "kafka:9092", 3)
    selector = sts["spec"]["selector"]["matchLabels"]
    assert selector == {NAME_LABEL: "staticfleet-consumer", INSTANCE_LABEL: "orders", GROUP_LABEL: "orders"}
    assert "team" not in selector
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert labels["tier"] == "backend"  # the user's template labels stay
    assert labels[NAME_LABEL] == "staticfleet-consumer"  # ours win over a clashing user label
    assert labels[MANAGED_BY_LABEL] == "staticfleet"
    assert selector.items() <= labels.items()


def test_selector_string_is_sorted_and_matches_the_selector() -> None:
    spec = group_spec()
    assert selector_string(spec) == (
        "app.kubernetes.io/instance=orders,app.kubernetes.io/name=staticfleet-consumer,staticfleet.io/group=orders"
    )
    assert dict(p.split("=") for p in selector_string(spec).split(",")) == selector_labels(spec)


def test_every_container_gets_the_environment_contract_first_and_ours_win() -> None:
    spec = group_spec(sessionTimeoutMs=60_000, heartbeatIntervalMs=5_000, rebalanceTimeoutMs=90_000)
    (container,) = builders.pod_template(spec, "kafka:9092")["spec"]["containers"]
    env = env_of(container)
    assert env["KAFKA_BOOTSTRAP_SERVERS"]["value"] == "kafka:9092"
    assert env["KAFKA_GROUP_ID"]["value"] == "shop.orders"  # the template's own value is replaced
    assert env["KAFKA_TOPICS"]["value"] == "orders,refunds"
    assert env["KAFKA_SESSION_TIMEOUT_MS"]["value"] == "60000"
    assert env["KAFKA_HEARTBEAT_INTERVAL_MS"]["value"] == "5000"
    assert env["KAFKA_REBALANCE_TIMEOUT_MS"]["value"] == "90000"
    assert env["KAFKA_SECURITY_PROTOCOL"]["value"] == "PLAINTEXT"
    assert env["LOG_LEVEL"]["value"] == "debug"
    names = [e["name"] for e in container["env"]]
    assert names.count("KAFKA_GROUP_ID") == 1
    assert names.index("LOG_LEVEL") > names.index("KAFKA_GROUP_INSTANCE_ID")  # user vars may use ours


def test_optional_settings_are_not_injected_when_unset() -> None:
    spec = group_spec(scaleUp={"preRegister": False})
    (container,) = builders.pod_template(spec, "kafka:9092")["spec"]["containers"]
    assert "KAFKA_HEARTBEAT_INTERVAL_MS" not in env_of(container)
    assert "KAFKA_REBALANCE_TIMEOUT_MS" not in env_of(container)
    assert "KAFKA_PARTITION_ASSIGNMENT_STRATEGY" not in env_of(container)


def test_the_fleets_assignment_strategy_is_injected_and_replaces_the_templates_own() -> None:
    spec = group_spec(assignmentStrategy="cooperative-sticky")
    template = spec.template
    (own,) = template["spec"]["containers"]
    own = {
        **own,
        "env": [*own.get("env", []), {"name": "KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "value": "range"}],
    }
    spec = group_spec(
        assignmentStrategy="cooperative-sticky",
        template={**template, "spec": {**template["spec"], "containers": [own]}},
    )
    (container,) = builders.pod_template(spec, "kafka:9092")["spec"]["containers"]
    assert env_of(container)["KAFKA_PARTITION_ASSIGNMENT_STRATEGY"]["value"] == "cooperative-sticky"
    assert [e["name"] for e in container["env"]].count("KAFKA_PARTITION_ASSIGNMENT_STRATEGY") == 1


def test_a_consumer_protocol_fleet_says_so_and_leaves_session_heartbeat_and_assignor_to_the_coordinator() -> (
    None
):
    spec = group_spec(groupProtocol="consumer")
    assert spec.group_protocol == "consumer"
    assert not spec.pre_register  # no join phase to pre-register in
    (container,) = builders.pod_template(spec, "kafka:9092")["spec"]["containers"]
    env = env_of(container)
    assert env["KAFKA_GROUP_PROTOCOL"]["value"] == "consumer"
    for name in (
        "KAFKA_SESSION_TIMEOUT_MS",
        "KAFKA_HEARTBEAT_INTERVAL_MS",
        "KAFKA_PARTITION_ASSIGNMENT_STRATEGY",
    ):
        assert name not in env
    classic = env_of(builders.pod_template(group_spec(), "kafka:9092")["spec"]["containers"][0])
    assert "KAFKA_GROUP_PROTOCOL" not in classic and "KAFKA_SESSION_TIMEOUT_MS" in classic


@pytest.mark.parametrize("setting", [{"assignmentStrategy": "range"}, {"heartbeatIntervalMs": 500}])
def test_a_consumer_protocol_fleet_refuses_the_client_side_settings_the_coordinator_owns(
    setting: dict[str, Any],
) -> None:
    with pytest.raises(SpecError, match="groupProtocol consumer"):
        group_spec(groupProtocol="consumer", **setting)


def test_a_fleet_whose_scale_ups_are_pre_registered_gets_the_fleet_heartbeat() -> None:
    api = {"bootstrapServers": "coordinator:9092", "coordinatorApi": "http://coordinator:8080"}
    for kafka in (api, {"bootstrapServers": "kafka:9092"}):
        (container,) = builders.pod_template(group_spec(kafka=kafka), "k:9092")["spec"]["containers"]
        assert env_of(container)["KAFKA_HEARTBEAT_INTERVAL_MS"]["value"] == "250"


def test_every_container_can_read_whether_its_pod_is_departing_from_a_downward_api_file() -> None:
    pod = builders.pod_template(group_spec(), "k:1")
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == builders.POD_INFO_VOLUME]
    (item,) = volume["downwardAPI"]["items"]
    assert item == {
        "path": "departing",
        "fieldRef": {"fieldPath": "metadata.annotations['staticfleet.io/departing']"},
    }
    for container in pod["spec"]["containers"]:
        mount = {"name": builders.POD_INFO_VOLUME, "mountPath": "/etc/staticfleet/pod", "readOnly": True}
        assert mount in container["volumeMounts"]
        assert env_of(container)["STATICFLEET_DEPARTURE_FILE"]["value"] == "/etc/staticfleet/pod/departing"


def test_pod_template_instance_id_comes_from_the_pod_name() -> None:
    (container,) = builders.pod_template(group_spec(), "k:1")["spec"]["containers"]
    ref = env_of(container)["KAFKA_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert ref == "metadata.name"


def test_a_pod_of_several_members_is_told_how_many_and_keeps_its_own_instance_id() -> None:
    (container,) = builders.pod_template(group_spec(membersPerPod=2), "k:1")["spec"]["containers"]
    env = env_of(container)
    assert env["KAFKA_MEMBERS_PER_POD"] == {"name": "KAFKA_MEMBERS_PER_POD", "value": "2"}
    assert env["KAFKA_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_a_pod_of_one_member_gets_no_members_per_pod_variable_so_its_template_is_unchanged() -> None:
    (container,) = builders.pod_template(group_spec(membersPerPod=1), "k:1")["spec"]["containers"]
    assert "KAFKA_MEMBERS_PER_POD" not in env_of(container)
    assert builders.pod_template(group_spec(membersPerPod=1), "k:1") == builders.pod_template(
        group_spec(), "k:1"
    )


def test_ordinal_template_instance_id_comes_from_the_pod_index_label() -> None:
    (container,) = builders.pod_template(group_spec(instanceIdTemplate="{ordinal}"), "k:1")["spec"][
        "containers"
    ]
    ref = env_of(container)["KAFKA_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert ref == "metadata.labels['apps.kubernetes.io/pod-index']"


def test_composed_templates_use_dependent_variable_expansion_of_earlier_variables() -> None:
    spec = group_spec(instanceIdTemplate="{namespace}-{name}-{ordinal}-{pod}")
    (container,) = builders.pod_template(spec, "k:1")["spec"]["containers"]
    names = [e["name"] for e in container["env"]]
    value = env_of(container)["KAFKA_GROUP_INSTANCE_ID"]["value"]
    assert value == "shop-orders-$(STATICFLEET_POD_ORDINAL)-$(STATICFLEET_POD_NAME)"
    position = names.index("KAFKA_GROUP_INSTANCE_ID")
    assert (
        names.index("STATICFLEET_POD_ORDINAL") < position and names.index("STATICFLEET_POD_NAME") < position
    )


def test_sasl_credentials_come_from_the_secret_and_tls_is_mounted() -> None:
    spec = group_spec(kafka={"bootstrapServers": "k:9093", "sasl": SASL, "tls": TLS})
    template = builders.pod_template(spec, "k:9093")
    (container,) = template["spec"]["containers"]
    env = env_of(container)
    assert env["KAFKA_SECURITY_PROTOCOL"]["value"] == "SASL_SSL"
    assert env["KAFKA_SASL_MECHANISM"]["value"] == "SCRAM-SHA-256"
    assert env["KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "kafka-user",
        "key": "password",
    }
    assert env["KAFKA_SSL_CA_LOCATION"]["value"] == "/etc/staticfleet/kafka-tls/ca.pem"
    assert env["KAFKA_SSL_KEY_LOCATION"]["value"] == "/etc/staticfleet/kafka-tls/tls.key"
    assert {"name": "staticfleet-kafka-tls", "secret": {"secretName": "kafka-ca"}} in template["spec"][
        "volumes"
    ]
    assert {
        "name": "staticfleet-kafka-tls",
        "mountPath": "/etc/staticfleet/kafka-tls",
        "readOnly": True,
    } in container["volumeMounts"]


def test_building_does_not_modify_the_spec() -> None:
    spec = group_spec()
    before = repr(spec.template)
    builders.statefulset(spec, "k:1", 3)
    assert repr(spec.template) == before


def test_volume_claim_templates_and_retention_policy_are_passed_through() -> None:
    claim = {"metadata": {"name": "state"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    spec = group_spec(
        volumeClaimTemplates=[claim], persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete"}
    )
    sts = builders.statefulset(spec, "k:1", 3)["spec"]
    assert sts["volumeClaimTemplates"][0]["metadata"]["name"] == "state"
    assert sts["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Delete"}


def test_headless_service_and_disruption_budget_select_the_pods() -> None:
    spec = group_spec()
    service = builders.headless_service(spec)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == selector_labels(spec)
    pdb = builders.pod_disruption_budget(spec)
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(spec)}}
    assert pdb["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_pod_ordinal_prefers_the_pod_index_label_and_falls_back_to_the_name() -> None:
    labelled = {"metadata": {"name": "orders-7", "labels": {"apps.kubernetes.io/pod-index": "3"}}}
    assert pod_ordinal(labelled, "orders") == 3
    assert pod_ordinal({"metadata": {"name": "orders-12"}}, "orders") == 12
    assert pod_ordinal({"metadata": {"name": "other-1"}}, "orders") is None


def _template(pod: dict[str, Any]) -> dict[str, Any]:
    return {"spec": pod}


def test_fleet_pods_get_the_restricted_security_settings_by_default() -> None:
    pod = builders.pod_template(group_spec(), "kafka:9092")["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


def test_security_settings_the_template_sets_are_kept() -> None:
    template = _template(
        {
            "securityContext": {
                "runAsUser": 1000,
                "seccompProfile": {"type": "Localhost", "localhostProfile": "p"},
            },
            "initContainers": [
                {"name": "init", "image": "i", "securityContext": {"readOnlyRootFilesystem": True}}
            ],
            "containers": [
                {
                    "name": "consumer",
                    "image": "c",
                    "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                }
            ],
        }
    )
    pod = builders.pod_template(group_spec(template=template), "kafka:9092")["spec"]
    assert pod["securityContext"] == {
        "runAsUser": 1000,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "Localhost", "localhostProfile": "p"},
    }
    (init,) = pod["initContainers"]
    assert init["securityContext"] == {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "capabilities": {"add": ["NET_ADMIN"]},
        "allowPrivilegeEscalation": False,
    }


def test_a_template_that_asks_for_root_is_not_told_to_run_as_non_root() -> None:
    for pod in (
        {"securityContext": {"runAsUser": 0}, "containers": [{"name": "c", "image": "i"}]},
        {"containers": [{"name": "c", "image": "i", "securityContext": {"runAsUser": 0}}]},
        {"containers": [{"name": "c", "image": "i", "securityContext": {"runAsNonRoot": False}}]},
    ):
        built = builders.pod_template(group_spec(template=_template(pod)), "kafka:9092")["spec"]
        assert "runAsNonRoot" not in built["securityContext"], pod
        assert built["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_a_consumer_may_run_until_its_pod_reaches_a_terminal_phase() -> None:
    assert builders.consumer_may_run({"status": {"phase": "Running"}})
    assert builders.consumer_may_run(
        {"metadata": {"deletionTimestamp": "2026-11-22T10:00:00Z"}, "status": {}}
    )
    assert builders.consumer_may_run({"status": {"phase": "Pending"}})
    assert not builders.consumer_may_run({"status": {"phase": "Succeeded"}})
    assert not builders.consumer_may_run({"status": {"phase": "Failed"}})
