"""The one atomic write: the whole new file or the old one, each fsynced (the file, then its directory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from staticfleet.broker.server import load_cluster_id
from staticfleet.fsutil import write_atomically


def _synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths fsync is called on from now on."""
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_an_atomic_write_replaces_the_file_syncs_it_and_its_directory_and_leaves_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    synced = _synced(monkeypatch)
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
    # The temporary file (renamed since) first, then the directory that holds the new name.
    assert len(synced) == 2 and Path(synced[0]).name.startswith("state.json.") and synced[1] == str(tmp_path)


def test_the_cluster_id_is_written_durably_once_and_then_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _synced(monkeypatch)
    cluster_id = load_cluster_id(tmp_path)
    assert (tmp_path / "cluster.id").read_text() == cluster_id + "\n"
    assert str(tmp_path) in synced and len(synced) == 2
    assert load_cluster_id(tmp_path) == cluster_id and len(synced) == 2
