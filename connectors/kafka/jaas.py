"""Username and password from a Java client's ``sasl.jaas.config`` (PLAIN and SCRAM login
modules), for the Python clients, which take them as two options.

A quoted JAAS value escapes a quote or backslash with a backslash. Errors name the option and
never show its value: it holds the password.
"""

from __future__ import annotations

import re

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_ESCAPE = re.compile(r"\\(.)")


class UnsupportedOptionError(ValueError):
    """A Kafka client option a Python client cannot honour."""


def jaas_credentials(value: str) -> tuple[str, str]:
    """(username, password) of a PLAIN or SCRAM ``sasl.jaas.config``; UnsupportedOptionError for
    any other login module (Kerberos, OAuth…)."""
    fields = {name: _JAAS_ESCAPE.sub(r"\1", quoted) for name, quoted in _JAAS_OPTION.findall(value)}
    if "username" not in fields or "password" not in fields:
        raise UnsupportedOptionError(
            "kafka option 'sasl.jaas.config': only username/password login modules "
            "(PLAIN, SCRAM) are supported; use sasl.username and sasl.password"
        )
    return fields["username"], fields["password"]
