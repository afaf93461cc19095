"""Kafka client options in librdkafka's words.

The job's ``kafka_options`` use the Java client's names (they also configure Spark's Kafka
source). librdkafka shares most of them (``security.protocol``, ``sasl.mechanism``,
``client.id``...); ``sasl.jaas.config`` becomes librdkafka's username and password, options that
only tune the Java client are left out, and the JKS trust store, which librdkafka cannot read,
is refused with the option named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: Java client options with no librdkafka equivalent that matter for connecting.
_UNSUPPORTED = (
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
    "ssl.keystore.type",
)

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

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_ESCAPE = re.compile(r"\\(.)")


class UnsupportedOptionError(ValueError):
    """A Kafka client option the librdkafka client cannot honour."""


def librdkafka_options(bootstrap_servers: str, kafka_options: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka configuration for ``bootstrap_servers`` and the job's ``kafka_options``."""
    options: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    for key, value in kafka_options.items():
        if key in _UNSUPPORTED:
            raise UnsupportedOptionError(
                f"kafka option {key!r} has no librdkafka equivalent: use ssl.ca.location "
                "(PEM) for the broker's certificate authority"
            )
        if key in _JAVA_ONLY:
            continue
        if key == "sasl.jaas.config":
            # PLAIN/SCRAM credentials: librdkafka takes them as sasl.username/sasl.password.
            # A quoted JAAS value escapes a quote or backslash with a backslash.
            fields = {
                name: _JAAS_ESCAPE.sub(r"\1", quoted)
                for name, quoted in _JAAS_OPTION.findall(value)
            }
            if "username" not in fields or "password" not in fields:
                raise UnsupportedOptionError(
                    "kafka option 'sasl.jaas.config': only username/password login modules "
                    "(PLAIN, SCRAM) are supported; use sasl.username and sasl.password"
                )
            options["sasl.username"] = fields["username"]
            options["sasl.password"] = fields["password"]
            continue
        options[key] = value
    return options
