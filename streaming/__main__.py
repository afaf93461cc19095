"""``python -m streaming``: the streaming job (see ``streaming.cli.run``)."""

import sys

from streaming.cli.run import main

if __name__ == "__main__":
    sys.exit(main())
