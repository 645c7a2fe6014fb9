"""``python -m promoter`` and the ``longshoreman`` command: the local runner's command line."""

from __future__ import annotations

import sys

from promoter.local.cli import main


def run() -> None:
    """The command line, from start to exit (the ``longshoreman`` console script's entry)."""
    sys.exit(main())


if __name__ == "__main__":
    run()
