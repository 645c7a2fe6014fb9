"""Kargo-compatible steps that read and edit files in the Promotion's work directory.

``yaml-update``, ``json-update``, ``yaml-parse``, ``json-parse``, ``helm-update-chart``,
``copy``, ``delete``, ``file-write`` and ``yaml-merge`` (``kustomize-set-image`` lives with
``kustomize-build`` in promoter/steps/workdir/kustomize.py, on the YAML editor here). Config fields
and
outputs follow Kargo's reference docs (docs/50-user-guide/60-reference-docs/30-promotion-steps/
*.md); deviations are called out where they are made.

Every config path goes through :meth:`StepContext.path`, so absolute paths, ``..`` and symlinks
leading out of the work directory are refused with a terminal error naming the field. Edits keep
the file's formatting: a YAML scalar set to a plain value is written in place of the old one
(:mod:`promoter.steps.workdir.yamlsplice`), other YAML edits go through the round-trip editor
(:mod:`promoter.steps.workdir.yamledit`, ruamel.yaml, imported when first needed) in the file's own
indentation, and JSON scalars are spliced into the original text. File I/O runs in a worker
thread in the server (``ctx.services.io``) so a large copy or glob never blocks the event loop.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml as pyyaml

from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError, evaluate_expression
from promoter.expressions.compiler import ENVIRONMENT
from promoter.expressions.regex import Regex, RegexError, compile_regex, escape
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepFunction,
    StepResult,
    succeeded,
)
from promoter.steps.workdir.yamlsplice import same_value, splice

# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def _existing_file(ctx: StepContext, kind: str, raw: str, field_name: str = "path") -> Path:
    path = ctx.path(raw, field_name=field_name)
    if not path.exists():
        raise StepError(
            f"{kind}: config.{field_name} {raw!r} does not exist in the work directory",
            terminal=True,
        )
    if not path.is_file():
        raise StepError(f"{kind}: config.{field_name} {raw!r} is not a regular file", terminal=True)
    return path


def _leaf_path(ctx: StepContext, raw: str, field_name: str) -> Path:
    """Confine ``raw`` to the work directory without following a symlink at its last component.

    ``delete`` must remove a symlink itself, not whatever it points at (which ``ctx.path`` would
    resolve to), so only the parent directory is resolved.
    """
    if not isinstance(raw, str) or raw == "" or os.path.isabs(raw):
        return ctx.path(raw, field_name=field_name)  # raises with the standard message
    normal = os.path.normpath(raw)
    if normal == ".." or normal.startswith(".." + os.sep):
        return ctx.path(raw, field_name=field_name)  # raises with the standard message
    head, tail = os.path.split(normal)
    parent = ctx.path(head or ".", field_name=field_name)
    return parent if tail in ("", ".") else parent / tail


def _ensure_inside(ctx: StepContext, path: Path, kind: str, field_name: str) -> None:
    root = ctx.work_dir.resolve()
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise ConfigRefused(
            f"{kind}: config.{field_name}: {path.relative_to(root)} is a symlink leading outside "
            "the Promotion's work directory"
        )


def _read_text(path: Path, kind: str, raw: str, field_name: str = "path") -> str:
    try:
        # Bytes, not read_text(): universal newlines would silently turn CRLF files into LF.
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise StepError(
            f"{kind}: config.{field_name} {raw!r} is not UTF-8 text", terminal=True
        ) from None
    except OSError as err:
        raise StepError(f"{kind}: could not read {raw!r}: {err.strerror}") from None


def _create_beside(path: Path) -> tuple[int, str]:
    """A new file of our own (mode 0600) beside ``path``, as ``tempfile.mkstemp`` makes one:
    tempfile (with shutil, random, bz2 and lzma) costs more to import than the whole edit of
    an image tag takes (``bench/bench_runner.py``)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _write_text_atomic(path: Path, text: str) -> None:
    """Replace a file's content in one rename, so a crash never leaves half a file behind.

    A retried step then sees either the old or the new content, both of which it handles.
    """
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if path.exists():
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # shutil.copymode's doing
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------------------------
# Key syntax shared by yaml-update and json-update
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyPart:
    """One step of an update key. ``map_key`` marks ``:0``: a numeric-looking map key."""

    name: str
    map_key: bool = False


def parse_key(key: str) -> list[KeyPart]:
    """Split an update key the way Kargo does (tidwall/sjson path syntax, setters subset).

    Dots separate parts; ``\\.`` is a literal dot, ``\\:`` a literal colon and ``\\\\`` a literal
    backslash; a part starting with ``:`` is always a map key even if it looks like a list index.
    Raises ValueError with a message that completes "the key ...".
    """
    key = key.strip()
    if not key:
        raise ValueError("is empty")
    parts: list[KeyPart] = []
    current: list[str] = []
    map_key = False
    escaped = False
    for char in key:
        if escaped:
            if char not in ".:\\":
                raise ValueError(
                    f"has an invalid escape '\\{char}' (only '\\.', '\\:' and '\\\\' are allowed)"
                )
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ".":
            if not current:
                raise ValueError("has an empty part")
            parts.append(KeyPart("".join(current), map_key))
            current, map_key = [], False
        elif char == ":":
            if current or map_key:
                raise ValueError("has a ':' inside a part (escape a literal colon as '\\:')")
            map_key = True
        else:
            current.append(char)
    if escaped:
        raise ValueError("ends with a lone backslash")
    if not current:
        raise ValueError("has an empty part")
    parts.append(KeyPart("".join(current), map_key))
    return parts


