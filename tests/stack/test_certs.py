"""The stack's CA: keys 0600, certificates reused while valid and for the same names, PKCS#12 and HAProxy files."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from stack.certs import CertificateAuthority

pytestmark = pytest.mark.unit


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keys_are_private_and_certificates_verify(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "tls")
    server = ca.issue("gateway")
    assert mode(tmp_path / "tls") == 0o700 and mode(tmp_path / "tls" / "ca.key") == 0o600 and mode(server.key) == 0o600
    ctx = ssl.create_default_context(cafile=str(ca.pem))
    ctx.load_cert_chain(str(server.cert), str(server.key))  # the pair matches
    cert = x509.load_pem_x509_certificate(server.cert.read_bytes())
    assert cert.issuer == ca.cert.subject
    assert mode(ca.combined_pem(server)) == 0o600
    p12 = ca.pkcs12(ca.issue("broker", usage="both"), "pw")
    key, leaf, extra = pkcs12.load_key_and_certificates(p12.read_bytes(), b"pw")
    assert key is not None and leaf is not None and [c.subject for c in extra] == [ca.cert.subject]


def test_reused_while_valid_reissued_when_names_change_or_asked(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "tls")
    first = ca.issue("registry").cert.read_bytes()
    again = CertificateAuthority(tmp_path / "tls")  # a later `up`: the same CA
    assert again.pem.read_bytes() == ca.pem.read_bytes()
    assert again.issue("registry").cert.read_bytes() == first
    assert again.issue("registry", dns=("localhost", "registry.internal")).cert.read_bytes() != first
    assert again.issue("registry", renew=True).cert.read_bytes() != first


def test_a_new_ca_drops_the_old_leaves(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "tls")
    old, old_ca = ca.issue("gateway").cert.read_bytes(), ca.pem.read_bytes()
    (tmp_path / "tls" / "ca.key").unlink()  # lost: a new CA is made, and leaves of the old one are reissued
    new = CertificateAuthority(tmp_path / "tls")
    assert new.pem.read_bytes() != old_ca
    assert not (tmp_path / "tls" / "gateway.pem").exists()
    assert x509.load_pem_x509_certificate(new.issue("gateway").cert.read_bytes()).issuer == new.cert.subject
    assert new.issue("gateway").cert.read_bytes() != old


def test_a_corrupt_ca_key_is_an_error_not_a_silent_new_ca(tmp_path: Path) -> None:
    CertificateAuthority(tmp_path / "tls")
    (tmp_path / "tls" / "ca.key").write_text("garbage")
    with pytest.raises(ValueError):
        CertificateAuthority(tmp_path / "tls")
