"""What the kind tests share: the chart as the README installs it, the README's own commands, the embedded
coordinator asked through `kubectl exec` (its pod has the project's Python), and waits that, when they
time out, put the pods' state and logs into the failure message.
"""

from __future__ import annotations

import json
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
        return {**os.environ, "PATH": path, "KUBECONFIG": str(self.kubeconfig)}

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


# -- the embedded coordinator, asked from inside its pod ---------------------------------------------------
# Secured (the chart's default), the HTTP API is on HTTPS behind the token its container mounts, and Kafka
# is reached as the admin user from the operator-acls container beside it (its client.properties); an
# open installation is reached on plain HTTP and PLAINTEXT from the coordinator's own container.

_HTTP_PRELUDE = """
import os, ssl, sys, urllib.error, urllib.request
TOKEN = "/etc/staticfleet/http/token"
def get(path):
    if not os.path.exists(TOKEN):
        return urllib.request.urlopen("http://127.0.0.1:8080" + path, timeout=5)
    request = urllib.request.Request("https://127.0.0.1:8080" + path)
    request.add_header("Authorization", "Bearer " + open(TOKEN).read().strip())
    context = ssl.create_default_context(cafile="/etc/staticfleet/tls/ca.crt")
    return urllib.request.urlopen(request, timeout=5, context=context)
"""

_KAFKA_PRELUDE = """
import json, sys
from pathlib import Path
from kafka import KafkaAdminClient
from staticfleet.admin import KafkaConnection
from staticfleet.admin.client_properties import load_client_properties
ADMIN = Path("/etc/staticfleet/admin/client.properties")
options = load_client_properties(ADMIN) if ADMIN.exists() else {}
CONFIG = KafkaConnection("127.0.0.1:9092", **options).kafka_python_config(10)
"""

_GROUP_SCRIPT = (
    _HTTP_PRELUDE
    + """
try:
    print(get("/api/groups/" + sys.argv[1]).read().decode())
except urllib.error.HTTPError as exc:
    if exc.code != 404:
        raise
    print("null")
"""
)

_OFFSETS_SCRIPT = (
    _KAFKA_PRELUDE
    + """
admin = KafkaAdminClient(**CONFIG)
try:
    found = admin.list_group_offsets(sys.argv[1])[sys.argv[1]]
    print(json.dumps({f"{tp.topic}-{tp.partition}": meta.offset for tp, meta in found.items()}))
finally:
    admin.close()
"""
)

_CREATE_TOPIC_SCRIPT = (
    _KAFKA_PRELUDE
    + """
from kafka.admin import NewTopic
admin = KafkaAdminClient(**CONFIG)
try:
    admin.create_topics([NewTopic(sys.argv[1], int(sys.argv[2]), 1)])
finally:
    admin.close()
print("null")
"""
)

_PRODUCE_SCRIPT = (
    _KAFKA_PRELUDE
    + """
from kafka import KafkaProducer
producer = KafkaProducer(**CONFIG)
try:
    for n in range(int(sys.argv[2])):
        producer.send(sys.argv[1], f"message-{n}".encode())
    producer.flush(timeout=30)
finally:
    producer.close()
print("null")
"""
)


def _in_coordinator(
    kubectl: Kubectl,
    script: str,
    *args: str,
    kafka: bool = False,
    fullname: str = RELEASE,
    namespace: str = RELEASE_NAMESPACE,
) -> Any:
    """Runs `script` in the coordinator's pod of the release whose object names start with `fullname`
    (the README's release: `staticfleet`)."""
    pod = f"{fullname}-coordinator-0"
    container = "coordinator"
    if kafka:
        names = {c["name"] for c in kubectl.get("pod", pod, namespace)["spec"]["containers"]}
        container = "operator-acls" if "operator-acls" in names else "coordinator"
    done = kubectl.run(
        "exec", "-n", namespace, pod, "-c", container, "--", "python", "-c", script, *args, timeout=60,
    )  # fmt: skip
    return json.loads(done.stdout)


def coordinator_group(
    kubectl: Kubectl, group_id: str, fullname: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> Manifest | None:
    """The coordinator's HTTP API view of one group (None when it does not know it)."""
    found: Manifest | None = _in_coordinator(
        kubectl, _GROUP_SCRIPT, group_id, fullname=fullname, namespace=namespace
    )
    return found


def committed_offsets(
    kubectl: Kubectl, group_id: str, fullname: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> dict[str, int]:
    """The group's committed offsets by `topic-partition` (OffsetFetch, as any Kafka client asks)."""
    found: dict[str, int] = _in_coordinator(
        kubectl, _OFFSETS_SCRIPT, group_id, kafka=True, fullname=fullname, namespace=namespace
    )
    return found


def create_topic(
    kubectl: Kubectl, topic: str, partitions: int, fullname: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> None:
    _in_coordinator(
        kubectl,
        _CREATE_TOPIC_SCRIPT,
        topic,
        str(partitions),
        kafka=True,
        fullname=fullname,
        namespace=namespace,
    )


def produce(
    kubectl: Kubectl, topic: str, count: int, fullname: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> None:
    """`count` messages to `topic`, as the admin user (or anonymously on an open installation)."""
    _in_coordinator(
        kubectl, _PRODUCE_SCRIPT, topic, str(count), kafka=True, fullname=fullname, namespace=namespace
    )


# -- tenancy ------------------------------------------------------------------------------------------------


def allow_topics(kubectl: Kubectl, namespace: str, *topics: str) -> str:
    """A StaticFleetTenancyPolicy letting `namespace` read `topics` (as examples/tenancy.yaml does for
    `default`); returns its name, for forget_policy."""
    name = f"kind-{namespace}"[:63]
    policy = {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticFleetTenancyPolicy",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "topics": [{"name": t} for t in topics],
        },
    }
    kubectl.apply(policy, namespace)
    return name


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
