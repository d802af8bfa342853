"""A secured Kafka for the stack: brokers listening with SASL/SCRAM over TLS for clients and mutual TLS between
themselves, StandardAuthorizer with nothing allowed unless granted, the administrator's SCRAM credential written at
format time, then every component's user and ACLs (stack/kafka_acls.py) through the Admin API.

| listener | protocol | who |
| --- | --- | --- |
| `EXTERNAL` (the node's broker port) | SASL_SSL, SCRAM-SHA-512 | every client, as its own principal |
| `INTERNAL` (a second port) | SSL, client certificate required | the brokers (principal `broker`, a super user) |
| `CONTROLLER` | SSL, client certificate required | the controllers (the same certificate) |
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from stack.certs import CertificateAuthority
from stack.kafka_acls import ADMIN, PRINCIPALS, Grant, apply_acls, grants, set_passwords
from stack.secrets import StackSecrets

BROKER_PRINCIPAL = "broker"
JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclass(frozen=True)
class KafkaTls:
    """The brokers' certificate material in one folder: CA, PKCS#12 keystore and its password."""

    ca: Path
    keystore: Path
    keystore_password: str

    @classmethod
    def make(cls, tls_dir: Path) -> KafkaTls:
        ca = CertificateAuthority(tls_dir)
        pw_file = tls_dir / "broker.keystore-password"
        if not pw_file.exists():
            pw_file.write_text(secrets.token_urlsafe(24) + "\n")
            pw_file.chmod(0o600)
        password = pw_file.read_text().strip()
        keystore = ca.pkcs12(ca.issue(BROKER_PRINCIPAL, usage="both"), password)
        return cls(ca.pem, keystore, password)


def listener_properties(port: int, internal_port: int, controller_port: int, tls: KafkaTls) -> dict[str, str]:
    """What a secured node changes in its server.properties (the rest stays as the PLAINTEXT stack has it)."""
    return {
        "listeners": f"EXTERNAL://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal_port},"
                     f"CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"EXTERNAL://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": "CONTROLLER:SSL,INTERNAL:SSL,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.external.scram-sha-512.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tls.keystore),
        "ssl.keystore.password": tls.keystore_password,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls.ca),
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{BROKER_PRINCIPAL};User:{ADMIN}",
        "allow.everyone.if.no.acl.found": "false",
    }


def format_arguments(secrets_: StackSecrets) -> list[str]:
    """`kafka-storage format` arguments that store the administrator's SCRAM credential in the metadata (the
    other users are created later through the Admin API, as the administrator)."""
    return ["--add-scram", f"SCRAM-SHA-512=[name={ADMIN},password={secrets_.kafka_passwords()[ADMIN]}]"]


def client_config(bootstrap: str, principal: str, secrets_: StackSecrets, ca: Path) -> dict[str, Any]:
    """librdkafka settings of `principal` (the stack's own calls use ADMIN)."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": principal, "sasl.password": secrets_.kafka_passwords()[principal],
            "ssl.ca.location": str(ca)}


def provision(bootstrap: str, secrets_: StackSecrets, ca: Path, timeout_s: float = 60.0, *,
              extra: Mapping[str, Iterable[Grant]] | None = None) -> int:
    """Every component's SCRAM user and ACLs (idempotent); the number of ACL bindings. `extra`: more grants, and
    a user for each principal it names that the table lacks (a region's `mirror`, its mirrored topics)."""
    admin = AdminClient(client_config(bootstrap, ADMIN, secrets_, ca))
    passwords = secrets_.kafka_passwords()
    users = {p: passwords[p] for p in PRINCIPALS}
    users |= {p: secrets_.kafka_password_file(p).read_text().strip() for p in (extra or {}) if p not in users}
    set_passwords(admin, users, timeout_s)
    table: dict[str, list[Grant]] = {p: list(g) for p, g in grants().items()}
    for principal, granted in (extra or {}).items():
        table.setdefault(principal, []).extend(granted)
    return apply_acls(admin, table, timeout_s)
