"""The embedded coordinator of a Helm release, asked from inside its pod with `kubectl exec`: what the
demo and the kind tests read and do where this machine cannot reach the coordinator itself.

Secured (the chart's default), the HTTP API is on HTTPS behind the token its container mounts, and Kafka
is reached as the admin user from the operator-acls container beside it (its client.properties); an
open installation is reached on plain HTTP and PLAINTEXT from the coordinator's own container.
"""

from __future__ import annotations

import json
from typing import Any

from e2e.helpers import Kubectl

HTTP_PRELUDE = """
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

KAFKA_PRELUDE = """
import json, sys
from pathlib import Path
from kafka import KafkaAdminClient
from staticfleet.admin import KafkaConnection
from staticfleet.admin.client_properties import load_client_properties
ADMIN = Path("/etc/staticfleet/admin/client.properties")
options = load_client_properties(ADMIN) if ADMIN.exists() else {}
CONFIG = KafkaConnection("127.0.0.1:9092", **options).kafka_python_config(10)
"""

GROUP_SCRIPT = (
    HTTP_PRELUDE
    + """
try:
    print(get("/api/groups/" + sys.argv[1]).read().decode())
except urllib.error.HTTPError as exc:
    if exc.code != 404:
        raise
    print("null")
"""
)

OFFSETS_SCRIPT = (
    KAFKA_PRELUDE
    + """
admin = KafkaAdminClient(**CONFIG)
try:
    found = admin.list_group_offsets(sys.argv[1])[sys.argv[1]]
    print(json.dumps({f"{tp.topic}-{tp.partition}": meta.offset for tp, meta in found.items()}))
finally:
    admin.close()
"""
)

CREATE_TOPIC_SCRIPT = (
    KAFKA_PRELUDE
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

# A SCRAM user and its ACLs, from JSON on stdin: {"user", "mechanism", "password", "acls": [[type, name,
# principal, operation], ...]} (the password never appears on a command line).
GRANT_SCRIPT = (
    KAFKA_PRELUDE
    + """
from staticfleet.admin import AclBinding, GroupAdmin
wanted = json.loads(sys.stdin.read())
with GroupAdmin(KafkaConnection("127.0.0.1:9092", **options), timeout_s=10) as admin:
    admin.upsert_scram(wanted["user"], wanted["mechanism"], wanted["password"], 8192)
    admin.create_acls(AclBinding(*acl) for acl in wanted["acls"])
print("null")
"""
)

PRODUCE_SCRIPT = (
    KAFKA_PRELUDE
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


def in_coordinator(
    kubectl: Kubectl,
    fullname: str,
    namespace: str,
    script: str,
    *args: str,
    kafka: bool = False,
    stdin: str | None = None,
) -> Any:
    """Runs `script` (one of the scripts above) in the coordinator's pod of the release whose object
    names start with `fullname`, and returns the JSON of its last line."""
    pod = f"{fullname}-coordinator-0"
    container = "coordinator"
    if kafka:
        names = {c["name"] for c in kubectl.get("pod", pod, namespace)["spec"]["containers"]}
        container = "operator-acls" if "operator-acls" in names else "coordinator"
    done = kubectl.run(
        "exec", "-i", "-n", namespace, pod, "-c", container, "--", "python", "-c", script, *args,
        stdin=stdin, timeout=60,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])
