"""The README's secured installation as a pod without credentials finds it, on a real kubelet and network:
the coordinator's Kafka port takes TLS only, and over TLS it answers ApiVersions and nothing else before a
SASL login. A request other than ApiVersions or SaslHandshake gets its connection closed at once and
unanswered, as Apache Kafka's SaslServerAuthenticator does (docs/security.md, "Kafka behaviour worth
knowing"); the HTTP API answers its probes and refuses the rest without the token."""

from __future__ import annotations

import json
import secrets

import pytest

from e2e.helpers import Cluster, Manifest, wait_until

from .support import COORDINATOR_POD, RELEASE, RELEASE_NAMESPACE

pytestmark = pytest.mark.kind

# What the pod runs: each attempt on a fresh connection, answers as JSON on its last line.
PROBE = r"""
import json, socket, ssl, struct, sys, urllib.error, urllib.request
host = sys.argv[1]
kafka_port, http_port = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (9092, 8080)

def request(api_key, version, body=b""):
    client = b"no-credentials"
    header = struct.pack(">hhih", api_key, version, 7, len(client)) + client
    return struct.pack(">i", len(header) + len(body)) + header + body

def attempt(frames, tls):
    raw = socket.create_connection((host, kafka_port), timeout=10)
    try:
        if tls:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            raw = context.wrap_socket(raw, server_hostname=host)
        answers = []
        for frame in frames:
            raw.sendall(frame)
            size = raw.recv(4)
            if len(size) < 4:
                answers.append("closed")
                break
            (length,) = struct.unpack(">i", size)
            body = b""
            while len(body) < length:
                chunk = raw.recv(length - len(body))
                if not chunk:
                    break
                body += chunk
            (correlation, error) = struct.unpack(">ih", body[:6])
            answers.append({"correlation": correlation, "error": error})
        return answers
    except (ssl.SSLError, ConnectionError, socket.timeout) as exc:
        return [type(exc).__name__]
    finally:
        raw.close()

metadata = request(3, 1, struct.pack(">i", -1))
api_versions = request(18, 0)
out = {
    "plaintext": attempt([api_versions], tls=False),
    "metadata_first": attempt([metadata], tls=True),
    "api_versions_then_metadata": attempt([api_versions, metadata], tls=True),
}
http = {}
for path in ("/healthz", "/api/groups"):
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        url = f"https://{host}:{http_port}{path}"
        http[path] = urllib.request.urlopen(url, timeout=10, context=context).status
    except urllib.error.HTTPError as exc:
        http[path] = exc.code
out["http"] = http
print(json.dumps(out))
"""


def probe_pod(host: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"no-credentials-{secrets.token_hex(3)}",
            # Through the chart's NetworkPolicy (labels narrow who can try; SASL decides who may).
            "labels": {"staticfleet.io/kafka-client": "true"},
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": "staticfleet:0.1.0",
                    "command": ["python", "-c", PROBE, host],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def test_a_pod_without_credentials_gets_its_connection_closed_as_kafka_closes_it(
    cluster: Cluster, chart: None, namespace: str
) -> None:
    kubectl = cluster.kubectl
    host = f"{RELEASE}-coordinator.{RELEASE_NAMESPACE}.svc.cluster.local"
    pod = probe_pod(host)
    kubectl.apply(pod, namespace)
    name = pod["metadata"]["name"]
    wait_until(
        lambda: kubectl.get("pod", name, namespace)["status"].get("phase") in ("Succeeded", "Failed"),
        timeout=120,
        what="the probe pod to finish",
    )
    log = kubectl.run("logs", "-n", namespace, name).stdout
    assert kubectl.get("pod", name, namespace)["status"]["phase"] == "Succeeded", log
    seen = json.loads(log.strip().splitlines()[-1])
    # Plain Kafka bytes where TLS is expected: no Kafka answer.
    assert seen["plaintext"] in (["closed"], ["ConnectionResetError"]), seen
    # Over TLS, a Metadata request before any login: closed, no answer.
    assert seen["metadata_first"] == ["closed"], seen
    # ApiVersions is answered before a login (error 0), and the Metadata after it is not: closed.
    assert seen["api_versions_then_metadata"] == [{"correlation": 7, "error": 0}, "closed"], seen
    # The HTTP API: probes open, the groups behind the token (reached here because this cluster's network
    # plugin does not enforce the chart's NetworkPolicy, which admits only the operator to that port).
    assert seen["http"] == {"/healthz": 200, "/api/groups": 401}, seen
    # The coordinator is still serving its fleets (nothing but those connections was closed).
    ready = kubectl.get("pod", COORDINATOR_POD, RELEASE_NAMESPACE)["status"]["conditions"]
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in ready)
