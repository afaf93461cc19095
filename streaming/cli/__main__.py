"""``python -m streaming.cli``: the ``consumer-offsets`` command line."""

from streaming.cli.main import console_main

console_main()
