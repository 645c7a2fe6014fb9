"""The three PATCH dialects: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and the subset
of strategic merge patch that the built-in kinds we serve actually exercise.

All functions are pure: they return a new document and never mutate their inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


class PatchError(ValueError):
    """A patch that cannot be applied; the server answers 422 (or 400 when malformed)."""


def _without_nulls(value: Any) -> Any:
    """``value`` with every null removed: keys of objects, items of lists, at any depth."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value if v is not None]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """A JSON merge patch as kube-apiserver applies it (evanphx/json-patch MergePatch).

    RFC 7386 (objects merge recursively, ``null`` deletes, everything else replaces), with the
    library's twist: a value that lands where there was no object (a new key, a null, a list
    or a scalar) has its nulls removed at every depth, list items included, so
    ``{"conditions": [{"message": null}]}`` writes a condition without ``message`` and
    ``{"tags": ["a", null]}`` writes ``["a"]``. Only a non-object replacing an object keeps
    its nulls. (Checked against kube-apiserver v1.20.2.)
    """
    return copy.deepcopy(merge_patch_shared(target, patch))


def merge_patch_shared(target: Any, patch: Any) -> Any:
    """``merge_patch`` without copying: the result is new along the patch's paths and shares
    everything else with ``target``, and the patch's values with ``patch``. For the store,
    whose objects are never changed in place (copy-on-write) and which owns the patch (just
    decoded from the request); nobody may change the result in place either."""
    if not isinstance(patch, Mapping):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        current = result.get(key)
        if value is None:
            result.pop(key, None)
        elif not isinstance(current, Mapping):
            result[key] = _without_nulls(value)
        elif isinstance(value, Mapping):
            result[key] = merge_patch_shared(current, value)
        else:
            result[key] = value
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer {pointer!r} must start with '/'")
    return [_unescape(t) for t in pointer[1:].split("/")]


def _parent(doc: Any, tokens: list[str], pointer: str) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict):
            if token not in current:
                raise PatchError(f"doc is missing path: {pointer!r}: missing value")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, pointer, allow_end=False)]
        else:
            raise PatchError(f"doc is missing path: {pointer!r}: missing value")
    return current


def _index(items: list[Any], token: str, pointer: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(items)
    if not token.isdigit():
        raise PatchError(f"invalid array index {token!r} in {pointer!r}")
    index = int(token)
    limit = len(items) if allow_end else len(items) - 1
    if index > limit:
        raise PatchError(f"array index out of bounds in {pointer!r}")
    return index


def _get(doc: Any, pointer: str) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"doc is missing path: {pointer!r}: missing value")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, pointer, allow_end=False)]
    raise PatchError(f"doc is missing path: {pointer!r}: missing value")


def _add(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return value
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, pointer, allow_end=True), value)
    else:
        raise PatchError(f"doc is missing path: {pointer!r}: missing value")
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    tokens = _split_pointer(pointer)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"Unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, pointer, allow_end=False))
    raise PatchError(f"doc is missing path: {pointer!r}: missing value")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 operations applied in order; a failing ``test`` aborts the whole patch."""
    if not isinstance(operations, list):
        raise PatchError("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, Mapping) or "op" not in operation:
            raise PatchError(f"invalid operation {operation!r}")
        op = operation["op"]
        path = str(operation.get("path", ""))
        if op == "add":
            doc = _add(doc, path, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            doc, _ = _remove(doc, path)
        elif op == "replace":
            _get(doc, path)
            doc, _ = _remove(doc, path) if _split_pointer(path) else (doc, None)
            doc = _add(doc, path, copy.deepcopy(operation.get("value")))
        elif op == "move":
            doc, value = _remove(doc, str(operation.get("from", "")))
            doc = _add(doc, path, value)
        elif op == "copy":
            value = copy.deepcopy(_get(doc, str(operation.get("from", ""))))
            doc = _add(doc, path, value)
        elif op == "test":
            if _get(doc, path) != operation.get("value"):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {op}")
    return doc


# Lists that carry a patchStrategy in the Go types of the kinds we serve
# (k8s.io/apimachinery ObjectMeta): finalizers merge as a set, ownerReferences by uid.
_PRIMITIVE_MERGE_LISTS = frozenset({"finalizers"})
_KEYED_MERGE_LISTS = {"ownerReferences": "uid"}


def strategic_merge_patch(target: Any, patch: Any, *, path: tuple[str, ...] = ()) -> Any:
    """Strategic merge for built-in kinds: merge patch plus ObjectMeta's list strategies.

    Supports ``$patch: delete|replace`` on maps and ``$deleteFromPrimitiveList/<field>``;
    other ``$`` directives (``$setElementOrder``, ``$retainKeys``) are accepted and ignored.
    """
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    base: dict[str, Any] = {}
    if isinstance(target, Mapping) and directive != "replace":
        base = dict(copy.deepcopy(target))
    deletions = {
        key.split("/", 1)[1]: value
        for key, value in patch.items()
        if key.startswith("$deleteFromPrimitiveList/")
    }
    in_metadata = path == ("metadata",)
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            base.pop(key, None)
        elif in_metadata and key in _PRIMITIVE_MERGE_LISTS and isinstance(value, list):
            merged = list(base.get(key) or [])
            merged.extend(v for v in value if v not in merged)
            base[key] = merged
        elif in_metadata and key in _KEYED_MERGE_LISTS and isinstance(value, list):
            merge_key = _KEYED_MERGE_LISTS[key]
            existing = list(base.get(key) or [])
            for item in value:
                match = next(
                    (
                        i
                        for i, e in enumerate(existing)
                        if isinstance(e, Mapping)
                        and isinstance(item, Mapping)
                        and e.get(merge_key) == item.get(merge_key)
                    ),
                    None,
                )
                if isinstance(item, Mapping) and item.get("$patch") == "delete":
                    if match is not None:
                        existing.pop(match)
                elif match is None:
                    existing.append(copy.deepcopy(item))
                else:
                    existing[match] = strategic_merge_patch(existing[match], item)
            base[key] = existing
        else:
            merged_value = strategic_merge_patch(base.get(key), value, path=(*path, key))
            if merged_value is None:
                base.pop(key, None)
            else:
                base[key] = merged_value
    for key, removed in deletions.items():
        if isinstance(base.get(key), list) and isinstance(removed, list):
            base[key] = [v for v in base[key] if v not in removed]
    return base
