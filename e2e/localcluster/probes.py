"""Running container probes (exec, httpGet, tcpSocket) and counting their results like the kubelet."""

from __future__ import annotations

import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from e2e.localcluster.podspec import Mount, Probe, probe_url, rewrite_word


def run_probe(probe: Probe, *, env: Mapping[str, str], cwd: Path, mounts: list[Mount]) -> bool:
    """One probe attempt, bounded by its timeout."""
    try:
        if probe.action == "exec":
            argv = [rewrite_word(word, mounts) for word in probe.command]
            done = subprocess.run(
                argv,
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=probe.timeout_seconds,
                start_new_session=True,
                check=False,
            )
            return done.returncode == 0
        if probe.action == "http":
            request = urllib.request.Request(probe_url(probe), headers=dict(probe.headers))
            context = ssl._create_unverified_context()  # the kubelet does not verify probe certificates
            with urllib.request.urlopen(request, timeout=probe.timeout_seconds, context=context) as response:
                return 200 <= int(response.status) < 400
        with socket.create_connection((probe.host, probe.port), timeout=probe.timeout_seconds):
            return True
    except urllib.error.HTTPError as error:
        return 200 <= error.code < 400
    except (OSError, subprocess.SubprocessError, ValueError):
        return False


@dataclass
class ProbeTracker:
    """Success/failure counting for one probe of one running container."""

    probe: Probe
    passing: bool
    next_due: float
    successes: int = 0
    failures: int = 0
    pending: Future[bool] | None = None

    @classmethod
    def start(cls, probe: Probe | None, *, initially: bool, now: float) -> ProbeTracker | None:
        if probe is None:
            return None
        return cls(probe, passing=initially, next_due=now + probe.initial_delay_seconds)

    def record(self, ok: bool, now: float) -> None:
        self.next_due = now + self.probe.period_seconds
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= self.probe.success_threshold:
                self.passing = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.failures >= self.probe.failure_threshold:
                self.passing = False
