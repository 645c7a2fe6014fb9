"""Kargo objects as plain dicts, built one way for the whole suite.

One builder per kind (:func:`stage`, :func:`freight`, :func:`promotion`) with Kargo's v1alpha1
shape and the fewest fields a test must name: a Stage that takes Warehouse ``w``'s Freight
directly, a Promotion of Freight ``f1``, all in project ``p``. A test names what it is about
(``upstream=``, ``phase=``, ``annotations=``...) and nothing else, so reading one says what
matters to it. Pipeline pictures (Stages holding Freight, a Warehouse with discoveries) are in
:mod:`tests.support.pipelines`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

API_VERSION = "kargo.akuity.io/v1alpha1"
NS = "p"
WAREHOUSE = "w"
FREIGHT = "f1"


def _metadata(
    name: str,
    namespace: str,
    *,
    created: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "namespace": namespace}
    if created is not None:
        out["creationTimestamp"] = created
    if labels is not None:
        out["labels"] = dict(labels)
    if annotations is not None:
        out["annotations"] = dict(annotations)
    return out


def stage(
    name: str,
    *,
    namespace: str = NS,
    warehouse: str = WAREHOUSE,
    upstream: Sequence[str] = (),
    sources: Mapping[str, Any] | None = None,
    steps: Sequence[Any] | None = None,
    verification: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Stage taking ``warehouse``'s Freight directly, or from the ``upstream`` Stages (or as
    ``sources`` says, soak time and all); ``steps`` its promotion template, ``verification`` the
    AnalysisTemplates it verifies with."""
    if sources is None:
        sources = {"stages": list(upstream)} if upstream else {"direct": True}
    body: dict[str, Any] = {
        "requestedFreight": [
            {"origin": {"kind": "Warehouse", "name": warehouse}, "sources": dict(sources)}
        ]
    }
    if steps is not None:
        body["promotionTemplate"] = {"spec": {"steps": list(steps)}}
    if verification:
        body["verification"] = {"analysisTemplates": [{"name": t} for t in verification]}
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Stage",
        "metadata": _metadata(name, namespace, annotations=annotations),
        "spec": {**body, **spec},
    }
    if status is not None:
        out["status"] = dict(status)
    return out


def freight(
    name: str = FREIGHT,
    *,
    namespace: str = NS,
    alias: str | None = None,
    warehouse: str = WAREHOUSE,
    created: str | None = None,
    commits: Sequence[Mapping[str, Any]] = (),
    images: Sequence[Mapping[str, Any]] = (),
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Freight from ``warehouse`` with the artifacts given."""
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Freight",
        "metadata": _metadata(name, namespace, created=created),
        "origin": {"kind": "Warehouse", "name": warehouse},
    }
    if alias is not None:
        out["alias"] = alias
    if commits:
        out["commits"] = [dict(c) for c in commits]
    if images:
        out["images"] = [dict(i) for i in images]
    if status is not None:
        out["status"] = dict(status)
    return out


def promotion(
    name: str,
    stage_name: str = "test",
    *,
    namespace: str = NS,
    freight: str = FREIGHT,
    phase: str | None = None,
    steps: Sequence[Any] | None = None,
    created: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Promotion of ``freight`` into ``stage_name``; ``phase`` (or a whole ``status``) when
    the test needs one, ``steps`` when it is not to be inflated from the Stage."""
    body: dict[str, Any] = {"stage": stage_name, "freight": freight}
    if steps is not None:
        body["steps"] = list(steps)  # as given: a test may hand in junk on purpose
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Promotion",
        "metadata": _metadata(
            name, namespace, created=created, labels=labels, annotations=annotations
        ),
        "spec": {**body, **spec},
    }
    if status is not None or phase is not None:
        out["status"] = {**(status or {}), **({"phase": phase} if phase is not None else {})}
    return out
