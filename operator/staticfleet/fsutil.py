"""File-system steps that durability depends on, written once."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_directory(path: Path) -> None:
    """Make the directory's entries durable: a file created, renamed or removed in it survives a crash
    only once its directory has been synced too."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
