"""Kubeconfig documents (written as JSON, which every kubeconfig reader accepts as YAML)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

CONTEXT = "staticfleet-local"


def kubeconfig(server: str, token: str, ca_pem: bytes | None) -> dict[str, Any]:
    """A single-context kubeconfig for a bearer token; TLS verified against ca_pem when given."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    else:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin"}}],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document, indent=2) + "\n")
    path.chmod(0o600)
    return path
