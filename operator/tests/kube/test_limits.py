"""What the operator agrees to act on: a replicas bound and the hosts it may send requests to."""

from __future__ import annotations

from staticfleet.kube.limits import (
    CLUSTER_NOT_ALLOWED,
    COORDINATOR_API_NOT_ALLOWED,
    REPLICAS_ABOVE_LIMIT,
    AllowedHosts,
    Limits,
)

from .fixtures import group_spec


def limits(**overrides: object) -> Limits:
    values: dict[str, object] = {
        "max_replicas": 1000,
        "allowed_bootstrap_servers": [],
        "allowed_coordinator_apis": [],
        "default_bootstrap_servers": "coordinator.staticfleet.svc:9092",
        "default_coordinator_api": "http://coordinator.staticfleet.svc:8080",
    }
    values.update(overrides)
    return Limits.from_flags(**values)  # type: ignore[arg-type]


def test_a_target_above_max_replicas_is_refused_with_the_limit_named() -> None:
    refusal = limits().refusal(group_spec(replicas=10_000_000, kafka={}))
    assert refusal is not None and refusal.reason == REPLICAS_ABOVE_LIMIT
    assert "10000000" in refusal.message and "1000" in refusal.message
    assert (
        limits().refusal(
            group_spec(replicas=1000, kafka={"bootstrapServers": "coordinator.staticfleet.svc:9092"})
        )
        is None
    )


def test_without_allow_flags_only_the_default_cluster_is_allowed() -> None:
    refusal = limits().refusal(group_spec(kafka={"bootstrapServers": "evil.example:9092"}))
    assert refusal is not None and refusal.reason == CLUSTER_NOT_ALLOWED
    assert "evil.example:9092" in refusal.message and "no request was sent" in refusal.message
    other_port = group_spec(kafka={"bootstrapServers": "coordinator.staticfleet.svc:9093"})
    assert limits().refusal(other_port) is not None


def test_every_bootstrap_server_must_be_allowed() -> None:
    mixed = group_spec(kafka={"bootstrapServers": "kafka-0:9092,attacker:9092"})
    refusal = limits(allowed_bootstrap_servers=["kafka-0,kafka-1"]).refusal(mixed)
    assert (
        refusal is not None and "attacker:9092" in refusal.message and "kafka-0:9092" not in refusal.message
    )


def test_a_host_entry_allows_every_port_and_star_allows_every_host() -> None:
    hosts = AllowedHosts.of(["Kafka-0", "kafka-1:9093"])
    assert hosts.allows("kafka-0:9092") and hosts.allows("KAFKA-0:1")
    assert hosts.allows("kafka-1:9093") and not hosts.allows("kafka-1:9092")
    assert AllowedHosts.of(["*"]).allows("anything:1")
    assert AllowedHosts.of(["::1"]).allows("[::1]:9092")


def test_a_coordinator_api_outside_the_allowed_hosts_is_refused() -> None:
    spec = group_spec(
        kafka={
            "bootstrapServers": "coordinator.staticfleet.svc:9092",
            "coordinatorApi": "http://10.0.0.9:8080",
        }
    )
    refusal = limits().refusal(spec)
    assert refusal is not None and refusal.reason == COORDINATOR_API_NOT_ALLOWED
    allowed = group_spec(
        kafka={
            "bootstrapServers": "coordinator.staticfleet.svc:9092",
            "coordinatorApi": "http://coordinator.staticfleet.svc:8080/",
        }
    )
    assert limits().refusal(allowed) is None
