"""Per-fleet least privilege: the fleet's own user, Secret and ACLs, as planner rules (pure) and as a pass
against in-memory stand-ins (the real coordinator and Apache Kafka: e2e/tests/operator/test_security.py)."""

from __future__ import annotations

import base64
import copy
import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest

from staticfleet.admin import AclBinding, KafkaErrorResponse
from staticfleet.kube import builders, secrets
from staticfleet.kube.access import (
    AccessObservation,
    FleetSecurity,
    OperatorKafka,
    fleet_access,
    fleet_acls,
    operator_acls,
    plan_access,
    secret_data,
)
from staticfleet.kube.claims import Claim
from staticfleet.kube.kubeapi import KubeApi
from staticfleet.kube.reconcile import finalize, reconcile
from staticfleet.kube.spec import SpecError
from staticfleet.kube.steps import (
    ApplyChildren,
    ApplyFleetSecret,
    GrantAcls,
    SetFleetCredential,
    plan_actions,
)
from staticfleet.kube.tenancy import NamePattern, NamespaceSelector, Tenancy, TenancyPolicy

from .fixtures import group_spec, resource
from .test_reconcile import Context, FakeAdmin, FakeKube, context
from .test_steps import group, observed

SECURITY = FleetSecurity("SASL_SSL", "SCRAM-SHA-512", b"-----BEGIN CERTIFICATE-----\nca\n")
USER = "staticfleet.shop.orders"
PRINCIPAL = f"User:{USER}"


def access_seen(**changes: Any) -> AccessObservation:
    access = fleet_access(group_spec(), SECURITY)
    assert access is not None
    fields: dict[str, Any] = {
        "access": access,
        "secret": secret_data(access, "known-password"),
        "mechanisms": frozenset({"SCRAM-SHA-512"}),
        "acls": fleet_acls(group_spec(), PRINCIPAL),
        "candidate_password": "fresh-password",
    }
    fields.update(changes)
    return AccessObservation(**fields)


# -- who gets what -------------------------------------------------------------------------------------------


def test_a_fleet_may_read_its_group_and_read_and_describe_its_topics_and_nothing_else() -> None:
    assert fleet_acls(group_spec(), PRINCIPAL) == {
        AclBinding("GROUP", "shop.orders", PRINCIPAL, "READ"),
        AclBinding("TOPIC", "orders", PRINCIPAL, "READ"),
        AclBinding("TOPIC", "orders", PRINCIPAL, "DESCRIBE"),
        AclBinding("TOPIC", "refunds", PRINCIPAL, "READ"),
        AclBinding("TOPIC", "refunds", PRINCIPAL, "DESCRIBE"),
    }


def test_a_fleet_gets_its_own_user_only_when_the_operator_logs_in_with_sasl_and_it_does_not_opt_out() -> None:
    access = fleet_access(group_spec(), SECURITY)
    assert access is not None
    assert (access.user, access.secret_name, access.principal) == (USER, "orders-kafka-user", PRINCIPAL)
    assert fleet_access(group_spec(), None) is None
    external = group_spec(kafka={"bootstrapServers": "kafka:9092", "credentials": "External"})
    assert fleet_access(external, SECURITY) is None


def test_kafka_sasl_means_credentials_managed_elsewhere_and_cannot_be_provisioned() -> None:
    sasl = {"bootstrapServers": "kafka:9092", "sasl": {"secretName": "mine"}}
    assert group_spec(kafka=sasl).credentials == "External"
    assert group_spec().credentials == "Provisioned"
    with pytest.raises(SpecError, match=r"remove kafka\.sasl, or set kafka\.credentials to External"):
        group_spec(kafka={**sasl, "credentials": "Provisioned"})


def test_the_fleet_mechanism_is_the_operators_scram_mechanism_or_scram_sha_512(tmp_path: Path) -> None:
    config = tmp_path / "kafka.properties"
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"the CA")
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="op" password="p";'
    config.write_text(
        f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={jaas}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
    )
    assert OperatorKafka(config).fleet_security() == FleetSecurity("SASL_SSL", "SCRAM-SHA-512", b"the CA")
    config.write_text(config.read_text().replace("=PLAIN", "=SCRAM-SHA-256"))
    assert OperatorKafka(config).fleet_security() == FleetSecurity("SASL_SSL", "SCRAM-SHA-256", b"the CA")
    config.write_text("security.protocol=SSL\n")
    assert OperatorKafka(config).fleet_security() is None


