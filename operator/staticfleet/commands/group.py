"""`staticfleet group describe`: a consumer group's state and members with their partitions, from any
Kafka cluster (DescribeGroups)."""

from __future__ import annotations

import argparse
import json
import sys

from staticfleet.admin import AdminError, GroupAdmin, GroupDescription
from staticfleet.commands.members import add_connection_arguments, connection_from


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("group", help="inspect a consumer group")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = actions.add_parser(
        "describe",
        help="state, coordinator and members (instance ids, hosts, partitions)",
        description="Exit code 0 when described; 1 when the group does not exist or the coordinator "
        "could not be reached.",
    )
    add_connection_arguments(describe)
    describe.add_argument("--group", required=True, help="the group.id")
    describe.add_argument("-o", "--output", choices=["table", "json"], default="table")
    describe.set_defaults(run=run_describe)


def _partitions(partitions: dict[str, list[int]] | None) -> str:
    if not partitions:
        return "-"
    return " ".join(f"{topic}:{','.join(map(str, parts))}" for topic, parts in sorted(partitions.items()))


def render_table(group: GroupDescription) -> str:
    lines = [
        f"GROUP        {group.group_id}",
        f"STATE        {group.state}",
        f"PROTOCOL     {group.protocol_type or '-'}/{group.protocol or '-'}",
        f"COORDINATOR  {group.coordinator.address} (node {group.coordinator.node_id})",
        f"MEMBERS      {len(group.members)}",
    ]
    if group.members:
        rows = [("INSTANCE-ID", "MEMBER-ID", "CLIENT-ID", "HOST", "PARTITIONS")]
        rows += [
            (m.instance_id or "-", m.member_id, m.client_id, m.client_host, _partitions(m.partitions))
            for m in group.members
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines.append("")
        for r in rows:
            lines.append("  ".join(f"{r[i]:<{widths[i]}}" for i in range(4)) + "  " + r[4])
    return "\n".join(lines)


def run_describe(args: argparse.Namespace) -> int:
    try:
        with GroupAdmin(connection_from(args), timeout_s=args.timeout) as admin:
            group = admin.describe_group(args.group)
    except AdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(group.to_json(), indent=2))
    else:
        print(render_table(group))
    return 0
