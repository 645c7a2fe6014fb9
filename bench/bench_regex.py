"""Benchmark of the regex port: ``^(a+)+$`` against 10,000 characters, in every place.

Run: ``.venv/bin/python bench/bench_regex.py [--runs N]``. Each place a user or a manifest
hands Longshoreman a pattern is driven through its own entry point (an expression's
``matches``, a Warehouse's tag and path filters, a credential Secret's ``repoURL``, a policy's
and a window's name selector, the ``copy`` step's ignore globs, the API server emulator's CRD
``pattern``, and ``date()``'s Go layout, which becomes a pattern) with the runaway pattern and
a 10,001-character text that does not match, then one of 10,000 characters that does. Prints
the median and the worst of ``--runs`` answers in ms, compiled as the server keeps it (cached)
and from cold (the port's cache cleared first). The budget is 10 ms per answer (the issue's),
judged on each place's median; Python's ``re`` does not answer the first text at all. The
credential row's time is mostly normalizing a
10,000-character URL, not the pattern.
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.apiserver.schema import validate
from bench import limits
from promoter.control.policies import policy_for, project_config, schedule_for
from promoter.expressions import ExpressionError, Scope, compile_expression
from promoter.expressions.regex import compile_regex
from promoter.ports.credentials import CredentialType
from promoter.rules.credentials import find_secret, parse_secret
from promoter.steps.workdir.ignore import IgnoreRules
from promoter.warehouses.selection import git_tag_matches, image_tag_matches, paths_match
from promoter.warehouses.spec import parse_subscription

BUDGET_MS = 10.0
PATTERN = "^(a+)+$"
MISS = "a" * 10_000 + "!"
HIT = "a" * 10_000
GLOB_MISS = "glob:" + "*" * 40 + "!?"  # forty [^/]* in a row, then a character after the "!"


def _stage(name: str, namespace: str = "demo") -> dict[str, Any]:
    return {"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
            "metadata": {"name": name, "namespace": namespace}}  # fmt: skip


def _project(**spec: Any) -> Any:
    meta = {"name": "demo", "namespace": "demo"}
    return project_config({"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "ProjectConfig",
                           "metadata": meta, "spec": spec})  # fmt: skip


def _secret(repo_url: str) -> Any:
    data = {"repoURL": repo_url, "repoURLIsRegex": "true", "username": "u", "password": "p"}
    return parse_secret({
        "metadata": {"name": "s", "namespace": "demo",
                     "labels": {"kargo.akuity.io/cred-type": "git"}},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    })  # fmt: skip


def _date(compiled: Any, text: str) -> object:
    # A Go layout of forty "2" elements is forty \d{1,2} in a row; the text is all digits.
    try:
        return compiled.evaluate(Scope({"s": text.replace("a", "1"), "l": "2" * 40}))
    except ExpressionError as err:  # "cannot parse": the answer for the text that misses
        return err


def places() -> list[tuple[str, Callable[[str], object]]]:
    """(place, answer(text)) for each place that accepts a pattern, set up with PATTERN."""
    scope = lambda text: Scope({"s": text, "p": PATTERN})  # noqa: E731
    constant = compile_expression(f"s matches '{PATTERN}'")
    dynamic = compile_expression("s matches p")
    layout = compile_expression("date(s, l)")
    image = parse_subscription({"image": {"repoURL": "example/app",
                                          "imageSelectionStrategy": "Lexical",
                                          "allowTagsRegexes": [PATTERN]}}, 0)  # fmt: skip
    git_tags = parse_subscription({"git": {"repoURL": "https://github.com/x/y",
                                           "commitSelectionStrategy": "Lexical",
                                           "ignoreTagsRegexes": [PATTERN]}}, 0)  # fmt: skip
    git_paths = parse_subscription({"git": {"repoURL": "https://github.com/x/y",
                                            "includePaths": [f"regex:{PATTERN}"],
                                            "excludePaths": [GLOB_MISS]}}, 0)  # fmt: skip
    secret = _secret(PATTERN)
    policies = _project(promotionPolicies=[{"stageSelector": {"name": f"regex:{PATTERN}"}}])
    windows = _project(promotionWindows=[{
        "name": "freeze", "kind": "Deny", "dtstart": "20260101T000000Z",
        "dtend": "20260102T000000Z", "stageSelector": {"name": f"regexp:{PATTERN}"}}])  # fmt: skip
    ignore = IgnoreRules("**" * 20 + "y")
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": PATTERN}}}
    return [
        ("expression: s matches '^(a+)+$'", lambda t: constant.evaluate(scope(t))),
        ("expression: s matches p", lambda t: dynamic.evaluate(scope(t))),
        ("expression: date(s, '2' x 40)", lambda t: _date(layout, t)),
        ("Warehouse image allowTagsRegexes", lambda t: image_tag_matches(image, t)),
        ("Warehouse git ignoreTagsRegexes", lambda t: git_tag_matches(git_tags, t)),
        ("Warehouse git includePaths regex:", lambda t: paths_match(git_paths, [t])),
        (
            "credential Secret repoURL pattern",
            lambda t: find_secret([secret], CredentialType.GIT, t),
        ),
        ("promotion policy stageSelector", lambda t: policy_for(_stage(t), policies)),
        ("promotion window stageSelector", lambda t: schedule_for(_stage(t), windows, None)),
        ("copy step ignore: (**)x20 y", lambda t: ignore.ignored(t, is_dir=False)),
        ("emulator CRD pattern", lambda t: validate({"name": t}, schema)),
    ]


def measure(answer: Callable[[str], object], text: str, runs: int, *, cold: bool) -> list[float]:
    times = []
    for _ in range(runs):
        if cold:
            compile_regex.cache_clear()
        started = time.perf_counter()
        answer(text)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="answers per place and text")
    runs = parser.parse_args().runs
    rows = []
    for place, answer in places():
        limits.doing(f"answering {place}")
        warm_miss = measure(answer, MISS, runs, cold=False)
        warm_hit = measure(answer, HIT, runs, cold=False)
        cold_miss = measure(answer, MISS, max(1, runs // 10), cold=True)
        rows.append((place, warm_miss, warm_hit, cold_miss))
    width = max(len(r[0]) for r in rows)
    print(f"^(a+)+$ against 10,000 characters; ms per answer, median / worst of {runs} runs\n")
    print(f"{'place':<{width}}  {'no match':>15}  {'match':>15}  {'cold, no match':>15}")
    worst = slowest = 0.0
    for place, *series in rows:
        cells = [f"{statistics.median(s):6.3f} / {max(s):6.3f}" for s in series]
        worst = max(worst, *(max(s) for s in series))
        slowest = max(slowest, *(statistics.median(s) for s in series))
        print(f"{place:<{width}}  " + "  ".join(f"{c:>15}" for c in cells))
    # The verdict is on the slowest place's median: the worst single answer on a shared machine
    # is mostly the scheduler (printed above, not judged).
    verdict = "within" if slowest < BUDGET_MS else "OVER"
    print(f"\nslowest median {slowest:.3f} ms: {verdict} the {BUDGET_MS:.0f} ms budget "
          f"(worst single answer {worst:.3f} ms)")  # fmt: skip
    # Reported, never a failure: on a shared machine the timing is the scheduler's as much as
    # ours, and `make bench-smoke` (CI) must fail only when a benchmark breaks.
    return 0


if __name__ == "__main__":
    limits.bound()
    raise SystemExit(main())
