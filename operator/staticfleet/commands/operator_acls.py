"""`staticfleet operator-acls`: the Kafka ACLs the operator's own principal needs, listed or granted.

`grant` logs in as a principal that may change ACLs (a super user), makes the operator's ACLs exactly
those of kube/access.OPERATOR_ACLS (creating the missing ones, deleting any other ACL of that principal)
and, with `--every`, checks again at that interval until it is stopped: the Helm chart runs it beside the
embedded coordinator, so ACLs lost with the coordinator's data come back within one interval.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Iterable

from staticfleet.admin import AclBinding, AdminError, GroupAdmin
from staticfleet.commands.members import add_connection_arguments, connection_from
from staticfleet.kube.access import operator_acls

log = logging.getLogger("staticfleet.operator-acls")
RETRY_S = 2.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("operator-acls", help="the Kafka ACLs of the operator's own principal")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="print them as kafka-acls.sh commands")
    listing.add_argument("--principal", default="User:staticfleet-operator")
    listing.add_argument("--bootstrap-server", default="<bootstrap>", help="shown in the commands")
    listing.set_defaults(run=run_list)
    grant = actions.add_parser(
        "grant",
        help="make the principal's ACLs exactly these",
        description="Logs in as a principal allowed to change ACLs (ALTER on the cluster, e.g. a super "
        "user). Exit code 0 once the ACLs are exactly the operator's; 1 when they could not be made so. "
        "With --every, keeps them so until SIGTERM.",
    )
    add_connection_arguments(grant)
    grant.add_argument("--principal", default="User:staticfleet-operator")
    grant.add_argument(
        "--every",
        type=float,
        metavar="SECONDS",
        help="check again at this interval until stopped (failures are retried every 2 s)",
    )
    grant.set_defaults(run=run_grant)


def kafka_acls_commands(bindings: Iterable[AclBinding], bootstrap: str) -> list[str]:
    """One kafka-acls.sh --add per resource, with its operations."""
    by_resource: dict[tuple[str, str, str], list[str]] = {}
    for b in sorted(bindings):
        by_resource.setdefault((b.resource_type, b.name, b.principal), []).append(b.operation)
    flag = {"CLUSTER": "--cluster", "GROUP": "--group", "TOPIC": "--topic"}
    commands = []
    for (kind, name, principal), operations in sorted(by_resource.items()):
        resource = flag[kind] if kind == "CLUSTER" else f"{flag[kind]} '{name}'"
        ops = " ".join(f"--operation {op.title().replace('_', '')}" for op in operations)
        commands.append(
            f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties --add "
            f"--allow-principal {principal} {ops} {resource}"
        )
    return commands


def run_list(args: argparse.Namespace) -> int:
    for line in kafka_acls_commands(operator_acls(args.principal), args.bootstrap_server):
        print(line)
    return 0


def converge(admin: GroupAdmin, principal: str) -> tuple[frozenset[AclBinding], frozenset[AclBinding]]:
    """Makes the principal's ACLs exactly the operator's; returns (granted, revoked)."""
    wanted = operator_acls(principal)
    have = admin.acls_of(principal)
    grant, revoke = wanted - have, have - wanted
    admin.create_acls(grant)
    admin.delete_acls(revoke)
    return grant, revoke


def run_grant(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    stop = threading.Event()
    if args.every is not None:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with GroupAdmin(connection_from(args), timeout_s=args.timeout) as admin:
        while True:
            try:
                grant, revoke = converge(admin, args.principal)
            except AdminError as exc:
                if args.every is None:
                    print(f"error: {exc}", file=sys.stderr)
                    return 1
                log.warning("the ACLs of %s are not set yet (retrying): %s", args.principal, exc)
                wait = RETRY_S
            else:
                for binding in sorted(grant):
                    log.info("granted: %s", binding.describe())
                for binding in sorted(revoke):
                    log.info("revoked: %s", binding.describe())
                if args.every is None:
                    return 0
                wait = args.every
            if stop.wait(wait):
                return 0
