"""Kafka client properties files, as Kafka's tools take them (--command-config)."""

from __future__ import annotations

from pathlib import Path

import pytest

from staticfleet.admin.client_properties import (
    ClientPropertiesError,
    connection_options,
    jaas_credentials,
    load_client_properties,
    parse_properties,
)


def test_properties_syntax_with_comments_separators_and_continuations() -> None:
    text = """
    # a comment
    ! another
    a=1
    b : 2
    c 3
    long=first \\
         second
    escaped\\=key=x\\ty
    """
    assert parse_properties(text.splitlines()) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "long": "first second",
        "escaped=key": "x\ty",
    }


def test_scram_and_plain_jaas_give_username_and_password() -> None:
    scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="op" password="p w;x";'
    assert jaas_credentials(scram) == ("op", "p w;x")
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule required username=op password=pw;"
    assert jaas_credentials(plain) == ("op", "pw")


def test_oauthbearer_is_refused() -> None:
    with pytest.raises(ClientPropertiesError, match="only PlainLoginModule and ScramLoginModule"):
        jaas_credentials("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")


def test_sasl_ssl_with_pem_stores_becomes_connection_options(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=sasl_ssl\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="a" password="b";\n'
        "ssl.truststore.type=PEM\nssl.truststore.location=/ca.crt\n"
        "ssl.keystore.type=PEM\nssl.keystore.location=/client.pem\n"
        "ssl.endpoint.identification.algorithm=\n"
    )
    assert load_client_properties(path) == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "a",
        "sasl_password": "b",
        "ssl_cafile": "/ca.crt",
        "ssl_certfile": "/client.pem",
        "ssl_keyfile": "/client.pem",
        "ssl_check_hostname": False,
    }


def test_jks_stores_are_refused_with_the_fix() -> None:
    with pytest.raises(ClientPropertiesError, match=r"ssl\.truststore\.type=JKS: only PEM stores"):
        connection_options({"ssl.truststore.location": "/truststore.jks"})


def test_a_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ClientPropertiesError, match="cannot read the client properties file"):
        load_client_properties(tmp_path / "missing.properties")
