"""PyYAML, loaded without the one regular expression it compiles for nothing.

Importing PyYAML compiles ``yaml.reader.Reader.NON_PRINTABLE``, a character class over most of
Unicode, for the pure-Python reader: 3.5 ms, the largest single cost of the local runner's
imports after its own modules (``bench/bench_runner.py``). The loader this project reads with
is libyaml's (:data:`LOADER`), which checks printable characters in C and never uses it. So the
first import goes through :func:`_load`, which lets PyYAML's modules compile their expressions
on first use instead: a pattern is compiled the first time anything asks it to match, so the
pure-Python loader (where libyaml is missing) still works, only its first document pays.

Import ``yaml`` from here in modules on the local runner's path (the first import in a process
is the one that counts; later ``import yaml`` anywhere gets the same module).
"""

from __future__ import annotations

import re
import sys

from promoter.lean import TYPE_CHECKING, lazy_pattern

if TYPE_CHECKING:
    from typing import Any


def _load() -> Any:
    if "yaml" in sys.modules:
        return sys.modules["yaml"]
    compile_now = re.compile

    def compile_later(pattern: Any, flags: int = 0) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if isinstance(pattern, str) and caller.startswith("yaml."):
            return lazy_pattern(pattern, flags)
        return compile_now(pattern, flags)

    re.compile = compile_later
    try:
        import yaml as module
    finally:
        re.compile = compile_now
    return module


if TYPE_CHECKING:
    import yaml as yaml
else:
    yaml = _load()
# libyaml's loader when PyYAML has it: the same documents, ten times faster to read.
LOADER: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
