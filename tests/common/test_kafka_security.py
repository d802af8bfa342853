"""The Kafka security settings: read from the environment (per-component names first), refused when unusable
(naming the variable, never the password), and given as librdkafka settings and as Spark options."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.kafka_security import KafkaSecurity, KafkaSecurityError

pytestmark = pytest.mark.unit


def test_the_default_is_plaintext_without_credentials() -> None:
    sec = KafkaSecurity.from_env({}, "GATEWAY")
    assert sec.librdkafka() == {"security.protocol": "PLAINTEXT"}
    assert sec.spark_options() == {"kafka.security.protocol": "PLAINTEXT"}
    assert sec.describe() == "PLAINTEXT"


def test_scram_over_tls_from_files(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("s3cr\"et\\x\n")
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n")
    env = {"KAFKA_SECURITY_PROTOCOL": "sasl_ssl", "KAFKA_SASL_USERNAME": "gateway",
           "KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "pw"), "KAFKA_SSL_CA_LOCATION": str(tmp_path / "ca.pem")}
    sec = KafkaSecurity.from_env(env, "GATEWAY")
    assert sec.librdkafka() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "gateway",
        "sasl.password": "s3cr\"et\\x", "ssl.ca.location": str(tmp_path / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "https"}
    spark = sec.spark_options()
    assert spark["kafka.sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                               'username="gateway" password="s3cr\\"et\\\\x";')
    assert spark["kafka.ssl.truststore.type"] == "PEM"
    assert spark["kafka.ssl.truststore.certificates"].startswith("-----BEGIN CERTIFICATE-----")
    assert "s3cr" not in repr(sec) and sec.describe() == "SASL_SSL as gateway"


def test_a_components_own_names_win(tmp_path: Path) -> None:
    (tmp_path / "rules").write_text("rules-pw\n")
    env = {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_USERNAME": "pipeline",
           "KAFKA_SASL_PASSWORD": "pipeline-pw", "HEADWATER_RULES_KAFKA_SASL_USERNAME": "rules",
           "HEADWATER_RULES_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "rules")}
    rules = KafkaSecurity.from_env(env, "rules")
    assert (rules.username, rules.password, rules.protocol) == ("rules", "rules-pw", "SASL_SSL")
    pipeline = KafkaSecurity.from_env(env, "PIPELINE")
    assert (pipeline.username, pipeline.password) == ("pipeline", "pipeline-pw")


@pytest.mark.parametrize(("env", "message"), [
    ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL='TLS' is not one of"),
    ({"KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM='GSSAPI' is not one of"),
    ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_USERNAME": "u"}, "needs KAFKA_SASL_USERNAME and"),
    ({"HEADWATER_X_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "HEADWATER_X_KAFKA_SECURITY_PROTOCOL=SASL_SSL needs"),
    ({"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "u",
      "KAFKA_SASL_PASSWORD": "p"}, "password in clear"),
    ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CA_LOCATION": "/nonexistent/ca.pem"},
     "KAFKA_SSL_CA_LOCATION='/nonexistent/ca.pem': no such readable file"),
    ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CERTIFICATE_LOCATION": "/x.pem"}, "go together"),
    ({"KAFKA_SASL_PASSWORD_FILE": "/nonexistent/pw"}, "KAFKA_SASL_PASSWORD_FILE='/nonexistent/pw'"),
    ({"KAFKA_SSL_ENDPOINT_IDENTIFICATION": "maybe"}, "is not https or none"),
])
def test_unusable_settings_name_their_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaSecurityError, match=message.replace("(", r"\(")) as err:
        KafkaSecurity.from_env(env, "X")
    assert "pipeline-pw" not in str(err.value)


def test_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("\n")
    with pytest.raises(KafkaSecurityError, match="is empty"):
        KafkaSecurity.from_env({"KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "pw")})


def test_mutual_tls_passes_the_client_certificate(tmp_path: Path) -> None:
    for name in ("ca.pem", "c.pem", "c.key"):
        (tmp_path / name).write_text(f"PEM {name}\n")
    sec = KafkaSecurity.from_env({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CA_LOCATION": str(tmp_path / "ca.pem"),
                                  "KAFKA_SSL_CERTIFICATE_LOCATION": str(tmp_path / "c.pem"),
                                  "KAFKA_SSL_KEY_LOCATION": str(tmp_path / "c.key"),
                                  "KAFKA_SSL_ENDPOINT_IDENTIFICATION": "none"})
    assert sec.librdkafka()["ssl.certificate.location"] == str(tmp_path / "c.pem")
    assert sec.librdkafka()["ssl.endpoint.identification.algorithm"] == "none"
    spark = sec.spark_options()
    assert spark["kafka.ssl.keystore.key"] == "PEM c.key\n" and spark["kafka.ssl.keystore.type"] == "PEM"
    assert spark["kafka.ssl.endpoint.identification.algorithm"] == ""
