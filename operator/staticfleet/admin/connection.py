"""How the admin path reaches a cluster: its address and the client's TLS and SASL settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KafkaConnection:
    """How to reach a cluster. Secrets arrive as file paths (TLS) or values (SASL)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True
    client_id: str = "staticfleet-admin"

    def kafka_python_config(self, timeout_s: float) -> dict[str, Any]:
        timeout_ms = int(timeout_s * 1000)
        config: dict[str, Any] = {
            "bootstrap_servers": [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()],
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": timeout_ms,
            "bootstrap_timeout_ms": timeout_ms,
            "reconnect_backoff_max_ms": 1000,
        }
        if self.sasl_mechanism:
            config.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self.sasl_password,
            )
        if self.security_protocol in ("SSL", "SASL_SSL"):
            config.update(
                ssl_cafile=self.ssl_cafile,
                ssl_certfile=self.ssl_certfile,
                ssl_keyfile=self.ssl_keyfile,
                ssl_check_hostname=self.ssl_check_hostname,
            )
        return config
