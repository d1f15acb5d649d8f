"""The helm CLI (built from the Go module proxy by charts/build-helm.sh, cached) and a small runner."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_ROOT / "charts" / "build-helm.sh"
CHART = REPO_ROOT / "charts" / "staticfleet"


def ensure_helm() -> Path:
    """The helm binary, built first when missing (minutes, once per version); progress goes to stderr."""
    return built_by(BUILD_SCRIPT)


def built_by(script: Path) -> Path:
    """The binary a cached build script names on its last line, built first when missing."""
    done = subprocess.run([str(script)], stdout=subprocess.PIPE, text=True, check=True)
    binary = Path(done.stdout.strip().splitlines()[-1])
    if not binary.is_file():
        raise RuntimeError(f"{script} finished but {binary} does not exist")
    return binary


class HelmError(RuntimeError):
    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"helm {' '.join(args)} failed ({returncode}): {stderr.strip()}")
        self.stderr = stderr


def set_flags(values: Mapping[str, Any]) -> list[str]:
    """`--set-json key=<json>` for each value (keys in helm's dotted form), so types survive."""
    import json

    return [f"--set-json={key}={json.dumps(value)}" for key, value in values.items()]


@dataclass(frozen=True)
class Helm:
    binary: Path
    kubeconfig: Path | None = None

    def run(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary), *args]
        if self.kubeconfig is not None:
            argv.append(f"--kubeconfig={self.kubeconfig}")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise HelmError(args, done.returncode, done.stderr)
        return done

    def template(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        release: str = "sf",
        namespace: str = "staticfleet",
        api_versions: Sequence[str] = (),
        chart: Path = CHART,
    ) -> list[dict[str, Any]]:
        """The chart's rendered manifests (without the CRD), parsed; `api_versions` are APIs the rendering
        takes as served (helm's --api-versions, e.g. cert-manager.io/v1/Certificate)."""
        done = self.run(
            "template", release, str(chart), "--namespace", namespace,
            *(f"--api-versions={v}" for v in api_versions), *set_flags(values or {}),
        )  # fmt: skip
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]
