"""How a component authenticates to Kafka (TLS, SASL/SCRAM): read once from the environment, given as librdkafka
settings (Python clients) or as Spark's `kafka.`-prefixed options (the pipeline).

Every variable below may also be given per component as `HEADWATER_<COMPONENT>_<VARIABLE>` (for example
`HEADWATER_RULES_KAFKA_SASL_USERNAME`), which wins over the plain name: one environment (such as stack.env)
can then name a different principal for each tool while sharing the protocol and the CA.

| variable | default | meaning |
| --- | --- | --- |
| `KAFKA_SECURITY_PROTOCOL` | `PLAINTEXT` | `PLAINTEXT`, `SSL`, `SASL_SSL` or `SASL_PLAINTEXT` |
| `KAFKA_SASL_MECHANISM` | `SCRAM-SHA-512` | `SCRAM-SHA-512`, `SCRAM-SHA-256` or `PLAIN` (PLAIN only over TLS) |
| `KAFKA_SASL_USERNAME` | | the principal (required with a `SASL_` protocol) |
| `KAFKA_SASL_PASSWORD_FILE` | | a file holding its password (first line); or `KAFKA_SASL_PASSWORD` itself |
| `KAFKA_SSL_CA_LOCATION` | system store | PEM file of the CA(s) that signed the brokers' certificates |
| `KAFKA_SSL_CERTIFICATE_LOCATION`, `KAFKA_SSL_KEY_LOCATION` | | client certificate and key (mutual TLS) |
| `KAFKA_SSL_ENDPOINT_IDENTIFICATION` | `https` | `https` checks the broker's name in its certificate; `none` does not |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from common.component_env import ComponentEnv

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


class KafkaSecurityError(ValueError):
    """A Kafka security variable is missing or unusable; the message names it (never its secret value)."""


@dataclass(frozen=True)
class KafkaSecurity:
    """One component's Kafka credentials and trust; the default is PLAINTEXT without authentication."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "SCRAM-SHA-512"
    username: str = ""
    password: str = field(default="", repr=False)
    ca_location: str = ""
    certificate_location: str = ""
    key_location: str = ""
    verify_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def describe(self) -> str:
        """For logs: protocol and principal, never the password."""
        return f"{self.protocol} as {self.username}" if self.sasl else self.protocol

    def librdkafka(self) -> dict[str, str]:
        """The librdkafka (confluent-kafka) settings; merge them into every client's configuration."""
        conf = {"security.protocol": self.protocol}
        if self.sasl:
            conf |= {"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                     "sasl.password": self.password}
        if self.tls:
            if self.ca_location:
                conf["ssl.ca.location"] = self.ca_location
            if self.certificate_location:
                conf |= {"ssl.certificate.location": self.certificate_location,
                         "ssl.key.location": self.key_location}
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.verify_hostname else "none"
        return conf

    def spark_options(self) -> dict[str, str]:
        """The same as Spark's Kafka connector options (Java client settings prefixed `kafka.`).

        Certificates and keys are passed inline (PEM text), so executors on other hosts need no files; the
        password is inside `sasl.jaas.config`, which the connector redacts in its logs.
        """
        opts = {"kafka.security.protocol": self.protocol}
        if self.sasl:
            opts["kafka.sasl.mechanism"] = self.mechanism
            opts["kafka.sasl.jaas.config"] = (f'{_LOGIN_MODULES[self.mechanism]} required '
                                              f'username="{_jaas(self.username)}" password="{_jaas(self.password)}";')
        if self.tls:
            if self.ca_location:
                opts |= {"kafka.ssl.truststore.type": "PEM",
                         "kafka.ssl.truststore.certificates": _read(self.ca_location)}
            if self.certificate_location:
                opts |= {"kafka.ssl.keystore.type": "PEM",
                         "kafka.ssl.keystore.certificate.chain": _read(self.certificate_location),
                         "kafka.ssl.keystore.key": _read(self.key_location)}
            opts["kafka.ssl.endpoint.identification.algorithm"] = "https" if self.verify_hostname else ""
        return opts

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, component: str = "") -> KafkaSecurity:
        """Read the variables (per-component names first); raise KafkaSecurityError naming a bad one."""
        env = os.environ if env is None else env
        e = ComponentEnv(env, component, error=KafkaSecurityError)
        protocol = e.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise KafkaSecurityError(f"{e.name('KAFKA_SECURITY_PROTOCOL')}={protocol!r} is not one of "
                                     f"{', '.join(PROTOCOLS)}")
        mechanism = e.get("KAFKA_SASL_MECHANISM", "SCRAM-SHA-512").upper()
        if mechanism not in MECHANISMS:
            raise KafkaSecurityError(f"{e.name('KAFKA_SASL_MECHANISM')}={mechanism!r} is not one of "
                                     f"{', '.join(MECHANISMS)}")
        sec = cls(protocol=protocol, mechanism=mechanism, username=e.get("KAFKA_SASL_USERNAME", ""),
                  password=e.secret("KAFKA_SASL_PASSWORD"), ca_location=e.get("KAFKA_SSL_CA_LOCATION", ""),
                  certificate_location=e.get("KAFKA_SSL_CERTIFICATE_LOCATION", ""),
                  key_location=e.get("KAFKA_SSL_KEY_LOCATION", ""),
                  verify_hostname=_verify(e))
        _check(sec, e)
        return sec


def _verify(e: ComponentEnv) -> bool:
    raw = e.get("KAFKA_SSL_ENDPOINT_IDENTIFICATION", "https").lower()
    if raw not in ("https", "none"):
        raise KafkaSecurityError(f"{e.name('KAFKA_SSL_ENDPOINT_IDENTIFICATION')}={raw!r} is not https or none")
    return raw == "https"


def _check(sec: KafkaSecurity, e: ComponentEnv) -> None:
    if sec.sasl and not (sec.username and sec.password):
        raise KafkaSecurityError(f"{e.name('KAFKA_SECURITY_PROTOCOL')}={sec.protocol} needs "
                                 f"{e.name('KAFKA_SASL_USERNAME')} and {e.name('KAFKA_SASL_PASSWORD')}_FILE "
                                 "(or _PASSWORD)")
    if sec.protocol == "SASL_PLAINTEXT" and sec.mechanism == "PLAIN":
        raise KafkaSecurityError("SASL PLAIN over SASL_PLAINTEXT would send the password in clear: use SASL_SSL "
                                 "or a SCRAM mechanism")
    if bool(sec.certificate_location) != bool(sec.key_location):
        raise KafkaSecurityError(f"{e.name('KAFKA_SSL_CERTIFICATE_LOCATION')} and "
                                 f"{e.name('KAFKA_SSL_KEY_LOCATION')} go together")
    for var, path in (("KAFKA_SSL_CA_LOCATION", sec.ca_location),
                      ("KAFKA_SSL_CERTIFICATE_LOCATION", sec.certificate_location),
                      ("KAFKA_SSL_KEY_LOCATION", sec.key_location)):
        if path and not os.access(path, os.R_OK):
            raise KafkaSecurityError(f"{e.name(var)}={path!r}: no such readable file")


def _jaas(value: str) -> str:
    """A value inside a JAAS quoted string (Kafka's parser takes backslash escapes)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _read(path: str) -> str:
    return Path(path).read_text()
