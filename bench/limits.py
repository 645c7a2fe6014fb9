"""A wall-clock bound for every benchmark, so a bench that stops moving fails instead of hanging.

A behaviour change can leave a benchmark waiting forever for something that no longer happens
(issue 30: ``bench_verification.py`` waited on an AnalysisRun the engine had stopped creating).
Each bench calls :func:`bound` first: after ``LONGSHOREMAN_BENCH_LIMIT`` seconds (default 1800,
``make bench-smoke`` sets a minute) a ``SIGALRM`` raises :class:`BenchmarkStuck` in the main
thread, naming the bench and what it said it was doing (:func:`doing`). Raised there, it unwinds
``asyncio.run`` like any error: the running tasks are cancelled and their ``finally`` blocks stop
the servers they started (kube-apiserver, etcd, docker-registry), and the process exits 1 with
the message. Benchmarks also bound their own waits where they wait on one thing (``--timeout``).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType

ENV_VAR = "LONGSHOREMAN_BENCH_LIMIT"
DEFAULT_LIMIT = 1800.0

_state = {"name": "benchmark", "doing": "starting"}


class BenchmarkStuck(RuntimeError):
    """The benchmark ran past its wall-clock bound."""


def doing(what: str) -> None:
    """Say what the benchmark is about to wait for (named if the bound ends it)."""
    _state["doing"] = what


def bound(limit: float | None = None) -> float:
    """Arm the bound for this process (the script's name is the bench's); returns it."""
    seconds = limit if limit is not None else float(os.environ.get(ENV_VAR) or DEFAULT_LIMIT)
    _state["name"] = Path(sys.argv[0]).name

    def expired(signum: int, frame: FrameType | None) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise BenchmarkStuck(
            f"{_state['name']}: no result after {seconds:g} s ({ENV_VAR}); it was {_state['doing']}"
        )

    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return seconds
