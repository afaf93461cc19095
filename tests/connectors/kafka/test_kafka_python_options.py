"""The Java-named Kafka options as kafka-python options, SASL_SSL with SCRAM and a PEM trust
store included; what kafka-python cannot honour is refused by name, never showing a secret."""

from __future__ import annotations

import pytest

from connectors.kafka.client_options import UnsupportedOptionError, kafka_python_options

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="s3cr\\"et";'
)


def test_sasl_ssl_with_scram_and_a_pem_trust_store() -> None:
    options = kafka_python_options(
        "b1:9093,b2:9093",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": JAAS,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "ca.pem",
            "ssl.endpoint.identification.algorithm": "",
            "client.id": "me",
        },
    )
    assert options == {
        "bootstrap_servers": ["b1:9093", "b2:9093"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 's3cr"et',
        "ssl_cafile": "ca.pem",
        "ssl_check_hostname": False,
        "client_id": "me",
    }
    assert kafka_python_options("b:1", {"ssl.endpoint.identification.algorithm": "https"}) == {
        "bootstrap_servers": ["b:1"],
        "ssl_check_hostname": True,
    }


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"ssl.truststore.location": "ts.jks", "ssl.truststore.password": "pw1"}, "truststore"),
        ({"ssl.keystore.location": "ks.p12", "ssl.keystore.password": "pw1"}, "ssl.keystore"),
        ({"sasl.jaas.config": 'Krb5LoginModule required password="pw1";'}, "sasl.jaas.config"),
    ],
)
def test_what_kafka_python_cannot_honour_is_refused_by_name(
    options: dict[str, str], named: str
) -> None:
    with pytest.raises(UnsupportedOptionError, match=named) as refused:
        kafka_python_options("b:9092", options)
    assert "pw1" not in str(refused.value)
