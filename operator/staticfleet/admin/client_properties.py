"""Kafka client properties (the `--command-config` file of Kafka's own tools) as a KafkaConnection.

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="operator" password="operator-secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/tls/ca.crt

The same file works with kafka-acls, kafka-configs and kafka-consumer-groups. Only PEM stores are read
(a JKS or PKCS12 store names a format this client cannot use; the error says so).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from staticfleet.admin.connection import KafkaConnection
from staticfleet.admin.errors import AdminError


class ClientPropertiesError(AdminError):
    """A client properties file this client cannot use; the message names the property."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(lines: Iterable[str]) -> dict[str, str]:
    """java.util.Properties' syntax: `key=value` or `key: value`, `#`/`!` comments, `\\` continuations."""
    out: dict[str, str] = {}
    logical = ""
    for raw in lines:
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical)
        out[key] = value
        logical = ""
    if logical:
        key, value = _split(logical)
        out[key] = value
    return out


def _split(line: str) -> tuple[str, str]:
    match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line, re.DOTALL)
    assert match is not None
    return _unescape(match.group(1)), _unescape(match.group(2))


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s;]+))')


def jaas_credentials(jaas: str) -> tuple[str | None, str | None]:
    """username and password from a `sasl.jaas.config` value (PlainLoginModule or ScramLoginModule)."""
    if "OAuthBearerLoginModule" in jaas or "Krb5LoginModule" in jaas:
        raise ClientPropertiesError(
            "sasl.jaas.config: only PlainLoginModule and ScramLoginModule (PLAIN, SCRAM-SHA-256, "
            "SCRAM-SHA-512) are supported"
        )
    options = {
        m.group(1): (m.group(2) if m.group(2) is not None else m.group(3))
        for m in _JAAS_OPTION.finditer(jaas)
    }
    return options.get("username"), options.get("password")


def connection_options(properties: Mapping[str, str]) -> dict[str, object]:
    """Keyword arguments for KafkaConnection from Kafka client properties."""
    options: dict[str, object] = {}
    protocol = properties.get("security.protocol")
    if protocol:
        options["security_protocol"] = protocol.upper()
    mechanism = properties.get("sasl.mechanism")
    if mechanism:
        options["sasl_mechanism"] = mechanism
    jaas = properties.get("sasl.jaas.config")
    if jaas:
        username, password = jaas_credentials(jaas)
        options["sasl_username"] = username
        options["sasl_password"] = password
    for kind in ("truststore", "keystore"):
        store_type = properties.get(f"ssl.{kind}.type", "JKS" if f"ssl.{kind}.location" in properties else "")
        if properties.get(f"ssl.{kind}.location") and store_type.upper() != "PEM":
            raise ClientPropertiesError(
                f"ssl.{kind}.type={store_type}: only PEM stores can be read here; set ssl.{kind}.type=PEM "
                f"and point ssl.{kind}.location at PEM files"
            )
    if properties.get("ssl.truststore.location"):
        options["ssl_cafile"] = properties["ssl.truststore.location"]
    if properties.get("ssl.keystore.location"):
        # A PEM keystore holds the private key and the certificate chain in one file.
        options["ssl_certfile"] = properties["ssl.keystore.location"]
        options["ssl_keyfile"] = properties["ssl.keystore.location"]
    if properties.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
        options["ssl_check_hostname"] = False
    return options


def load_client_properties(path: Path) -> dict[str, object]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClientPropertiesError(f"cannot read the client properties file {path}: {exc}") from exc
    return connection_options(parse_properties(text.splitlines()))


def with_options(connection: KafkaConnection, options: Mapping[str, object]) -> KafkaConnection:
    """The connection with these KafkaConnection fields replaced (from connection_options or flags)."""
    return dataclasses.replace(connection, **cast(dict[str, Any], dict(options)))