_INDEX = re.compile(r"-?\d+|\[-?\d+\]")


def _list_index(part: KeyPart, length: int, where: str, *, pad: bool = False) -> int:
    """Index into a list; ``-1`` (or ``len``) appends, as in Kargo and sjson.

    With ``pad`` (json-update), an index past the end is allowed: the list is padded with nulls
    up to it, as sjson does (``friends.4`` on ``["Andy","Carol"]`` gives
    ``["Andy","Carol",null,null,"Sara"]``).
    """
    if part.map_key or not _INDEX.fullmatch(part.name):
        raise ValueError(f"{where} is a list, but {part.name!r} is not a list index")
    index = int(part.name.strip("[]"))
    if index < -1:
        raise ValueError(f"{where}: negative index {index} (only -1, append, is allowed)")
    if index > length and not pad:
        raise ValueError(f"{where}: index {index} is past the end of a list of {length} items")
    return length if index == -1 else index


def _scalar_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _find_map_key(node: Mapping[Any, Any], name: str) -> tuple[bool, Any]:
    if name in node:
        return True, name
    # YAML keys need not be strings (``1: x``, ``true: y``); Kargo matches on the key's text.
    for key in node:
        if not isinstance(key, str) and _scalar_text(key) == name:
            return True, key
    return False, None


def _as_given(old: Any, new: Any) -> Any:
    """The default of ``keep_style``: the new value as it is (JSON has no styles to keep)."""
    return new


@dataclass
class _SetOutcome:
    root: Any
    changed: bool
    # True when a map key or list item was added: JSON then cannot be edited by splicing.
    created: bool


def _set_path(
    root: Any,
    parts: Sequence[KeyPart],
    value: Any,
    new_map: Callable[[], Any],
    *,
    pad: bool = False,
    keep_style: Callable[[Any, Any], Any] = _as_given,
) -> _SetOutcome:
    """Set ``value`` at ``parts`` inside nested maps and lists, creating missing maps.

    Like Kargo, a scalar (or null) met on the way is replaced by a map.
    """
    if not isinstance(root, dict | list):
        root = new_map()
    node: Any = root
    created = False
    walked: list[str] = []
    for position, part in enumerate(parts):
        last = position == len(parts) - 1
        where = ".".join(walked) or "the document root"
        walked.append(part.name)
        if isinstance(node, dict):
            found, key = _find_map_key(node, part.name)
            if not found:
                node[part.name] = value if last else new_map()
                created = True
                if last:
                    return _SetOutcome(root, True, True)
                node = node[part.name]
                continue
            if last:
                old = node[key]
                if same_value(old, value):
                    return _SetOutcome(root, False, created)
                node[key] = keep_style(old, value)
                return _SetOutcome(root, True, created)
            if not isinstance(node[key], dict | list):
                node[key] = new_map()
                created = True
            node = node[key]
        else:
            index = _list_index(part, len(node), where, pad=pad)
            if index >= len(node):
                node.extend([None] * (index - len(node)))
                node.append(value if last else new_map())
                created = True
                if last:
                    return _SetOutcome(root, True, True)
                node = node[index]
                continue
            if last:
                old = node[index]
                if same_value(old, value):
                    return _SetOutcome(root, False, created)
                node[index] = keep_style(old, value)
                return _SetOutcome(root, True, created)
            if not isinstance(node[index], dict | list):
                node[index] = new_map()
                created = True
            node = node[index]
    raise AssertionError("parse_key never returns an empty key")


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())


# --------------------------------------------------------------------------------------------
# Commit message fragments (formats copied from Kargo so aggregated messages look the same)
# --------------------------------------------------------------------------------------------

_GO_FLOAT = re.compile(
    r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE
)
_GO_BOOLS = frozenset(
    {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}
)


def _go_value(value: Any) -> str:
    """Go's ``%v`` for the JSON-like values a rendered config holds."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _looks_like_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _yaml_message_value(value: Any) -> str:
    """Kargo's ``QuoteIfNecessary``: quote strings a YAML reader would take for another type."""
    if isinstance(value, str):
        if _GO_FLOAT.fullmatch(value) or value in _GO_BOOLS or _looks_like_json(value):
            return json.dumps(value, ensure_ascii=False)
        return value
    return _go_value(value)


