"""Throw-away certificates for tests: a CA, a server certificate for 127.0.0.1/localhost, client certificates.

Written as PEM files: `<name>.crt`, `<name>.key` (PKCS#8) and, for Kafka's PEM keystore, `<name>.pem`
(key then certificate chain in one file).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    pem: Path  # key + chain, Kafka's ssl.keystore.type=PEM


@dataclass
class CertificateAuthority:
    directory: Path
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def cert_file(self) -> Path:
        return self.directory / "ca.crt"

    @classmethod
    def create(cls, directory: Path, common_name: str = "staticfleet test CA") -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        ca = cls(directory, key, certificate)
        ca.cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return ca

    def issue(
        self,
        name: str,
        subject: x509.Name,
        *,
        server: bool = False,
        hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                    if server
                    else [ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            alt_names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    alt_names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        chain_pem = certificate.public_bytes(serialization.Encoding.PEM) + self.certificate.public_bytes(
            serialization.Encoding.PEM
        )
        issued = Issued(
            self.directory / f"{name}.crt", self.directory / f"{name}.key", self.directory / f"{name}.pem"
        )
        # Written under a temporary name and renamed (as a Secret mount is updated): never half a file.
        for path, data in (
            (issued.cert, chain_pem),
            (issued.key, key_pem),
            (issued.pem, key_pem + chain_pem),
        ):
            partial = path.with_suffix(path.suffix + ".partial")
            partial.write_bytes(data)
            partial.replace(path)
        return issued

    def server(self, name: str = "server") -> Issued:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        return self.issue(name, subject, server=True)

    def client(self, name: str, common_name: str, organization: str = "staticfleet") -> Issued:
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )
        return self.issue(name, subject)
