"""The CLI's command handlers, by family: ``offsets`` (list, describe, commit, history,
status), ``reset`` (reset-offsets), ``delete`` (delete-offsets, delete) and ``transfer``
(export, import). Each handler takes a :class:`streaming.cli.context.Context` and returns the
exit status, or raises :class:`streaming.cli.errors.UsageError`/``CommandFailed``."""
