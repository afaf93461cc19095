"""Kafka client options in kafka-python's words.

The job's and the mirror's ``kafka_options`` use the Java client's names (they also configure
Spark's Kafka source). kafka-python takes most of them with underscores
(``security.protocol`` → ``security_protocol``); the security options differ:

- ``sasl.jaas.config`` (PLAIN, SCRAM) → ``sasl_plain_username`` / ``sasl_plain_password``;
- a PEM trust store (``ssl.truststore.type=PEM``, ``ssl.truststore.location``) → ``ssl_cafile``;
  any other trust store type is refused with the option named (kafka-python reads PEM only);
- ``ssl.endpoint.identification.algorithm`` → ``ssl_check_hostname`` ("" turns the check off);
- ``ssl.keystore.*`` (client certificates) → refused: give PEM files as ``ssl.certfile`` /
  ``ssl.keyfile``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.kafka.jaas import UnsupportedOptionError, jaas_credentials

_TRUSTSTORE = ("ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type")
_KEYSTORE_PREFIX = "ssl.keystore."


def kafka_python_options(
    bootstrap_servers: str, kafka_options: Mapping[str, Any]
) -> dict[str, Any]:
    """kafka-python client options for ``bootstrap_servers`` and Java-named ``kafka_options``."""
    options: dict[str, Any] = {"bootstrap_servers": bootstrap_servers.split(",")}
    pem = str(kafka_options.get("ssl.truststore.type", "")).upper() == "PEM"
    for key, value in kafka_options.items():
        if key in _TRUSTSTORE:
            if not pem or key == "ssl.truststore.password":
                raise UnsupportedOptionError(
                    f"kafka option {key!r}: kafka-python reads only a PEM trust store: set "
                    "ssl.truststore.type=PEM with ssl.truststore.location"
                )
            if key == "ssl.truststore.location":
                options["ssl_cafile"] = value
            continue
        if key.startswith(_KEYSTORE_PREFIX):
            raise UnsupportedOptionError(
                f"kafka option {key!r}: kafka-python takes a client certificate as PEM files: "
                "use ssl.certfile and ssl.keyfile"
            )
        if key == "sasl.jaas.config":
            options["sasl_plain_username"], options["sasl_plain_password"] = jaas_credentials(
                str(value)
            )
            continue
        if key == "ssl.endpoint.identification.algorithm":
            options["ssl_check_hostname"] = bool(value)
            continue
        options[key.replace(".", "_")] = value
    return options


__all__ = ["UnsupportedOptionError", "kafka_python_options"]
