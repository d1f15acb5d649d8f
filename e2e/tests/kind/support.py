"""What the kind tests share: the chart as the README installs it, the README's own commands, the embedded
coordinator asked through `kubectl exec` (its pod has the project's Python), and waits that, when they
time out, put the pods' state and logs into the failure message.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from e2e.helpers import Kubectl, Manifest, pod_report, wait_until
from e2e.tests.operator.harness import timing
from examples.demo.fleet import tenancy_policy
from examples.demo.incluster import (
    CREATE_TOPIC_SCRIPT,
    GROUP_SCRIPT,
    OFFSETS_SCRIPT,
    PRODUCE_SCRIPT,
    in_coordinator,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
README = REPO_ROOT / "README.md"
RELEASE = "staticfleet"
RELEASE_NAMESPACE = "staticfleet"
COORDINATOR_POD = f"{RELEASE}-coordinator-0"
FLEET = "orders"  # examples/embedded.yaml
PARTITIONS = 6  # examples/producer.yaml

T = TypeVar("T")


@dataclass(frozen=True)
class Shell:
    """Runs a README command line as a user would: bash in the repository, with helm, kubectl and the
    kind cluster's KUBECONFIG."""

    kubeconfig: Path
    helm: Path
    kubectl: Path

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.helm.parent), str(Path(self.kubectl).parent), os.environ["PATH"]])
        # Without KIND_FRESH, which `make kind-e2e` exports: a user's shell has none, and with it the
        # README's `make kind-up` (and `make demo`) would delete and remake the cluster under the suite.
        inherited = {k: v for k, v in os.environ.items() if k != "KIND_FRESH"}
        return {**inherited, "PATH": path, "KUBECONFIG": str(self.kubeconfig)}

    def run(self, line: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", line],
            cwd=REPO_ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"README command failed ({done.returncode}): {line}\n"
                f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
            )
        return done


def readme_commands(section: str) -> list[str]:
    """The command lines of the first ```sh block under the README heading `## <section>`, without
    their comments."""
    text = README.read_text()
    heading = re.search(rf"^## {re.escape(section)}\n", text, flags=re.MULTILINE)
    assert heading is not None, f"README has no section {section!r}"
    block = re.search(r"```sh\n(.*?)```", text[heading.end() :], flags=re.DOTALL)
    assert block is not None, f"README section {section!r} has no sh block"
    commands = []
    for raw in block.group(1).splitlines():
        words = shlex.split(raw, comments=True)
        if words:
            commands.append(shlex.join(words))
    return commands


HELM_SECTION = "Install with Helm"


