from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


def table(spark: SparkSession, out_dir: Path | str, name: str) -> list[dict[str, Any]]:
    return [row.asDict() for row in spark.read.parquet(f"{out_dir}/{name}").collect()]


def keyed(rows: list[dict[str, Any]], *key: str) -> dict[Any, dict[str, Any]]:
    return {tuple(r[k] for k in key) if len(key) > 1 else r[key[0]]: r for r in rows}
