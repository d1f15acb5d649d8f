"""Apache Kafka's jars (broker, tools, logging), resolved from Maven Central once and cached.

    python -m conformance.kafka_jars version     # the pinned Kafka version
    python -m conformance.kafka_jars lib         # resolve the jars (idempotent); print their directory

conformance/kafka/pom.xml's `kafka.version` property is the one place the version is pinned. The jars go
to `$STATICFLEET_CACHE/kafka-<version>/lib` (default cache: ~/.cache/staticfleet). The conformance broker
runs from them, and so does the Kafka image of the kind tests (e2e/kind/images.sh).

Standard library only: e2e/kind/images.sh runs it with the system's python3.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from conformance.java_build import cache_root, locked

HERE = Path(__file__).resolve().parent
POM = HERE / "kafka" / "pom.xml"
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
RESOLVE_TIMEOUT_S = 900.0


@functools.cache
def kafka_version() -> str:
    """The pinned Kafka version (the `kafka.version` property of conformance/kafka/pom.xml)."""
    node = ET.parse(POM).getroot().find("m:properties/m:kafka.version", _POM_NS)
    if node is None or not (node.text or "").strip():
        raise RuntimeError(f"{POM} has no kafka.version property")
    return (node.text or "").strip()


def kafka_home() -> Path:
    return cache_root() / f"kafka-{kafka_version()}"


def _pom_digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def ensure_kafka_jars(*, quiet: bool = True) -> Path:
    """Resolves the broker's jars once and returns the lib directory.

    A stamp file records the digest of the pom the jars were resolved from; a changed pom resolves again.
    Concurrent callers (two pytest processes, say) serialise on a lock file.
    """
    home = kafka_home()
    lib = home / "lib"
    stamp = home / ".resolved"
    digest = _pom_digest()
    if stamp.exists() and stamp.read_text().strip() == digest and any(lib.glob("kafka_2.13-*.jar")):
        return lib
    with locked(home / ".lock"):
        if stamp.exists() and stamp.read_text().strip() == digest and any(lib.glob("kafka_2.13-*.jar")):
            return lib
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("mvn not found: Maven resolves the Kafka jars from Maven Central")
        staging = home / "lib.partial"
        shutil.rmtree(staging, ignore_errors=True)
        command = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-f",
            str(POM),
            f"-Dmaven.repo.local={cache_root() / 'm2'}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
        ]
        result = subprocess.run(
            command, capture_output=quiet, text=True, timeout=RESOLVE_TIMEOUT_S, check=False
        )
        if result.returncode != 0:
            detail = (result.stdout or "") + (result.stderr or "") if quiet else ""
            raise RuntimeError(
                f"resolving Kafka {kafka_version()} failed ({' '.join(command)}):\n{detail[-4000:]}"
            )
        shutil.rmtree(lib, ignore_errors=True)
        staging.rename(lib)
        stamp.write_text(digest + "\n")
    return lib


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.kafka_jars")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the pinned Kafka version")
    sub.add_parser("lib", help="print the lib directory (resolving the jars if needed)")
    args = parser.parse_args(argv)
    print(kafka_version() if args.command == "version" else ensure_kafka_jars())
    return 0


if __name__ == "__main__":
    sys.exit(main())
