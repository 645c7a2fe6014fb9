"""The project's own test data under tests/fixtures/, and the lookups tests use on it.

Everything there was written for these tests, small and in the shapes its owners document:
Kargo-style manifests (``kargo/``), GitHub webhook bodies (``github/``, read through
:func:`tests.support.github.fixture`) and Argo Rollouts analysis templates (``argo/``). Data written
by others is only read by the conformance group (:mod:`tests.support.conformance`).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KARGO = FIXTURES / "kargo"
ARGO = FIXTURES / "argo"
GITHUB = FIXTURES / "github"
WEBHOOKS = FIXTURES / "webhooks"


def kargo_documents(name: str) -> list[dict[str, Any]]:
    """The documents of one manifest file under tests/fixtures/kargo/."""
    return [d for d in yaml.safe_load_all((KARGO / name).read_text()) if d]


def kargo_manifests() -> list[tuple[str, dict[str, Any]]]:
    """Every document under tests/fixtures/kargo/, as (``file#index``, document)."""
    found = [
        (f"{path.name}#{i}", doc)
        for path in sorted(KARGO.glob("*.yaml"))
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d)
    ]
    if not found:
        raise FileNotFoundError(f"no Kargo manifests in {KARGO}")
    return found


def steps_of(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The promotion steps of a Stage (its promotion template) or a (Cluster)PromotionTask."""
    spec = document.get("spec") or {}
    if document.get("kind") == "Stage":
        spec = (spec.get("promotionTemplate") or {}).get("spec") or {}
    return list(spec.get("steps") or [])


def kargo_step(name: str, alias: str) -> dict[str, Any]:
    """A copy of the step ``as: alias`` in a manifest file of tests/fixtures/kargo/."""
    for document in kargo_documents(name):
        for step in steps_of(document):
            if step.get("as") == alias:
                return copy.deepcopy(step)
    raise KeyError(f"no step {alias!r} in {KARGO / name}")


@functools.cache
def _analysis_templates() -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for path in sorted(ARGO.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") in ("AnalysisTemplate", "ClusterAnalysisTemplate"):
                found[(doc["kind"], doc["metadata"]["name"])] = doc
    if not found:
        raise FileNotFoundError(f"no analysis templates in {ARGO}")
    return found


def analysis_template(name: str, kind: str = "AnalysisTemplate") -> dict[str, Any]:
    """A copy of one of our templates, e.g. ``analysis_template("multiple-job")``."""
    return copy.deepcopy(_analysis_templates()[(kind, name)])


def analysis_templates() -> Iterator[dict[str, Any]]:
    """Copies of all our templates, in file order."""
    for template in _analysis_templates().values():
        yield copy.deepcopy(template)


def webhook_body(name: str) -> dict[str, Any]:
    """A fresh copy of a registry's webhook body under tests/fixtures/webhooks/ (e.g.
    ``dockerhub.push``), in the shape its sender documents."""
    data: dict[str, Any] = json.loads((WEBHOOKS / f"{name}.json").read_text())
    return data
