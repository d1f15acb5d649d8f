"""A class-data archive of Spark's classes for local-mode JVMs (HotSpot's dynamic CDS archive).

A local analysis loads some 15,000 classes while it runs, most of them from Spark's jars: each is read,
parsed and verified, about 4 CPU-seconds in all. From an archive they are mapped ready to use, and a
session starts sooner. The first analysis in local mode for a given Java and Spark
writes the archive when its JVM exits (`-XX:ArchiveClassesAtExit`, to a part file of its own), so it
holds the classes an analysis loads. A later session finds the part file complete (HotSpot writes its
header last), renames it to the archive and starts with `-XX:SharedArchiveFile`. A JVM that cannot use
an archive (another Java build, another class path) starts without it: `-Xshare:auto` is HotSpot's
default, and the archive's log messages are off.

The archives live under `$STATICFLEET_CACHE/spark-classes` (default `~/.cache/staticfleet`), one per
Java runtime and set of Spark jars, 150-200 MB each; `STATICFLEET_SPARK_CLASS_ARCHIVE=off` turns them
off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

SWITCH = "STATICFLEET_SPARK_CLASS_ARCHIVE"
_DYNAMIC_ARCHIVE_MAGIC = (0xF00BABA8).to_bytes(4, "little")
_QUIET = "-Xlog:cds*=off"
"""HotSpot logs to standard output; writing an archive alone logs a warning per class it leaves out."""
_ABANDONED_S = 24 * 3600
"""A part file not taken after this long is left over: its JVM died while writing it, or no session
of its Python environment came to take it."""
_UNUSED_S = 30 * 24 * 3600
"""Archives of other Java runtimes or Spark versions not used for this long are removed."""
_KEPT = 3
"""Archives kept at most, the ones used last: each Python environment with its own Spark has one."""
_JAVA_ENVIRONMENT = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")
"""Where JVM options may come from besides Spark's settings."""


@dataclass(frozen=True)
class ClassArchive:
    """Where the archive of one Java runtime and set of Spark jars is kept, or written. The archive is
    named with its size, `KEY.SIZE.jsa`: HotSpot maps an archive cut short as if whole, and crashes."""

    directory: Path
    key: str
    writable: bool = True
    """Whether a JVM may write it: HotSpot refuses to start, rather than write one, without the
    runtime's own base archive."""

    def part_files(self) -> list[Path]:
        return sorted(self.directory.glob(f"{self.key}.*.part"))

    def found(self) -> Path | None:
        """The archive, if there is a whole one."""
        for candidate in sorted(self.directory.glob(f"{self.key}.*.jsa")):
            if _named_size(candidate) == _size(candidate):
                return candidate
        return None


def cache_directory(name: str) -> Path:
    """A directory of the project's cache, `$STATICFLEET_CACHE` (default `~/.cache/staticfleet`)."""
    cache = os.environ.get("STATICFLEET_CACHE") or str(Path.home() / ".cache" / "staticfleet")
    return Path(cache) / name


def turned_off(switch: str) -> bool:
    """Whether an environment switch says off."""
    return os.environ.get(switch, "").lower() in ("off", "0", "false", "no")


def default_directory() -> Path:
    return cache_directory("spark-classes")


