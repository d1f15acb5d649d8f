"""One data directory, one coordinator: a second `staticfleet coordinator` on it exits and touches nothing."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from e2e.localcluster.ports import free_port

from .processes import CoordinatorProcess, _env


def _tree(directory: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under the directory with its size, modification time and content digest."""
    entries = {}
    for path in sorted(directory.rglob("*")):
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        entries[str(path.relative_to(directory))] = (stat.st_size, stat.st_mtime_ns, digest)
    return entries


def test_a_second_coordinator_on_the_same_data_dir_exits_with_a_clear_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = CoordinatorProcess(data)
    first.start()
    try:
        before = _tree(data)
        assert "coordinator" in before and ".lock" in before
        command = [
            sys.executable, "-m", "staticfleet.cli", "coordinator",
            "--listen", f"127.0.0.1:{free_port()}", "--http", f"127.0.0.1:{free_port()}",
            "--data-dir", str(data),
        ]  # fmt: skip
        second = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=60,
        )
        assert second.returncode != 0
        assert f"data directory {data} is in use by another coordinator" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        assert _tree(data) == before, "the second coordinator changed the data directory"
        assert first.process is not None and first.process.poll() is None, "the first one still runs"
        assert first.api("/api/groups") is not None
    finally:
        first.stop()
    # Once the first has stopped, the directory is free again.
    again = CoordinatorProcess(data)
    again.start()
    again.stop()
