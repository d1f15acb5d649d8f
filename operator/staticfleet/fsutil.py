"""File-system steps that durability depends on, written once."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def fsync_directory(path: Path) -> None:
    """Make the directory's entries durable: a file created, renamed or removed in it survives a crash
    only once its directory has been synced too."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` by a file holding `data`, so that a crash leaves the old file or the new one and
    never a part: write a temporary file beside it (`<name>.<random>.tmp`), fsync it, rename it over
    `path`, fsync the directory. A temporary file a crash left behind is for the caller to remove."""
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:  # a regular file takes it all at once, but a short write must not cut the file
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(path.parent)
