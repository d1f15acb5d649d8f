"""Child processes that cannot outlive the process that started them.

Each child gets its own process group (so a signal reaches its own children too) and, on Linux,
PR_SET_PDEATHSIG: the kernel signals it when the thread that forked it dies, even by SIGKILL.
Processes are also tagged with an environment marker so that a sweep can find stragglers
(grandchildren that escaped the group kill) by reading /proc.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[[int, int], int] | None:
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
    except OSError:
        return None
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    def call(option: int, value: int) -> int:
        return int(prctl(option, value))

    return call


# Resolved once, before any fork: the child only makes one foreign call.
_PRCTL = _load_prctl()


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A preexec_fn that asks the kernel to send `sig` when the forking thread exits."""

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, int(sig))

    return preexec


def spawn(
    argv: Sequence[str],
    *,
    log: IO[bytes] | int,
    env: Mapping[str, str],
    cwd: Path | None = None,
    parent_death_signal: int = signal.SIGKILL,
) -> subprocess.Popen[bytes]:
    """Starts argv in a new session (its own process group); stdout and stderr go to `log`."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=die_with_parent(parent_death_signal),
    )


def signal_group(pid: int, sig: int) -> None:
    """Signals the process group led by pid (every child is a group leader); gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stop(process: subprocess.Popen[bytes], *, grace_seconds: float, sig: int = signal.SIGTERM) -> int:
    """Sends `sig` to the process group, waits up to grace_seconds, then SIGKILLs the group."""
    if process.poll() is None:
        signal_group(process.pid, sig)
        try:
            process.wait(timeout=max(grace_seconds, 0.0))
        except subprocess.TimeoutExpired:
            signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    # The leader may be gone while members of its group live on.
    signal_group(process.pid, signal.SIGKILL)
    return int(process.returncode)


def stop_all(processes: Iterable[subprocess.Popen[bytes]], *, grace_seconds: float) -> None:
    """Signals every group at once, then waits for them together within one grace period."""
    running = [p for p in processes if p.poll() is None]
    for process in running:
        signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    for process in running:
        stop(process, grace_seconds=max(0.0, deadline - time.monotonic()))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def processes_with_env(marker: str, value: str) -> list[int]:
    """Pids of this user's processes whose environment contains marker=value."""
    wanted = f"{marker}={value}".encode()
    found: list[int] = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def sweep(marker: str, value: str, *, grace_seconds: float = 2.0) -> int:
    """SIGTERMs, then SIGKILLs, every process tagged marker=value; returns how many were found."""
    pids = processes_with_env(marker, value)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)
