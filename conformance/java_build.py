"""Java programs the tests run, built once by Maven and cached.

    python -m conformance.java_build build DIR     # build DIR/pom.xml; print the jar's path
    python -m conformance.java_build repository     # print the Maven repository the builds use

A project (a directory with `pom.xml` and `src/`) is built by `mvn package` in a copy under
`$STATICFLEET_CACHE/java/builds/<artifact>-<digest>`, where the digest covers the pom and every source file:
an unchanged project is not built again, a changed one is. The Maven repository is
`$STATICFLEET_CACHE/java/m2`, shared by these builds and by the example image's build (e2e/kind/images.sh
copies it into the image's build context, so the build inside Docker downloads nothing).

Standard library only: e2e/kind/images.sh runs it with the system's python3.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from pathlib import Path

BUILD_TIMEOUT_S = 900.0
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def cache_root() -> Path:
    configured = os.environ.get("STATICFLEET_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "staticfleet"


def repository() -> Path:
    """The Maven repository of the Java builds (not the Kafka broker's, which holds much more)."""
    return cache_root() / "java" / "m2"


def _sources(project: Path) -> list[Path]:
    return [project / "pom.xml", *sorted(p for p in (project / "src").rglob("*") if p.is_file())]


def digest(project: Path) -> str:
    """A digest of the pom and the sources, by path relative to the project."""
    h = hashlib.sha256()
    for path in _sources(project):
        h.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def final_name(project: Path) -> str:
    """The jar's name: the pom's build/finalName."""
    node = ET.parse(project / "pom.xml").getroot().find("m:build/m:finalName", _POM_NS)
    if node is None or not (node.text or "").strip():
        raise RuntimeError(f"{project / 'pom.xml'} has no build/finalName")
    return (node.text or "").strip()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_jar(project: Path, *, quiet: bool = True) -> Path:
    """Builds the project unless this version of it was built before; returns its jar (dependencies are in
    `lib/` beside it, named by the jar's manifest). Concurrent callers serialise on a lock file."""
    project = project.resolve()
    name = final_name(project)
    builds = cache_root() / "java" / "builds"
    home = builds / f"{name}-{digest(project)}"
    jar = home / "target" / f"{name}.jar"
    if jar.exists():
        return jar
    with locked(builds / f".{name}.lock"):
        if jar.exists():
            return jar
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError(
                "mvn not found: Maven builds the Java programs the tests run (apt-get install maven)"
            )
        staging = builds / f"{home.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        shutil.copy2(project / "pom.xml", staging / "pom.xml")
        shutil.copytree(project / "src", staging / "src")
        command = [mvn, "-B", *(["-q"] if quiet else []), f"-Dmaven.repo.local={repository()}", "package"]
        result = subprocess.run(
            command, cwd=staging, capture_output=quiet, text=True, timeout=BUILD_TIMEOUT_S, check=False
        )
        if result.returncode != 0:
            detail = (result.stdout or "") + (result.stderr or "") if quiet else ""
            raise RuntimeError(f"building {project} failed ({' '.join(command)}):\n{detail[-4000:]}")
        staging.rename(home)
    return jar


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.java_build")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build a Maven project (cached); print its jar")
    build.add_argument("project", type=Path)
    sub.add_parser("repository", help="print the Maven repository the builds use")
    args = parser.parse_args(argv)
    if args.command == "repository":
        print(repository())
        return 0
    started = time.monotonic()
    jar = ensure_jar(args.project)
    print(f"built or found in {time.monotonic() - started:.1f}s", file=sys.stderr)
    print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
