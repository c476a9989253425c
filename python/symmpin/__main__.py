"""`python -m symmpin ...`: the same as the `symmpin` command."""

import sys

from .cli import main

sys.exit(main())
