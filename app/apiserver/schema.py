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


def prune(obj: dict[str, Any], schema: Schema) -> tuple[dict[str, Any], list[str]]:
    """Return ``obj`` without undeclared fields, plus the dotted paths that were dropped."""
    dropped: list[str] = []
    kept = {k: copy.deepcopy(v) for k, v in obj.items() if k in _ROOT_FIELDS}
    rest = {k: v for k, v in obj.items() if k not in _ROOT_FIELDS}
    pruned = _prune_value(rest, schema, "", dropped)
    if isinstance(pruned, dict):
        kept.update(pruned)
    return kept, dropped


def _prune_value(value: Any, schema: Schema, path: str, dropped: list[str]) -> Any:
    if isinstance(value, dict):
        return _prune_object(value, schema, path, dropped)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [_prune_value(v, items, f"{path}[{i}]", dropped) for i, v in enumerate(value)]
        return copy.deepcopy(value)
    return value


def _prune_object(
    value: dict[str, Any], schema: Schema, path: str, dropped: list[str]
) -> dict[str, Any]:
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    result: dict[str, Any] = {}
    for key, child in value.items():
        child_path = f"{path}.{key}" if path else key
        if isinstance(properties, Mapping) and key in properties:
            child_schema = properties[key]
            if child is None and not child_schema.get("nullable", False):
                # Nulls for non-nullable fields are pruned before defaulting.
                continue
            result[key] = _prune_value(child, child_schema, child_path, dropped)
        elif isinstance(additional, Mapping):
            result[key] = _prune_value(child, additional, child_path, dropped)
        elif preserve or additional is True or (embedded and key in _ROOT_FIELDS):
            result[key] = copy.deepcopy(child)
        else:
            dropped.append(child_path)
    return result


def apply_defaults(obj: Any, schema: Schema) -> Any:
    """Fill ``default`` values for missing properties of objects that exist."""
    if isinstance(obj, dict):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            for key, child_schema in properties.items():
                if key not in obj and "default" in child_schema:
                    obj[key] = copy.deepcopy(child_schema["default"])
                if key in obj:
                    obj[key] = apply_defaults(obj[key], child_schema)
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key in list(obj):
                if not isinstance(properties, Mapping) or key not in properties:
                    obj[key] = apply_defaults(obj[key], additional)
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [apply_defaults(v, items) for v in obj]
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


def validate(obj: Any, schema: Schema, path: str = "") -> list[FieldCause]:
    """Type, required, enum, pattern and simple bounds, reported like kube-apiserver does."""
    causes: list[FieldCause] = []
    _validate(obj, schema, path, causes, root=True)
    return causes


def _validate(
    value: Any, schema: Schema, path: str, causes: list[FieldCause], *, root: bool = False
) -> None:
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
            for index, item in enumerate(value):
                _validate(item, items, f"{path}[{index}]", causes)
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
            if isinstance(properties, Mapping) and key in properties:
                _validate(child, properties[key], child_path, causes)
            elif isinstance(additional, Mapping):
                _validate(child, additional, child_path, causes)
