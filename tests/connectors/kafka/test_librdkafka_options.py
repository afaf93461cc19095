"""The job's Kafka options (the Java client's names) as librdkafka configuration."""

from __future__ import annotations

import pytest

from connectors.kafka.client_options import UnsupportedOptionError, librdkafka_options


def test_shared_names_pass_through_and_java_only_tuning_is_left_out() -> None:
    options = librdkafka_options(
        "b1:9092,b2:9092",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "ssl.ca.location": "/etc/ca.pem",
            "fetch.max.wait.ms": "10",
        },
    )
    assert options == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.ca.location": "/etc/ca.pem",
    }


def test_jaas_credentials_become_username_and_password() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cr\\"et";'
    )
    options = librdkafka_options("b:9092", {"sasl.jaas.config": jaas})
    assert options["sasl.username"] == "alice"
    assert options["sasl.password"] == 's3cr"et'
    assert "sasl.jaas.config" not in options


@pytest.mark.parametrize(
    ("key", "value", "names"),
    [
        ("ssl.truststore.location", "/etc/truststore.jks", "ssl.truststore.location"),
        (
            "sasl.jaas.config",
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
            "sasl.jaas.config",
        ),
    ],
)
def test_what_librdkafka_cannot_honour_is_refused_by_name(key: str, value: str, names: str) -> None:
    with pytest.raises(UnsupportedOptionError, match=names):
        librdkafka_options("b:9092", {key: value})


def test_a_pem_trust_store_becomes_the_ca_location() -> None:
    options = librdkafka_options(
        "b:9093",
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "ca.pem",
            "ssl.endpoint.identification.algorithm": "",
        },
    )
    assert options == {
        "bootstrap.servers": "b:9093",
        "ssl.ca.location": "ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
