"""``python -m connectors.kafka.local``."""

import sys

from connectors.kafka.local.cli import main

sys.exit(main())
