"""What passes share: admin clients keyed without the password, TLS files removed when not needed."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from staticfleet.admin import GroupAdmin, KafkaConnection
from staticfleet.kube.context import AdminCache
from staticfleet.kube.secrets import SecretFiles


class FakeAdmin:
    def __init__(self, connection: KafkaConnection) -> None:
        self.connection = connection
        self.closed = False

    def close(self) -> None:
        self.closed = True


def sasl(password: str) -> KafkaConnection:
    return KafkaConnection(
        "kafka:9092",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="orders",
        sasl_password=password,
    )


def test_a_rotated_password_replaces_the_cached_admin_instead_of_adding_one() -> None:
    cache = AdminCache(lambda c: cast(GroupAdmin, FakeAdmin(c)))
    first = cache(sasl("one"))
    assert cache(sasl("one")) is first
    second = cache(sasl("two"))
    assert second is not first and cast(FakeAdmin, first).closed
    assert len(cache) == 1
    assert all("two" not in repr(key) for key in cache._admins)  # no password in the key


def test_tls_files_are_private_and_deleted_when_forgotten_or_closed(tmp_path: Path) -> None:
    files = SecretFiles(tmp_path / "root")
    path = Path(files.write("shop", "orders", "ca.crt", b"pem"))
    assert path.read_bytes() == b"pem" and path.stat().st_mode & 0o777 == 0o600
    files.forget("shop", "orders")
    assert not path.exists()
    other = Path(files.write("shop", "refunds", "ca.crt", b"pem"))
    files.close()
    assert not other.exists() and not (tmp_path / "root").exists()
