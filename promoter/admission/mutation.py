"""The mutating half of admission: who created a Promotion, and who asked to abort it.

Kargo's promotion webhook (``pkg/webhook/kubernetes/promotion``) records the requesting user
of a Promotion created by anyone but its own control plane as ``kargo.akuity.io/create-actor:
kubernetes:<username>``, keeps that annotation as it was on every update (nobody rewrites who
created it), and stamps an abort request that changed with the user who made the change. We
do the same, so ``kubectl create`` Promotions say who made them on the pages, in chat and in
"Aborted by ...". Since our readers prefer ``longshoreman.dev/create-actor``, one a user
writes themselves is dropped too: the creator is the admission request's, never the body's.

Longshoreman's own writes (its service account: the chat front ends and auto-promotion
record the real actor themselves) pass unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from promoter.resources import annotations as ann

__all__ = ["KUBERNETES_ACTOR_PREFIX", "mutated_annotations"]

KUBERNETES_ACTOR_PREFIX = "kubernetes:"  # Kargo's EventActorKubernetesUserPrefix


def _annotations(obj: Mapping[str, Any] | None) -> dict[str, str]:
    raw = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def mutated_annotations(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, user: str, *, control_plane: bool
) -> dict[str, str] | None:
    """The Promotion's annotations as admission leaves them, or None when they stay as sent.

    ``old`` is the stored object on an update; ``user`` the request's username;
    ``control_plane`` whether the request is Longshoreman's own.
    """
    if obj.get("kind") != "Promotion":
        return None
    current = _annotations(obj)
    wanted = dict(current)
    actor = KUBERNETES_ACTOR_PREFIX + user if user else ""
    if old is None:
        if not control_plane and actor:
            for key in ann.CREATE_ACTOR_ANNOTATIONS:
                wanted.pop(key, None)
            wanted[ann.CREATE_ACTOR_ANNOTATIONS[1]] = actor
    else:
        before = _annotations(old)
        for key in ann.CREATE_ACTOR_ANNOTATIONS:
            if key in before:
                wanted[key] = before[key]
            else:
                wanted.pop(key, None)
    if not control_plane and actor:
        for key in ann.ABORT_ANNOTATIONS:
            if key in wanted and wanted[key] != _annotations(old).get(key):
                wanted[key] = json.dumps({"action": "terminate", "actor": actor})
    return wanted if wanted != current else None
