"""Admission for Longshoreman's kinds, carried to the two places an API server asks for it:

- the embedded cluster's emulator calls :func:`problems_of` in-process on every write
  (``app/embedded.py``);
- a real kube-apiserver calls ``POST /admission/validate`` and ``POST /admission/mutate`` with
  an ``admission.k8s.io/v1`` ``AdmissionReview`` (deploy/'s Validating- and
  MutatingWebhookConfiguration); :func:`review_response` and :func:`mutation_response`
  answer them.

Both ask the one pure decision, ``promoter.admission.validate``; this module only gathers its
facts (the objects it reads, the step kinds, the time) and puts its problems in the
AdmissionReview's shape. Objects are read by plural (in our group) through a :class:`Reader`:
the emulator's store, or the controller's informer caches, as Kargo's webhooks read their
manager's cache.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from promoter.admission import Facts, Problem, validate
from promoter.admission.mutation import mutated_annotations
from promoter.rules.limits import Limits
from promoter.steps.registry import builtin_registry

JsonObject = dict[str, Any]

# The kinds admission reads, by kind: their plurals in our group.
READ_PLURALS: Mapping[str, str] = {
    "Stage": "stages",
    "Freight": "freights",
    "PromotionTask": "promotiontasks",
    "ClusterPromotionTask": "clusterpromotiontasks",
    "ProjectConfig": "projectconfigs",
    "ClusterConfig": "clusterconfigs",
}


class Reader(Protocol):
    """One stored object of our group by plural (namespace empty when cluster-scoped)."""

    def __call__(self, plural: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


def step_kinds() -> frozenset[str]:
    """The step kinds a Stage may use: the server's built-in registry."""
    return frozenset(builtin_registry())


def problems_of(
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    read: Reader,
    kinds: frozenset[str],
    now: datetime,
    aliased: Callable[[str, str], Sequence[Mapping[str, Any]]],
    limits: Limits,
) -> list[Problem]:
    """``promoter.admission.validate`` over objects read with ``read`` (and Freight by alias
    with ``aliased(namespace, alias)``)."""

    def lookup(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        plural = READ_PLURALS.get(kind)
        return None if plural is None else read(plural, namespace, name)

    facts = Facts(lookup=lookup, step_kinds=kinds, now=now, aliased=aliased, limits=limits)
    return validate(obj, old, facts)


def review_response(
    review: Mapping[str, Any],
    read: Reader,
    kinds: frozenset[str],
    now: datetime,
    aliased: Callable[[str, str], Sequence[Mapping[str, Any]]],
    limits: Limits,
) -> JsonObject:
    """The ``AdmissionReview`` answering ``review``: allowed, or refused with every problem
    (``status.details.causes``, one per field) in a 422 Invalid status, as Kargo's webhooks
    answer through controller-runtime."""
    request = review.get("request") or {}
    uid = str(request.get("uid") or "")
    obj = request.get("object")
    old = request.get("oldObject")
    problems: list[Problem] = []
    if isinstance(obj, Mapping) and request.get("operation") in ("CREATE", "UPDATE"):
        before = old if isinstance(old, Mapping) else None
        problems = problems_of(obj, before, read, kinds, now, aliased, limits)
    response: JsonObject = {"uid": uid, "allowed": not problems}
    if problems:
        kind = str(request.get("kind", {}).get("kind") or (obj or {}).get("kind") or "")
        group = str(request.get("kind", {}).get("group") or "")
        name = str(request.get("name") or ((obj or {}).get("metadata") or {}).get("name") or "")
        rendered = [str(p) for p in problems]
        summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
        qualified = f"{kind}.{group}" if group else kind
        response["status"] = {
            "status": "Failure",
            "code": 422,
            "reason": "Invalid",
            "message": f"{qualified} {json.dumps(name)} is invalid: {summary}",
            "details": {
                "name": name,
                "group": group,
                "kind": kind,
                "causes": [
                    {"reason": p.reason, "message": p.message, "field": p.field} for p in problems
                ],
            },
        }
    return {
        "apiVersion": str(review.get("apiVersion") or "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }


def mutation_response(review: Mapping[str, Any], control_plane_users: frozenset[str]) -> JsonObject:
    """The ``AdmissionReview`` answering a mutating call: allowed, with a JSONPatch replacing
    the Promotion's annotations when ``promoter.admission.mutation`` changes them."""
    request = review.get("request") or {}
    response: JsonObject = {"uid": str(request.get("uid") or ""), "allowed": True}
    obj = request.get("object")
    old = request.get("oldObject")
    user = str((request.get("userInfo") or {}).get("username") or "")
    if isinstance(obj, Mapping) and request.get("operation") in ("CREATE", "UPDATE"):
        annotations = mutated_annotations(
            obj,
            old if isinstance(old, Mapping) else None,
            user,
            control_plane=user in control_plane_users,
        )
        if annotations is not None:
            patch = [{"op": "add", "path": "/metadata/annotations", "value": annotations}]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {
        "apiVersion": str(review.get("apiVersion") or "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }
