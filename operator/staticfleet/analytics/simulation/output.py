"""Buffered JSON-lines files, rotated by size and named as the coordinator names its event log."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_FLUSH_BYTES = 1 << 20


class JsonLinesLog:
    """Appends events to `<directory>/<stem>.jsonl`; past `max_bytes` the file becomes `<stem>-<n>.jsonl`.

    Unlike the coordinator's writer this keeps every rotated file and writes in large chunks: a
    simulation produces millions of lines and nothing reads them while it runs.
    """

    def __init__(self, directory: Path, stem: str = "events", max_bytes: int = 64 * 1024 * 1024) -> None:
        self.directory = directory
        self.stem = stem
        self.max_bytes = max_bytes
        self.lines = 0
        directory.mkdir(parents=True, exist_ok=True)
        self._path = directory / f"{stem}.jsonl"
        self._file = self._path.open("w", encoding="utf-8")
        self._size = 0
        self._buffer: list[str] = []
        self._buffered = 0
        self._rotations = 0
        self._dumps = json.JSONEncoder(separators=(",", ":")).encode

    def emit(self, event: Mapping[str, Any]) -> None:
        line = self._dumps(event) + "\n"
        size = len(line)  # ASCII in practice; only the rotation point depends on it
        if self._size and self._size + size > self.max_bytes:
            self._rotate()
        self._buffer.append(line)
        self._buffered += size
        self._size += size
        self.lines += 1
        if self._buffered >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        self._file.write("".join(self._buffer))
        self._buffer.clear()
        self._buffered = 0

    def _rotate(self) -> None:
        self._flush()
        self._file.close()
        self._rotations += 1
        self._path.rename(self.directory / f"{self.stem}-{self._rotations:06d}.jsonl")
        self._file = self._path.open("w", encoding="utf-8")
        self._size = 0

    def files(self) -> list[Path]:
        rotated = [self.directory / f"{self.stem}-{n:06d}.jsonl" for n in range(1, self._rotations + 1)]
        return [*rotated, self._path]

    def close(self) -> None:
        self._flush()
        self._file.close()
