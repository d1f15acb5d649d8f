"""Starting the dashboard from `staticfleet operator --ui HOST:PORT [--ui-token-file F]`."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence

from staticfleet.admin import KafkaConnection
from staticfleet.broker.security.tls import TlsSettings
from staticfleet.kube.kubeapi import KubeApi
from staticfleet.kube.spec import GroupSpec, OperatorDefaults
from staticfleet.ui.server import DashboardThread, parse_listen
from staticfleet.ui.sources import LiveSource

log = logging.getLogger(__name__)


def read_token(args: argparse.Namespace) -> str | None:
    if args.ui_token_file is None:
        return None
    token = args.ui_token_file.read_text().strip()
    if not token:
        raise SystemExit(f"--ui-token-file {args.ui_token_file} is empty")
    return str(token)


def read_tls(args: argparse.Namespace) -> TlsSettings | None:
    cert, key = getattr(args, "ui_tls_cert", None), getattr(args, "ui_tls_key", None)
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise SystemExit("the dashboard's TLS needs both --ui-tls-cert and --ui-tls-key")
    return TlsSettings(cert, key)


def start_dashboard(
    args: argparse.Namespace,
    namespaces: Sequence[str],
    defaults: OperatorDefaults,
    connect: Callable[[GroupSpec], KafkaConnection],
    refusal: Callable[[GroupSpec], str | None] | None = None,
    api_token: Callable[[GroupSpec], str | None] | None = None,
    api_ca: Callable[[GroupSpec], str | None] | None = None,
) -> DashboardThread:
    """The dashboard reads through its own Kubernetes and Kafka connections (`connect` builds the
    operator's, with the resource's TLS/SASL settings), so a slow page never holds up a reconcile. It
    contacts no cluster the operator refuses (`refusal` says why, from the operator's limits), and
    sends the coordinator API's bearer token where the operator would (`api_token`), trusting the CA the
    operator trusts for it (`api_ca`)."""
    host, port = parse_listen(args.ui)
    token = read_token(args)

    def make_source() -> LiveSource:
        return LiveSource(
            KubeApi(args.kubeconfig),
            namespaces=namespaces,
            defaults=defaults,
            connect=connect,
            refusal=refusal,
            api_token=api_token,
            api_ca=api_ca,
            admin_timeout_s=args.admin_timeout,
        )

    dashboard = DashboardThread(make_source, host, port, token, read_tls(args))
    dashboard.start()
    log.info("dashboard at %s%s", dashboard.url, " (bearer token required)" if token else "")
    return dashboard
