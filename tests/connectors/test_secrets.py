"""Secrets of Kafka client options: masked in printed configs and in every log line."""

from __future__ import annotations

import logging
import secrets

import pytest

from connectors.secrets import hide_in_logs, redacted_options, secret_values


def _jaas(password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{password}";'
    )


def test_printed_options_mask_secret_values_by_name() -> None:
    options = {
        "security.protocol": "SASL_SSL",
        "sasl.jaas.config": _jaas("pw"),
        "ssl.keystore.password": "ks",
        "ssl.key.password": "k",
    }
    assert redacted_options(options) == {
        "security.protocol": "SASL_SSL",
        "sasl.jaas.config": "***",
        "ssl.keystore.password": "***",
        "ssl.key.password": "***",
    }


def test_the_password_inside_a_jaas_config_is_a_secret_of_its_own() -> None:
    jaas = _jaas("s3cret-pw")
    assert set(secret_values({"sasl.jaas.config": jaas, "acks": "all"})) == {jaas, "s3cret-pw"}
    # A login module without a password field: the whole value is still hidden.
    kerberos = "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"
    assert secret_values({"sasl.jaas.config": kerberos}) == [kerberos]


def test_a_hidden_value_is_masked_in_any_logger_and_any_argument(
    caplog: pytest.LogCaptureFixture,
) -> None:
    password = f"pw-{secrets.token_hex(8)}"
    jaas = _jaas(password)
    hide_in_logs(secret_values({"sasl.jaas.config": jaas}))
    caplog.set_level(logging.DEBUG)
    # The way kafka-python and py4j log their configuration: a dict as an argument, a command
    # as text.
    logging.getLogger("tests.secrets.kafka_client").debug(
        "Starting KafkaAdminClient with configuration: %s", {"sasl_plain_password": password}
    )
    logging.getLogger("tests.secrets.py4j").debug("Command to send: c\nsoption\n%s\ne", jaas)
    logging.getLogger("tests.secrets.ours").info("unrelated line with no secret")
    assert password not in caplog.text
    messages = [record.getMessage() for record in caplog.records]
    assert (
        messages[0]
        == "Starting KafkaAdminClient with configuration: {'sasl_plain_password': '***'}"
    )
    assert messages[1] == "Command to send: c\nsoption\n***\ne"
    assert messages[2] == "unrelated line with no secret"


def test_values_too_short_to_be_told_from_words_are_not_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hide_in_logs(["abc"])
    caplog.set_level(logging.INFO)
    logging.getLogger("tests.secrets.ours").info("abc is a word")
    assert caplog.records[-1].getMessage() == "abc is a word"
