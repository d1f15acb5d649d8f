"""`staticfleet operator`: run the StaticConsumerGroup operator (in the cluster, or outside it with a
kubeconfig)."""

from __future__ import annotations

import argparse
import http.server
import logging
import os
import threading
import urllib.parse
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from secrets import token_bytes
from typing import TYPE_CHECKING, Any

from staticfleet.commands.arguments import (
    add_logging_arguments,
    bootstrap_servers,
    http_url,
    listen_text,
    port_or_zero,
    positive_int,
    seconds,
)
from staticfleet.kube.limits import DEFAULT_MAX_REPLICAS, KUBE_READS_PER_PASS, RECONCILE_THREADS
from staticfleet.readiness import Readiness
from staticfleet.readiness import serve as serve_readiness

if TYPE_CHECKING:
    from staticfleet.kube.context import OperatorContext
    from staticfleet.kube.spec import GroupSpec
    from staticfleet.ui.server import DashboardThread


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "operator",
        help="run the StaticConsumerGroup operator",
        description="Reconciles StaticConsumerGroup resources: StatefulSet, Service and PDB, one-rebalance "
        "scaling, member removal and live group status.",
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", default=[], help="watch this namespace (repeatable)"
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace (default)")
    p.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig to use outside the cluster (default: in-cluster, then ~/.kube)",
    )
    p.add_argument(
        "--default-bootstrap-servers",
        type=bootstrap_servers,
        default=os.environ.get("STATICFLEET_DEFAULT_BOOTSTRAP_SERVERS"),
        help="bootstrap servers for resources without spec.kafka.bootstrapServers "
        "(env STATICFLEET_DEFAULT_BOOTSTRAP_SERVERS)",
    )
    p.add_argument(
        "--default-coordinator-api",
        type=http_url,
        default=os.environ.get("STATICFLEET_DEFAULT_COORDINATOR_API"),
        help="HTTP API of the default (embedded) coordinator (env STATICFLEET_DEFAULT_COORDINATOR_API)",
    )
    p.add_argument(
        "--kafka-config",
        type=Path,
        default=os.environ.get("STATICFLEET_KAFKA_CONFIG"),
        metavar="FILE",
        help="the operator's own Kafka login: a Kafka client properties file (security.protocol, "
        "sasl.mechanism, sasl.jaas.config, ssl.truststore.location with ssl.truststore.type=PEM), used for "
        "every resource without kafka.sasl. With SASL in it, each fleet gets its own SCRAM user, Secret "
        "and ACLs (kafka.credentials: Provisioned). Read again on every use (env STATICFLEET_KAFKA_CONFIG)",
    )
    p.add_argument(
        "--kafka-ca-file",
        type=Path,
        default=os.environ.get("STATICFLEET_KAFKA_CA_FILE"),
        metavar="PEM",
        help="the CA for the operator's own Kafka login, instead of the ssl.truststore.location of "
        "--kafka-config (env STATICFLEET_KAFKA_CA_FILE)",
    )
    p.add_argument(
        "--coordinator-api-token-file",
        type=Path,
        default=os.environ.get("STATICFLEET_COORDINATOR_API_TOKEN_FILE"),
        metavar="FILE",
        help="bearer token of the default coordinator's HTTP API (its --http-token-file); sent to "
        "--default-coordinator-api only (env STATICFLEET_COORDINATOR_API_TOKEN_FILE)",
    )
    p.add_argument(
        "--departure-signing-key-file",
        type=Path,
        default=os.environ.get("STATICFLEET_DEPARTURE_SIGNING_KEY_FILE"),
        metavar="FILE",
        help="the secret each fleet's departure key is derived from (at least 32 bytes); every replica "
        "needs the same one. Default: a key of this process, so after a restart a fleet's running pods "
        "hold a stale key and take their departure by the slower handshake until they restart (env "
        "STATICFLEET_DEPARTURE_SIGNING_KEY_FILE)",
    )
    p.add_argument(
        "--coordinator-api-ca-file",
        type=Path,
        default=os.environ.get("STATICFLEET_COORDINATOR_API_CA_FILE"),
        metavar="PEM",
        help="the CA of the default coordinator's HTTPS certificate (its --http-tls-cert); default: the "
        "system's trust store (env STATICFLEET_COORDINATOR_API_CA_FILE)",
    )
    p.add_argument(
        "--tenancy",
        choices=[TENANCY_POLICIES, TENANCY_OFF],
        default=os.environ.get("STATICFLEET_TENANCY", TENANCY_POLICIES),
        help="policies (default): a fleet may claim only the topics and group ids that start with "
        "'<namespace>.' or that a StaticFleetTenancyPolicy selecting its namespace allows; any other gets "
        "no Kafka user, no ACL and no action on its group. off: every fleet may claim any name "
        "(env STATICFLEET_TENANCY)",
    )
    p.add_argument(
        "--reconcile-threads",
        type=positive_int,
        default=os.environ.get("STATICFLEET_RECONCILE_THREADS", str(RECONCILE_THREADS)),
        help="how many fleets' reconcile passes may be under way at once, of which at most the CPUs + 4 "
        "work while the others wait (a scale-down's, a second or more for its departing consumers) "
        f"(default {RECONCILE_THREADS}; env STATICFLEET_RECONCILE_THREADS)",
    )
    p.add_argument(
        "--max-replicas",
        type=positive_int,
        default=os.environ.get("STATICFLEET_MAX_REPLICAS", str(DEFAULT_MAX_REPLICAS)),
        help="refuse (with a condition) resources whose replicas exceed this "
        f"(default {DEFAULT_MAX_REPLICAS}; env STATICFLEET_MAX_REPLICAS)",
    )
    p.add_argument(
        "--allowed-bootstrap-servers",
        action="append",
        default=_env_list("STATICFLEET_ALLOWED_BOOTSTRAP_SERVERS"),
        metavar="HOST[:PORT],...",
        help="hosts a resource's bootstrapServers may name (repeatable; a host without a port allows every "
        "port; * allows any host). Default: the hosts of --default-bootstrap-servers only "
        "(env STATICFLEET_ALLOWED_BOOTSTRAP_SERVERS)",
    )
    p.add_argument(
        "--allowed-coordinator-apis",
        action="append",
        default=_env_list("STATICFLEET_ALLOWED_COORDINATOR_APIS"),
        metavar="HOST[:PORT],...",
        help="hosts a resource's coordinatorApi may name, as above. Default: the host of "
        "--default-coordinator-api only (env STATICFLEET_ALLOWED_COORDINATOR_APIS)",
    )
    p.add_argument(
        "--scale-down-step-timeout",
        type=seconds,
        default=300.0,
        metavar="SECONDS",
        help="a scale-down step that waits longer than this on pods or the coordinator is reported as "
        "ScaleDownBlocked, and a new replicas target then supersedes it (default 300)",
    )
    p.add_argument(
        "--interval",
        type=seconds,
        default=2.0,
        help="seconds between status refreshes of a resource (default 2)",
    )
    p.add_argument(
        "--liveness",
        type=http_url,
        default=None,
        metavar="URL",
        help="serve a liveness probe, e.g. http://0.0.0.0:8081/healthz",
    )
    p.add_argument(
        "--readiness",
        type=http_url,
        default=None,
        metavar="URL",
        help="serve a readiness probe, e.g. http://0.0.0.0:8082/readyz: 200 once kopf has started, or while "
        "this replica stands by for the Lease (--leader-election); 503 before",
    )
    p.add_argument("--metrics-port", type=port_or_zero, default=9090, help="Prometheus metrics port (0: off)")
    p.add_argument("--metrics-host", default="0.0.0.0", help="Prometheus metrics bind address")
    p.add_argument(
        "--ui",
        type=listen_text,
        metavar="HOST:PORT",
        help="serve the read-only dashboard here, e.g. 127.0.0.1:8000 (default: off)",
    )
    p.add_argument(
        "--ui-token-file",
        type=Path,
        help="require the bearer token in this file for the dashboard (default: no token)",
    )
    p.add_argument("--ui-tls-cert", type=Path, metavar="PEM", help="serve the dashboard over HTTPS")
    p.add_argument("--ui-tls-key", type=Path, metavar="PEM", help="the key of --ui-tls-cert")
    p.add_argument("--admin-timeout", type=seconds, default=5.0, help="seconds for each Kafka admin request")
    p.add_argument(
        "--leader-election",
        action="store_true",
        help="run as one of several replicas: act only while holding a Lease (the others wait)",
    )
    p.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE"),
        help="namespace of the Lease (default: env POD_NAMESPACE)",
    )
    p.add_argument("--leader-election-name", default="staticfleet-operator", help="name of the Lease")
    p.add_argument(
        "--field-manager",
        default=os.environ.get("STATICFLEET_FIELD_MANAGER", "staticfleet-operator"),
        help="field manager of the operator's server-side applies: one per operator (the chart uses "
        "staticfleet-operator/<namespace>/<release>); another staticfleet operator's fields are not "
        "overwritten but reported as ApplyConflict (env STATICFLEET_FIELD_MANAGER)",
    )
    add_logging_arguments(p)
    p.set_defaults(run=run)


