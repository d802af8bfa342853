"""TLS for Headwater's own HTTP services and their clients: a server context from certificate files (optionally
asking for client certificates signed by a given CA), a client context trusting a CA bundle or the system store,
and the names a verified peer certificate carries."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common.component_env import ComponentEnv


@dataclass(frozen=True)
class ServerTls:
    """A service's certificate and key files, and the CA its clients' certificates must chain to (if any)."""

    cert: str
    key: str
    client_ca: str = ""
    require_client_cert: bool = False

    def context(self) -> ssl.SSLContext:
        """TLS 1.2+; with `client_ca`, a client certificate is asked for (required or optional) and verified."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert, self.key)
        if self.client_ca:
            ctx.load_verify_locations(cafile=self.client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED if self.require_client_cert else ssl.CERT_OPTIONAL
        return ctx

    def reload(self, ctx: ssl.SSLContext) -> None:
        """Load the (rotated) files into `ctx`: new handshakes use them, open connections keep theirs. The files
        are tried on a scratch context first, so a bad pair raises and leaves `ctx` as it was."""
        self.context()
        ctx.load_cert_chain(self.cert, self.key)
        if self.client_ca:
            ctx.load_verify_locations(cafile=self.client_ca)


def server_tls(env: Mapping[str, str], prefix: str, error: type[Exception]) -> ServerTls | None:
    """`<prefix>TLS_CERT` + `<prefix>TLS_KEY` (both or neither) and `<prefix>TLS_CLIENT_CA`; None: plain HTTP.

    The files are opened now, so a wrong path or a key that does not match fails at start, naming the variable.
    """
    cert, key = env.get(prefix + "TLS_CERT", "").strip(), env.get(prefix + "TLS_KEY", "").strip()
    client_ca = env.get(prefix + "TLS_CLIENT_CA", "").strip()
    if bool(cert) != bool(key):
        raise error(f"{prefix}TLS_CERT and {prefix}TLS_KEY go together")
    if not cert:
        if client_ca:
            raise error(f"{prefix}TLS_CLIENT_CA needs {prefix}TLS_CERT and {prefix}TLS_KEY")
        return None
    tls = ServerTls(cert, key, client_ca)
    try:
        tls.context()
    except (OSError, ssl.SSLError) as exc:
        raise error(f"{prefix}TLS_CERT/{prefix}TLS_KEY/{prefix}TLS_CLIENT_CA: cannot load: {exc}") from None
    return tls


def client_context(ca_file: str = "") -> ssl.SSLContext:
    """Verifies the server's certificate and name against `ca_file`, or the system store when empty."""
    return ssl.create_default_context(cafile=ca_file or None)


def ca_file(env: Mapping[str, str], var: str, component: str, error: type[Exception]) -> str:
    """A CA bundle path from `var` (per-component name first), checked readable now; "" for the system store."""
    e = ComponentEnv(env, component, error=error)
    path = e.get(var)
    if path:
        try:
            ssl.create_default_context(cafile=path)
        except (OSError, ssl.SSLError) as exc:
            raise error(f"{e.name(var)}={path!r}: cannot load: {exc}") from None
    return path


def peer_names(cert: Any) -> set[str]:
    """The subject common names and DNS subject alternative names of a verified peer certificate
    (`SSLObject.getpeercert()`'s dict; empty when the peer sent none)."""
    if not isinstance(cert, dict):
        return set()
    names = {value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names |= {value for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"}
    return names
