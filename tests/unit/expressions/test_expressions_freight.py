"""Kargo's Freight functions: warehouse(), commitFrom(), imageFrom(), chartFrom()."""

from __future__ import annotations

from typing import Any

import pytest

from promoter.expressions import ExpressionError, evaluate_expression, freight_functions
from tests.support import objects


def freight(origin: str, **artifacts: Any) -> dict[str, Any]:
    return objects.freight(f"{origin}-freight", warehouse=origin, **artifacts)


FRONTEND = freight(
    "frontend",
    commits=[{"repoURL": "https://github.com/example/app.git", "id": "fe01", "branch": "main"}],
    images=[{"repoURL": "ghcr.io/example/frontend", "tag": "1.10", "digest": "sha256:fe"}],
    charts=[{"repoURL": "oci://ghcr.io/example/charts/frontend", "version": "0.1.0"}],
)
BACKEND = freight(
    "backend",
    commits=[{"repoURL": "https://github.com/example/app.git", "id": "be02"}],
    images=[{"repoURL": "ghcr.io/example/backend", "tag": "2.0.0", "digest": "sha256:be"}],
    charts=[
        {"repoURL": "oci://ghcr.io/example/charts", "name": "backend", "version": "0.2.0"},
        {"repoURL": "https://charts.example.com", "name": "backend", "version": "0.3.0"},
    ],
)


def ev(source: str, freights: list[dict[str, Any]], **kwargs: Any) -> Any:
    return evaluate_expression(source, {"vars": {}}, freight_functions(freights, **kwargs))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('warehouse("w")', {"kind": "Warehouse", "name": "w"}),
        ('imageFrom("ghcr.io/example/frontend").Tag', "1.10"),
        ('imageFrom("ghcr.io/example/frontend/").Digest', "sha256:fe"),
        (
            'imageFrom("ghcr.io/example/backend")',
            {"repoURL": "ghcr.io/example/backend", "tag": "2.0.0", "digest": "sha256:be"},
        ),
        ('commitFrom("https://github.com/example/app", warehouse("frontend")).ID', "fe01"),
        ('commitFrom("https://GitHub.com/example/app.git/", warehouse("backend")).ID', "be02"),
        (
            'commitFrom("https://github.com/example/app.git", warehouse("backend"))',
            # Kargo's GitCommit JSON: its field names, empty fields left out (omitempty).
            {"repoURL": "https://github.com/example/app.git", "id": "be02"},
        ),
        ('commitFrom("https://github.com/example/app.git", warehouse("backend")).Branch', ""),
        (
            'commitFrom("https://github.com/example/app.git", warehouse("backend")).RepoURL',
            "https://github.com/example/app.git",
        ),
        ('imageFrom("ghcr.io/example/backend").Annotations', {}),
        (
            'toJSON(imageFrom("ghcr.io/example/backend"))',
            '{\n  "digest": "sha256:be",\n  "repoURL": "ghcr.io/example/backend",\n'
            '  "tag": "2.0.0"\n}',
        ),
        (
            'asYAML(commitFrom("https://github.com/example/app.git", warehouse("backend")))',
            '"id: be02\nrepoURL: https://github.com/example/app.git\n"',
        ),
        ('warehouse("w").Name', "w"),
        ('chartFrom("oci://ghcr.io/example/charts/frontend").Version', "0.1.0"),
        ('chartFrom("oci://ghcr.io/example/charts/backend").Version', "0.2.0"),
        ('chartFrom("oci://ghcr.io/example/charts", "backend").Version', "0.2.0"),
        ('chartFrom("https://charts.example.com", "backend").Version', "0.3.0"),
        (
            'chartFrom("https://charts.example.com/", "backend", warehouse("backend")).Name',
            "backend",
        ),
        (
            'chartFrom("oci://ghcr.io/example/charts/frontend", warehouse("frontend")).Version',
            "0.1.0",
        ),
        # not found: nil, so ?. and ?? work
        ('imageFrom("ghcr.io/example/nope")', None),
        ('imageFrom("ghcr.io/example/nope")?.Tag ?? "latest"', "latest"),
        ('commitFrom("https://github.com/example/nope")', None),
        ('imageFrom("ghcr.io/example/frontend", warehouse("backend"))', None),
        ('chartFrom("oci://ghcr.io/example/charts/frontend", warehouse("backend"))', None),
    ],
)
def test_freight_functions(source: str, expected: Any) -> None:
    assert ev(source, [FRONTEND, BACKEND]) == expected


def test_ambiguous_origin_asks_for_warehouse() -> None:
    with pytest.raises(ExpressionError) as caught:
        ev('commitFrom("https://github.com/example/app.git").ID', [FRONTEND, BACKEND])
    message = str(caught.value)
    assert "multiple requested Freight could potentially provide a commit" in message
    assert "'frontend'" in message and "'backend'" in message
    assert 'warehouse("name")' in message


def test_single_origin_needs_no_warehouse() -> None:
    assert ev('commitFrom("https://github.com/example/app.git").ID', [BACKEND]) == "be02"


def test_chart_that_no_origin_can_provide_is_an_error_as_in_kargo() -> None:
    with pytest.raises(ExpressionError, match="not found in referenced Freight"):
        ev('chartFrom("oci://ghcr.io/example/charts/nope")', [FRONTEND, BACKEND])


def test_origin_resolution_uses_warehouse_subscriptions_when_given() -> None:
    frontend_subscriptions = [
        {"git": {"repoURL": "https://github.com/example/app"}},
        {"image": {"repoURL": "ghcr.io/example/frontend"}},
    ]
    warehouses = {
        "frontend": {"spec": {"subscriptions": frontend_subscriptions}},
        "backend": {"spec": {"subscriptions": [{"image": {"repoURL": "ghcr.io/example/backend"}}]}},
    }
    # Only "frontend" subscribes to the repo, so BACKEND's commit is not a candidate.
    found = ev(
        'commitFrom("https://github.com/example/app").ID',
        [FRONTEND, BACKEND],
        warehouses=warehouses,
    )
    assert found == "fe01"
    # Subscribed, but its Freight has not arrived: nil rather than an error.
    assert ev('imageFrom("ghcr.io/example/frontend")', [BACKEND], warehouses=warehouses) is None
    both = {**warehouses, "backend": warehouses["frontend"]}
    with pytest.raises(ExpressionError, match="multiple requested Freight could potentially"):
        ev('imageFrom("ghcr.io/example/frontend")', [FRONTEND], warehouses=both)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('warehouse("")', "non-empty string"),
        ("warehouse(1)", "non-empty string"),
        ("imageFrom(1)", "first argument must be a string"),
        ('imageFrom("x", "frontend")', 'must come from warehouse("name")'),
        ('commitFrom("x", {"name": "frontend"})', 'must come from warehouse("name")'),
        ('chartFrom("x", warehouse("a"), warehouse("b"))', "second must be the chart name"),
        ('chartFrom("a", "b", "c", "d")', "expects 1 to 3 arguments"),
        ("imageFrom()", "imageFrom()"),
    ],
)
def test_argument_errors(source: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ev(source, [FRONTEND, BACKEND])
