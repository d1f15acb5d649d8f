"""Where the analysis writes: one directory on any Hadoop filesystem (a local path, `file:///shared/...`
on a path every node mounts, `hdfs://`, `s3a://`, ...).

Spark's executors write the tables there; the driver writes the few small files it made itself (the
summary, charts and report) through the same filesystem API, each once, so that nothing assumes the
driver's local disk is where the output is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


class OutputDir:
    def __init__(self, spark: SparkSession, location: str | Path) -> None:
        self.location = str(location)
        context = spark.sparkContext
        jvm: Any = context._jvm
        self._hadoop: Any = jvm.org.apache.hadoop.fs
        self._root: Any = self._hadoop.Path(self.location)
        self._conf: Any = context._jsc.hadoopConfiguration()

    def child(self, name: str) -> str:
        """The location of an output inside the directory, as Spark's readers and writers take it."""
        return f"{self.location.rstrip('/')}/{name}"

    def _filesystem(self) -> Any:
        # A filesystem object of our own (not the JVM-wide cached one Spark uses), so that turning off
        # the local filesystem's .crc side files affects only these few files.
        filesystem = self._hadoop.FileSystem.newInstance(self._root.toUri(), self._conf)
        filesystem.setWriteChecksum(False)
        return filesystem

    def create(self) -> None:
        filesystem = self._filesystem()
        try:
            filesystem.mkdirs(self._root)
        finally:
            filesystem.close()

    def write_files(self, files: dict[str, bytes]) -> None:
        """Write (replacing) these files, named relative to the directory."""
        filesystem = self._filesystem()
        try:
            for name, data in files.items():
                stream = filesystem.create(self._hadoop.Path(self._root, name), True)
                try:
                    stream.write(bytearray(data))
                finally:
                    stream.close()
        finally:
            filesystem.close()
