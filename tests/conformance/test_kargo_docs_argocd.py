"""Kargo's ``argocd-update`` and ``argocd-wait`` documentation examples, through our Argo CD rules.

Every step config in ``kargo-docs/argocd-update.*.yaml`` and ``argocd-wait.*.yaml`` parses with
:mod:`promoter.rules.argocd`, into what the documentation says it means; the documented Application
authorizes the Stage it names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from promoter.resources import annotations as ann
from promoter.rules.argocd import authorization_problem, parse_update_config, parse_wait_config
from tests.support import conformance

FIXTURES = conformance.root() / "kargo-docs"


def steps_in(doc: Any) -> Iterator[Mapping[str, Any]]:
    """Every promotion step in an example, at whatever depth it sits."""
    if isinstance(doc, Mapping):
        for key, value in doc.items():
            if key == "steps" and isinstance(value, list):
                yield from (s for s in value if isinstance(s, Mapping))
            else:
                yield from steps_in(value)
    elif isinstance(doc, list):
        for item in doc:
            yield from steps_in(item)


def example_configs(kind: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(file name, config) of every ``kind`` step in the examples of that step."""
    out = []
    for path in conformance.files("kargo-docs", f"{kind}.*.yaml"):
        for step in steps_in(yaml.safe_load(path.read_text())):
            if step.get("uses") == kind:
                out.append((path.name, step["config"]))
    return conformance.cases(out, f"{kind} step configs in kargo-docs/{kind}.*.yaml")


UPDATES = example_configs("argocd-update")
WAITS = example_configs("argocd-wait")


@pytest.mark.parametrize(("name", "config"), UPDATES, ids=lambda v: str(v)[:24])
def test_kargo_update_examples_parse(name: str, config: Mapping[str, Any]) -> None:
    updates = parse_update_config(config)
    assert updates and all(u.ref.namespace == "argocd" for u in updates)
    for u in updates:
        assert bool(u.ref.name) != (u.ref.selector is not None)


def test_kargo_update_examples_cover_every_shape() -> None:
    configs = dict(UPDATES)
    chart = parse_update_config(configs["argocd-update.4.yaml"])[0].sources[0]
    assert chart.chart == "my-chart" and chart.update_target_revision
    kustomize = parse_update_config(configs["argocd-update.5.yaml"])[0].sources[0]
    assert kustomize.kustomize_images[0].tag == "${{ imageFrom(vars.imageRepo).Tag }}"
    helm = parse_update_config(configs["argocd-update.6.yaml"])[0].sources[0]
    assert helm.helm_images[0].key == "image.tag"
    refresh = parse_update_config(configs["argocd-update.10.yaml"])[0]
    assert refresh.sources == () and refresh.ref.selector is not None


@pytest.mark.parametrize(
    ("example", "selector"),
    [
        ("argocd-update.7.yaml", "environment=production,team=platform"),
        ("argocd-update.8.yaml", "environment in (staging,production)"),
        (
            "argocd-update.9.yaml",
            "team=platform,environment in (staging,production),managed-by notin (legacy-system)",
        ),
        ("argocd-update.10.yaml", "auto-refresh=enabled"),
        ("argocd-update.11.yaml", "app=my-microservice,deployment-group=blue"),
    ],
)
def test_kargo_selector_examples_become_label_selector_strings(example: str, selector: str) -> None:
    ref = parse_update_config(dict(UPDATES)[example])[0].ref
    assert ref.selector is not None and ref.selector.to_label_selector() == selector


@pytest.mark.parametrize(("name", "config"), WAITS)
def test_kargo_wait_examples_parse(name: str, config: Mapping[str, Any]) -> None:
    waits = parse_wait_config(config)
    expected = {
        "argocd-wait.1.yaml": ("health", "sync", "operation"),
        "argocd-wait.2.yaml": ("operation",),
        "argocd-wait.3.yaml": ("health", "sync", "operation"),
        "argocd-wait.4.yaml": ("suspended",),
    }[name]
    assert waits[0].wait_for == expected


def test_kargo_documentation_application_is_authorized_for_its_stage() -> None:
    manifest = yaml.safe_load((FIXTURES / "argocd-update.2.yaml").read_text())
    assert authorization_problem(manifest, "kargo-demo", "test") is None
    denied = authorization_problem(manifest, "kargo-demo", "prod")
    assert denied is not None and "authorizes 'kargo-demo:test'" in denied
    # Example 1 documents the annotation's name and value form.
    (annotation,) = yaml.safe_load((FIXTURES / "argocd-update.1.yaml").read_text())
    assert annotation == ann.KARGO_AUTHORIZED_STAGE