# -- the planner rule ----------------------------------------------------------------------------------------


def test_a_new_fleet_sets_its_credential_before_its_secret_then_grants_its_acls() -> None:
    plan = plan_access(access_seen(secret=None, mechanisms=frozenset(), acls=frozenset()), group_spec())
    assert plan.credential_password == "fresh-password"
    assert plan.secret is not None and plan.secret["password"] == b"fresh-password"
    assert plan.secret["ca.crt"] == SECURITY.ca
    assert plan.grant == fleet_acls(group_spec(), PRINCIPAL) and not plan.revoke


def test_a_provisioned_fleet_needs_nothing() -> None:
    plan = plan_access(access_seen(), group_spec())
    assert (plan.credential_password, plan.secret, plan.grant, plan.revoke) == (
        None,
        None,
        frozenset(),
        frozenset(),
    )


def test_a_user_the_cluster_lost_gets_the_password_of_its_secret_again() -> None:
    plan = plan_access(access_seen(mechanisms=frozenset()), group_spec())
    assert plan.credential_password == "known-password" and plan.secret is None


def test_a_dropped_topic_loses_its_acls_and_a_new_one_gains_them() -> None:
    spec = group_spec(topics=["orders", "returns"])
    plan = plan_access(access_seen(), spec)
    assert plan.grant == {
        AclBinding("TOPIC", "returns", PRINCIPAL, "READ"),
        AclBinding("TOPIC", "returns", PRINCIPAL, "DESCRIBE"),
    }
    assert plan.revoke == {
        AclBinding("TOPIC", "refunds", PRINCIPAL, "READ"),
        AclBinding("TOPIC", "refunds", PRINCIPAL, "DESCRIBE"),
    }


def test_access_adds_write_on_output_topics_and_the_streams_internal_topics_as_one_prefix() -> None:
    spec = group_spec(kafka={"access": {"outputTopics": ["order-counts"], "internalTopics": True}})
    plan = plan_access(access_seen(), spec)
    internal = {
        AclBinding("TOPIC", "shop.orders-", PRINCIPAL, op, pattern="PREFIXED")
        for op in ("CREATE", "READ", "WRITE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS")
    }
    assert plan.grant == {
        AclBinding("TOPIC", "order-counts", PRINCIPAL, "WRITE"),
        AclBinding("TOPIC", "order-counts", PRINCIPAL, "DESCRIBE"),
        *internal,
    }
    assert not plan.revoke, "what a consumer needs stays"
    # Dropping kafka.access takes back exactly what it added.
    taken_back = plan_access(access_seen(acls=fleet_acls(spec, PRINCIPAL)), group_spec())
    assert taken_back.revoke == plan.grant and not taken_back.grant


def test_access_is_refused_with_external_credentials() -> None:
    with pytest.raises(SpecError, match=r"with kafka.credentials External it grants nothing"):
        group_spec(kafka={"credentials": "External", "access": {"internalTopics": True}})


def test_without_an_authorizer_no_acls_are_planned_and_an_unreachable_cluster_plans_nothing() -> None:
    plan = plan_access(access_seen(acls=None), group_spec())
    assert not plan.grant and not plan.revoke
    failed = plan_access(access_seen(secret=None, error="unreachable"), group_spec())
    assert (failed.credential_password, failed.secret) == (None, None)


def test_the_access_steps_come_before_the_children() -> None:
    base = observed(3, 3, {0, 1, 2}, group("orders-0", "orders-1", "orders-2"))
    obs = dataclasses.replace(base, access=access_seen(secret=None, mechanisms=frozenset(), acls=frozenset()))
    steps = plan_actions(obs).steps
    assert [type(s) for s in steps] == [SetFleetCredential, ApplyFleetSecret, GrantAcls, ApplyChildren]
    assert "fresh-password" not in repr(steps), "a plan never shows a password"


