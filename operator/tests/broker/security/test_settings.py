"""The coordinator's security settings: what combinations are refused, what is warned about."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from staticfleet.broker.security.listeners import SecurityProtocol
from staticfleet.broker.security.settings import (
    OPEN_WARNING,
    SecuritySettings,
    SecuritySettingsError,
    add_arguments,
    from_arguments,
)
from staticfleet.broker.security.tls import ClientAuth

DEFAULT = "PLAINTEXT://0.0.0.0:9092"


def settings(*argv: str) -> SecuritySettings:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_arguments(parser.parse_args(list(argv)), default_listener=DEFAULT)


def test_no_security_flags_is_todays_behaviour_with_one_loud_warning() -> None:
    open_settings = settings()
    assert open_settings.open and open_settings.authorizer is None
    assert [(x.name, x.bind.port) for x in open_settings.listeners] == [("PLAINTEXT", 9092)]
    assert open_settings.warnings == (OPEN_WARNING,)
    assert "SECURITY IS OFF" in OPEN_WARNING and "docs/security.md" in OPEN_WARNING


def test_a_secured_coordinator_has_sasl_ssl_listeners_mechanisms_users_and_acls(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("SCRAM-SHA-512=[name=op,password=pw]\n")
    secured = settings(
        "--listener", "SASL_SSL://0.0.0.0:9094", "--sasl-enabled-mechanisms", "SCRAM-SHA-512",
        "--users-file", str(users), "--authorizer", "standard", "--super-users", "User:op",
        "--tls-cert", "c.pem", "--tls-key", "k.pem",
    )  # fmt: skip
    assert not secured.open and secured.warnings == ()
    assert secured.listeners[0].protocol == SecurityProtocol.SASL_SSL
    assert secured.authorizer is not None and secured.authorizer.super_users == {"User:op"}
    assert secured.credentials().describe("op")[0][1] == 4096


def test_sasl_listener_needs_mechanisms() -> None:
    with pytest.raises(
        SecuritySettingsError, match="listener SASL_PLAINTEXT uses SASL: give --sasl-enabled-mechanisms"
    ):
        settings("--listener", "SASL_PLAINTEXT://:9093")


def test_tls_listener_needs_certificate_and_key() -> None:
    with pytest.raises(SecuritySettingsError, match="listener SSL needs --tls-cert and --tls-key"):
        settings("--listener", "SSL://:9093", "--tls-cert", "c.pem")


def test_client_certificates_need_a_ca() -> None:
    with pytest.raises(SecuritySettingsError, match="--tls-client-auth required needs --tls-ca"):
        settings(
            "--listener", "SSL://:9093", "--tls-cert", "c", "--tls-key", "k", "--tls-client-auth", "required"
        )
    mtls = settings(
        "--listener", "SSL://:9093", "--tls-cert", "c", "--tls-key", "k", "--tls-ca", "ca",
        "--tls-client-auth", "requested",
    )  # fmt: skip
    assert mtls.tls is not None and mtls.tls.client_auth == ClientAuth.REQUESTED


def test_oauthbearer_is_refused_with_the_reason() -> None:
    with pytest.raises(SecuritySettingsError, match="OAUTHBEARER is not supported"):
        settings("--listener", "SASL_SSL://:9093", "--sasl-enabled-mechanisms", "OAUTHBEARER")


def test_super_users_without_the_authorizer_are_refused() -> None:
    with pytest.raises(SecuritySettingsError, match="need --authorizer standard"):
        settings("--super-users", "User:admin")


def test_authentication_without_authorization_and_sasl_without_users_are_warned_about() -> None:
    warned = settings("--listener", "SASL_PLAINTEXT://:9093", "--sasl-enabled-mechanisms", "PLAIN")
    assert any("every authenticated client may do everything" in w for w in warned.warnings)
    assert any("no --users-file" in w for w in warned.warnings)
    assert not warned.open


def test_an_authorizer_without_super_users_is_warned_about() -> None:
    assert any("nobody can create the first ACLs" in w for w in settings("--authorizer", "standard").warnings)


def test_http_tls_needs_both_files() -> None:
    with pytest.raises(SecuritySettingsError, match="--http-tls-cert and --http-tls-key"):
        settings("--http-tls-cert", "c.pem")


def test_a_bad_users_file_names_its_line(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("SCRAM-SHA-512=[name=op]\n")
    configured = settings("--users-file", str(users))
    with pytest.raises(SecuritySettingsError, match=r"line 1: You must supply one of 'password'"):
        configured.credentials()
    with pytest.raises(SecuritySettingsError, match="No such file"):
        settings("--users-file", str(tmp_path / "missing")).credentials()
