"""Rebuilding a Promotion's work directory on a replica that did not build it.

The status says which steps ran and what they output, but the files those steps left behind (a
clone, an edited manifest, a commit not yet pushed) live in one replica's work directory: an
``emptyDir`` another pod does not have and a restarted pod no longer has. So before a step runs,
the engine checks that the work directory is the one the status describes, and if it is not,
rebuilds it from the status alone:

- a ``LOCAL`` step (:class:`promoter.steps.base.Effect`) is run again, from the inputs it had:
  the outputs of the steps before it *as recorded*, and the results of the expression functions
  that read the cluster (``stageMetadata()``, ``commitFrom()``, ...) *as recorded* when it ran.
  Its config must render to the same digest, and its output must come out the same, or the
  rebuild is refused: a Promotion never continues from a state other than the one it recorded;
- an ``EXTERNAL`` step is never run again. Its recorded output stands, and its ``verify`` hook,
  if it has one, checks that the effect is still there (the pushed commit is on the branch, the
  pull request exists) and brings the work directory in line with it.

What a replay needs that the outputs do not say is in ``status.replay.steps.<alias>``
(:class:`StepRecord`): the digest of the rendered config, the recorded function results, and
the step's own data (git-commit's tree and dates, so the same commit comes out with the same ID).
Nothing secret: a digest of a config rendered from what the Promotion's spec and status show
anyway, values read from Stage and Freight objects, git object IDs and dates. (An expression
function that returns a secret must never be recorded; none exists today.)

Which work directory the status describes is ``status.replay.workDir``: a token naming the last
work directory a step of the Promotion ran in, also written into that directory
(``.longshoreman/replay.json``). A replica whose work directory carries another token (or none:
another pod's, a fresh ``emptyDir``, one deleted under it) rebuilds before running anything.
Every step that runs is preceded by this check, so a matching token means every step recorded
since the token was set ran in this very directory.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promoter.expressions import revive_result
from promoter.ports.gitcmd import digest
from promoter.steps.base import PRIVATE_DIR

MARKER = "replay.json"
# Recorded function results above this size (JSON, per step, and for all steps together) are
# not kept, so the status stays far below the object size limit: the replay then calls the
# functions again, and the config digest refuses the rebuild if anything changed.
MAX_CALLS_BYTES = 8 * 1024
MAX_TOTAL_CALLS_BYTES = 64 * 1024
# How much of a differing value a refusal message shows.
_SHOWN = 200


# ---- what the status records ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepRecord:
    """``status.replay.steps.<alias>``: what a replay of one step needs."""

    # sha256 of the rendered config (canonical JSON), so a replay knows it renders the same.
    input: str = ""
    # Expression function calls that read the cluster, as text (``stageMetadata("test")``),
    # and their results as JSON text.
    calls: Mapping[str, str] = field(default_factory=dict)
    # The step's own (StepResult.replay_data).
    data: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.input:
            out["input"] = self.input
        if self.calls:
            out["calls"] = [{"call": c, "result": r} for c, r in sorted(self.calls.items())]
        if self.data:
            out["data"] = dict(self.data)
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> StepRecord:
        if not isinstance(raw, Mapping):
            return cls()
        calls = {
            str(c.get("call")): str(c.get("result"))
            for c in raw.get("calls") or ()
            if isinstance(c, Mapping) and c.get("call") is not None and c.get("result") is not None
        }
        data = raw.get("data")
        return cls(
            input=str(raw.get("input") or ""),
            calls=calls,
            data={str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {},
        )


def _calls_size(calls: Mapping[str, str]) -> int:
    return sum(len(k) + len(v) for k, v in calls.items())


def record_of(
    config: Mapping[str, Any],
    calls: Mapping[str, str],
    data: Mapping[str, str] | None,
    others: Mapping[str, Any],
) -> dict[str, Any]:
    """The record to keep for a step that just finished, as it goes into the status
    (``others``: the records already there)."""
    kept = dict(calls)
    used = sum(_calls_size(StepRecord.from_dict(r).calls) for r in others.values())
    size = _calls_size(kept)
    if size > MAX_CALLS_BYTES or used + size > MAX_TOTAL_CALLS_BYTES:
        kept = {}
    return StepRecord(input_digest(config), kept, dict(data or {})).to_dict()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def input_digest(config: Mapping[str, Any]) -> str:
    return "sha256:" + digest(_canonical(config), 64)


def same_output(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Outputs compared as the status stores them (JSON), so 1 and 1.0 or tuples do not differ."""
    return bool(json.loads(_canonical(a)) == json.loads(_canonical(b)))


def shown(value: Any) -> str:
    text = _canonical(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


# ---- expression functions that read the cluster ---------------------------------------------


def call_text(name: str, args: tuple[Any, ...]) -> str:
    return f"{name}({', '.join(_canonical(a) for a in args)})"


class CallRecorder:
    """Wraps expression functions so that every call and its result is noted in :attr:`calls`.

    The functions wrapped are the runtime's (Freight lookups over the Stage's Freight, Stage and
    Freight metadata): their answers can change while a Promotion runs, and a replay must see
    the answers the step saw.
    """

    def __init__(self, functions: Mapping[str, Callable[..., Any]]) -> None:
        self.calls: dict[str, str] = {}
        self.functions = {name: self._wrap(name, fn) for name, fn in functions.items()}

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any) -> Any:
            result = fn(*args)
            self.calls[call_text(name, args)] = _canonical(result)
            return result

        return recorded


def replaying_functions(
    functions: Mapping[str, Callable[..., Any]], calls: Mapping[str, str]
) -> dict[str, Callable[..., Any]]:
    """``functions`` answering the recorded calls with the recorded results (others live)."""

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def replayed(*args: Any) -> Any:
            recorded = calls.get(call_text(name, args))
            if recorded is None:
                return fn(*args)
            return revive_result(name, json.loads(recorded))

        return replayed

    return {name: wrap(name, fn) for name, fn in functions.items()}


# ---- the work directory's token -------------------------------------------------------------


def new_token() -> str:
    """A token for a freshly (re)built work directory: which host, and which life of it."""
    # os.uname() and os.urandom() are what socket.gethostname() and secrets.token_hex() read,
    # without importing socket and secrets into the local runner.
    host = os.uname().nodename or "localhost"
    return f"{host[:63]}/{os.urandom(6).hex()}"


def _marker(work_dir: Path) -> Path:
    return work_dir / PRIVATE_DIR / MARKER


def read_token(work_dir: Path, promotion: str) -> str | None:
    """The token this work directory was built under for ``promotion``, or None."""
    try:
        data = json.loads(_marker(work_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, Mapping) or data.get("promotion") != promotion:
        return None
    token = data.get("token")
    return token if isinstance(token, str) and token else None


def write_token(work_dir: Path, promotion: str, token: str) -> None:
    path = _marker(work_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{MARKER}.{os.getpid()}")
    tmp.write_text(json.dumps({"promotion": promotion, "token": token}), encoding="utf-8")
    os.replace(tmp, path)


def has_content(work_dir: Path) -> bool:
    try:
        with os.scandir(work_dir) as entries:
            return any(True for _ in entries)
    except FileNotFoundError:
        return False


def clear(work_dir: Path) -> None:
    """Empty the work directory (creating it if it is gone), clone cache and all.

    Nothing in it is trusted: it may be another life's of this same Promotion, ahead of or
    beside the status. Symlinks are unlinked, never followed.
    """
    import shutil  # a work directory to clear is the exception: most runs never load it

    work_dir.mkdir(parents=True, exist_ok=True)
    for entry in work_dir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
