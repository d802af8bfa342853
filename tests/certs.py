"""A private CA for tests (the stack's own, stack/certs.py, in a temporary folder)."""

from __future__ import annotations

from pathlib import Path

from stack.certs import CertificateAuthority, Issued

__all__ = ["Issued", "TestCA"]


class TestCA(CertificateAuthority):
    """A fresh CA in `folder`; `issue` signs leaf certificates for loopback names."""

    __test__ = False  # not a pytest class

    def __init__(self, folder: Path, name: str = "Headwater test CA") -> None:
        super().__init__(folder, name)
