"""Which files to read, and in which format: the edge between command-line arguments and Spark.

Local paths are checked and expanded here (files, directories walked recursively, globs), so a typo
fails fast with a clear message. Anything with a URI scheme (hdfs://, s3a://, ...) is passed to Spark
as given; Spark resolves it and reports what it cannot find.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal
from urllib.parse import urlparse

Format = Literal["json", "parquet"]
FORMATS: Final = ("auto", "json", "parquet")
PARQUET_MAGIC: Final = b"PAR1"


class InputError(ValueError):
    """An input path that cannot be read as an event log."""


@dataclass(frozen=True, slots=True)
class Sources:
    json: tuple[str, ...] = ()
    parquet: tuple[str, ...] = ()
    described: tuple[str, ...] = field(default=())
    """The arguments as given, for the report."""

    @property
    def empty(self) -> bool:
        return not self.json and not self.parquet


def is_remote(path: str) -> bool:
    scheme = urlparse(path).scheme
    return len(scheme) > 1 and scheme != "file"  # one letter is a Windows drive, not a scheme


def _local(path: str) -> str:
    return urlparse(path).path if path.startswith("file:") else path


def _hidden(name: str) -> bool:
    # Spark's own convention: _SUCCESS, .crc files and the like are not data.
    return name.startswith(("_", "."))


def walk(directory: Path) -> list[Path]:
    """Data files under a directory, in a stable order, skipping hidden files and directories."""
    found: list[Path] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        found.extend(Path(root) / name for name in sorted(files) if not _hidden(name))
    return found


def sniff(path: Path) -> Format:
    """Parquet files start with PAR1; anything else is read as JSON lines."""
    with path.open("rb") as handle:
        return "parquet" if handle.read(4) == PARQUET_MAGIC else "json"


def _by_extension(path: str) -> Format:
    return "parquet" if path.rstrip("/").endswith(".parquet") else "json"


def _expand_local(argument: str) -> list[Path]:
    path = _local(argument)
    if glob.has_magic(path):
        matches = sorted(glob.glob(path))
        if not matches:
            raise InputError(f"{argument}: no file matches this pattern")
        candidates = [Path(m) for m in matches]
    else:
        candidate = Path(path)
        if not candidate.exists():
            raise InputError(f"{argument}: no such file or directory")
        candidates = [candidate]
    files: list[Path] = []
    for candidate in candidates:
        if candidate.is_dir():
            inside = walk(candidate)
            if not inside and len(candidates) == 1:
                raise InputError(f"{argument}: the directory holds no data files")
            files.extend(inside)
        elif not _hidden(candidate.name):
            files.append(candidate)
    return files


def resolve(arguments: Sequence[str], fmt: str = "auto") -> Sources:
    """Split the inputs into JSON-lines and Parquet paths; raise InputError for what cannot be read."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not arguments:
        raise InputError("no input given")
    json_paths: list[str] = []
    parquet_paths: list[str] = []
    for argument in arguments:
        if is_remote(argument):
            chosen: Format = _by_extension(argument) if fmt == "auto" else fmt  # type: ignore[assignment]
            (parquet_paths if chosen == "parquet" else json_paths).append(argument)
            continue
        for path in _expand_local(argument):
            if not os.access(path, os.R_OK):
                raise InputError(f"{path}: not readable")
            chosen = sniff(path) if fmt == "auto" else fmt  # type: ignore[assignment]
            # Qualified, so that a cluster whose default filesystem is another one reads this path.
            (parquet_paths if chosen == "parquet" else json_paths).append(f"file:{path.resolve()}")
    sources = Sources(tuple(_unique(json_paths)), tuple(_unique(parquet_paths)), described=tuple(arguments))
    if sources.empty:
        raise InputError(f"no data files in {', '.join(arguments)}")
    return sources


def _unique(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(paths))
