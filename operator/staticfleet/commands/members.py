"""`staticfleet members remove`: remove static members from a consumer group by group.instance.id
(one LeaveGroup v3+ batch), against any Kafka cluster."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from staticfleet.admin import AdminError, GroupAdmin, KafkaConnection
from staticfleet.admin.client_properties import load_client_properties, with_options
from staticfleet.admin.instance_ids import MAX_MEMBERS_PER_POD, member_instance_ids
from staticfleet.commands.arguments import bootstrap_servers, seconds


def add_connection_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap-server",
        type=bootstrap_servers,
        required=True,
        metavar="HOST:PORT[,...]",
        help="the cluster",
    )
    p.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, "
        "ssl.truststore.location with ssl.truststore.type=PEM, ...), as Kafka's tools take them; "
        "the flags below override it",
    )
    p.add_argument("--security-protocol", choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
    p.add_argument("--sasl-mechanism", choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    p.add_argument("--sasl-username")
    p.add_argument(
        "--sasl-password-env",
        default="KAFKA_SASL_PASSWORD",
        metavar="VAR",
        help="environment variable holding the SASL password (default KAFKA_SASL_PASSWORD)",
    )
    p.add_argument("--ssl-cafile")
    p.add_argument("--ssl-certfile")
    p.add_argument("--ssl-keyfile")
    p.add_argument("--timeout", type=seconds, default=10.0, help="seconds per request (default 10)")


def connection_from(args: argparse.Namespace) -> KafkaConnection:
    """The connection from --command-config, with each flag given on the command line taking precedence."""
    options: dict[str, object] = {}
    if args.command_config is not None:
        options.update(load_client_properties(args.command_config))
    flags = {
        "security_protocol": args.security_protocol,
        "sasl_mechanism": args.sasl_mechanism,
        "sasl_username": args.sasl_username,
        "ssl_cafile": args.ssl_cafile,
        "ssl_certfile": args.ssl_certfile,
        "ssl_keyfile": args.ssl_keyfile,
    }
    options.update({key: value for key, value in flags.items() if value is not None})
    if args.sasl_mechanism and os.environ.get(args.sasl_password_env) is not None:
        options["sasl_password"] = os.environ[args.sasl_password_env]
    return with_options(KafkaConnection(args.bootstrap_server, client_id="staticfleet-cli"), options)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("members", help="administer the members of a consumer group")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    remove = actions.add_parser(
        "remove",
        help="remove static members by group.instance.id",
        description="Sends one LeaveGroup (v3+) with each instance id and an empty member id, as Kafka's "
        "Admin.removeMembersFromConsumerGroup does. Exit code 0 when every member was removed or was "
        "already gone; 1 when any removal failed or the coordinator could not be reached.",
    )
    add_connection_arguments(remove)
    remove.add_argument("--group", required=True, help="the group.id")
    remove.add_argument(
        "--instance-id", action="append", required=True, metavar="ID", help="a group.instance.id (repeatable)"
    )
    remove.add_argument(
        "--members-per-pod",
        type=_members_per_pod,
        default=1,
        metavar="N",
        help="each --instance-id is a process running N members (a Kafka Streams instance with N stream "
        "threads): remove <ID>-1 .. <ID>-N instead, as Kafka Streams names its threads' consumers",
    )
    remove.add_argument("--reason", default="removed with staticfleet members remove")
    remove.set_defaults(run=run_remove)


def _members_per_pod(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_MEMBERS_PER_POD:
        raise argparse.ArgumentTypeError(f"must be a number from 1 to {MAX_MEMBERS_PER_POD}")
    return int(text)


def run_remove(args: argparse.Namespace) -> int:
    try:
        with GroupAdmin(connection_from(args), timeout_s=args.timeout) as admin:
            ids = [m for i in args.instance_id for m in member_instance_ids(i, args.members_per_pod)]
            report = admin.remove_members(args.group, ids, reason=args.reason)
    except AdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    width = max(len("INSTANCE-ID"), *(len(r.instance_id) for r in report.results))
    print(f"{'INSTANCE-ID':<{width}}  RESULT")
    for r in report.results:
        print(f"{r.instance_id:<{width}}  {r.outcome}")
    return 0 if report.ok else 1
