"""Secrets of the Kafka client options kept out of printed configs (masked by option name) and
out of every log line: libraries log their own configuration (kafka-python's clients, py4j at
DEBUG), so a log record factory masks the secret values themselves, whoever logs them."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterable, Mapping
from contextlib import suppress
from typing import Any

from connectors.kafka.client_options import UnsupportedOptionError, jaas_credentials

#: Kafka client option names whose values are secrets.
SECRET_MARKERS = ("password", "jaas", "secret", "token", "key")
MASK = "***"
#: Shorter values would mask ordinary words of unrelated log lines.
_MIN_SECRET_LENGTH = 4

_secrets: frozenset[str] = frozenset()
_lock = threading.Lock()


def is_secret_option(name: str) -> bool:
    return any(marker in name.lower() for marker in SECRET_MARKERS)


def redacted_options(kafka_options: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka client options as printable data: values of secret options (passwords, JAAS
    configs, keys, tokens) masked."""
    return {k: (MASK if is_secret_option(k) else v) for k, v in kafka_options.items()}


def secret_values(kafka_options: Mapping[str, Any]) -> list[str]:
    """The secret values of ``kafka_options``: each secret option's value, and the password
    inside a JAAS config (clients that take it alone log it alone)."""
    values = []
    for name, value in kafka_options.items():
        if not is_secret_option(name):
            continue
        values.append(str(value))
        if name == "sasl.jaas.config":
            with suppress(UnsupportedOptionError):  # no password field: nothing more to hide
                values.append(jaas_credentials(str(value))[1])
    return values


def hide_in_logs(values: Iterable[str]) -> None:
    """Mask ``values`` in every log record of this process from now on."""
    global _secrets
    new = {v for v in values if len(v) >= _MIN_SECRET_LENGTH}
    if not new:
        return
    with _lock:
        _secrets = _secrets | new
        _install()


@functools.cache  # once per process
def _install() -> None:
    previous = logging.getLogRecordFactory()

    def masking_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        secrets = _secrets
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report
            return record
        if any(secret in message for secret in secrets):
            # Longest first: a password inside a JAAS value is masked with the whole value.
            for secret in sorted(secrets, key=len, reverse=True):
                message = message.replace(secret, MASK)
            record.msg, record.args = message, None
        return record

    logging.setLogRecordFactory(masking_factory)
