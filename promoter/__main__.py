"""``python -m promoter``: the local runner's command line."""

import sys

from promoter.cli import main

sys.exit(main())
