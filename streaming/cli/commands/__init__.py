"""The CLI's command handlers: each takes a :class:`streaming.cli.context.Context` and returns
the exit status, or raises ``UsageError``/``CommandFailed`` (``streaming.cli.errors``)."""