TENANCY_POLICIES = "policies"
TENANCY_OFF = "off"


def _env_list(name: str) -> list[str]:
    value = os.environ.get(name)
    return [value] if value else []


MIN_SIGNING_KEY_BYTES = 32


def _departure_signing_key(path: Path | None) -> bytes | str | None:
    """The file's key, None without a file, or why it cannot be used."""
    if path is None:
        return None
    try:
        key = path.read_bytes().strip()
    except OSError as exc:
        return f"--departure-signing-key-file {path}: {exc.strerror or exc}"
    if len(key) < MIN_SIGNING_KEY_BYTES:
        return (
            f"--departure-signing-key-file {path}: {len(key)} bytes, at least {MIN_SIGNING_KEY_BYTES} "
            "expected (e.g. head -c 48 /dev/urandom | base64)"
        )
    return key


def run(args: argparse.Namespace) -> int:
    from staticfleet import logs

    # kafka-python logs each failed connection attempt as an ERROR, and while the coordinator restarts
    # (expected) that is a line per attempt: told once a minute instead.
    logs.configure(args.log_level, args.log_format, quiet_kafka=True)
    if logging.getLogger().level > logging.DEBUG:
        # kopf logs every watch-event handler call: keep them for DEBUG.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # one line per liveness probe
    if args.kubeconfig is not None:
        if not args.kubeconfig.exists():
            logging.error("kubeconfig %s does not exist", args.kubeconfig)
            return 2
        os.environ["KUBECONFIG"] = str(args.kubeconfig)  # for kopf's own login as well

    # Imported only now: the kubernetes client reads KUBECONFIG once, when first imported.
    from staticfleet.kube.kubeapi import is_operator_manager

    if not is_operator_manager(args.field_manager) or len(args.field_manager) > 128:
        logging.error(
            "--field-manager %r: use staticfleet-operator or staticfleet-operator/<name> (at most 128 "
            "characters), so that operators recognise each other",
            args.field_manager,
        )
        return 2

    import kopf
    from prometheus_client import start_http_server

    from staticfleet.admin import AdminError
    from staticfleet.kube import handlers
    from staticfleet.kube.access import OperatorKafka
    from staticfleet.kube.context import OperatorContext
    from staticfleet.kube.kubeapi import KubeApi
    from staticfleet.kube.limits import Limits
    from staticfleet.kube.metrics import OperatorMetrics
    from staticfleet.kube.spec import OperatorDefaults

    kafka = OperatorKafka(Path(args.kafka_config), args.kafka_ca_file) if args.kafka_config else None
    if kafka is not None:
        try:  # a file that cannot be used stops the start, with the property to fix
            security = kafka.fleet_security()
        except (AdminError, OSError) as exc:
            logging.error("--kafka-config %s: %s", args.kafka_config, exc)
            return 2
        logging.info(
            "Kafka login from %s; fleets get their own users: %s",
            args.kafka_config,
            f"yes ({security.mechanism} over {security.security_protocol})" if security else "no (no SASL)",
        )
    tenancy = args.tenancy == TENANCY_POLICIES
    if tenancy:
        from staticfleet.kube.tenancy import TENANCY_CRD

        probe = KubeApi(args.kubeconfig, args.field_manager)
        try:
            served = probe.served(TENANCY_CRD)
        finally:
            probe.close()
        if not served:
            # Without the policies every fleet would be held to its own prefix, and lose its access.
            logging.error(
                "--tenancy policies needs the CRD %s: apply crds/ first (kubectl apply --server-side "
                "-f crds/), or start with --tenancy off",
                TENANCY_CRD,
            )
            return 2
        handlers.enable_tenancy()
    else:
        logging.warning(
            "TENANCY IS OFF: a fleet in any namespace may claim any topic and group id, and gets READ "
            "on them with its own Kafka user"
        )
    signing_key = _departure_signing_key(args.departure_signing_key_file)
    if isinstance(signing_key, str):
        logging.error("%s", signing_key)
        return 2
    metrics = OperatorMetrics()
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.metrics_host, registry=metrics.registry)
    ctx = OperatorContext(
        api=KubeApi(
            args.kubeconfig, args.field_manager, connections=KUBE_READS_PER_PASS * args.reconcile_threads
        ),
        defaults=OperatorDefaults(args.default_bootstrap_servers, args.default_coordinator_api),
        metrics=metrics,
        admin_timeout_s=args.admin_timeout,
        step_timeout=timedelta(seconds=args.scale_down_step_timeout),
        kafka=kafka,
        api_token_file=args.coordinator_api_token_file,
        api_ca_file=args.coordinator_api_ca_file,
        tenancy_enforced=tenancy,
        departure_signing_key=signing_key or token_bytes(32),
        limits=Limits.from_flags(
            args.max_replicas,
            args.allowed_bootstrap_servers,
            args.allowed_coordinator_apis,
            args.default_bootstrap_servers,
            args.default_coordinator_api,
        ),
    )
    memo = handlers.OperatorMemo(ctx=ctx, interval_s=args.interval, pass_threads=args.reconcile_threads)
    readiness = Readiness()
    if args.readiness:
        serve_readiness(args.readiness, readiness)
    namespaces = list(args.namespace)
    # Every replica serves the dashboard, the followers of a leader election too: it only reads.
    dashboard = _dashboard(args, namespaces, ctx) if args.ui else None

    def operate() -> int:
        metrics.leading.set(1)
        try:
            kopf.run(
                registry=handlers.registry,
                settings=handlers.settings(),
                standalone=True,
                clusterwide=not namespaces,
                namespaces=namespaces,
                liveness_endpoint=args.liveness,
                ready_flag=readiness.kopf_started,
                memo=memo,
            )
        finally:
            ctx.close()
        return 0

    try:
        if not args.leader_election:
            return operate()
        return _elected(args, operate, readiness)
    finally:
        if dashboard is not None:
            dashboard.stop()


