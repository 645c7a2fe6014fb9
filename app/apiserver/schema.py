"""Structural-schema handling for custom resources: pruning, defaulting and basic validation.

kube-apiserver silently drops fields a CRD schema does not declare (unless
``x-kubernetes-preserve-unknown-fields``), fills ``default`` values, and rejects wrong types,
missing ``required`` fields and out-of-``enum`` values with 422. Doing the same here means a
controller that writes an undeclared field fails in tests, not only against a real cluster.
CEL rules (``x-kubernetes-validations``), ``format`` and ``anyOf``/``oneOf`` beyond
int-or-string are not checked.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from app.apiserver.errors import FieldCause

Schema = Mapping[str, Any]

# Root fields every object keeps regardless of its schema.
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
# "No counterpart in the old object" (None is a value).
_NOTHING: Any = object()


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
                # Nulls for non-nullable fields are pruned before defaulting.
                changed = True
                continue
            kept = _prune_value(child, child_schema, child_path, dropped, olds.get(key, _NOTHING))
        elif isinstance(additional, Mapping):
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
            defaulted_items = [apply_defaults(v, items) for v in obj]
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
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def validate(obj: Any, schema: Schema, path: str = "", *, old: Any = _NOTHING) -> list[FieldCause]:
    """Type, required, enum, pattern and simple bounds, reported like kube-apiserver does.

    On an update, ``old`` is the stored object: parts of ``obj`` that are the very same
    objects as in ``old`` at the same place (copy-on-write leaves unchanged parts shared) are
    not checked again, as kube-apiserver's CRD validation ratcheting (on by default since
    1.30) lets unchanged fields through. They were checked when they were written.
    """
    causes: list[FieldCause] = []
    _validate(obj, schema, path, causes, root=True, old=old)
    return causes


def _validate(
    value: Any,
    schema: Schema,
    path: str,
    causes: list[FieldCause],
    *,
    root: bool = False,
    old: Any = _NOTHING,
) -> None:
    if value is old and isinstance(value, (dict, list)):
        return
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable", False) and schema.get("type"):
            causes.append(
                FieldCause(
                    "FieldValueTypeInvalid",
                    f'Invalid value: "null": {where} in body must be of type '
                    f'{schema["type"]}: "null"',
                    where,
                )
            )
        return
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _type_ok(value, "integer")):
            causes.append(
                FieldCause(
                    "FieldValueTypeInvalid",
                    f"Invalid value: {_describe(value)!r}: {where} in body "
                    f"must be of type integer or string",
                    where,
                )
            )
        return
    if isinstance(expected, str) and not _type_ok(value, expected):
        causes.append(
            FieldCause(
                "FieldValueTypeInvalid",
                f'Invalid value: "{_describe(value)}": {where} in body must be '
                f'of type {expected}: "{_describe(value)}"',
                where,
            )
        )
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        allowed = ", ".join(f'"{e}"' for e in enum)
        causes.append(
            FieldCause(
                "FieldValueNotSupported",
                f"Unsupported value: {value!r}: supported values: {allowed}",
                where,
            )
        )
    if isinstance(value, str):
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not re.search(pattern, value):
            causes.append(
                FieldCause(
                    "FieldValueInvalid",
                    f"Invalid value: {value!r}: {where} in body should match '{pattern}'",
                    where,
                )
            )
        if "maxLength" in schema and len(value) > int(schema["maxLength"]):
            causes.append(
                FieldCause(
                    "FieldValueTooLong",
                    f"Too long: may not be more than {schema['maxLength']} bytes",
                    where,
                )
            )
        if "minLength" in schema and len(value) < int(schema["minLength"]):
            causes.append(
                FieldCause(
                    "FieldValueInvalid",
                    f"Invalid value: {value!r}: {where} in body should be at "
                    f"least {schema['minLength']} chars long",
                    where,
                )
            )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append(
                FieldCause(
                    "FieldValueInvalid",
                    f"Invalid value: {value}: {where} in body should be greater "
                    f"than or equal to {schema['minimum']}",
                    where,
                )
            )
        if "maximum" in schema and value > schema["maximum"]:
            causes.append(
                FieldCause(
                    "FieldValueInvalid",
                    f"Invalid value: {value}: {where} in body should be less "
                    f"than or equal to {schema['maximum']}",
                    where,
                )
            )
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > int(schema["maxItems"]):
            causes.append(
                FieldCause(
                    "FieldValueTooMany",
                    f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                    where,
                )
            )
        if "minItems" in schema and len(value) < int(schema["minItems"]):
            causes.append(
                FieldCause(
                    "FieldValueInvalid",
                    f"Invalid value: {len(value)}: {where} in body should have "
                    f"at least {schema['minItems']} items",
                    where,
                )
            )
        items = schema.get("items")
        if isinstance(items, Mapping):
            old_items = old if isinstance(old, list) else ()
            for index, item in enumerate(value):
                old_item = old_items[index] if index < len(old_items) else _NOTHING
                _validate(item, items, f"{path}[{index}]", causes, old=old_item)
    if isinstance(value, dict):
        for required in schema.get("required") or []:
            if required not in value:
                field_path = f"{path}.{required}" if path else required
                causes.append(FieldCause("FieldValueRequired", "Required value", field_path))
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
