"""``python -m promoter`` and the ``longshoreman`` command: the local runner's command line.

Two start-up and shut-down habits of short-lived command lines, both measured by
``bench/bench_runner.py`` (the runner's whole process against plain git):

- The cyclic garbage collector is off while the modules load: start-up creates tens of thousands
  of long-lived objects and no garbage, and collecting among them costs several milliseconds.
  :func:`promoter.cli.cmd_run` turns it back on once the runner's modules are in.
- The process ends with ``os._exit`` once the output is flushed: by then every file and work
  directory has been closed and removed by its own ``with``, and tearing down the interpreter's
  modules one by one would only cost time. An exception still ends the usual way, traceback and
  all.
"""

import gc
import os
import sys
from typing import NoReturn


def run() -> NoReturn:
    """The command line, from start to exit (the ``longshoreman`` console script's entry)."""
    gc.disable()
    from promoter.cli import main

    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
