"""``python -m streaming.cli``: the ``consumer-offsets`` command line."""

from streaming.cli.main import console_main

# Guarded: a child process spawned by the job (the sink's writer) imports this module again.
if __name__ == "__main__":
    console_main()
