"""The class-data archive of Spark's classes: written by the first local JVM, used by the next ones."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from staticfleet.analytics import class_archive as ca

ROOT = Path(__file__).resolve().parents[3]
COMPLETE = (0xF00BABA8).to_bytes(4, "little") + b"\0" * 60
BEING_WRITTEN = b"\0" * 64


def _archive(tmp_path: Path, key: str = "k1") -> ca.ClassArchive:
    return ca.ClassArchive(tmp_path / "classes", key)


def _option(options: list[str], name: str) -> str | None:
    values = [option.split("=", 1)[1] for option in options if option.startswith(f"-XX:{name}=")]
    return values[0] if values else None


def test_without_an_archive_the_jvm_writes_one_to_a_part_file_of_its_own(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    first, second = ca.jvm_options(archive), ca.jvm_options(archive)
    assert _option(first, "SharedArchiveFile") is None
    written = [_option(options, "ArchiveClassesAtExit") for options in (first, second)]
    assert all(path and Path(path).parent == archive.directory for path in written)
    assert all(path and Path(path).name.startswith("k1.") and path.endswith(".part") for path in written)
    assert written[0] != written[1]
    assert "-Xlog:cds*=off" in first


def _whole(directory: Path, name: str) -> Path:
    """An archive file as HotSpot writes one, named with its size."""
    path = directory / f"{name}.{len(COMPLETE)}.jsa"
    path.write_bytes(COMPLETE)
    return path


def test_a_session_that_does_not_write_one_uses_the_archive_only_when_there_is_one(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    assert ca.jvm_options(archive, write=False) == []
    assert not archive.directory.exists()
    archive.directory.mkdir()
    assert ca.jvm_options(archive, write=False) == []
    assert archive.part_files() == []
    whole = _whole(archive.directory, "k1")
    assert _option(ca.jvm_options(archive, write=False), "SharedArchiveFile") == str(whole)


def test_a_runtime_without_its_base_archive_is_never_asked_to_write_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "lib" / "server").mkdir(parents=True)
    java = java_home / "bin" / "java"
    java.write_bytes(b"java")
    assert not ca.has_base_archive(java)
    for name in ("classes.jsa", "classes_nocoops.jsa"):
        (java_home / "lib" / "server" / name).write_bytes(b"base")
    assert ca.has_base_archive(java)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx2g -Xshare:off")
    assert not ca.has_base_archive(java)
    archive = ca.ClassArchive(tmp_path / "classes", "k1", writable=False)
    assert ca.jvm_options(archive, write=True) == []
    whole = _whole(archive.directory, "k1")
    assert _option(ca.jvm_options(archive, write=True), "SharedArchiveFile") == str(whole)


def test_a_complete_part_file_becomes_the_archive_named_with_its_size(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    archive.directory.mkdir(parents=True)
    (archive.directory / "k1.aaa.part").write_bytes(COMPLETE)
    (archive.directory / "k1.bbb.part").write_bytes(COMPLETE)
    options = ca.jvm_options(archive)
    named = archive.directory / f"k1.{len(COMPLETE)}.jsa"
    assert _option(options, "SharedArchiveFile") == str(named)
    assert _option(options, "ArchiveClassesAtExit") is None
    assert named.read_bytes() == COMPLETE
    assert archive.found() == named
    assert archive.part_files() == []  # the other complete one is not needed


def test_an_archive_cut_short_is_removed_and_written_again(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    archive.directory.mkdir(parents=True)
    cut = archive.directory / f"k1.{len(COMPLETE) + 4096}.jsa"
    cut.write_bytes(COMPLETE)
    options = ca.jvm_options(archive)
    assert not cut.exists()
    assert _option(options, "SharedArchiveFile") is None
    assert _option(options, "ArchiveClassesAtExit") is not None


def _new_and_day_old(directory: Path, new: str, old: str, content: bytes) -> tuple[Path, Path]:
    """Two part files: one written now, one written a little over a day ago."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / new, directory / old)
    for path in paths:
        path.write_bytes(content)
    day_ago = time.time() - 25 * 3600
    os.utime(paths[1], (day_ago, day_ago))
    return paths


