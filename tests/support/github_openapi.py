"""What GitHub documents about the REST operations ``github-push`` uses, for the fake to enforce.

The facts are an extract of GitHub's own OpenAPI description (npm ``@octokit/openapi``), kept in
``tests/fixtures/github-openapi/git-database.json`` with a note on its source and rebuilt by
``scripts/github_openapi_subset.py``. For a request the fake serves, :func:`operation_of` names
the documented operation it is (method and path template), and :func:`body_problems` lists what
in its JSON body GitHub's schema does not allow: a key the operation does not document, a
required key left out, a value of the wrong type or outside an ``enum``. The fake answers such a
body as GitHub does, ``422`` with ``Invalid request.`` and the reasons, and records it, so a
client that sends anything undocumented fails its test instead of passing against a lenient fake.

Standard library only, like the rest of the fakes' plumbing.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.fixtures import FIXTURES

SPEC_FILE = FIXTURES / "github-openapi" / "git-database.json"
# Path parameters that GitHub documents as holding slashes (a ref, ``base...head``).
_SLASHED = {"ref", "basehead"}
_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "array": (list,),
    "object": (dict,),
}


@dataclass(frozen=True, slots=True)
class Operation:
    """One documented operation: its id, method, path template and what it accepts."""

    id: str
    method: str
    path: str
    pattern: re.Pattern[str]
    body: Mapping[str, Any] | None
    responses: frozenset[int]


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    regex = ""
    for part in parts:
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            regex += f"(?P<{name}>.+)" if name in _SLASHED else f"(?P<{name}>[^/]+)"
        else:
            regex += re.escape(part)
    return re.compile(f"^{regex}$")


@functools.lru_cache(maxsize=1)
def operations() -> tuple[Operation, ...]:
    data = json.loads(SPEC_FILE.read_text())
    found = []
    for op_id, op in data["operations"].items():
        found.append(
            Operation(
                id=op_id,
                method=op["method"],
                path=op["path"],
                pattern=_pattern(op["path"]),
                body=op["requestBody"],
                responses=frozenset(int(code) for code in op["responses"]),
            )
        )
    # Literal paths before templated ones: POST /git/refs is not POST /git/refs/{ref}.
    return tuple(sorted(found, key=lambda o: o.path.count("{")))


def operation_of(method: str, path: str) -> Operation | None:
    """The documented operation a request is, or None when it is none of those extracted."""
    for op in operations():
        if op.method == method.upper() and op.pattern.match(path):
            return op
    return None


def _type_problem(where: str, value: Any, schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if value is None:
        return None if schema.get("nullable") else f"For '{where}', nil is not a {kind}."
    if kind in _TYPES:
        ok = isinstance(value, _TYPES[kind]) and not (
            kind in ("integer", "number") and isinstance(value, bool)
        )
        if not ok:
            article = "an" if kind[0] in "aeiou" else "a"
            return f"For '{where}', {json.dumps(value)} is not {article} {kind}."
    if "enum" in schema and value not in schema["enum"]:
        return f"For '{where}', {json.dumps(value)} is not a member of {schema['enum']}."
    return None


def schema_problems(value: Any, schema: Mapping[str, Any], where: str = "") -> list[str]:
    """GitHub-style reasons ``value`` does not fit ``schema`` (empty when it does)."""
    problem = _type_problem(where or "items", value, schema)
    if problem:
        return [problem]
    problems: list[str] = []
    if isinstance(value, dict) and "properties" in schema:
        properties: Mapping[str, Any] = schema["properties"]
        for key in value:
            if key not in properties:
                problems.append(f'"{key}" is not a permitted key.')
        for key in schema.get("required", ()):
            if key not in value:
                problems.append(f'"{key}" wasn\'t supplied.')
        for key, sub in value.items():
            if key in properties:
                inner = f"{where}/{key}" if where else f"properties/{key}"
                problems += schema_problems(sub, properties[key], inner)
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            problems += schema_problems(item, schema["items"], f"{where}/{index}")
    return problems


def body_problems(op: Operation, body: bytes) -> list[str]:
    """What in a request body the operation's documented schema does not allow."""
    if op.body is None:
        return [] if not body.strip() else ["this operation takes no request body"]
    if not body.strip():
        return schema_problems({}, op.body)
    try:
        data = json.loads(body)
    except ValueError:
        return ["Problems parsing JSON"]
    return schema_problems(data, op.body)


__all__ = ["Operation", "body_problems", "operation_of", "operations", "schema_problems"]
