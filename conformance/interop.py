"""Apache Kafka's own tools against a bootstrap server: the consumer-group command and member removal.

Both run `conformance/interop/GroupTool.java` (Java single-file source launch) with the Kafka jars of the
pinned version on the class path, so they work against Kafka and against staticfleet alike.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from conformance.kafka_broker import LOG4J2_CONFIG, ensure_kafka_jars, java_executable

GROUP_TOOL = Path(__file__).resolve().parent / "interop" / "GroupTool.java"
TOOL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ToolRun:
    returncode: int
    stdout: str
    stderr: str


def _group_tool(*args: str) -> ToolRun:
    lib = ensure_kafka_jars()
    with tempfile.NamedTemporaryFile(prefix="staticfleet-group-tool-", suffix=".log") as log:
        command = [
            java_executable(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            f"-Dstaticfleet.kafka.log={log.name}",
            "-cp",
            f"{lib}/*",
            str(GROUP_TOOL),
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    return ToolRun(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class MemberRow:
    """One row of `kafka-consumer-groups --describe --members --verbose` (`columns` has them all)."""

    group: str
    consumer_id: str
    instance_id: str | None
    host: str
    client_id: str
    partitions: int
    assignment: str | None
    columns: dict[str, str]


def describe_members(bootstrap: str, group: str) -> tuple[ToolRun, list[MemberRow]]:
    """Runs the consumer-group command and parses its member table."""
    run = _group_tool("describe-members", bootstrap, group)
    return run, parse_member_table(run.stdout)


def parse_member_table(text: str) -> list[MemberRow]:
    """Parses the member table; every cell is one word ("-" when empty)."""
    rows: list[MemberRow] = []
    header: list[str] | None = None
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "GROUP" and "CONSUMER-ID" in fields:
            header = fields
            continue
        if header is None or len(fields) != len(header):
            continue
        columns = dict(zip(header, fields, strict=True))
        assignment = columns.get("CURRENT-ASSIGNMENT", columns.get("ASSIGNMENT", "-"))
        instance = columns.get("GROUP-INSTANCE-ID", "-")
        rows.append(
            MemberRow(
                group=columns["GROUP"],
                consumer_id=columns["CONSUMER-ID"],
                instance_id=None if instance == "-" else instance,
                host=columns["HOST"],
                client_id=columns["CLIENT-ID"],
                partitions=int(columns["#PARTITIONS"]),
                assignment=None if assignment == "-" else assignment,
                columns=columns,
            )
        )
    return rows


_REMOVAL = re.compile(r"^(?P<instance>\S+) (?P<outcome>\S+)$")


def remove_members(bootstrap: str, group: str, instance_ids: list[str]) -> tuple[ToolRun, dict[str, str]]:
    """`Admin.removeMembersFromConsumerGroup` by instance id: instance id -> NONE or the exception class."""
    run = _group_tool("remove-members", bootstrap, group, *instance_ids)
    outcomes: dict[str, str] = {}
    for line in run.stdout.splitlines():
        match = _REMOVAL.match(line.strip())
        if match is not None:
            outcomes[match.group("instance")] = match.group("outcome")
    return run, outcomes
