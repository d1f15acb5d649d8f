"""What the operator agrees to act on, whoever wrote the resource (operator flags; the chart sets them).

Anyone who may edit a StaticConsumerGroup (namespace `edit`, an HPA, KEDA) chooses its replicas and its
cluster. The operator bounds both before anything is built or sent: a target above `--max-replicas`,
bootstrap servers or a coordinator API outside the allowed hosts, are refused with a condition, and no
request leaves the operator for them (the credentials in the resource's Secret are never sent to a
host the operator was not told to trust).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from staticfleet.kube.spec import GroupSpec

DEFAULT_MAX_REPLICAS = 1000
RECONCILE_THREADS = 64
"""How many fleets' reconcile passes may be under way at once (--reconcile-threads), a thread each; fewer
work at once (passes.py). A scale-down's pass waits for its departing consumers to leave (the mark's
moment, a second ahead, and up to three more for the group to settle): on asyncio's default pool (the
CPUs + 4 threads) fleets scaled down together waited for one another's waits."""
KUBE_READS_PER_PASS = 2
"""The Kubernetes requests a pass has in flight at once (its StatefulSet and its pods are read together)."""
ANY_HOST = "*"

REPLICAS_ABOVE_LIMIT = "ReplicasAboveLimit"
CLUSTER_NOT_ALLOWED = "ClusterNotAllowed"
COORDINATOR_API_NOT_ALLOWED = "CoordinatorApiNotAllowed"


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    message: str


def _split_host_port(address: str) -> tuple[str, str | None]:
    address = address.strip().lower()
    if address.startswith("["):  # [ipv6]:port
        host, _, rest = address[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = address.rpartition(":")
    return (host, port) if sep and port.isdigit() else (address, None)


@dataclass(frozen=True, slots=True)
class AllowedHosts:
    """Entries are `host` (any port) or `host:port`; `*` allows every host."""

    entries: frozenset[str]

    @staticmethod
    def of(values: Iterable[str]) -> AllowedHosts:
        found = set()
        for value in values:
            for item in value.split(","):
                if item.strip():
                    found.add(item.strip().lower())
        return AllowedHosts(frozenset(found))

    def allows(self, address: str) -> bool:
        if ANY_HOST in self.entries:
            return True
        host, port = _split_host_port(address)
        return host in self.entries or (port is not None and f"{host}:{port}" in self.entries)

    def describe(self) -> str:
        return ", ".join(sorted(self.entries)) or "none"


def api_address(url: str) -> str | None:
    """host[:port] of an http(s) URL, or None when it is not one."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return None
    return f"{parsed.hostname}:{parsed.port}" if parsed.port else parsed.hostname


@dataclass(frozen=True, slots=True)
class Limits:
    max_replicas: int = DEFAULT_MAX_REPLICAS
    bootstrap_servers: AllowedHosts = AllowedHosts(frozenset({ANY_HOST}))
    coordinator_apis: AllowedHosts = AllowedHosts(frozenset({ANY_HOST}))

    @staticmethod
    def from_flags(
        max_replicas: int,
        allowed_bootstrap_servers: Iterable[str],
        allowed_coordinator_apis: Iterable[str],
        default_bootstrap_servers: str | None,
        default_coordinator_api: str | None,
    ) -> Limits:
        """Without allow flags, the operator's own defaults (the chart's coordinator) are the only ones."""
        servers = list(allowed_bootstrap_servers) or [default_bootstrap_servers or ""]
        apis = list(allowed_coordinator_apis)
        if not apis and default_coordinator_api:
            apis = [api_address(default_coordinator_api) or ""]
        return Limits(max_replicas, AllowedHosts.of(servers), AllowedHosts.of(apis))

    def refusal(self, spec: GroupSpec) -> Refusal | None:
        """Why the operator will not act on this resource as it stands, or None."""
        if spec.replicas > self.max_replicas:
            return Refusal(
                REPLICAS_ABOVE_LIMIT,
                f"replicas {spec.replicas} is above this operator's limit of {self.max_replicas} "
                "(--max-replicas); nothing was changed. Set replicas to at most "
                f"{self.max_replicas}.",
            )
        servers = [s for s in (spec.bootstrap_servers or "").split(",") if s.strip()]
        refused = [s.strip() for s in servers if not self.bootstrap_servers.allows(s)]
        if refused:
            return Refusal(
                CLUSTER_NOT_ALLOWED,
                f"bootstrap servers {', '.join(refused)} are not among the hosts this operator may "
                f"connect to ({self.bootstrap_servers.describe()}; --allowed-bootstrap-servers); "
                "no request was sent to them.",
            )
        if spec.coordinator_api:
            address = api_address(spec.coordinator_api)
            if address is None or not self.coordinator_apis.allows(address):
                return Refusal(
                    COORDINATOR_API_NOT_ALLOWED,
                    f"coordinatorApi {spec.coordinator_api} is not among the hosts this operator may "
                    f"connect to ({self.coordinator_apis.describe()}; --allowed-coordinator-apis); "
                    "no request was sent to it.",
                )
        return None
