"""`python -m sagebox.cli ...`: the same as the `sagebox` command."""

import sys

from sagebox.cli.app import main

sys.exit(main())
