"""Structural-schema handling for custom resources: pruning, defaulting and basic validation.

kube-apiserver silently drops fields a CRD schema does not declare (unless
``x-kubernetes-preserve-unknown-fields``), fills ``default`` values, and rejects wrong types,
missing ``required`` fields and out-of-``enum`` values with 422. Doing the same here means a
controller that writes an undeclared field fails in tests, not only against a real cluster.
CEL rules (``x-kubernetes-validations``), ``format`` and ``anyOf``/``oneOf`` beyond
int-or-string are not checked.

Nulls follow the rules kube-apiserver has had since 1.20 (KEP 1929, kubernetes#95423;
structuraldefaulting.PruneNonNullableNullsWithoutDefaults runs when a request is decoded):

- a null for a declared field, or a map value, whose schema is not ``nullable: true`` is
  dropped, and replaced by the schema's ``default`` when it has one. ``{"message": null}`` is
  therefore the same as leaving ``message`` out: fine for an optional field, ``Required value``
  for a required one;
- a null list item is kept, and is invalid unless the items are ``nullable`` (or have a
  default, which replaces it): ``spec.tags: Invalid value: "null": spec.tags in body must be of
  type string: "null"``;
- ``nullable: true`` keeps the null, even over a default;
- nulls where the schema declares nothing (under ``x-kubernetes-preserve-unknown-fields``) stay.

(Before 1.20 such nulls were not dropped and failed validation with the type error above.) A
merge patch removes most nulls before any of this: see ``patching.merge_patch``.

An empty string is a string. kube-apiserver 1.20 compiled with Go 1.16 or later reports every
``""`` in a ``type: string`` field as that same null type error (go-openapi compares
``reflect.Value``s, which Go 1.16 made equal for zero values: kubernetes#99804, fixed by
kube-openapi#230); release builds, made with Go 1.15, accept it, and so does the emulator.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

import re2

from app.apiserver.errors import FieldCause
from app.apiserver.golang import go_float, go_quote, go_value

Schema = Mapping[str, Any]

# Root fields every object keeps regardless of its schema.
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
# "No counterpart in the old object" (None is a value).
_NOTHING: Any = object()


@functools.lru_cache(maxsize=128)
def _pattern(pattern: str) -> Any:
    # A CRD's ``pattern`` is Go's regexp, RE2, as the kube-apiserver compiles it: linear time,
    # so an object's field never stalls the server. The emulator stands alone by contract, so it
    # uses google-re2 directly rather than promoter's regex port; None: it does not compile
    # (which the kube-apiserver refuses when the CRD is created).
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    try:
        return re2.compile(pattern.encode("utf-8", "surrogatepass"), options)
    except re2.error:
        return None


def _matches(pattern: str, value: str) -> bool:
    compiled = _pattern(pattern)
    text = value.encode("utf-8", "surrogatepass")
    return compiled is not None and compiled.search(text) is not None


def prune(
    obj: dict[str, Any], schema: Schema, *, old: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Return ``obj`` without undeclared fields, plus the dotted paths that were dropped.

    The top level is a new dict; below it, whatever the schema keeps is shared with ``obj``
    rather than copied (containers are new only where something was dropped): the store's
    objects are copy-on-write, and unchanged parts stay recognisable to ``validate``.
    ``old``: an object already pruned by this very schema; parts of ``obj`` that are the same
    objects as in ``old`` at the same place are kept as they are without a walk.
    """
    dropped: list[str] = []
    kept = {k: v for k, v in obj.items() if k in _ROOT_FIELDS}
    rest = {k: v for k, v in obj.items() if k not in _ROOT_FIELDS}
    pruned = _prune_value(rest, schema, "", dropped, old if old is not None else _NOTHING)
    if isinstance(pruned, dict):
        kept.update(pruned)
    return kept, dropped


def _prune_value(value: Any, schema: Schema, path: str, dropped: list[str], old: Any) -> Any:
    if value is old:
        return value  # (scalars are kept anyway; containers were pruned by this schema)
    if isinstance(value, dict):
        return _prune_object(value, schema, path, dropped, old)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            olds = old if isinstance(old, list) else ()
            pruned = [
                _prune_value(
                    v, items, f"{path}[{i}]", dropped, olds[i] if i < len(olds) else _NOTHING
                )
                for i, v in enumerate(value)
            ]
            return value if all(p is v for p, v in zip(pruned, value, strict=True)) else pruned
    return value


