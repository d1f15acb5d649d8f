"""Event-log lines parsed in Spark's JVM by a strict parser of their own schema, several times cheaper
than Spark's JSON reader, which builds every line through a generic, schema-driven converter.

`StrictEventLines.java` takes only lines that the reader would read to exactly the same values and
flags any other; an input with a flagged line is read again with Spark's reader (`pipeline._read`),
so the tables are the same either way. Its jar is compiled here, with the `javac` of the Java runtime
Spark runs on, against PySpark's jars, and kept under `$STATICFLEET_CACHE/spark-jars`; a session that
`build_session` starts ships it with `spark.jars`. Without a JDK, with
`STATICFLEET_SPARK_LINE_PARSER=off`, or in a session started by `spark-submit`, Spark's reader reads
every input.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from staticfleet.analytics import schema as s
from staticfleet.analytics.class_archive import cache_directory, turned_off

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

SOURCE = Path(__file__).with_name("StrictEventLines.java")
CLASS = "staticfleet.analytics.StrictEventLines"
FUNCTION = "staticfleet_strict_event_line"
SWITCH = "STATICFLEET_SPARK_LINE_PARSER"
PER_MEMBER = "_per_member"
READ_FIELDS = (*s.ANALYSED_FIELDS, ("members", "string"))
"""The fields a line is read to, in order: the JSON reader's schema but its corrupt-record field."""

log = logging.getLogger(__name__)


def row_schema() -> StructType:
    """What the parser gives for a line: the JSON reader's row, and a completed rebalance's members
    keyed as `lines` keys them."""
    from pyspark.sql.types import ArrayType, LongType, StructField, StructType

    member = StructType([StructField("owner", LongType()), StructField("keys", ArrayType(LongType()))])
    return StructType([*s.event_schema(READ_FIELDS).fields, StructField(PER_MEMBER, ArrayType(member))])


def enabled() -> bool:
    return not turned_off(SWITCH)


def directory() -> Path:
    return cache_directory("spark-jars")


def fields_resource() -> bytes:
    return "".join(f"{name}\t{kind}\n" for name, kind in READ_FIELDS).encode()


def javac() -> Path | None:
    """The compiler of the JDK Spark's launcher runs on (`$JAVA_HOME`, else `java` on PATH)."""
    from staticfleet.analytics.class_archive import java_binary

    java = java_binary()
    if java is not None and (java.resolve().parent / "javac").exists():
        return java.resolve().parent / "javac"
    found = shutil.which("javac")
    return Path(found) if found else None


def jar_key(spark_jars: Path) -> str:
    """The source, the fields and the Spark jars it is compiled against, by name and size."""
    digest = hashlib.sha256(SOURCE.read_bytes() + fields_resource())
    for jar in sorted(spark_jars.glob("*.jar")):
        digest.update(f"{jar.name}:{jar.stat().st_size}\n".encode())
    return digest.hexdigest()[:20]


def jar() -> Path | None:
    """The parser's jar, compiled now if it is not in the cache; None when it is off or cannot be
    compiled here (no JDK), in which case Spark's reader reads every input."""
    if not enabled():
        return None
    from staticfleet.analytics.class_archive import spark_home

    spark_jars = spark_home() / "jars"
    try:
        target = directory() / f"strict-event-lines-{jar_key(spark_jars)}.jar"
        if target.is_file():
            return target
        compiler = javac()
        if compiler is None:
            return None
        return _compiled(compiler, spark_jars, target)
    except (OSError, subprocess.SubprocessError) as error:
        log.warning(
            "the strict line parser is not available (%s); Spark's JSON reader reads every line", error
        )
        return None


def _compiled(compiler: Path, spark_jars: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="staticfleet-javac-") as work:
        classes = Path(work) / "classes"
        classes.mkdir()
        subprocess.run(
            [
                str(compiler),
                "--release",
                "17",
                "-nowarn",
                "-cp",
                f"{spark_jars}/*",
                "-d",
                str(classes),
                str(SOURCE),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        part = Path(work) / "lines.jar"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as archive:
            for compiled in sorted(classes.rglob("*.class")):
                archive.write(compiled, compiled.relative_to(classes).as_posix())
            archive.writestr("staticfleet/analytics/fields.tsv", fields_resource())
        # Whole or not there, whichever of several sessions compiling at once is first.
        staged = target.with_name(f"{target.name}.{os.getpid()}.part")
        os.replace(shutil.copy(part, staged), target)
    return target


def register(spark: SparkSession) -> bool:
    """Whether the session can parse lines with it: the function registered, its class loaded."""
    if not enabled():
        return False
    try:
        spark.udf.registerJavaFunction(FUNCTION, CLASS, row_schema())
    except Exception:  # its class is not in this session (spark-submit): Spark's reader reads the lines
        return False
    return True