def test_a_part_file_being_written_is_left_alone_and_an_abandoned_one_removed(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    young, old = _new_and_day_old(archive.directory, "k1.young.part", "k1.old.part", BEING_WRITTEN)
    options = ca.jvm_options(archive)
    assert archive.found() is None
    assert archive.part_files() == [young]
    assert _option(options, "ArchiveClassesAtExit") not in (str(young), str(old), None)


def test_archives_of_other_runtimes_go_when_unused_for_a_month_or_beyond_the_last_three(
    tmp_path: Path,
) -> None:
    archive = _archive(tmp_path)
    archive.directory.mkdir(parents=True)
    mine = _whole(archive.directory, "k1")
    others = [_whole(archive.directory, name) for name in ("a", "b", "c", "stale")]
    long_ago = time.time() - 31 * 24 * 3600
    for path in (others[-1], mine):
        os.utime(path, (long_ago, long_ago))
    for age, path in enumerate(others[:3], start=1):
        os.utime(path, (time.time() - age * 60, time.time() - age * 60))
    assert _option(ca.jvm_options(archive), "SharedArchiveFile") == str(mine)
    assert [path.exists() for path in others] == [True, True, False, False]
    assert mine.stat().st_mtime > long_ago  # used now: the last to be removed


def test_part_files_of_other_environments_go_after_a_day(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    waiting, left = _new_and_day_old(archive.directory, "k2.new.part", "k3.old.part", COMPLETE)
    ca.jvm_options(archive)
    assert waiting.exists()
    assert not left.exists()


def test_the_key_follows_the_java_runtime_and_the_spark_jars(tmp_path: Path) -> None:
    java_home, spark_home = tmp_path / "jdk", tmp_path / "spark"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "lib" / "server").mkdir(parents=True)
    (spark_home / "jars").mkdir(parents=True)
    java = java_home / "bin" / "java"
    java.write_bytes(b"java")
    (java_home / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    jar = spark_home / "jars" / "spark-core.jar"
    jar.write_bytes(b"classes")
    key = ca.archive_key(java, spark_home)
    assert ca.archive_key(java, spark_home) == key
    jar.write_bytes(b"other classes")
    assert ca.archive_key(java, spark_home) != key
    changed = ca.archive_key(java, spark_home)
    (java_home / "lib" / "server" / "libjvm.so").write_bytes(b"an updated jvm")
    assert ca.archive_key(java, spark_home) != changed


@pytest.mark.parametrize("value", ["off", "0", "false"])
def test_archives_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str) -> None:
    monkeypatch.setenv("STATICFLEET_CACHE", str(tmp_path))
    monkeypatch.setenv(ca.SWITCH, value)
    assert ca.local_options(write=True) == []
    assert not (tmp_path / "spark-classes").exists()


# A local session that runs one query and says whether its JVM has the archive mapped.
SESSION = textwrap.dedent(
    """
    import sys
    from staticfleet.analytics.session import build_session
    spark = build_session("local[1]", shuffle_partitions=1, driver_memory="512m", writes_class_archive=True)
    assert spark.range(10).selectExpr("sum(id)").collect()[0][0] == 45
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    maps = open(f"/proc/{pid}/maps").read()
    print("MAPPED" if sys.argv[1] in maps else "NOT MAPPED", flush=True)
    spark.stop()
    """
)


def _session(cache: Path, key: str) -> str:
    environment = {**os.environ, "STATICFLEET_CACHE": str(cache), "PYTHONPATH": str(ROOT / "operator")}
    environment.pop(ca.SWITCH, None)
    # Returns once the JVM has exited (it holds the output pipes open): with its archive written.
    finished = subprocess.run(
        [sys.executable, "-c", SESSION, f"spark-classes/{key}."],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,  # a bound: a first Spark JVM on a loaded 2-core machine has taken 300 s
        check=True,
    )
    return finished.stdout + finished.stderr


def test_the_first_local_jvm_writes_the_archive_and_the_next_one_maps_it(tmp_path: Path) -> None:
    java = ca.java_binary()
    assert java is not None, "Spark needs a Java runtime on PATH or in JAVA_HOME"
    archive = ca.ClassArchive(tmp_path / "spark-classes", ca.archive_key(java, ca.spark_home()))
    first = _session(tmp_path, archive.key)
    assert "NOT MAPPED" in first
    assert "[cds" not in first  # writing an archive logs a warning per class left out, when not quiet
    parts = archive.part_files()
    assert len(parts) == 1 and ca.is_complete(parts[0])
    second = _session(tmp_path, archive.key)
    assert "MAPPED" in second.replace("NOT MAPPED", "")
    assert "[cds" not in second
    found = archive.found()
    assert found is not None and ca.is_complete(found)
    assert archive.part_files() == []