def _prune_object(
    value: dict[str, Any], schema: Schema, path: str, dropped: list[str], old: Any
) -> dict[str, Any]:
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    olds = old if isinstance(old, dict) else {}
    result: dict[str, Any] = {}
    changed = False
    for key, child in value.items():
        child_path = f"{path}.{key}" if path else key
        if isinstance(properties, Mapping) and key in properties:
            child_schema = properties[key]
            if child is None and not child_schema.get("nullable", False):
                # A null for a non-nullable field is dropped; apply_defaults then fills the
                # field's default, if it has one (see the module docstring).
                changed = True
                continue
            kept = _prune_value(child, child_schema, child_path, dropped, olds.get(key, _NOTHING))
        elif isinstance(additional, Mapping):
            if child is None and not additional.get("nullable", False):
                # Same rule for map values; a key's default cannot be filled later, so here.
                changed = True
                if "default" in additional:
                    result[key] = copy.deepcopy(additional["default"])
                continue
            kept = _prune_value(child, additional, child_path, dropped, olds.get(key, _NOTHING))
        elif preserve or additional is True or (embedded and key in _ROOT_FIELDS):
            kept = child
        else:
            dropped.append(child_path)
            changed = True
            continue
        result[key] = kept
        changed = changed or kept is not child
    return result if changed else value


# id(schema node) -> (the node, whether a default is declared at or below it). The entry holds
# the node, so its id cannot be reused while cached.
_DEFAULTS_BELOW: dict[int, tuple[Schema, bool]] = {}


def _declares_defaults(schema: Schema) -> bool:
    cached = _DEFAULTS_BELOW.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    children: list[Any] = [schema.get("additionalProperties"), schema.get("items")]
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        children.extend(properties.values())
    found = any(
        isinstance(child, Mapping) and ("default" in child or _declares_defaults(child))
        for child in children
    )
    _DEFAULTS_BELOW[id(schema)] = (schema, found)
    return found


def apply_defaults(obj: Any, schema: Schema) -> Any:
    """``obj`` with ``default`` values filled in for missing properties of objects that exist.

    Copy-on-write: ``obj`` is not changed; containers are new only along the paths where a
    default was added, everything else is returned as it was. Parts of the schema that
    declare no default are not walked at all.
    """
    if not _declares_defaults(schema):
        return obj
    if isinstance(obj, dict):
        result = obj
        properties = schema.get("properties")

        def put(key: str, value: Any) -> None:
            nonlocal result
            if result is obj:
                result = dict(obj)
            result[key] = value

        if isinstance(properties, Mapping):
            for key, child_schema in properties.items():
                if key not in result and "default" in child_schema:
                    put(key, copy.deepcopy(child_schema["default"]))
                if key in result:
                    child = result[key]
                    defaulted = apply_defaults(child, child_schema)
                    if defaulted is not child:
                        put(key, defaulted)
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key in list(result):
                if not isinstance(properties, Mapping) or key not in properties:
                    child = result[key]
                    defaulted = apply_defaults(child, additional)
                    if defaulted is not child:
                        put(key, defaulted)
        return result
    if isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            # A null item is kept (and then fails validation) unless the items have a default.
            defaulted_items = [
                copy.deepcopy(items["default"])
                if v is None and "default" in items and not items.get("nullable", False)
                else apply_defaults(v, items)
                for v in obj
            ]
            if any(d is not v for d, v in zip(defaulted_items, obj, strict=True)):
                return defaulted_items
    return obj


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _type_ok(value: Any, expected: str) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    if expected == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(expected, (object,)))


def _describe(value: Any) -> str:
    # go-openapi's name for the JSON type of a decoded value (int64 is "integer").
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _number(value: Any) -> str:
    # Bounds are float64 in go-openapi's messages, printed with %v.
    return go_float(float(value)) if isinstance(value, (int, float)) else str(value)


class _Causes:
    """The causes found so far, deduplicated as go-openapi's Result.AddErrors does.

    go-openapi drops an error whose text was already reported, and its texts name the path
    (list items have no index) but, except for type errors, not the bad value: two items with
    the same wrong enum value, or with two different ones, make one cause, for the first.
    """

    def __init__(self) -> None:
        self.found: list[FieldCause] = []
        self._seen: set[tuple[str, ...]] = set()

    def add(self, key: tuple[str, ...], cause: FieldCause) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.found.append(cause)

    def type_error(self, where: str, expected: str, value: Any) -> None:
        actual = _describe(value)
        self.add(
            (where, "type", actual),
            FieldCause(
                "FieldValueInvalid",
                f'Invalid value: "{actual}": {where} in body must be of type {expected}: '
                f'"{actual}"',
                where,
            ),
        )

    def invalid(self, where: str, rule: str, value: Any, detail: str) -> None:
        self.add(
            (where, rule),
            FieldCause(
                "FieldValueInvalid",
                f"Invalid value: {go_value(value)}: {where} in body {detail}",
                where,
            ),
        )


