"""What the local runner's modules take at run time in place of what would cost more to load.

Names from :mod:`typing`, without loading it, and regular expressions compiled when first used
(:func:`lazy_pattern`).

Importing ``typing`` costs a local run more than any one of its own modules (it brings ``re``,
and with it ``enum``, before anything needs them; ``bench/bench_runner.py``), and these modules
use almost nothing of it at run time: their annotations are strings (``from __future__ import
annotations``), read by the type checker only. So the modules a git-only Promotion loads import
``typing`` under ``if TYPE_CHECKING:`` alone (``tests/test_runner_imports.py`` holds them to it)
and take from here the few names they need while running:

- ``TYPE_CHECKING``: False. mypy takes any flag of that name for typing's own.
- ``Protocol``: typing's, to the type checker; at run time a plain base class. These protocols
  describe ports and are never checked with ``isinstance`` (none is ``runtime_checkable``); a
  class that names one as its base gets its methods, as it would from typing.
- ``Any``: typing's, to the type checker; ``object`` at run time, for the type aliases that are
  evaluated when their module loads (``Callable[[Scope], Any]``). Annotations themselves take
  ``Any`` from typing, under ``if TYPE_CHECKING:``.
- ``dataclass_transform`` (for :func:`promoter.records.record`): typing's, to the type
  checker; at run time it leaves the function as it is (nothing reads the mark typing's would
  leave on it).
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    import re
    from typing import Any as Any
    from typing import Protocol as Protocol
    from typing import dataclass_transform as dataclass_transform
else:
    Any = object

    def dataclass_transform(**kwargs):
        return lambda fn: fn

    class Protocol:
        """typing.Protocol as the running program sees these ports: a base, nothing more."""

        __slots__ = ()


class _LazyPattern:
    """A pattern compiled the first time anything asks it to match."""

    __slots__ = ("_args", "_pattern")

    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)
        self._pattern: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._pattern is None:
            import re  # loaded long before: this module only must not load it first

            self._pattern = re.compile(*self._args)
        return getattr(self._pattern, name)


def lazy_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, compiled on its first use: for the module-level patterns
    a Promotion may never use (a duration, a semver, a Go float...). Compiling costs 0.1-0.5 ms
    a pattern, paid by every run that imports the module; using one through this costs a
    lookup more each call, so the hot ones (the expression tokenizer's) are compiled as usual."""
    return _LazyPattern(pattern, flags)  # type: ignore[return-value]  # a Pattern in all but name
