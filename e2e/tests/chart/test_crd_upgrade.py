"""Upgrading the CRD as docs/install.md says, on a real API server: a CRD that Helm created (a create,
owned by Helm's field manager) refuses a plain server-side apply of a changed CRD, and takes the
documented command; and the CRD fits client-side apply's annotation, contrary to what the docs once said.
The CRD is a copy under another API group, so the cluster's own is not touched."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.helm import REPO_ROOT
from e2e.helpers import Cluster

GROUP = "upgrade.e2e.staticfleet.io"
NAME = f"staticconsumergroups.{GROUP}"
ANNOTATION_LIMIT = 256 * 1024  # bytes of all annotations of an object (the API server's limit)


def _copy(description: str) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(
        (REPO_ROOT / "crds" / "staticconsumergroups.staticfleet.io.yaml").read_text()
    )
    crd["metadata"]["name"], crd["spec"]["group"] = NAME, GROUP
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = description
    return crd


@pytest.fixture
def workdir(cluster: Cluster, tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "crds").mkdir()
    yield tmp_path
    # The API server deletes a CRD once its cleanup finalizer has run, in well under a second here, but
    # once, in a full kind run on this 2-core machine, it took more than two minutes.
    cluster.kubectl.run("delete", "crd", NAME, "--ignore-not-found", check=False, timeout=300)


def _documented_upgrade() -> str:
    found = re.search(
        r"```sh\n(kubectl apply --server-side[^\n]*-f crds/)\n",
        (REPO_ROOT / "docs" / "install.md").read_text(),
    )
    assert found is not None, "docs/install.md shows no CRD upgrade command"
    return found.group(1)


def _kubectl(cluster: Cluster, line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    words = shlex.split(line)
    assert words[0] == "kubectl"
    argv = [str(cluster.kubectl.binary), f"--kubeconfig={cluster.kubectl.kubeconfig}", *words[1:]]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_a_crd_helm_created_is_upgraded_by_the_documented_command(cluster: Cluster, workdir: Path) -> None:
    target = workdir / "crds" / "crd.yaml"
    target.write_text(yaml.safe_dump(_copy("version one")))
    cluster.kubectl.run("create", "--field-manager=helm", "-f", str(target))  # as `helm install` does

    target.write_text(yaml.safe_dump(_copy("version two")))
    plain = _kubectl(cluster, "kubectl apply --server-side -f crds/", workdir)
    assert plain.returncode != 0 and "conflict" in plain.stderr.lower() and "helm" in plain.stderr, (
        plain.stderr
    )

    documented = _kubectl(cluster, _documented_upgrade(), workdir)
    assert documented.returncode == 0, documented.stderr
    schema = cluster.kubectl.json("get", "crd", NAME)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["description"] == "version two"


def test_the_crd_fits_client_side_apply(cluster: Cluster, workdir: Path) -> None:
    (workdir / "crds" / "crd.yaml").write_text(yaml.safe_dump(_copy("client side")))
    done = _kubectl(cluster, "kubectl apply -f crds/", workdir)
    assert done.returncode == 0, done.stderr
    annotations = cluster.kubectl.json("get", "crd", NAME)["metadata"]["annotations"]
    applied = annotations["kubectl.kubernetes.io/last-applied-configuration"]
    assert len(applied.encode()) < ANNOTATION_LIMIT / 8  # about 25 KB of JSON: far below the limit
