"""`python -m guardian.entrypoints.cli`: the same as the `guardian` command."""

import sys

from guardian.entrypoints.cli import main

sys.exit(main())
