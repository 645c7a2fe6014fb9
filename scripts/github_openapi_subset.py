"""Extract the GitHub REST operations ``github-push`` and the Freight diffs use from GitHub's
OpenAPI description.

The fake GitHub (tests/support/github.py) holds every request to these operations to what GitHub
documents: the method and path, the path and query parameters, the request body's properties,
types and required keys, and the response codes. The facts come from the npm package
``@octokit/openapi`` (GitHub's published description, regenerated from
github/rest-api-description), so the fixture says where it came from and can be rebuilt::

    cd /tmp && npm pack @octokit/openapi && tar xzf octokit-openapi-*.tgz
    python3 scripts/github_openapi_subset.py /tmp/package > \
        tests/fixtures/github-openapi/git-database.json

The same facts are checked against the GitHub Enterprise Server descriptions in the package
(``ghes-*.deref.json``): an operation that differs there is reported and the script fails, so the
fixture stays true for both.

Standard library only: it runs where the package was unpacked, with no project installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OPERATIONS = (
    "apps/get-repo-installation",
    "apps/create-installation-access-token",
    "repos/compare-commits-with-basehead",
    "repos/list-pull-requests-associated-with-commit",
    "git/create-commit",
    "git/get-ref",
    "git/create-ref",
    "git/update-ref",
    "git/delete-ref",
)
# What of a JSON schema the fake checks; descriptions and examples are left out.
_SCHEMA_KEYS = ("type", "properties", "required", "items", "enum", "nullable", "format")
# Kept as their type alone: the installation token's ``permissions`` lists every permission
# GitHub has (and GHES has a few others); Longshoreman never sends it.
_SHALLOW = {("apps/create-installation-access-token", "permissions")}


def _schema(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key in _SCHEMA_KEYS:
        if key not in node:
            continue
        value = node[key]
        if key == "properties":
            value = {name: _schema(sub) for name, sub in value.items()}
        elif key == "items":
            value = _schema(value)
        out[key] = value
    return out


def operations(spec: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or op.get("operationId") not in OPERATIONS:
                continue
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                properties = body["schema"].get("properties", {})
                for operation, name in _SHALLOW:
                    if operation == op["operationId"] and name in properties:
                        properties[name] = {"type": properties[name].get("type", "object")}
            found[op["operationId"]] = {
                "method": method.upper(),
                "path": path,
                "parameters": {
                    p["name"]: {"in": p["in"], **_schema(p.get("schema", {}))}
                    for p in op.get("parameters", ())
                },
                "requestBody": _schema(body["schema"]) if body else None,
                "responses": sorted(op["responses"]),
            }
    missing = sorted(set(OPERATIONS) - set(found))
    if missing:
        raise SystemExit(f"not in the description: {', '.join(missing)}")
    return dict(sorted(found.items()))


def main(package: str) -> None:
    root = Path(package)
    version = json.loads((root / "package.json").read_text())["version"]
    generated = root / "generated"
    dotcom = operations(json.loads((generated / "api.github.com.deref.json").read_text()))
    differences = []
    for ghes in sorted(generated.glob("ghes-*.deref.json")):
        other = operations(json.loads(ghes.read_text()))
        for name, op in dotcom.items():
            theirs = other[name]
            # GHES may document fewer response codes; everything else must be the same.
            if {k: v for k, v in op.items() if k != "responses"} != {
                k: v for k, v in theirs.items() if k != "responses"
            }:
                differences.append(f"{ghes.name}: {name}")
    if differences:
        raise SystemExit("differs on GitHub Enterprise Server: " + ", ".join(differences))
    ghes_names = sorted(p.name for p in generated.glob("ghes-*.deref.json"))
    print(
        json.dumps(
            {
                "_source": (
                    f"@octokit/openapi {version}, generated/api.github.com.deref.json; the same "
                    f"on {', '.join(ghes_names)}. Rebuilt by scripts/github_openapi_subset.py."
                ),
                "operations": dotcom,
            },
            indent=1,
            sort_keys=False,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/package")
