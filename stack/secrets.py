"""The stack's credentials under <state>/secrets/ (folder 0700, files 0600), made once at the first `up` and kept:
each component's Kafka SCRAM password, the registry's users file (salted hashes) and each client's
`user:password` file, and the settings (file paths, never secrets) that point each component at its own.

| principal | Kafka | registry role |
| --- | --- | --- |
| gateway, deadletter, console, loadtest, subscribe | its own SCRAM user (stack/kafka_acls.py) | read |
| pipeline, rules | its own SCRAM user | write (its own new subjects) |
| admin (the stack itself, the schemas CLI) | super user | admin |
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common.basic_auth import hash_password
from stack.kafka_acls import ADMIN, PRINCIPALS

REGISTRY_ROLES = {ADMIN: "admin", "pipeline": "write", "rules": "write"}  # everyone else: read
# Components whose commands run from an operator's shell (stack.env names their credentials for them).
TOOLS = ("pipeline", "rules", "deadletter", "console", "loadtest", "tail")


def _private_file(path: Path, text: str, *, keep_existing: bool = False) -> None:
    """Write `text` to `path` (mode 0600) atomically; with keep_existing, the first writer wins and later ones leave
    its file alone (the brokers format their storage in parallel and each asks for the same passwords)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            os.fchmod(out.fileno(), 0o600)
            out.write(text)
        if keep_existing:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def kept_secret(path: Path, make: str) -> str:
    """The secret in `path` (mode 0600, its folder 0700), made once from `make`: of several threads or processes
    making it at once, the first file linked in place wins and every caller reads that one."""
    if not path.exists():
        _private_file(path, make + "\n", keep_existing=True)
    return path.read_text().strip()


@dataclass(frozen=True)
class StackSecrets:
    """The secrets of one state directory."""

    root: Path

    def kafka_password_file(self, principal: str) -> Path:
        path = self.root / "kafka" / f"{principal}.password"
        kept_secret(path, secrets.token_urlsafe(32))
        return path

    def kafka_passwords(self) -> dict[str, str]:
        """Every principal's SCRAM password, the administrator's too (made on first use)."""
        return {p: self.kafka_password_file(p).read_text().strip() for p in (ADMIN, *PRINCIPALS)}

    def registry_credentials_file(self, principal: str) -> Path:
        """`principal:password` for the registry (a client's REGISTRY_BASIC_AUTH_USER_INFO_FILE)."""
        path = self.root / "registry" / f"{principal}.credentials"
        kept_secret(path, f"{principal}:{secrets.token_urlsafe(32)}")
        return path

    def registry_users_file(self) -> Path:
        """The registry's users file: every principal's hash and role, made from the credentials files (made
        again only when a principal is missing: hashing is slow on purpose)."""
        path = self.root / "registry" / "users"
        wanted = (ADMIN, *PRINCIPALS)
        if path.exists() and {line.partition(":")[0] for line in path.read_text().splitlines()} >= set(wanted):
            return path
        lines = []
        for principal in wanted:
            password = self.registry_credentials_file(principal).read_text().strip().partition(":")[2]
            lines.append(f"{principal}:{REGISTRY_ROLES.get(principal, 'read')}:{hash_password(password)}\n")
        _private_file(path, "".join(lines))
        return path

    def admin_registry_credentials(self) -> tuple[str, str]:
        name, _, password = self.registry_credentials_file(ADMIN).read_text().strip().partition(":")
        return name, password

    def kafka_env(self, principal: str, ca_file: Path, prefix: str = "") -> dict[str, str]:
        """The KAFKA_* settings that make a component `principal` over SASL_SSL (`prefix`: its own names)."""
        return {f"{prefix}KAFKA_SECURITY_PROTOCOL": "SASL_SSL", f"{prefix}KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
                f"{prefix}KAFKA_SASL_USERNAME": principal,
                f"{prefix}KAFKA_SASL_PASSWORD_FILE": str(self.kafka_password_file(principal)),
                f"{prefix}KAFKA_SSL_CA_LOCATION": str(ca_file)}

    def registry_env(self, principal: str, prefix: str = "") -> dict[str, str]:
        return {f"{prefix}REGISTRY_BASIC_AUTH_USER_INFO_FILE": str(self.registry_credentials_file(principal))}

    def tools_env(self, ca_file: Path | None) -> dict[str, str]:
        """stack.env's credentials for the commands run from a shell: each tool its own principal (file paths
        only; the files are 0600), the schemas CLI the administrator's registry user; Kafka's when secured."""
        env: dict[str, str] = {}
        for tool in TOOLS:
            prefix = f"HEADWATER_{tool.upper()}_"
            env |= self.registry_env(tool, prefix)
            if ca_file is not None:
                env |= self.kafka_env(tool, ca_file, prefix)
        return env | self.registry_env(ADMIN, "HEADWATER_SCHEMAS_")
