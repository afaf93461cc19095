"""``python -m streaming.cli``: the ``consumer-offsets`` command line."""

from streaming.cli.main import main

raise SystemExit(main())
