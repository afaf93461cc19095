"""Entry file for spark-submit: runs the same job as ``consumer-offsets run``."""

import sys

from streaming.cli.run import main

if __name__ == "__main__":
    sys.exit(main())