def archive_key(java: Path, spark_home: Path) -> str:
    """A key for the archive: the Java runtime's binaries and the Spark jars, by name, size and time.
    An archive holds the classes of one JVM build and one class path."""
    binary_path = java.resolve()
    parts = [str(binary_path)]
    for binary in (binary_path, *sorted(binary_path.parent.parent.glob("lib/*/libjvm.so"))):
        stat = binary.stat()
        parts.append(f"{binary}:{stat.st_size}:{stat.st_mtime_ns}")
    for jar in sorted((spark_home / "jars").glob("*.jar")):
        stat = jar.stat()
        parts.append(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def is_complete(part: Path) -> bool:
    """Whether an archive file is whole: HotSpot writes its header, which starts with the magic
    number, after everything else."""
    try:
        with part.open("rb") as file:
            return file.read(4) == _DYNAMIC_ARCHIVE_MAGIC
    except OSError:
        return False


def jvm_options(archive: ClassArchive, write: bool = True, now: float | None = None) -> list[str]:
    """The JVM options that use the archive, or (`write`) write it when there is none yet. Makes a
    complete part file the archive, and clears out part files left behind, archives cut short and
    archives of other runtimes or Spark versions no longer used."""
    now = time.time() if now is None else now
    if not write and not archive.directory.is_dir():
        return []
    archive.directory.mkdir(parents=True, exist_ok=True)
    found = archive.found()
    for part in archive.part_files():
        if found is None and is_complete(part):
            found = archive.directory / f"{archive.key}.{_size(part)}.jsa"
            os.replace(part, found)
        elif found is not None and is_complete(part):
            part.unlink(missing_ok=True)
    if found is not None:
        with contextlib.suppress(OSError):
            os.utime(found)  # in use: the last to be removed
    _prune(archive.directory, found, now)
    if found is not None:
        return [_QUIET, f"-XX:SharedArchiveFile={found}"]
    if not (write and archive.writable):
        return []
    part = archive.directory / f"{archive.key}.{uuid.uuid4().hex[:12]}.part"
    return [_QUIET, f"-XX:ArchiveClassesAtExit={part}"]


def _prune(directory: Path, kept: Path | None, now: float) -> None:
    """Removes archives cut short, those not used for a month, and all but the few used last; and
    part files a day old, whose JVM died while writing, or whose Python environment is gone."""
    for part in directory.glob("*.part"):
        if _age(part, now) > _ABANDONED_S:
            part.unlink(missing_ok=True)
    others = []
    for other in directory.glob("*.jsa"):
        if other == kept:
            continue
        if _named_size(other) != _size(other) or _age(other, now) > _UNUSED_S:
            other.unlink(missing_ok=True)
        else:
            others.append(other)
    others.sort(key=lambda path: _age(path, now))
    for other in others[_KEPT - (kept is not None) :]:
        other.unlink(missing_ok=True)


def _named_size(path: Path) -> int | None:
    number = path.name.rsplit(".", 2)[-2] if path.name.count(".") >= 2 else ""
    return int(number) if number.isdigit() else None


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0


def java_binary() -> Path | None:
    """The `java` Spark's launcher runs: `$JAVA_HOME/bin/java`, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found) if found and Path(found).exists() else None


def spark_home() -> Path:
    import pyspark

    return Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)


def current() -> ClassArchive | None:
    """The archive for the Java runtime and Spark that a local session would start now; None when
    archives are off or there is no Java to key them on."""
    if turned_off(SWITCH):
        return None
    java = java_binary()
    if java is None:
        return None
    return ClassArchive(default_directory(), archive_key(java, spark_home()), has_base_archive(java))


def has_base_archive(java: Path) -> bool:
    """Whether the runtime has its default archives (with and without compressed pointers, for any
    heap size) and nothing in the environment turns sharing off."""
    server = java.resolve().parent.parent / "lib" / "server"
    if not all((server / name).is_file() for name in ("classes.jsa", "classes_nocoops.jsa")):
        return False
    given = " ".join(os.environ.get(name, "") for name in _JAVA_ENVIRONMENT)
    return "-Xshare:off" not in given


def is_written(archive: ClassArchive) -> bool:
    """Whether the archive is there, or written and waiting for the next session to take it."""
    return archive.found() is not None or any(is_complete(part) for part in archive.part_files())


def local_options(write: bool) -> list[str]:
    """The archive's options for a local-mode JVM about to start (`write`: one that runs an analysis,
    and writes the archive if there is none); none when archives are off, or where there is no Java
    to key them on or no directory to keep them in."""
    try:
        archive = current()
        return [] if archive is None else jvm_options(archive, write)
    except OSError:
        return []
