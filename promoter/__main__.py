"""``python -m promoter`` and the ``longshoreman`` command: the local runner's command line.

Three start-up and shut-down habits of short-lived command lines, all measured by
``bench/bench_runner.py`` (the runner's whole process against plain git):

- A ``run`` whose first step clones one branch starts that clone before anything else loads
  (:mod:`promoter.earlyclone`); the git-clone step takes it over if it is the clone it would
  make, and whatever nobody took is ended before the process exits.
- The cyclic garbage collector is off while the modules load: start-up creates tens of thousands
  of long-lived objects and no garbage, and collecting among them costs several milliseconds.
  :func:`promoter.cli.cmd_run` freezes what is loaded (``gc.freeze``: never walked again) and
  turns it back on once the runner's modules are in.
- The process ends with ``os._exit`` once the output is flushed: by then every file and work
  directory has been closed and removed by its own ``with``, and tearing down the interpreter's
  modules one by one would only cost time. An exception still ends the usual way, traceback and
  all.
"""

from __future__ import annotations

import gc
import os
import sys

# Nothing before the early clone may load typing (and with it re and enum): ~5 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def run() -> NoReturn:
    """The command line, from start to exit (the ``longshoreman`` console script's entry)."""
    gc.disable()
    # The first git-clone starts now, while the rest loads (promoter/earlyclone.py).
    from promoter.earlyclone import start

    early = start(sys.argv[1:])
    try:
        from promoter.cli import main

        code = main(early=early)
    finally:
        if early is not None:
            early.discard()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
