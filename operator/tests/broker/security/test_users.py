"""The bootstrap users file (kafka-storage --add-scram syntax) and the credential store."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from staticfleet.broker.security.scram import ScramMechanism, credential_from_salted_password, salted_password
from staticfleet.broker.security.users import (
    CredentialStore,
    PlainEntry,
    ScramEntry,
    UsersFileError,
    load_users_file,
    parse_entry,
    parse_users,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def test_password_entry_derives_a_salted_credential_with_default_4096_iterations() -> None:
    entry = parse_entry("SCRAM-SHA-512=[name=admin,password=admin-secret]")
    assert isinstance(entry, ScramEntry)
    assert (entry.name, entry.mechanism, entry.credential.iterations) == ("admin", SHA512, 4096)
    expected = credential_from_salted_password(
        SHA512,
        entry.credential.salt,
        salted_password(SHA512, "admin-secret", entry.credential.salt, 4096),
        4096,
    )
    assert entry.credential == expected


def test_salted_password_entry_uses_the_given_salt_and_iterations() -> None:
    salted = salted_password(SHA256, "pw", b"salt", 8192)
    text = (
        f"SCRAM-SHA-256=[name=bob,salt={base64.b64encode(b'salt').decode()},"
        f"saltedpassword={base64.b64encode(salted).decode()},iterations=8192]"
    )
    entry = parse_entry(text)
    assert isinstance(entry, ScramEntry)
    assert entry.credential == credential_from_salted_password(SHA256, b"salt", salted, 8192)


def test_quotes_around_values_are_stripped() -> None:
    entry = parse_entry('SCRAM-SHA-256=[name="alice",password="alice-secret"]')
    assert isinstance(entry, ScramEntry) and entry.name == "alice"


def test_plain_entry_keeps_a_hash_that_checks_the_password() -> None:
    entry = parse_entry("PLAIN=[name=alice,password=alice-secret]")
    assert isinstance(entry, PlainEntry)
    assert entry.credential.matches("alice-secret") and not entry.credential.matches("other")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SCRAM-SHA-512", "Failed to find equals sign"),
        ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
        ("SCRAM-SHA-512=name=a,password=b]", "start with ["),
        ("SCRAM-SHA-512=[name=a,password=b", "end with ]"),
        ("SCRAM-SHA-512=[password=b]", "You must supply 'name'"),
        ("SCRAM-SHA-512=[name=a]", "You must supply one of 'password' or 'saltedpassword'"),
        ("SCRAM-SHA-512=[name=a,saltedpassword=AAAA]", "You must supply 'salt' with 'saltedpassword'"),
        ("SCRAM-SHA-512=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=4095]", "must be >= 4096"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=16385]", "must be <= 16384"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=many]", "Failed to parse iterations count: many"),
        ("SCRAM-SHA-512=[name=a,password]", "No equals sign found in SCRAM component: password"),
    ],
)
def test_invalid_entries_are_rejected_with_kafka_storage_tool_messages(text: str, message: str) -> None:
    with pytest.raises(UsersFileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_entry(text)


def test_password_with_a_comma_is_split_as_in_kafka() -> None:
    with pytest.raises(UsersFileError, match="No equals sign found in SCRAM component: b"):
        parse_entry("SCRAM-SHA-512=[name=a,password=a,b]")


def test_file_skips_comments_and_blank_lines_and_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("# users\n\nSCRAM-SHA-512=[name=a,password=b]\nPLAIN=[name=a,password=b]\n")
    assert len(load_users_file(path)) == 2
    with pytest.raises(UsersFileError, match=r"users, line 2: .*must be >= 4096"):
        parse_users(
            ["SCRAM-SHA-512=[name=a,password=b]", "SCRAM-SHA-256=[name=a,password=b,iterations=1]"], "users"
        )


def test_store_keeps_credentials_per_user_and_mechanism() -> None:
    store = CredentialStore(parse_users(["SCRAM-SHA-256=[name=alice,password=x,iterations=8192]"]))
    assert store.scram("alice", SHA256) is not None
    assert store.scram("alice", SHA512) is None
    assert store.describe("alice") == [(SHA256, 8192)]
    assert store.delete("alice", SHA256) and not store.delete("alice", SHA256)
    assert store.scram_users() == []
