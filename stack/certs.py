"""The stack's private CA and the certificates its processes serve and show, made with `cryptography` at `make up`
under <state>/secrets/tls/ (keys 0600, never committed), reused while valid, reissued when they would expire.

Keys are ECDSA P-256 (cheap handshakes; HAProxy, OpenSSL, Python and Java all take them). Leaves last
LEAF_DAYS, the CA CA_DAYS: a development stack older than that gets new ones at its next `up`.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 365
LEAF_DAYS = 90
RENEW_BEFORE = datetime.timedelta(days=7)
USAGES = {"server": (ExtendedKeyUsageOID.SERVER_AUTH,), "client": (ExtendedKeyUsageOID.CLIENT_AUTH,),
          "both": (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)}
LOOPBACK = (("localhost",), ("127.0.0.1",))


@dataclass(frozen=True)
class Issued:
    """A leaf certificate and its key, as PEM files."""

    cert: Path
    key: Path


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write_private(path: Path, data: bytes) -> None:
    """Written 0600 from the start (never briefly readable by others), atomically."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class CertificateAuthority:
    """The CA of one folder (ca.pem, ca.key): loaded when present and valid, made otherwise."""

    def __init__(self, folder: Path, name: str = "Headwater development CA") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        self.pem = folder / "ca.pem"
        key_path = folder / "ca.key"
        if self.pem.exists() and key_path.exists():
            self.cert = x509.load_pem_x509_certificate(self.pem.read_bytes())
            loaded = serialization.load_pem_private_key(key_path.read_bytes(), None)
            if isinstance(loaded, ec.EllipticCurvePrivateKey) and self.cert.not_valid_after_utc - RENEW_BEFORE > _now():
                self.key = loaded
                return
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(_now() - datetime.timedelta(minutes=5))
                     .not_valid_after(_now() + datetime.timedelta(days=CA_DAYS))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .sign(self.key, hashes.SHA256()))
        _write_private(key_path, _key_pem(self.key))
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        for stale in folder.glob("*.pem"):  # leaves of an older CA would no longer verify
            if stale != self.pem:
                stale.unlink()

    def issue(self, name: str, *, usage: str = "server", dns: tuple[str, ...] = LOOPBACK[0],
              ips: tuple[str, ...] = LOOPBACK[1], renew: bool = False) -> Issued:
        """`<name>.pem` + `<name>.key` for CN `name` with SANs `dns` + `ips` and `usage` ("server", "client",
        "both"); the existing pair when it was signed by this CA, has these names and is not about to expire
        (unless `renew`: a new key and certificate, as when rotating)."""
        out = Issued(self.folder / f"{name}.pem", self.folder / f"{name}.key")
        if not renew and self._reusable(out, dns, ips):
            return out
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(_now() - datetime.timedelta(minutes=5))
                   .not_valid_after(min(_now() + datetime.timedelta(days=LEAF_DAYS), self.cert.not_valid_after_utc))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(list(USAGES[usage])), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        _write_private(out.key, _key_pem(key))
        out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return out

    def _reusable(self, out: Issued, dns: tuple[str, ...], ips: tuple[str, ...]) -> bool:
        if not (out.cert.exists() and out.key.exists()):
            return False
        cert = x509.load_pem_x509_certificate(out.cert.read_bytes())
        try:
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return False
        names = ({str(n) for n in sans.get_values_for_type(x509.DNSName)},
                 {str(i) for i in sans.get_values_for_type(x509.IPAddress)})
        return (cert.issuer == self.cert.subject and names == (set(dns), set(ips))
                and cert.not_valid_after_utc - RENEW_BEFORE > _now())

    def combined_pem(self, issued: Issued) -> Path:
        """Certificate then key in one 0600 file: what HAProxy's `crt` takes."""
        path = issued.cert.with_suffix(".combined.pem")
        _write_private(path, issued.cert.read_bytes() + issued.key.read_bytes())
        return path

    def pkcs12(self, issued: Issued, password: str) -> Path:
        """The pair as a PKCS#12 keystore (0600), for a Kafka broker's `ssl.keystore.location`."""
        key = serialization.load_pem_private_key(issued.key.read_bytes(), None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TypeError(f"{issued.key}: not an EC key")
        cert = x509.load_pem_x509_certificate(issued.cert.read_bytes())
        data = pkcs12.serialize_key_and_certificates(issued.cert.stem.encode(), key, cert, [self.cert],
                                                     serialization.BestAvailableEncryption(password.encode()))
        path = issued.cert.with_suffix(".p12")
        _write_private(path, data)
        return path
