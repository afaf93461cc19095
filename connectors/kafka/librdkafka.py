"""Kafka client options in librdkafka's words.

The job's ``kafka_options`` use the Java client's names (they also configure Spark's Kafka
source). librdkafka shares most of them (``security.protocol``, ``sasl.mechanism``,
``client.id``...); ``sasl.jaas.config`` becomes librdkafka's username and password, options that
only tune the Java client are left out, a PEM trust store (``ssl.truststore.type=PEM``) becomes
``ssl.ca.location``, and any other trust store, which librdkafka cannot read, is refused with
the option named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.kafka.jaas import UnsupportedOptionError, jaas_credentials

#: Java trust store options; a PEM trust store becomes ``ssl.ca.location``, any other type (JKS,
#: PKCS12) librdkafka cannot read.
_TRUSTSTORE = ("ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type")

#: Java client options that only tune the Java client (or Spark's use of it); librdkafka
#: would refuse them as unknown, and they carry no meaning for it.
_JAVA_ONLY = frozenset(
    {
        "fetch.max.wait.ms",
        "max.poll.records",
        "max.partition.fetch.bytes",
        "request.timeout.ms",
        "default.api.timeout.ms",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
    }
)


def librdkafka_options(bootstrap_servers: str, kafka_options: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka configuration for ``bootstrap_servers`` and the job's ``kafka_options``."""
    options: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    pem = kafka_options.get("ssl.truststore.type", "").upper() == "PEM"
    for key, value in kafka_options.items():
        if key in _TRUSTSTORE:
            if not pem or key == "ssl.truststore.password":
                raise UnsupportedOptionError(
                    f"kafka option {key!r}: librdkafka reads only a PEM trust store: set "
                    "ssl.truststore.type=PEM with ssl.truststore.location, or ssl.ca.location"
                )
            if key == "ssl.truststore.location":
                options["ssl.ca.location"] = value
            continue
        if key in _JAVA_ONLY:
            continue
        if key == "sasl.jaas.config":
            # PLAIN/SCRAM credentials: librdkafka takes them as sasl.username/sasl.password.
            options["sasl.username"], options["sasl.password"] = jaas_credentials(value)
            continue
        if key == "ssl.endpoint.identification.algorithm":
            # The Java client's "" (no host name check) is librdkafka's "none".
            options[key] = value or "none"
            continue
        options[key] = value
    return options


__all__ = ["UnsupportedOptionError", "librdkafka_options"]
