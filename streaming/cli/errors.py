"""The CLI's exit statuses and the two exceptions that choose between them.

Every command module raises these; only :func:`streaming.cli.main.main` turns them into an
exit status, so a command never calls ``sys.exit``.
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
#: The operation failed (the Kafka error name and code were printed).
EXIT_FAILURE: Final = 1
#: Bad arguments, configuration or input file.
EXIT_USAGE: Final = 2
#: Interrupted with Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED: Final = 130


class UsageError(Exception):
    """Bad arguments, configuration or input file: exit status 2."""


class CommandFailed(Exception):
    """The operation failed and its details were already printed: exit status 1."""
