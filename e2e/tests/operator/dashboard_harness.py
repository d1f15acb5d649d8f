"""The pieces of the dashboard's browser tests: an operator serving the dashboard, consumers paused and
resumed as processes of this machine, messages produced to chosen partitions, and screenshots."""

from __future__ import annotations

import os
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.browser import texts, wait_in_page
from e2e.helpers import Kubectl, wait_until
from e2e.localcluster.ports import free_port

from .harness import REPO_ROOT, OperatorRunner

# `make dashboard-screenshots` sets this to docs/images: the pictures in docs/dashboard.md come from here.
SCREENSHOTS = os.environ.get("STATICFLEET_DASHBOARD_SCREENSHOTS", "")


@dataclass
class Dashboard:
    runner: OperatorRunner
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def status(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def wait_serving(self) -> None:
        def up() -> bool:
            if self.runner.process is not None and self.runner.process.poll() is not None:
                raise RuntimeError(f"the operator exited; see {self.runner.log_path}")
            try:
                return self.status("/healthz") == 200
            except OSError:
                return False

        wait_until(up, timeout=30, what="the dashboard to serve")

    def why_no_snapshot(self, path: str) -> str:
        """What to print when a page waited in vain for its first snapshot: how the JSON API answers for
        the same page, and the dashboard's lines of the operator's log."""
        started = time.monotonic()
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=60) as response:
                answer = f"HTTP {response.status}: {response.read(600).decode(errors='replace')}"
        except (OSError, urllib.error.URLError) as exc:
            answer = f"{type(exc).__name__}: {exc}"
        took = time.monotonic() - started
        log = self.runner.log_path.read_text(errors="replace") if self.runner.log_path.exists() else ""
        lines = [line for line in log.splitlines() if "dashboard" in line or "staticfleet.ui" in line]
        return f"GET {path} took {took:.1f} s, {answer}\n" + "\n".join(lines[-30:])

    def restart_operator(self) -> None:
        self.runner.stop()
        self.runner.start()
        self.wait_serving()


def operator_with_dashboard(kubeconfig: Path, namespace: str, workdir: Path) -> Dashboard:
    port = free_port()
    runner = OperatorRunner(kubeconfig, namespace, workdir, extra_args=("--ui", f"127.0.0.1:{port}"))
    runner.start()
    dashboard = Dashboard(runner, port)
    dashboard.wait_serving()
    return dashboard


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for p in range(partitions):
            for i in range(per_partition):
                producer.send(topic, value=f"m{i}".encode(), partition=p)
        producer.flush(timeout=30)
    finally:
        producer.close()


def card(driver: Any, name: str) -> str:
    found = texts(driver, f"#card-{name} dd")
    return found[0] if found else ""


def lag_shown(driver: Any) -> int | None:
    text = card(driver, "lag").replace(",", "")
    return int(text) if text.isdigit() else None


def all_committed_without_lag(driver: Any) -> bool:
    """Every partition has a committed offset (lag is counted only where one exists) and no lag."""
    committed = texts(driver, "#partitions td.committed")
    return bool(committed) and "none committed" not in committed and lag_shown(driver) == 0


def open_page(driver: Any, url: str) -> None:
    """Loads a page and waits for its first snapshot from the stream."""
    driver.get(url)
    wait_in_page(
        driver,
        lambda d: d.execute_script("return document.body.dataset.generated || ''"),
        timeout=60,  # a bound: a fleet whose coordinator is down waits out its admin timeout first
        what=f"the first snapshot of {url}",
    )


def screenshot(driver: Any, directory: Path, name: str) -> Path:
    """A PNG of the whole page at the window's width; copied to $STATICFLEET_DASHBOARD_SCREENSHOTS too."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    width = int(driver.execute_script("return window.outerWidth"))
    driver.set_window_size(width, max(800, min(height + 120, 4000)))
    try:
        target = directory / f"{name}.png"
        driver.save_screenshot(str(target))
    finally:
        driver.set_window_size(width, 800)
    if SCREENSHOTS:
        out = Path(SCREENSHOTS)
        out = out if out.is_absolute() else REPO_ROOT / out
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, out / target.name)
    return target


def is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def delete_fleets(kubectl: Kubectl, namespace: str) -> None:
    kubectl.run("delete", "staticconsumergroups", "--all", "-n", namespace, "--wait=false", check=False)
    wait_until(
        lambda: not kubectl.items("staticconsumergroups", namespace),
        timeout=120,
        what="the fleets to be deleted",
    )
