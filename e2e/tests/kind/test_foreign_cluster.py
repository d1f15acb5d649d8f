"""The project never deletes a kind cluster it did not create. A cluster named `kind` (kind's own default
name, likely a developer's) is made here as kind makes its nodes: a container that Docker labels
io.x-k8s.kind.cluster=kind, which `kind get clusters` lists and `kind delete cluster` would remove. Then
every way the project deletes a cluster is tried on it, `make kind-down` as the README writes it with
KIND_CLUSTER naming it, and it is still there; and `make test` itself names its cluster otherwise.
A real cluster named `kind`, if one runs, is used instead and left as it was."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from .support import REPO_ROOT, readme_blocks

pytestmark = pytest.mark.kind

NAME = "kind"
NODE = f"{NAME}-control-plane"


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120, check=check)


def _node_id() -> str:
    return _docker("inspect", "-f", "{{.Id}}", NODE, check=False).stdout.strip()


@pytest.fixture(scope="module")
def foreign(image: str) -> Iterator[tuple[str, bool]]:
    """The id of the node container of a cluster named `kind` that cluster.sh did not create, and
    whether this test made it (a stand-in) rather than found it running."""
    existing = _node_id()
    if existing:
        yield existing, False
        return
    _docker(
        "run", "-d", "--name", NODE,
        "--label", f"io.x-k8s.kind.cluster={NAME}", "--label", "io.x-k8s.kind.role=control-plane",
        "--entrypoint", "sleep", image, "infinity",
    )  # fmt: skip
    try:
        yield _node_id(), True
    finally:
        _docker("rm", "-f", NODE, check=False)


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _kind_clusters() -> list[str]:
    done = _run([str(REPO_ROOT / "e2e" / "kind" / "cluster.sh"), "kind", "get", "clusters"])
    return done.stdout.split()


def test_kind_lists_the_cluster_as_a_cluster_of_its_own(foreign: tuple[str, bool]) -> None:
    assert NAME in _kind_clusters()


def test_make_kind_down_as_written_leaves_a_cluster_it_did_not_create(foreign: tuple[str, bool]) -> None:
    (line,) = [c for c in readme_blocks()["Run on kind"] if c.startswith("make kind-down")]
    done = _run(["bash", "-c", line], KIND_CLUSTER=NAME)
    assert done.returncode != 0, "a refused delete fails the command"
    assert "was not created by e2e/kind/cluster.sh" in done.stderr and "leaving it alone" in done.stderr
    assert _node_id() == foreign[0] and NAME in _kind_clusters()


def test_cluster_up_never_deletes_it_to_start_afresh(foreign: tuple[str, bool]) -> None:
    """KIND_FRESH=1, as make kind-e2e sets it, would delete the cluster and make a new one: refused."""
    done = _run([str(REPO_ROOT / "e2e" / "kind" / "cluster.sh"), "up"], KIND_CLUSTER=NAME, KIND_FRESH="1")
    assert done.returncode != 0 and "leaving it alone" in done.stderr, done.stderr
    assert _node_id() == foreign[0]


def test_cluster_up_never_deletes_it_for_its_stopped_nodes(foreign: tuple[str, bool]) -> None:
    """A cluster whose nodes stopped (a Docker restart) is one `up` deletes and makes again: not this one."""
    node_id, stand_in = foreign
    if not stand_in:
        pytest.skip("a real cluster named kind runs here: its nodes are not stopped for a test")
    _docker("stop", "-t", "1", NODE)
    done = _run([str(REPO_ROOT / "e2e" / "kind" / "cluster.sh"), "up"], KIND_CLUSTER=NAME)
    assert done.returncode != 0 and "leaving it alone" in done.stderr, done.stderr
    assert _node_id() == node_id


def test_make_test_uses_a_cluster_of_its_own_name() -> None:
    """The name `make test` (and every kind target) uses when nobody sets one."""
    env = {k: v for k, v in os.environ.items() if k != "KIND_CLUSTER"}
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", "print-kind-cluster: ; @echo $(KIND_CLUSTER)",
         "print-kind-cluster"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "staticfleet"