def _json_message_value(value: Any) -> str:
    """Kargo's json-update prints strings with Go's ``%q`` and everything else with ``%v``."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else _go_value(value)


def _updates_message(path: str, lines: Sequence[str]) -> str:
    return f"Updated {path}\n" + "".join(f"\n- {line}" for line in lines)


# --------------------------------------------------------------------------------------------
# yaml-update / json-update
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Update:
    key: str
    parts: list[KeyPart]
    value: Any
    where: str


def _read_updates(cfg: Config) -> list[_Update]:
    """The updates of yaml-update and json-update, their keys split.

    What Kargo's JSON schema checks (a key and a value in every update, a non-empty key) is a
    refused config, ``Failed``, and is checked for every update first, as the schema is. A key
    that then cannot be split (a bad escape, a stray colon, an empty part such as a trailing
    dot) ends the step ``Errored``, as Kargo's ``SplitKey`` failing inside the edit does.
    """
    items = cfg.items("updates", required=True)
    if not items:
        raise ConfigRefused(f"{cfg.kind}: config.updates must list at least one update")
    raw: list[tuple[str, Any, str]] = []
    for index, item in enumerate(items):
        key = item.str("key")
        if not key:
            raise ConfigRefused(f"{cfg.kind}: config.updates[{index}].key must not be empty")
        if "value" not in item.data:
            raise ConfigRefused(f"{cfg.kind}: config.updates[{index}].value is required")
        raw.append((key, item.data["value"], f"config.updates[{index}].key"))
    updates = []
    for key, value, where in raw:
        try:
            parts = parse_key(key)
        except ValueError as err:
            raise StepError(f"{cfg.kind}: {where} {key!r} {err}", terminal=True) from None
        updates.append(_Update(key, parts, value, where))
    return updates


def _apply_update(
    kind: str,
    root: Any,
    update: _Update,
    new_map: Callable[[], Any],
    *,
    pad: bool = False,
    keep_style: Callable[[Any, Any], Any] = _as_given,
) -> _SetOutcome:
    try:
        return _set_path(root, update.parts, update.value, new_map, pad=pad, keep_style=keep_style)
    except ValueError as err:
        raise StepError(f"{kind}: {update.where} {update.key!r}: {err}", terminal=True) from None


def _yaml_update_round_trip(
    kind: str, path: Path, raw_path: str, text: str, updates: Sequence[_Update]
) -> bool:
    """yaml-update through the round-trip editor; whether the file changed."""
    from promoter.steps.workdir import yamledit

    document = yamledit.RoundTripYaml(text, kind=kind, source=repr(raw_path))
    changed = False
    for update in updates:
        outcome = _apply_update(
            kind, document.data, update, yamledit.new_map, keep_style=yamledit.keep_style
        )
        document.data = outcome.root
        changed = changed or outcome.changed
    if changed:
        new_text = document.text()
        changed = new_text != document.original
        if changed:
            _write_text_atomic(path, new_text)
    return changed


def _yaml_update(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "yaml-update"
    cfg = Config(kind, config)
    raw_path = cfg.str("path")
    updates = _read_updates(cfg)
    path = _existing_file(ctx, kind, raw_path)
    text = _read_text(path, kind, raw_path)
    spliced = splice(text, [(u.parts, u.value) for u in updates])
    if spliced is not None:
        changed = spliced != text
        if changed:
            _write_text_atomic(path, spliced)
    else:
        changed = _yaml_update_round_trip(kind, path, raw_path, text, updates)
    # Kargo always reports commitMessage when there are updates; later steps reference it.
    message = _updates_message(
        raw_path, [f"{u.key}: {_yaml_message_value(u.value)}" for u in updates]
    )
    return succeeded(
        {"commitMessage": message},
        message=f"updated {raw_path}" if changed else f"{raw_path} already up to date",
    )


# JSON: a tiny scanner that records where each value sits in the text, so an existing scalar can
# be replaced in place and the rest of the file (indentation, inline arrays, key spacing) kept.


@dataclass
class _JsonSpan:
    start: int
    end: int
    is_array: bool = False
    members: dict[str, _JsonSpan] = field(default_factory=dict)
    items: list[_JsonSpan] = field(default_factory=list)


_JSON_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
_JSON_WS = re.compile(r"[ \t\n\r]*")
_JSON_DECODER = json.JSONDecoder()


def _skip_ws(text: str, pos: int) -> int:
    match = _JSON_WS.match(text, pos)
    return match.end() if match else pos


def _scan_json(text: str, pos: int) -> _JsonSpan:
    pos = _skip_ws(text, pos)
    char = text[pos]
    if char == '"':
        _, end = _JSON_DECODER.raw_decode(text, pos)
        return _JsonSpan(pos, end)
    if char in "{[":
        closing = "}" if char == "{" else "]"
        span = _JsonSpan(pos, pos, is_array=char == "[")
        cursor = _skip_ws(text, pos + 1)
        if text[cursor] == closing:
            span.end = cursor + 1
            return span
        while True:
            if char == "{":
                cursor = _skip_ws(text, cursor)
                key, cursor = _JSON_DECODER.raw_decode(text, cursor)
                cursor = _skip_ws(text, cursor)
                if text[cursor] != ":":
                    raise ValueError("expected ':'")
                child = _scan_json(text, cursor + 1)
                span.members[key] = child
            else:
                child = _scan_json(text, cursor)
                span.items.append(child)
            cursor = _skip_ws(text, child.end)
            if text[cursor] == ",":
                cursor += 1
                continue
            if text[cursor] == closing:
                span.end = cursor + 1
                return span
            raise ValueError(f"unexpected {text[cursor]!r}")
    match = _JSON_SCALAR.match(text, pos)
    if not match:
        raise ValueError(f"unexpected {char!r}")
    return _JsonSpan(pos, match.end())


def _locate_json(text: str, parts: Sequence[KeyPart]) -> _JsonSpan:
    span = _scan_json(text, 0)
    for part in parts:
        if span.is_array:
            span = span.items[int(part.name.strip("[]"))]
        else:
            span = span.members[part.name]
    return span


def _json_layout(text: str) -> dict[str, Any]:
    """Guess json.dumps arguments that reproduce a file's formatting when it must be rewritten."""
    indent_match = re.search(r"\n([ \t]+)[^\s]", text)
    if indent_match:
        return {"indent": indent_match.group(1), "separators": (",", ": ")}
    item_sep = ", " if re.search(r",[ ]", text) else ","
    key_sep = ": " if re.search(r'"[ ]*:[ ]', text) else ":"
    return {"indent": None, "separators": (item_sep, key_sep)}


