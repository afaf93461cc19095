"""The job's Kafka client options (the Java client's names, as Spark takes them) for kafka-python
and librdkafka. ``sasl.jaas.config`` (PLAIN, SCRAM) becomes a username and password, a PEM trust
store the CA file (others are refused), "" for ``ssl.endpoint.identification.algorithm`` no host
check; Java-only options are left out for librdkafka. Errors never show a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_ESCAPE = re.compile(r"\\(.)")
_TRUSTSTORE = ("ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type")
_KEYSTORE_PREFIX = "ssl.keystore."
#: Options that only tune the Java client (or Spark's use of it): librdkafka refuses them.
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


class UnsupportedOptionError(ValueError):
    """A Kafka client option a Python client cannot honour."""


def jaas_credentials(value: str) -> tuple[str, str]:
    """(username, password) of a PLAIN or SCRAM ``sasl.jaas.config`` (a quoted value escapes a
    quote or backslash with a backslash); UnsupportedOptionError for any other login module."""
    fields = {name: _JAAS_ESCAPE.sub(r"\1", quoted) for name, quoted in _JAAS_OPTION.findall(value)}
    if "username" not in fields or "password" not in fields:
        raise UnsupportedOptionError(
            "kafka option 'sasl.jaas.config': only username/password login modules "
            "(PLAIN, SCRAM) are supported; use sasl.username and sasl.password"
        )
    return fields["username"], fields["password"]


def _pem_trust_store(key: str, kafka_options: Mapping[str, Any], client: str, hint: str) -> bool:
    """Whether ``key`` is the PEM trust store's location (the other trust store options are
    dropped); UnsupportedOptionError naming ``key`` unless the trust store is PEM."""
    pem = str(kafka_options.get("ssl.truststore.type", "")).upper() == "PEM"
    if not pem or key == "ssl.truststore.password":
        raise UnsupportedOptionError(
            f"kafka option {key!r}: {client} reads only a PEM trust store: set "
            f"ssl.truststore.type=PEM with ssl.truststore.location{hint}"
        )
    return key == "ssl.truststore.location"


def kafka_python_options(
    bootstrap_servers: str, kafka_options: Mapping[str, Any]
) -> dict[str, Any]:
    """kafka-python client options for ``bootstrap_servers`` and Java-named ``kafka_options``."""
    options: dict[str, Any] = {"bootstrap_servers": bootstrap_servers.split(",")}
    for key, value in kafka_options.items():
        if key in _TRUSTSTORE:
            if _pem_trust_store(key, kafka_options, "kafka-python", ""):
                options["ssl_cafile"] = value
        elif key.startswith(_KEYSTORE_PREFIX):
            raise UnsupportedOptionError(
                f"kafka option {key!r}: kafka-python takes a client certificate as PEM files: "
                "use ssl.certfile and ssl.keyfile"
            )
        elif key == "sasl.jaas.config":
            user, password = jaas_credentials(str(value))
            options["sasl_plain_username"], options["sasl_plain_password"] = user, password
        elif key == "ssl.endpoint.identification.algorithm":
            options["ssl_check_hostname"] = bool(value)
        else:
            options[key.replace(".", "_")] = value
    return options


def librdkafka_options(bootstrap_servers: str, kafka_options: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka configuration for ``bootstrap_servers`` and Java-named ``kafka_options``."""
    options: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    for key, value in kafka_options.items():
        if key in _TRUSTSTORE:
            if _pem_trust_store(key, kafka_options, "librdkafka", ", or ssl.ca.location"):
                options["ssl.ca.location"] = value
        elif key in _JAVA_ONLY:
            continue
        elif key == "sasl.jaas.config":
            options["sasl.username"], options["sasl.password"] = jaas_credentials(value)
        elif key == "ssl.endpoint.identification.algorithm":
            options[key] = value or "none"  # the Java client's "" is librdkafka's "none"
        else:
            options[key] = value
    return options
