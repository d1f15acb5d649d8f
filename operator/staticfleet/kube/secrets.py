"""Kafka credentials from a resource's Secrets, turned into a KafkaConnection.

SASL values stay in memory. TLS material must be files for the Kafka client, so each resource gets its
own private directory (mode 0700, files 0600) that is deleted when the resource is forgotten (deleted,
or no longer using TLS) and when the operator stops. Secrets are read from the resource's own namespace
only: a reference never names another namespace.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from staticfleet.admin import KafkaConnection
from staticfleet.admin.client_properties import ClientPropertiesError, jaas_credentials
from staticfleet.kube.kubeapi import KubeApi
from staticfleet.kube.spec import JAAS_CONFIG_KEY, GroupSpec, SaslSpec, SpecError

COMPONENT = "staticfleet-operator"


class SecretFiles:
    """Private temp directories of TLS material, one per resource."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root
        self._dirs: dict[tuple[str, str], Path] = {}
        self._guard = threading.Lock()

    def _dir(self, namespace: str, name: str) -> Path:
        with self._guard:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="staticfleet-kafka-"))
            self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
            found = self._dirs.get((namespace, name))
            if found is None:
                found = self._dirs[(namespace, name)] = Path(
                    tempfile.mkdtemp(prefix=f"{namespace}.{name}.", dir=self._root)
                )
            return found

    def write(self, namespace: str, name: str, key: str, data: bytes) -> str:
        """The path of a file holding `data`, rewritten only when the content changed."""
        path = self._dir(namespace, name) / key
        if not path.exists() or path.read_bytes() != data:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        return str(path)

    def forget(self, namespace: str, name: str) -> None:
        with self._guard:
            found = self._dirs.pop((namespace, name), None)
        if found is not None:
            shutil.rmtree(found, ignore_errors=True)

    def close(self) -> None:
        with self._guard:
            root, self._root, self._dirs = self._root, None, {}
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def read_secret(api: KubeApi, namespace: str, name: str) -> dict[str, bytes]:
    secret = api.get_secret(namespace, name)
    if secret is None:
        raise SpecError(f"Secret {namespace}/{name} does not exist")
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def _key(namespace: str, secret: str, data: dict[str, bytes], key: str) -> bytes:
    if key not in data:
        raise SpecError(f"Secret {namespace}/{secret} has no key {key}")
    return data[key]


def sasl_username(namespace: str, sasl: SaslSpec, data: Mapping[str, bytes]) -> str:
    """The user name from the Secret's username key, or, when it has none, from its `sasl.jaas.config`
    (a Strimzi KafkaUser's Secret holds `password` and `sasl.jaas.config`, no `username`)."""
    if sasl.username_key in data:
        return data[sasl.username_key].decode()
    jaas = data.get(JAAS_CONFIG_KEY)
    if jaas is not None:
        try:
            username, _ = jaas_credentials(jaas.decode())
        except ClientPropertiesError as exc:
            raise SpecError(f"Secret {namespace}/{sasl.secret_name} key {JAAS_CONFIG_KEY}: {exc}") from exc
        if username:
            return username
        raise SpecError(
            f"Secret {namespace}/{sasl.secret_name} has no key {sasl.username_key}, and its "
            f"{JAAS_CONFIG_KEY} names no username"
        )
    raise SpecError(
        f"Secret {namespace}/{sasl.secret_name} has neither the key {sasl.username_key} nor "
        f"{JAAS_CONFIG_KEY} (a Strimzi KafkaUser's Secret): set kafka.sasl.usernameKey to the key that "
        "holds the user name"
    )


def connection(
    api: KubeApi, files: SecretFiles, spec: GroupSpec, own: Mapping[str, object] | None = None
) -> KafkaConnection:
    """How the operator reaches the resource's cluster, with its credentials: the resource's kafka.sasl
    Secret when it names one, else the operator's own settings (`own`, from --kafka-config) when it has
    them, else the resource's kafka.tls Secret alone."""
    assert spec.bootstrap_servers is not None
    namespace = spec.namespace
    if spec.sasl is None and own is not None:
        files.forget(namespace, spec.name)
        own_options = {"client_id": COMPONENT, **cast(dict[str, Any], dict(own))}
        return KafkaConnection(spec.bootstrap_servers, **own_options)
    options: dict[str, Any] = {}
    if spec.sasl is not None:
        sasl = spec.sasl
        data = read_secret(api, namespace, sasl.secret_name)
        options.update(
            sasl_mechanism=sasl.mechanism,
            sasl_username=sasl_username(namespace, sasl, data),
            sasl_password=_key(namespace, sasl.secret_name, data, sasl.password_key).decode(),
        )
    if spec.tls is not None:
        tls = spec.tls
        data = read_secret(api, namespace, tls.secret_name)

        def file(key: str) -> str:
            return files.write(namespace, spec.name, key, _key(namespace, tls.secret_name, data, key))

        options["ssl_cafile"] = file(tls.ca_key)
        if tls.cert_key and tls.key_key:
            options["ssl_certfile"] = file(tls.cert_key)
            options["ssl_keyfile"] = file(tls.key_key)
    else:
        files.forget(namespace, spec.name)
    return KafkaConnection(
        spec.bootstrap_servers, security_protocol=spec.security_protocol, client_id=COMPONENT, **options
    )