def _json_update(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "json-update"
    cfg = Config(kind, config)
    raw_path = cfg.str("path")
    updates = _read_updates(cfg)
    path = _existing_file(ctx, kind, raw_path)
    for index, update in enumerate(updates):
        value = update.value
        if value is None or not isinstance(value, str | int | float | bool):
            # Kargo's json-update sets scalar values only (string, number, boolean); its schema
            # takes any value, so another one fails the edit (Errored), not the config.
            raise StepError(
                f"{kind}: config.updates[{index}].value for {update.key!r} must "
                f"be a string, number or boolean, got {type(value).__name__}",
                terminal=True,
            )
    original = _read_text(path, kind, raw_path)
    try:
        # Kargo (sjson) takes an empty file for an empty object.
        data = json.loads(original) if original.strip() else {}
    except ValueError as err:
        raise StepError(f"{kind}: {raw_path!r} is not valid JSON: {err}", terminal=True) from None
    ascii_only = all(ord(char) < 128 for char in original)
    text = original
    rewrite = False
    for update in updates:
        outcome = _apply_update(kind, data, update, dict, pad=True)
        data = outcome.root
        if not outcome.changed:
            continue
        if outcome.created or rewrite:
            rewrite = True
            continue
        try:
            span = _locate_json(text, update.parts)
        except (ValueError, IndexError, KeyError):
            rewrite = True
            continue
        text = (
            text[: span.start]
            + json.dumps(update.value, ensure_ascii=ascii_only)
            + text[span.end :]
        )
    if rewrite:
        text = json.dumps(data, ensure_ascii=ascii_only, **_json_layout(original))
        if original.endswith("\n"):
            text += "\n"
    changed = text != original
    if changed:
        _write_text_atomic(path, text)
    lines = [f"{u.key}: {_json_message_value(u.value)}" for u in updates]
    return succeeded(
        {"commitMessage": _updates_message(raw_path, lines)},
        message=f"updated {raw_path}" if changed else f"{raw_path} already up to date",
    )


# --------------------------------------------------------------------------------------------
# yaml-parse / json-parse
# --------------------------------------------------------------------------------------------


class _PlainYamlLoader(pyyaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings, as Kargo's YAML-to-JSON decoding does."""


_PlainYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in pyyaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _string_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            _scalar_text(key) if not isinstance(key, str) else key: _string_keys(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_string_keys(item) for item in value]
    return value


# ``(text, path as configured) -> document``; raises a terminal StepError for text it cannot read.
Loader = Callable[[str, str], Any]


def _load_for_parse(ctx: StepContext, kind: str, raw_path: str, load: Loader) -> dict[str, Any]:
    text = _read_text(_existing_file(ctx, kind, raw_path), kind, raw_path)
    if not text.strip():
        raise StepError(f"{kind}: {raw_path!r} is empty", terminal=True)
    data = _string_keys(load(text, raw_path))
    # Kargo runs the expressions with the document as expr-lang's environment: `$env[0]` and
    # `len($env)` read a list root; ours also names it `root`.
    return data if isinstance(data, dict) else {"root": data, ENVIRONMENT: data}


def _load_json_or_yaml(kind: str) -> Loader:
    def load(text: str, raw_path: str) -> Any:
        try:
            if kind == "json-parse":
                return json.loads(text)
            return pyyaml.load(text, _PlainYamlLoader)
        except (ValueError, pyyaml.YAMLError) as err:
            fmt = "JSON" if kind == "json-parse" else "YAML"
            raise StepError(
                f"{kind}: {raw_path!r} is not valid {fmt}: {_one_line(err)}", terminal=True
            ) from None

    return load


def make_parse_step(kind: str, load: Loader | None = None) -> StepFunction:
    """A ``<format>-parse`` step: read ``config.path`` with ``load`` (JSON or YAML by default)
    and publish ``config.outputs[]`` (``name``, ``fromExpression``) evaluated against it."""
    loader = load or _load_json_or_yaml(kind)

    async def parse(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        cfg = Config(kind, config)
        raw_path = cfg.str("path")
        outputs = cfg.items("outputs", required=True)
        if not outputs:
            raise ConfigRefused(f"{kind}: config.outputs must list at least one output")
        rules = [(item.str("name"), item.str("fromExpression")) for item in outputs]
        document = await ctx.services.io.call(_load_for_parse, ctx, kind, raw_path, loader)
        # Kargo evaluates against the document alone; `ctx` is added because Kargo's own
        # file-write example uses `apps[ctx.stage]`. A document key named `ctx` wins: it is
        # what the file's author meant.
        variables: dict[str, Any] = {
            "ctx": {"stage": ctx.stage, "project": ctx.project, "promotion": ctx.promotion},
            **document,
        }
        results: dict[str, Any] = {}
        for index, (name, source) in enumerate(rules):
            where = f"config.outputs[{index}].fromExpression"
            try:
                results[name] = evaluate_expression(source, variables, where=where)
            except ExpressionError as err:
                # The error's message already names `where` and the expression.
                raise StepError(f"{kind}: {err}", terminal=True) from None
        return succeeded(results, message=f"read {len(results)} value(s) from {raw_path}")

    parse.__name__ = kind.replace("-", "_")
    return parse


# --------------------------------------------------------------------------------------------
# helm-update-chart
# --------------------------------------------------------------------------------------------

# Kargo follows the Chart.yaml edit with `helm dependency update`, refreshing Chart.lock and the
# charts/ directory. Longshoreman has no helm binary, so only Chart.yaml is edited: Chart.lock (if
# any) and charts/ are left as they were, and the step's message says so. A later
# `helm dependency build` will then refuse the stale Chart.lock; commit Chart.yaml without a lock
# file or refresh it outside Longshoreman.
_NO_HELM_NOTE = (
    "Chart.lock and charts/ were not refreshed (Longshoreman does not run helm dependency update)"
)


def _freight_chart_version(
    ctx: StepContext, kind: str, item: Config, repository: str, name: str
) -> str:
    repo = repository.rstrip("/")
    for chart in ctx.freight.get("charts") or []:
        if not isinstance(chart, Mapping):
            continue
        repo_url = str(chart.get("repoURL") or "").rstrip("/")
        chart_name = str(chart.get("name") or "")
        # Classic repositories name the chart; an OCI Freight chart's repoURL ends with it.
        if (repo_url == repo and chart_name == name) or (
            repo_url == f"{repo}/{name}" and chart_name in ("", name)
        ):
            version = chart.get("version")
            if version:
                return str(version)
    raise StepError(
        f"{kind}: {item.prefix}.version is not set and the target Freight {_freight_name(ctx)} "
        f"has no chart {name!r} from {repository!r}",
        terminal=True,
    )


def _helm_update_chart(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "helm-update-chart"
    cfg = Config(kind, config)
    raw_dir = cfg.str("path")
    items = cfg.items("charts")
    if not items:
        # Kargo then lets helm resolve the SemVer ranges in Chart.yaml against the repositories.
        raise ConfigRefused(
            f"{kind}: config.charts is empty; updating dependencies to the newest versions their "
            "ranges allow needs `helm dependency update`, which Longshoreman does not run. "
            "List the charts to update."
        )
    directory = ctx.path(raw_dir, field_name="path")
    chart_file = directory / "Chart.yaml"
    if not chart_file.is_file():
        raise StepError(f"{kind}: no Chart.yaml in config.path {raw_dir!r}", terminal=True)
    from promoter.steps.workdir import yamledit

    document = yamledit.RoundTripYaml(
        _read_text(chart_file, kind, raw_dir), kind=kind, source=f"{raw_dir}/Chart.yaml"
    )
    data = document.data
    dependencies = data.get("dependencies") if isinstance(data, dict) else None
    if not isinstance(dependencies, list):
        raise StepError(f"{kind}: {raw_dir}/Chart.yaml has no dependencies list", terminal=True)
    changes: dict[str, str] = {}
    for item in items:
        repository, name = item.str("repository"), item.str("name")
        alias = item.opt_str("alias")
        version = item.opt_str("version") or _freight_chart_version(
            ctx, kind, item, repository, name
        )
        dependency = next(
            (
                dep
                for dep in dependencies
                if isinstance(dep, dict)
                and dep.get("name") == name
                and dep.get("repository") == repository
                and (alias is None or dep.get("alias") == alias)
            ),
            None,
        )
        if dependency is None:
            listed = ", ".join(
                f"{dep.get('repository')} {dep.get('name')}"
                for dep in dependencies
                if isinstance(dep, dict)
            )
            raise StepError(
                f"{kind}: {item.prefix}: no dependency in {raw_dir}/Chart.yaml has repository "
                f"{repository!r} and name {name!r}{f' and alias {alias!r}' if alias else ''} "
                f"(dependencies: {listed or 'none'})",
                terminal=True,
            )
        old = dependency.get("version")
        if old is not None and _scalar_text(old) == version:
            continue
        dependency["version"] = yamledit.keep_style(old, version)
        changes[alias or name] = f"{_scalar_text(old)} -> {version}" if old is not None else version
    note = _NO_HELM_NOTE
    if (directory / "Chart.lock").exists() and changes:
        note += "; the existing Chart.lock is now out of date"
    if not changes:
        return succeeded(message=f"{raw_dir}/Chart.yaml already up to date; {note}")
    _write_text_atomic(chart_file, document.text())
    message = f"Updated chart dependencies for {raw_dir}\n"
    message += "".join(f"\n- {name}: {change}" for name, change in changes.items())
    return succeeded({"commitMessage": message}, message=f"updated {raw_dir}/Chart.yaml; {note}")


# --------------------------------------------------------------------------------------------
# copy
# --------------------------------------------------------------------------------------------


def _glob_to_regex(pattern: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif char == "*":
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[":
            end = pattern.find("]", index + 2)
            if end == -1:
                out.append(escape(char))
                index += 1
                continue
            body = pattern[index + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            index = end + 1
        elif char == "\\" and index + 1 < len(pattern):
            out.append(escape(pattern[index + 1]))
            index += 2
        else:
            out.append(escape(char))
            index += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _IgnoreRule:
    regex: Regex
    negated: bool
    directories_only: bool


class IgnoreRules:
    """The subset of .gitignore syntax Kargo's ``copy.ignore`` accepts.

    ``#`` comments, ``!`` negation, a trailing ``/`` for directories only, patterns with a ``/``
    anchored at the copied directory, ``*``, ``?``, ``[...]`` and ``**``. The last matching rule
    wins; like git, nothing inside an ignored directory can be re-included. ``defaults`` come
    before the given rules (``.git`` unless a step says otherwise).
    """

    def __init__(self, text: str, defaults: Sequence[str] = (".git",)) -> None:
        self._rules: list[_IgnoreRule] = []
        for line in [*defaults, *text.splitlines()]:
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            directories_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            line = line.lstrip("/")
            if not line:
                continue
            body = _glob_to_regex(line)
            regex = body if anchored else f"(?:.*/)?{body}"
            try:  # through the RE2 port: a user's glob must not make the step backtrack
                compiled = compile_regex(f"(?s){regex}")
            except RegexError as exc:
                raise StepError(f"ignore: {line!r}: {exc.reason}", terminal=True) from None
            self._rules.append(_IgnoreRule(compiled, negated, directories_only))

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        result = False
        for rule in self._rules:
            if rule.directories_only and not is_dir:
                continue
            if rule.regex.fullmatch(relative):
                result = not rule.negated
        return result


def _copy(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    import shutil  # here, not at the top: see _create_beside

    kind = "copy"
    cfg = Config(kind, config)
    in_raw, out_raw = cfg.str("inPath"), cfg.str("outPath")
    rules = IgnoreRules(cfg.str("ignore", ""))
    source = ctx.path(in_raw, field_name="inPath")
    target = ctx.path(out_raw, field_name="outPath")
    if not source.exists():
        raise StepError(f"{kind}: config.inPath {in_raw!r} does not exist", terminal=True)
    if source.is_file():
        if rules.ignored(source.name, is_dir=False):
            return succeeded(message=f"{in_raw} is ignored; nothing copied")
        if target.is_dir():
            raise StepError(
                f"{kind}: config.outPath {out_raw!r} is a directory; name the destination file",
                terminal=True,
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        return succeeded(message=f"copied {in_raw} to {out_raw}")
    if target == source or source in target.parents:
        raise ConfigRefused(
            f"{kind}: config.outPath {out_raw!r} is inside config.inPath {in_raw!r}"
        )
    if target.exists() and not target.is_dir():
        raise StepError(
            f"{kind}: config.outPath {out_raw!r} is a file, but inPath is a directory",
            terminal=True,
        )
    copied = 0
    for current, dirnames, filenames in os.walk(source):
        base = Path(current)
        relative_dir = base.relative_to(source)
        destination_dir = target / relative_dir
        destination_dir.mkdir(parents=True, exist_ok=True)
        # A symlink already in the destination tree must not carry the copy out of the work dir.
        _ensure_inside(ctx, destination_dir, kind, "outPath")
        kept = []
        for name in sorted(dirnames):
            relative = (relative_dir / name).as_posix()
            # Symlinks in the source are skipped, as in Kargo.
            if (base / name).is_symlink() or rules.ignored(relative, is_dir=True):
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            relative = (relative_dir / name).as_posix()
            if (base / name).is_symlink() or rules.ignored(relative, is_dir=False):
                continue
            destination = destination_dir / name
            if destination.is_symlink():
                _ensure_inside(ctx, destination, kind, "outPath")
            shutil.copy(base / name, destination)
            copied += 1
    return succeeded(message=f"copied {copied} file(s) from {in_raw} to {out_raw}")


# --------------------------------------------------------------------------------------------
# delete
# --------------------------------------------------------------------------------------------


def _remove(path: Path) -> None:
    import shutil  # see _create_beside

    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass  # already gone with a parent directory listed earlier


def _delete(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    import glob

    kind = "delete"
    cfg = Config(kind, config)
    has_path, listed = cfg.has("path"), cfg.list("paths")
    if has_path and listed:
        raise ConfigRefused(f"{kind}: config.path and config.paths are mutually exclusive")
    if not has_path and not listed:
        raise ConfigRefused(f"{kind}: one of config.path or config.paths is required")
    entries: list[tuple[str, str]] = []
    if has_path:
        entries.append(("path", cfg.str("path")))
    for index, raw in enumerate(listed):
        if not isinstance(raw, str) or not raw:
            raise ConfigRefused(f"{kind}: config.paths[{index}] must be a non-empty path")
        entries.append((f"paths[{index}]", raw))
    globs, strict = cfg.bool("pathsAreGlobs"), cfg.bool("strict")
    root = ctx.work_dir.resolve()
    targets: list[Path] = []
    for field_name, raw in entries:
        if globs:
            if os.path.isabs(raw) or ".." in raw.replace("\\", "/").split("/"):
                raise ConfigRefused(
                    f"{kind}: config.{field_name} {raw!r} must stay inside the work directory "
                    "(no absolute paths, no '..')"
                )
            pattern = raw[2:] if raw.startswith("./") else raw
            matches = sorted(glob.glob(pattern, root_dir=root, recursive=True, include_hidden=True))
            if not matches and strict:
                raise StepError(
                    f"{kind}: config.{field_name} {raw!r} matches nothing", terminal=True
                )
            found = [_leaf_path(ctx, match.rstrip("/") or ".", field_name) for match in matches]
        else:
            leaf = _leaf_path(ctx, raw, field_name)
            exists = os.path.lexists(leaf)
            if not exists and strict:
                raise StepError(
                    f"{kind}: config.{field_name} {raw!r} does not exist", terminal=True
                )
            found = [leaf] if exists else []
        for path in found:
            if path == root:
                raise ConfigRefused(
                    f"{kind}: config.{field_name} {raw!r} is the work directory itself; "
                    "refusing to delete it"
                )
            if path not in targets:
                targets.append(path)
    for path in targets:
        _remove(path)
    return succeeded(message=f"deleted {len(targets)} path(s)")


# --------------------------------------------------------------------------------------------
# file-write
# --------------------------------------------------------------------------------------------

_PERMISSIONS = re.compile(r"0[0-7]{3}")
_DEFAULT_PERMISSIONS = 0o600  # Kargo's default


def _freight_name(ctx: StepContext) -> str:
    metadata = ctx.freight.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else ctx.freight.get("name")
    return str(name) if name else "(unnamed)"


def _file_permissions(cfg: Config) -> int:
    raw = cfg.opt_str("permissions")
    if raw is None:
        return _DEFAULT_PERMISSIONS
    if not _PERMISSIONS.fullmatch(raw):
        raise ConfigRefused(
            f"{cfg.kind}: config.permissions {raw!r} must be an octal mode like 0644"
        )
    mode = int(raw, 8)
    # Kargo's rules: another explicit step must make a file executable, and generated files
    # need not be world-writable.
    if mode & 0o111:
        raise ConfigRefused(
            f"{cfg.kind}: config.permissions {raw!r} must not include executable bits"
        )
    if mode & 0o002:
        raise ConfigRefused(f"{cfg.kind}: config.permissions {raw!r} must not be world-writable")
    return mode


def file_target(ctx: StepContext, kind: str, raw: str, field_name: str) -> Path:
    """Where a step may write the file ``config.<field_name>`` names: inside the work
    directory, not inside a ``.git`` directory, and not an existing directory."""
    if ".git" in Path(os.path.normpath(raw)).parts:
        # A file under .git/hooks would run on the next git step.
        raise ConfigRefused(
            f"{kind}: config.{field_name} {raw!r}: writing inside a .git directory is refused"
        )
    target = ctx.path(raw, field_name=field_name)
    if target.is_dir():
        # Kargo: Errored, not a refusal (the work directory, not the config, is in the way).
        raise StepError(f"{kind}: config.{field_name} {raw!r} is a directory", terminal=True)
    return target


def _file_write(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "file-write"
    cfg = Config(kind, config)
    raw = cfg.str("path")
    if "contents" not in cfg.data or not isinstance(cfg.data["contents"], str):
        got = type(cfg.data.get("contents")).__name__
        raise ConfigRefused(
            f"{kind}: config.contents is required and must be a string, got {got} "
            "(render structured data with asYAML() or asJSON())"
        )
    contents: str = cfg.data["contents"]
    overwrite = cfg.bool("overwrite")
    mode = _file_permissions(cfg)
    target = file_target(ctx, kind, raw, "path")
    if target.exists():
        # Same content counts as done: a retried step finds its own earlier write.
        if target.read_bytes() == contents.encode("utf-8"):
            return succeeded(message=f"{raw} already has these contents")
        if not overwrite:
            raise ConfigRefused(
                f"{kind}: config.path {raw!r} already exists; set overwrite: true to replace it"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_text_atomic(target, contents)
    os.chmod(target, mode)
    return succeeded(message=f"wrote {len(contents.encode('utf-8'))} bytes to {raw}")


# --------------------------------------------------------------------------------------------
# yaml-merge
# --------------------------------------------------------------------------------------------


def _merge_message(in_paths: Sequence[str], out_path: str) -> str:
    """Kargo's yaml-merge commit message fragment (empty when no file was merged)."""
    if not in_paths:
        return ""
    if len(in_paths) == 1:
        return f"Wrote {in_paths[0]} to {out_path}"
    return f"Merged {len(in_paths)} YAML files to {out_path}" + "".join(
        f"\n- {path}" for path in in_paths
    )


def _yaml_merge(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "yaml-merge"
    cfg = Config(kind, config)
    cfg.only(("inFiles", "outFile", "ignoreMissingFiles"))
    in_files = cfg.list("inFiles", required=True)
    if not in_files:
        raise ConfigRefused(f"{kind}: config.inFiles must list at least one file")
    for index, item in enumerate(in_files):
        if not isinstance(item, str):
            raise ConfigRefused(
                f"{kind}: config.inFiles[{index}] must be a string, got {type(item).__name__}"
            )
    out_raw = cfg.str("outFile")
    if not out_raw:
        raise ConfigRefused(f"{kind}: config.outFile must be a non-empty path")
    ignore_missing = cfg.bool("ignoreMissingFiles")
    from promoter.steps.workdir import yamledit

    merged: list[str] = []
    result: Any = None
    for index, raw in enumerate(in_files):
        path = ctx.path(raw, field_name=f"inFiles[{index}]")
        if not path.exists():
            if ignore_missing:
                continue
            raise StepError(f"{kind}: input file {raw!r} not found", terminal=True)
        if not path.is_file():
            raise StepError(f"{kind}: input file {raw!r} is not a regular file", terminal=True)
        text = _read_text(path, kind, raw, f"inFiles[{index}]")
        try:
            document = yamledit.rt_yaml().load(text)
        except yamledit.YAMLError as err:
            raise StepError(
                f"{kind}: error merging YAML files: error reading input file {raw}: "
                f"{_one_line(err)}",
                terminal=True,
            ) from None
        if isinstance(document, dict) and None in document:
            # ruamel reads ``:`` as {null: null}; kyaml, and so Kargo, refuses it.
            raise StepError(
                f"{kind}: error merging YAML files: error reading input file {raw}: "
                "a map key is empty",
                terminal=True,
            )
        merged.append(raw)
        if document is None:
            continue  # an empty file (or only comments) adds nothing, as in Kargo
        result = document if result is None else yamledit.merge(result, document)
    target = file_target(ctx, kind, out_raw, "outFile")
    target.parent.mkdir(parents=True, exist_ok=True)
    text = ""
    if result is not None:
        # Two-space maps and unindented list dashes: kyaml's layout, which Kargo writes.
        buffer = io.StringIO()
        yamledit.rt_yaml().dump(result, buffer)
        text = buffer.getvalue()
    _write_text_atomic(target, text)
    message = _merge_message(merged, out_raw)
    return succeeded({"commitMessage": message} if message else {}, message=f"wrote {out_raw}")


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


def _in_thread(fn: Callable[[StepContext, Mapping[str, Any]], StepResult]) -> StepFunction:
    async def run(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        return await ctx.services.io.call(fn, ctx, config)

    run.__name__ = fn.__name__.lstrip("_")
    return run


yaml_update = _in_thread(_yaml_update)
json_update = _in_thread(_json_update)
yaml_parse = make_parse_step("yaml-parse")
json_parse = make_parse_step("json-parse")
helm_update_chart = _in_thread(_helm_update_chart)
copy = _in_thread(_copy)
delete = _in_thread(_delete)
file_write = _in_thread(_file_write)
yaml_merge = _in_thread(_yaml_merge)

# All of them read and write the work directory only: a replay runs them again.
STEPS: dict[str, Step] = {
    "yaml-update": FunctionStep(yaml_update, effect=Effect.LOCAL),
    "json-update": FunctionStep(json_update, effect=Effect.LOCAL),
    "yaml-parse": FunctionStep(yaml_parse, effect=Effect.LOCAL),
    "json-parse": FunctionStep(json_parse, effect=Effect.LOCAL),
    "helm-update-chart": FunctionStep(helm_update_chart, effect=Effect.LOCAL),
    "copy": FunctionStep(copy, effect=Effect.LOCAL),
    "delete": FunctionStep(delete, effect=Effect.LOCAL),
    "file-write": FunctionStep(file_write, effect=Effect.LOCAL),
    "yaml-merge": FunctionStep(yaml_merge, effect=Effect.LOCAL),
}
