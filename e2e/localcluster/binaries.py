"""Finding, and if needed building, the control-plane binaries (e2e/cluster/build.sh)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parent.parent / "cluster" / "build.sh"
PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")


def cache_dir() -> Path:
    return Path(os.environ.get("STATICFLEET_CACHE") or Path.home() / ".cache" / "staticfleet")


def bin_dir() -> Path:
    """Where build.sh puts (or has put) the binaries of the pinned version; nothing is built."""
    done = subprocess.run([str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip().splitlines()[-1])


def is_built(directory: Path) -> bool:
    return (directory / ".built").is_file() and all((directory / name).is_file() for name in PROGRAMS)


def ensure_binaries() -> Path:
    """The bin directory, built first when missing (minutes, once per version); progress goes to stderr."""
    directory = bin_dir()
    if is_built(directory):
        return directory
    done = subprocess.run([str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=True)
    built = Path(done.stdout.strip().splitlines()[-1])
    if not is_built(built):
        raise RuntimeError(f"{BUILD_SCRIPT} finished but {built} lacks {', '.join(PROGRAMS)}")
    return built
