"""``python -m dlmsvdd``: the ``dlmsvdd`` command."""

import sys

from .cli import main

sys.exit(main())