def validate(obj: Any, schema: Schema, path: str = "", *, old: Any = _NOTHING) -> list[FieldCause]:
    """Type, required, enum, pattern and simple bounds, reported like kube-apiserver 1.20.

    The messages are go-openapi's, as apiextensions-apiserver 1.20 turns them into field
    errors (checked against the real server): the path of a list item is the list's own
    (``status.conditions.message``), a string gets only its first failing check (maxLength,
    minLength, then pattern), a number its first (maximum, then minimum), and repeated errors
    are reported once (see ``_Causes``).

    On an update, ``old`` is the stored object: parts of ``obj`` that are the very same
    objects as in ``old`` at the same place (copy-on-write leaves unchanged parts shared) are
    not checked again, as kube-apiserver's CRD validation ratcheting (on by default since
    1.30; 1.20 has none) lets unchanged fields through. They were checked when they were
    written, so only an object stored before its schema tightened can differ.
    """
    causes = _Causes()
    _validate(obj, schema, path, causes, root=True, old=old)
    return causes.found


def _validate(
    value: Any,
    schema: Schema,
    path: str,
    causes: _Causes,
    *,
    root: bool = False,
    old: Any = _NOTHING,
) -> None:
    if value is old and isinstance(value, (dict, list)):
        return
    where = path or "<root>"
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if value is None or not (isinstance(value, str) or _type_ok(value, "integer")):
            causes.type_error(where, "integer,string", value)
        return
    if value is None:
        if not schema.get("nullable", False) and expected:
            causes.type_error(where, str(expected), value)
        return
    if isinstance(expected, str) and not _type_ok(value, expected):
        causes.type_error(where, expected, value)
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        # apiextensions lists the allowed values with %v, each quoted.
        allowed = ", ".join(go_quote(e if isinstance(e, str) else go_value(e)) for e in enum)
        causes.add(
            (where, "enum"),
            FieldCause(
                "FieldValueNotSupported",
                f"Unsupported value: {go_value(value)}: supported values: {allowed}",
                where,
            ),
        )
    if isinstance(value, str):
        pattern = schema.get("pattern")
        if "maxLength" in schema and len(value) > int(schema["maxLength"]):
            causes.invalid(
                where, "maxLength", value, f"should be at most {schema['maxLength']} chars long"
            )
        elif "minLength" in schema and len(value) < int(schema["minLength"]):
            causes.invalid(
                where, "minLength", value, f"should be at least {schema['minLength']} chars long"
            )
        elif isinstance(pattern, str) and not _matches(pattern, value):
            causes.invalid(where, "pattern", value, f"should match '{pattern}'")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        maximum, minimum = schema.get("maximum"), schema.get("minimum")
        if maximum is not None and schema.get("exclusiveMaximum") and value >= maximum:
            causes.invalid(where, "maximum", value, f"should be less than {_number(maximum)}")
        elif maximum is not None and value > maximum:
            causes.invalid(
                where, "maximum", value, f"should be less than or equal to {_number(maximum)}"
            )
        elif minimum is not None and schema.get("exclusiveMinimum") and value <= minimum:
            causes.invalid(where, "minimum", value, f"should be greater than {_number(minimum)}")
        elif minimum is not None and value < minimum:
            causes.invalid(
                where, "minimum", value, f"should be greater than or equal to {_number(minimum)}"
            )
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            old_items = old if isinstance(old, list) else ()
            for index, item in enumerate(value):
                old_item = old_items[index] if index < len(old_items) else _NOTHING
                # (No index in the path: go-openapi 1.20 validates every item at the list's.)
                _validate(item, items, path, causes, old=old_item)
        if "minItems" in schema and len(value) < int(schema["minItems"]):
            causes.invalid(
                where, "minItems", len(value), f"should have at least {schema['minItems']} items"
            )
        if "maxItems" in schema and len(value) > int(schema["maxItems"]):
            causes.invalid(
                where, "maxItems", len(value), f"should have at most {schema['maxItems']} items"
            )
    if isinstance(value, dict):
        for required in schema.get("required") or []:
            if required not in value:
                field_path = f"{path}.{required}" if path else required
                causes.add(
                    (field_path, "required"),
                    FieldCause("FieldValueRequired", "Required value", field_path),
                )
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            if root and key in _ROOT_FIELDS:
                continue
            child_path = f"{path}.{key}" if path else key
            old_child = old.get(key, _NOTHING) if isinstance(old, dict) else _NOTHING
            if isinstance(properties, Mapping) and key in properties:
                _validate(child, properties[key], child_path, causes, old=old_child)
            elif isinstance(additional, Mapping):
                _validate(child, additional, child_path, causes, old=old_child)
