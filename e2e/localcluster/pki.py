"""Key material for the local control plane."""

from __future__ import annotations

import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def write_service_account_keys(directory: Path) -> tuple[Path, Path]:
    """An ECDSA P-256 pair for signing and verifying service-account tokens: (private, public)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private_path, public_path = directory / "sa.key", directory / "sa.pub"
    private_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    private_path.chmod(0o600)
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_path, public_path


def new_token() -> str:
    return secrets.token_hex(24)


def token_file_line(
    token: str, user: str = "admin", uid: str = "admin", groups: str = "system:masters"
) -> str:
    """One line of kube-apiserver's --token-auth-file (token,user,uid,"group1,group2")."""
    return f'{token},{user},{uid},"{groups}"\n'