# -- the pods ------------------------------------------------------------------------------------------------


def test_a_provisioned_fleet_reads_its_user_from_its_secret_and_mounts_only_the_ca() -> None:
    spec = group_spec()
    access = fleet_access(spec, SECURITY)
    template = builders.pod_template(spec, "kafka:9094", access)
    (container,) = template["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["KAFKA_SECURITY_PROTOCOL"]["value"] == "SASL_SSL"
    assert env["KAFKA_SASL_MECHANISM"]["value"] == "SCRAM-SHA-512"
    for name, key in (("KAFKA_SASL_USERNAME", "username"), ("KAFKA_SASL_PASSWORD", "password")):
        assert env[name]["valueFrom"]["secretKeyRef"] == {"name": "orders-kafka-user", "key": key}
    assert env["KAFKA_SSL_CA_LOCATION"]["value"] == "/etc/staticfleet/kafka-user/ca.crt"
    (volume,) = [v for v in template["spec"]["volumes"] if "secret" in v]  # the Secret, and only its CA
    assert volume["secret"] == {
        "secretName": "orders-kafka-user",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    assert {
        "name": volume["name"],
        "mountPath": "/etc/staticfleet/kafka-user",
        "readOnly": True,
    } in container["volumeMounts"]


def test_the_secret_is_owned_by_the_resource() -> None:
    spec = group_spec()
    access = fleet_access(spec, SECURITY)
    assert access is not None
    secret = builders.credentials_secret(spec, access, secret_data(access, "pw"))
    (owner,) = secret["metadata"]["ownerReferences"]
    assert (owner["uid"], owner["controller"]) == ("uid-1", True)
    assert base64.b64decode(secret["data"]["username"]) == USER.encode()


# -- a pass and a deletion -----------------------------------------------------------------------------------


class SecretKube(FakeKube):
    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body)
        self.secrets: dict[str, dict[str, Any]] = {}

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        if manifest["kind"] != "Secret":
            return super().apply(manifest)
        self.calls.append("apply Secret")
        self.secrets[manifest["metadata"]["name"]] = copy.deepcopy(manifest)
        return manifest

    def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.secrets.get(name))


class AccessAdmin(FakeAdmin):
    def __init__(self) -> None:
        super().__init__(set())
        self.credentials: dict[str, str] = {}
        self.acls: set[AclBinding] = set()
        self.refuse_alter = False
        self.refuse_delete = False
        self.calls: list[str] = []

    def scram_mechanisms(self, user: str) -> frozenset[str]:
        return frozenset({"SCRAM-SHA-512"}) if user in self.credentials else frozenset()

    def upsert_scram(self, user: str, mechanism: str, password: str, iterations: int = 4096) -> None:
        if self.refuse_alter:
            raise KafkaErrorResponse(31, "CLUSTER_AUTHORIZATION_FAILED")
        self.calls.append("upsert")
        self.credentials[user] = password

    def delete_scram(self, user: str, mechanisms: Any) -> None:
        if self.refuse_delete:
            raise KafkaErrorResponse(31, "CLUSTER_AUTHORIZATION_FAILED")
        self.calls.append("delete user")
        self.credentials.pop(user, None)

    def acls_of(self, principal: str) -> frozenset[AclBinding]:
        return frozenset(a for a in self.acls if a.principal == principal)

    def create_acls(self, bindings: Any) -> None:
        self.calls.append("create acls")
        self.acls |= set(bindings)

    def delete_acls(self, bindings: Any) -> None:
        self.calls.append("delete acls")
        self.acls -= set(bindings)


def secured(tmp_path: Path) -> tuple[SecretKube, AccessAdmin, Context]:
    config = tmp_path / "operator.properties"
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="op" password="x";'
    config.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={jaas}\n"
    )
    kube, admin = SecretKube(resource(replicas=1)), AccessAdmin()
    ctx = context(kube, admin)
    ctx.kafka = OperatorKafka(config)
    return kube, admin, ctx


