"""Kargo objects as plain dicts, built one way for the whole suite.

One builder per kind (:func:`stage`, :func:`freight`, :func:`promotion`, :func:`warehouse`,
:func:`promotion_task`, :func:`project_config`, :func:`cluster_config`) with Kargo's v1alpha1
shape and the fewest fields a test must name: a
Stage that takes Warehouse ``w``'s Freight directly, a Promotion of Freight ``f1``, a Warehouse
with no subscriptions, all in project ``p``. A test names what it is about (``upstream=``,
``phase=``, ``annotations=``...) and nothing else, so reading one says what matters to it. A test
module may wrap a builder in a one-line function that sets its own defaults; it does not write a
second dict of the same kind by hand. Pipeline pictures (Stages holding Freight, a Warehouse
with discoveries) are in :mod:`tests.support.pipelines`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

API_VERSION = "kargo.akuity.io/v1alpha1"
# The group our CRDs serve the same kinds under (app.controller.kube's, written out so these
# builders stay free of the Kubernetes client). The controller's client fills it in on every
# write; a raw client or kubectl sends the body as written, so those tests use served(), and
# fail if the two ever part.
SERVED_API_VERSION = "longshoreman.dev/v1alpha1"
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
    uid: str | None = None,
    generation: int | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "namespace": namespace}
    if created is not None:
        out["creationTimestamp"] = created
    if uid is not None:
        out["uid"] = uid
    if generation is not None:
        out["generation"] = generation
    if labels is not None:
        out["labels"] = dict(labels)
    if annotations is not None:
        out["annotations"] = dict(annotations)
    return out


def served(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` under the API group our CRDs serve it as, for a raw client or kubectl."""
    return {**obj, "apiVersion": SERVED_API_VERSION}


def stage(
    name: str,
    *,
    namespace: str = NS,
    warehouse: str = WAREHOUSE,
    upstream: Sequence[str] = (),
    sources: Mapping[str, Any] | None = None,
    steps: Sequence[Any] | None = None,
    template_vars: Sequence[Mapping[str, Any]] | None = None,
    verification: Sequence[str | Mapping[str, Any]] = (),
    verification_args: Any = None,
    analysis_run_metadata: Any = None,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    generation: int | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Stage taking ``warehouse``'s Freight directly, or from the ``upstream`` Stages (or as
    ``sources`` says, soak time and all); ``steps`` (and ``template_vars``) its promotion
    template; ``verification`` the AnalysisTemplates it verifies with (a name, or a whole
    reference), with ``verification_args`` and ``analysis_run_metadata``. Other spec fields
    (``vars=``...) go in as given."""
    if sources is None:
        sources = {"stages": list(upstream)} if upstream else {"direct": True}
    body: dict[str, Any] = {
        "requestedFreight": [
            {"origin": {"kind": "Warehouse", "name": warehouse}, "sources": dict(sources)}
        ]
    }
    if steps is not None or template_vars is not None:
        template: dict[str, Any] = {"steps": list(steps or ())}
        if template_vars is not None:
            template["vars"] = [dict(v) for v in template_vars]
        body["promotionTemplate"] = {"spec": template}
    if verification:
        refs = [{"name": t} if isinstance(t, str) else dict(t) for t in verification]
        body["verification"] = {"analysisTemplates": refs}
        # Both as given: a test may hand in junk on purpose.
        if verification_args is not None:
            body["verification"]["args"] = verification_args
        if analysis_run_metadata is not None:
            body["verification"]["analysisRunMetadata"] = analysis_run_metadata
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Stage",
        "metadata": _metadata(
            name, namespace, annotations=annotations, labels=labels, generation=generation
        ),
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
    labels: Mapping[str, str] | None = None,
    uid: str | None = None,
    commits: Sequence[Mapping[str, Any]] = (),
    images: Sequence[Mapping[str, Any]] = (),
    charts: Sequence[Mapping[str, Any]] = (),
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Freight from ``warehouse`` with the artifacts given."""
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Freight",
        "metadata": _metadata(name, namespace, created=created, labels=labels, uid=uid),
        "origin": {"kind": "Warehouse", "name": warehouse},
    }
    if alias is not None:
        out["alias"] = alias
    if commits:
        out["commits"] = [dict(c) for c in commits]
    if images:
        out["images"] = [dict(i) for i in images]
    if charts:
        out["charts"] = [dict(c) for c in charts]
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
    uid: str | None = None,
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
            name, namespace, created=created, labels=labels, annotations=annotations, uid=uid
        ),
        "spec": {**body, **spec},
    }
    if status is not None or phase is not None:
        out["status"] = {**(status or {}), **({"phase": phase} if phase is not None else {})}
    return out


def warehouse(
    name: str = WAREHOUSE,
    *,
    namespace: str = NS,
    subscriptions: Sequence[Mapping[str, Any]] = (),
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Warehouse with the ``subscriptions`` given (``{"image": {...}}``, ``{"git": {...}}``,
    ``{"chart": {...}}``); other spec fields (``interval=``, ``freightCreationCriteria=``...)
    go in as given."""
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Warehouse",
        "metadata": _metadata(name, namespace),
        "spec": {"subscriptions": [dict(s) for s in subscriptions], **spec},
    }
    if status is not None:
        out["status"] = dict(status)
    return out


def promotion_task(
    name: str,
    steps: Sequence[Any],
    *,
    vars: Sequence[Mapping[str, Any]] = (),
    kind: str = "PromotionTask",
    namespace: str = NS,
) -> dict[str, Any]:
    """A PromotionTask (or, with ``kind="ClusterPromotionTask"``, a cluster-scoped one, which
    has no namespace) with the ``vars`` and ``steps`` given."""
    metadata = _metadata(name, namespace)
    if kind == "ClusterPromotionTask":
        del metadata["namespace"]
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": {"vars": [dict(v) for v in vars], "steps": list(steps)},
    }


def project_config(
    namespace: str = NS,
    *,
    policies: Sequence[Mapping[str, Any]] = (),
    windows: Sequence[Mapping[str, Any]] = (),
    **spec: Any,
) -> dict[str, Any]:
    """The project's ProjectConfig (named after it, in its namespace): ``policies`` are its
    ``promotionPolicies``, ``windows`` its ``promotionWindows``; other spec fields as given."""
    body: dict[str, Any] = dict(spec)
    if policies:
        body["promotionPolicies"] = [dict(p) for p in policies]
    if windows:
        body["promotionWindows"] = [dict(w) for w in windows]
    return {
        "apiVersion": API_VERSION,
        "kind": "ProjectConfig",
        "metadata": {"name": namespace, "namespace": namespace},
        "spec": body,
    }


def cluster_config(*, windows: Sequence[Mapping[str, Any]] = (), **spec: Any) -> dict[str, Any]:
    """The cluster's one ClusterConfig (named ``cluster``)."""
    body: dict[str, Any] = dict(spec)
    if windows:
        body["promotionWindows"] = [dict(w) for w in windows]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterConfig",
        "metadata": {"name": "cluster"},
        "spec": body,
    }
