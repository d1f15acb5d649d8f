"""Kafka's own command-line tools (kafka-acls, kafka-configs, kafka-consumer-groups) from the pinned jars,
against any bootstrap server: they manage ACLs, SCRAM users and consumer groups on Kafka and on the embedded
coordinator alike."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from conformance.kafka_broker import LOG4J2_CONFIG, ensure_kafka_jars, java_executable

TOOL_TIMEOUT_S = 120.0
ACLS = "org.apache.kafka.tools.AclCommand"
CONFIGS = "kafka.admin.ConfigCommand"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@dataclass(frozen=True)
class ToolRun:
    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> ToolRun:
        if self.returncode != 0:
            raise AssertionError(
                f"{' '.join(self.command)} exited {self.returncode}:\n{self.stdout}\n{self.stderr}"
            )
        return self


def client_properties(
    path: Path, *, user: str, password: str, ca_file: Path, mechanism: str = "SCRAM-SHA-512"
) -> Path:
    """A --command-config file for SASL_SSL with the given user."""
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
        f'username="{user}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca_file}\n"
    )
    return path


def run_tool(main: str, bootstrap: str, properties: Path | None, *args: str) -> ToolRun:
    """`main` with --bootstrap-server, and --command-config when `properties` is given, then `args`."""
    lib = ensure_kafka_jars()
    with tempfile.NamedTemporaryFile(prefix="staticfleet-kafka-tool-", suffix=".log") as log:
        command = (
            java_executable(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            f"-Dstaticfleet.kafka.log={log.name}",
            "-cp",
            f"{lib}/*",
            main,
            "--bootstrap-server",
            bootstrap,
            *(("--command-config", str(properties)) if properties is not None else ()),
            *args,
        )
        done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    return ToolRun(command, done.returncode, done.stdout, done.stderr)


def kafka_acls(bootstrap: str, properties: Path, *args: str) -> ToolRun:
    return run_tool(ACLS, bootstrap, properties, *args)


def kafka_configs(bootstrap: str, properties: Path, *args: str) -> ToolRun:
    return run_tool(CONFIGS, bootstrap, properties, *args)


def kafka_consumer_groups(bootstrap: str, *args: str, properties: Path | None = None) -> ToolRun:
    """kafka-consumer-groups.sh."""
    return run_tool(CONSUMER_GROUPS, bootstrap, properties, *args)