def test_a_pass_provisions_the_user_secret_and_acls_once(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    reconcile(ctx, "shop", "orders", {})
    password = base64.b64decode(kube.secrets["orders-kafka-user"]["data"]["password"]).decode()
    assert admin.credentials == {USER: password}
    assert admin.acls == fleet_acls(group_spec(), PRINCIPAL)
    assert admin.calls == ["upsert", "create acls"]
    assert kube.group["status"]["kafkaUser"] == {"name": USER, "secretName": "orders-kafka-user"}
    sts_env = kube.objects["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "KAFKA_SECURITY_PROTOCOL", "value": "SASL_PLAINTEXT"} in sts_env
    reconcile(ctx, "shop", "orders", {})
    assert admin.calls == ["upsert", "create acls"], "a second pass changes nothing"
    assert kube.calls.count("apply Secret") == 1


def test_a_refused_credential_is_degraded_and_no_secret_is_written(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    admin.refuse_alter = True
    reconcile(ctx, "shop", "orders", {})
    degraded = {c["type"]: c for c in kube.group["status"]["conditions"]}["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "AccessNotProvisioned")
    assert "CLUSTER_AUTHORIZATION_FAILED" in degraded["message"]
    assert kube.secrets == {}


def test_a_secret_of_that_name_the_resource_does_not_own_is_never_taken_over(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    kube.secrets["orders-kafka-user"] = {"metadata": {"name": "orders-kafka-user"}, "data": {}}
    reconcile(ctx, "shop", "orders", {})
    degraded = {c["type"]: c for c in kube.group["status"]["conditions"]}["Degraded"]
    assert "is not owned by this resource" in degraded["message"]
    assert admin.calls == [] and kube.secrets["orders-kafka-user"]["data"] == {}


def test_deletion_removes_the_user_and_its_acls_whatever_the_deletion_policy(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    kube.group["spec"]["deletionPolicy"] = "Retain"
    reconcile(ctx, "shop", "orders", {})
    other = AclBinding("GROUP", "other", "User:someone-else", "READ")
    admin.acls.add(other)
    message = finalize(ctx, kube.group, {})
    assert f"user {USER} and its 5 ACLs removed" in message
    assert admin.credentials == {} and admin.acls == {other}
    assert [e["reason"] for e in kube.events][-1] == "UserRemoved"


def test_opting_out_later_removes_the_former_user_and_keeps_its_name_until_then(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    reconcile(ctx, "shop", "orders", {})
    assert USER in admin.credentials
    kube.group["spec"]["kafka"]["credentials"] = "External"
    admin.refuse_delete = True
    reconcile(ctx, "shop", "orders", {})
    assert kube.group["status"]["kafkaUser"]["name"] == USER, "kept while the user is still there"
    degraded = {c["type"]: c for c in kube.group["status"]["conditions"]}["Degraded"]
    assert (degraded["reason"], "could not remove the former user" in degraded["message"]) == (
        "AccessNotProvisioned",
        True,
    )
    admin.refuse_delete = False
    reconcile(ctx, "shop", "orders", {})
    assert admin.credentials == {} and admin.acls == set()
    assert "kafkaUser" not in kube.group["status"]
    env = kube.objects["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert not [e for e in env if e["name"].startswith("KAFKA_SASL_")]
    reconcile(ctx, "shop", "orders", {})
    assert admin.calls.count("delete user") == 1, "nothing left to remove"


def test_an_observation_never_shows_the_password() -> None:
    assert "known-password" not in repr(access_seen())


# -- tenancy: what a namespace may claim ---------------------------------------------------------------------

ALLOWED = Tenancy.of(
    [
        TenancyPolicy(
            "shop-topics",
            NamespaceSelector((("kubernetes.io/metadata.name", "shop"),)),
            (NamePattern("orders"), NamePattern("refunds")),
        )
    ],
    {},
)
NARROWED = Tenancy.of([], {})  # the policy deleted: shop keeps only names that start with "shop."


def test_a_fleet_outside_its_tenancy_gets_a_condition_no_user_no_acl_and_no_children(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    reconcile(ctx, "shop", "orders", {}, NARROWED)
    reconcile(ctx, "shop", "orders", {}, NARROWED)
    degraded = {c["type"]: c for c in kube.group["status"]["conditions"]}["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "TenancyDenied")
    assert "topic orders, topic refunds" in degraded["message"]
    assert admin.credentials == {} and admin.acls == set() and "upsert" not in admin.calls
    assert kube.secrets == {} and "StatefulSet" not in kube.objects
    assert "kafkaUser" not in kube.group["status"]
    assert [e["reason"] for e in kube.events] == ["TenancyDenied"], "said once, not every pass"


def test_a_narrowed_policy_removes_the_user_and_its_acls_in_the_pass_that_reports_it(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    reconcile(ctx, "shop", "orders", {}, ALLOWED)
    assert USER in admin.credentials and admin.acls == fleet_acls(group_spec(), PRINCIPAL)
    statefulset = copy.deepcopy(kube.objects["StatefulSet"])
    reconcile(ctx, "shop", "orders", {}, NARROWED)
    assert admin.credentials == {} and admin.acls == set()
    assert {c["type"]: c for c in kube.group["status"]["conditions"]}["Degraded"]["reason"] == "TenancyDenied"
    assert "kafkaUser" not in kube.group["status"]
    assert [e["reason"] for e in kube.events][-2:] == ["AccessRevoked", "TenancyDenied"]
    assert kube.objects["StatefulSet"] == statefulset, "the children are left as they are"
    reconcile(ctx, "shop", "orders", {}, ALLOWED)  # widened again: provisioned again, same password
    assert USER in admin.credentials and admin.acls == fleet_acls(group_spec(), PRINCIPAL)
    password = base64.b64decode(kube.secrets["orders-kafka-user"]["data"]["password"]).decode()
    assert admin.credentials[USER] == password


def test_a_removal_that_fails_is_in_the_condition_and_tried_again_on_the_next_pass(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    reconcile(ctx, "shop", "orders", {}, ALLOWED)
    admin.refuse_delete = True
    reconcile(ctx, "shop", "orders", {}, NARROWED)
    degraded = {c["type"]: c for c in kube.group["status"]["conditions"]}["Degraded"]
    assert degraded["reason"] == "TenancyDenied" and f"Removing user {USER}" in degraded["message"]
    assert kube.group["status"]["kafkaUser"]["name"] == USER, "kept while the user is still there"
    admin.refuse_delete = False
    reconcile(ctx, "shop", "orders", {}, NARROWED)
    assert admin.credentials == {} and "kafkaUser" not in kube.group["status"]


def test_a_claim_from_a_namespace_that_may_not_claim_the_group_counts_for_nothing(tmp_path: Path) -> None:
    kube, _, ctx = secured(tmp_path)
    squatter = Claim("2026-11-01T00:00:00Z", "blog", "squat", None, "kafka:9092")
    me = Claim("2026-11-22T10:00:00Z", "shop", "orders", None, "kafka:9092")
    reconcile(ctx, "shop", "orders", {"shop.orders": [squatter, me]}, ALLOWED)
    assert {c["type"]: c for c in kube.group["status"]["conditions"]}["Degraded"]["status"] == "False"
    assert "StatefulSet" in kube.objects
    reconcile(ctx, "shop", "orders", {"shop.orders": [squatter, me]}, None)
    degraded = {c["type"]: c for c in kube.group["status"]["conditions"]}["Degraded"]
    assert degraded["reason"] == "GroupIdConflict", "without tenancy the older claim wins"


def test_deleting_a_fleet_outside_its_tenancy_leaves_the_group_alone_and_removes_its_user(
    tmp_path: Path,
) -> None:
    kube, admin, ctx = secured(tmp_path)
    reconcile(ctx, "shop", "orders", {}, ALLOWED)
    admin.members = {"orders-0"}
    kube.group["spec"]["groupId"] = "blog.comments"
    message = finalize(ctx, kube.group, {}, NARROWED)
    assert "may not claim group blog.comments: left as it is" in message
    assert admin.removals == [] and admin.members == {"orders-0"}
    assert admin.credentials == {} and admin.acls == set()


# -- Strimzi KafkaUser Secrets as kafka.sasl -----------------------------------------------------------------

STRIMZI_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="my-user" password="pw";'
)


def strimzi_secret(**data: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "my-user"},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def test_a_strimzi_kafka_user_secret_gives_the_user_name_of_its_jaas_config(tmp_path: Path) -> None:
    kube = SecretKube(resource())
    kube.secrets["my-user"] = strimzi_secret(password="pw", **{"sasl.jaas.config": STRIMZI_JAAS})
    spec = group_spec(kafka={"bootstrapServers": "kafka:9092", "sasl": {"secretName": "my-user"}})
    connection = secrets.connection(cast(KubeApi, kube), secrets.SecretFiles(tmp_path), spec)
    assert (connection.sasl_username, connection.sasl_password) == ("my-user", "pw")
    assert connection.sasl_mechanism == "SCRAM-SHA-512"


def test_a_username_key_wins_over_the_jaas_config_and_a_secret_with_neither_is_refused(
    tmp_path: Path,
) -> None:
    kube = SecretKube(resource())
    kube.secrets["my-user"] = strimzi_secret(
        username="other", password="pw", **{"sasl.jaas.config": STRIMZI_JAAS}
    )
    spec = group_spec(kafka={"bootstrapServers": "kafka:9092", "sasl": {"secretName": "my-user"}})
    files = secrets.SecretFiles(tmp_path)
    assert secrets.connection(cast(KubeApi, kube), files, spec).sasl_username == "other"
    kube.secrets["my-user"] = strimzi_secret(password="pw")
    with pytest.raises(SpecError, match=r"neither the key username nor sasl\.jaas\.config"):
        secrets.connection(cast(KubeApi, kube), files, spec)


def test_pods_of_a_kafka_sasl_fleet_get_the_user_name_or_the_jaas_config_whichever_the_secret_has() -> None:
    spec = group_spec(kafka={"bootstrapServers": "kafka:9092", "sasl": {"secretName": "my-user"}})
    env = {e["name"]: e for e in builders.consumer_env(spec, "kafka:9092")}
    assert env["KAFKA_SASL_USERNAME"]["valueFrom"]["secretKeyRef"] == {
        "name": "my-user",
        "key": "username",
        "optional": True,
    }
    assert env["KAFKA_SASL_JAAS_CONFIG"]["valueFrom"]["secretKeyRef"]["key"] == "sasl.jaas.config"
    assert "optional" not in env["KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]
    named = group_spec(
        kafka={"bootstrapServers": "k:9092", "sasl": {"secretName": "s", "usernameKey": "user"}}
    )
    env = {e["name"]: e for e in builders.consumer_env(named, "k:9092")}
    assert env["KAFKA_SASL_USERNAME"]["valueFrom"]["secretKeyRef"] == {"name": "s", "key": "user"}
    assert "KAFKA_SASL_JAAS_CONFIG" not in env, "a key the resource names must be there"


# -- the operator's own principal ----------------------------------------------------------------------------


def test_the_operator_may_read_groups_alter_their_configs_describe_topics_and_alter_the_cluster() -> None:
    granted = {(b.resource_type, b.name, b.operation) for b in operator_acls("User:op")}
    assert granted == {
        ("CLUSTER", "kafka-cluster", "ALTER"),
        ("CLUSTER", "kafka-cluster", "DESCRIBE"),
        ("GROUP", "*", "READ"),
        ("GROUP", "*", "DESCRIBE"),
        ("GROUP", "*", "ALTER_CONFIGS"),
        ("TOPIC", "*", "DESCRIBE"),
    }
    assert all(
        (b.pattern, b.host, b.permission, b.principal) == ("LITERAL", "*", "ALLOW", "User:op")
        for b in operator_acls("User:op")
    )


def test_a_ca_file_given_to_the_operator_overrides_the_truststore_of_its_client_properties(
    tmp_path: Path,
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "ssl.truststore.type=PEM\nssl.truststore.location=/nowhere/ca.crt\n"
    )
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    assert OperatorKafka(config).options()["ssl_cafile"] == "/nowhere/ca.crt"
    security = OperatorKafka(config, ca).fleet_security()
    assert security is not None and security.ca == ca.read_bytes(), "copied into each fleet's Secret"