def _dashboard(args: argparse.Namespace, namespaces: list[str], ctx: OperatorContext) -> DashboardThread:
    from staticfleet.kube.secrets import connection
    from staticfleet.ui.run import start_dashboard

    def refusal(spec: GroupSpec) -> str | None:
        refused = ctx.limits.refusal(spec)
        return refused.message if refused is not None else None

    return start_dashboard(
        args,
        namespaces,
        ctx.defaults,
        lambda spec: connection(ctx.api, ctx.secret_files, spec, ctx.own_options()),
        refusal,
        ctx.api_token,
        ctx.api_ca,
    )


def _elected(args: argparse.Namespace, operate: Callable[[], int], readiness: Readiness) -> int:
    """Follow until this replica leads; meanwhile answer the liveness probe ourselves (kopf serves it
    once it runs)."""
    from kubernetes import config

    from staticfleet.kube.leader import Election, run_as_leader

    if args.kubeconfig is not None:
        config.load_kube_config(config_file=str(args.kubeconfig))  # type: ignore[no-untyped-call]
    else:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
    if not args.leader_election_namespace:
        logging.error("--leader-election needs --leader-election-namespace (or env POD_NAMESPACE)")
        return 2
    election = Election(args.leader_election_name, args.leader_election_namespace)
    probe = _follower_liveness(args.liveness)

    def lead() -> int:
        readiness.following(False)  # ready again once kopf has started
        if probe is not None:
            probe.shutdown()
            probe.server_close()
        return operate()

    readiness.following(True)
    return run_as_leader(election, lead)


def _follower_liveness(url: str | None) -> http.server.HTTPServer | None:
    if not url:
        return None
    parsed = urllib.parse.urlsplit(url)

    class Alive(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"following\n")

        def log_message(self, format: str, *args: Any) -> None:  # one line per probe is noise
            pass

    server = http.server.HTTPServer((parsed.hostname or "0.0.0.0", parsed.port or 80), Alive)
    threading.Thread(target=server.serve_forever, name="follower-liveness", daemon=True).start()
    return server