def readme_blocks() -> dict[str, list[str]]:
    """Every ```sh block of the README by the heading above it (`## X`, or "" before the first): its
    command lines as written, a line ending in a backslash joined with the next, blank and comment-only
    lines left out. Each is what a reader pastes into a shell."""
    blocks: dict[str, list[str]] = {}
    heading = ""
    text = README.read_text()
    for match in re.finditer(r"^## ([^\n]+)$|^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        if match.group(1) is not None:
            heading = match.group(1).strip()
            continue
        commands, pending = [], ""
        for raw in match.group(2).splitlines():
            line = pending + raw
            if line.rstrip().endswith("\\"):
                pending = line.rstrip()[:-1] + " "
                continue
            pending = ""
            if shlex.split(line, comments=True):
                commands.append(line.strip())
        blocks.setdefault(heading, []).extend(commands)
    return blocks


def install_lines() -> list[str]:
    """The quick start up to and including `helm install`: building and loading the images, the chart."""
    lines = readme_commands(HELM_SECTION)
    last = next(i for i, line in enumerate(lines) if line.startswith("helm install"))
    return lines[: last + 1]


def usage_lines() -> list[str]:
    """The quick start after `helm install`: the producer, the fleet, scaling it."""
    return readme_commands(HELM_SECTION)[len(install_lines()) :]


# -- diagnostics ---------------------------------------------------------------------------------------------


def wait_explained(
    kubectl: Kubectl,
    namespaces: Iterable[str],
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.5,
) -> T:
    """wait_until, failing with the pods' report when it times out."""
    try:
        return wait_until(probe, timeout=timeout, what=what, interval=interval)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{pod_report(kubectl, namespaces)}") from None


def coordinator_group(
    kubectl: Kubectl, group_id: str, fullname: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> Manifest | None:
    """The coordinator's HTTP API view of one group (None when it does not know it)."""
    found: Manifest | None = in_coordinator(kubectl, fullname, namespace, GROUP_SCRIPT, group_id)
    return found


def committed_offsets(
    kubectl: Kubectl, group_id: str, fullname: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> dict[str, int]:
    """The group's committed offsets by `topic-partition` (OffsetFetch, as any Kafka client asks)."""
    found: dict[str, int] = in_coordinator(kubectl, fullname, namespace, OFFSETS_SCRIPT, group_id, kafka=True)
    return found


def create_topic(
    kubectl: Kubectl, topic: str, partitions: int, fullname: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> None:
    in_coordinator(kubectl, fullname, namespace, CREATE_TOPIC_SCRIPT, topic, str(partitions), kafka=True)


def produce(
    kubectl: Kubectl, topic: str, count: int, fullname: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> None:
    """`count` messages to `topic`, as the admin user (or anonymously on an open installation)."""
    in_coordinator(kubectl, fullname, namespace, PRODUCE_SCRIPT, topic, str(count), kafka=True)


# -- tenancy ------------------------------------------------------------------------------------------------


def allow_topics(kubectl: Kubectl, namespace: str, *topics: str) -> str:
    """A StaticFleetTenancyPolicy letting `namespace` read `topics` (as examples/tenancy.yaml does for
    `default`); returns its name, for forget_policy."""
    policy = tenancy_policy(f"kind-{namespace}", namespace, list(topics))
    kubectl.apply(policy, namespace)
    return str(policy["metadata"]["name"])


def readme_release_absent(shell: Shell) -> bool:
    """The README's release (installed by the `chart` fixture, watching every namespace) is not there:
    a test with its own operator must run before it (file order)."""
    found = subprocess.run(
        ["helm", "status", RELEASE, "--namespace", RELEASE_NAMESPACE],
        env=shell.env(),
        capture_output=True,
        check=False,
    )
    return found.returncode != 0


def forget_policy(kubectl: Kubectl, name: str) -> None:
    kubectl.run("delete", "staticfleettenancypolicy", name, "--ignore-not-found", check=False)


def readme_fleet(**spec: Any) -> Manifest:
    """examples/embedded.yaml, with `spec` fields replaced."""
    body: Manifest = yaml.safe_load((REPO_ROOT / "examples" / "embedded.yaml").read_text())
    body["spec"].update(spec)
    return body


def instance_ids(group: Manifest | None) -> set[str]:
    return {str(m["instanceId"]) for m in (group or {}).get("memberList", []) if m.get("instanceId")}


def assigned_partitions(group: Manifest | None) -> int:
    return sum(
        len(p) for m in (group or {}).get("memberList", []) for p in (m.get("partitions") or {}).values()
    )


def assert_demo_outcomes(results: Path, stdout: str, kubectl: Kubectl, namespace: str) -> None:
    """The demo's table (its results JSON): one rebalance per operation and none for a rollout. On
    failure, the fleets' pods and the namespace's events in time order (a rollout costs a rebalance when
    a pod takes longer than the session timeout to come back; the events say which step took the time)."""
    import json

    try:
        outcome = json.loads(results.read_text())
        rows = {row["label"]: row["outcomes"] for row in outcome["rows"]}
        assert list(rows) == ["create 0 -> 3", "rolling restart of 3", "scale 3 -> 1", "scale 1 -> 4"]
        for title, seconds in outcome["steps_s"].items():
            timing(f"kind demo step: {title}", seconds)
        ours = {label: outcomes["staticfleet"] for label, outcomes in rows.items()}
        assert ours["create 0 -> 3"]["rebalances"] == 1
        restart = ours["rolling restart of 3"]
        assert (restart["rebalances"], restart["restarts_absorbed"]) == (0, 3)
        # The two departing consumers leave on their own (or, had they missed the mark, are removed).
        down = ours["scale 3 -> 1"]
        assert (down["rebalances"], down["members_left"] + down["members_removed"]) == (1, 2)
        assert ours["scale 1 -> 4"]["rebalances"] == 1
        assert rows["rolling restart of 3"]["plain static"]["rebalances"] == 0
        assert rows["rolling restart of 3"]["plain dynamic"]["rebalances"] >= 1
        assert "staticfleet against plain dynamic" in stdout
        assert "The demo keeps running" in stdout
    except AssertionError as failure:
        report = pod_report(kubectl, [namespace], log_lines=200, every_event=True)
        raise AssertionError(f"{failure}\n{report}") from None
