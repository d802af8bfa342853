"""Entry point of `python -m schemas` (see schemas/cli.py)."""

import sys

from schemas.cli import main

sys.exit(main())
