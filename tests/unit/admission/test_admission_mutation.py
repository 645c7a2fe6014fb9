"""Admission's mutation: who created a Promotion, and who asked to abort it (Kargo's rules)."""

from __future__ import annotations

import json
from typing import Any

from promoter.admission.mutation import mutated_annotations
from promoter.chat.views import promotion_view
from promoter.resources import annotations as ann
from tests.support import objects

KARGO_ACTOR = "kargo.akuity.io/create-actor"
OURS_ACTOR = "longshoreman.dev/create-actor"


def promo(**annotations: str) -> dict[str, Any]:
    return objects.promotion("p", annotations=annotations or None)


def test_a_user_creating_a_promotion_is_recorded_as_kargo_records_them() -> None:
    assert mutated_annotations(promo(), None, "jane", control_plane=False) == {
        KARGO_ACTOR: "kubernetes:jane"
    }


def test_a_creator_written_by_the_user_is_replaced_by_the_requests() -> None:
    forged = promo(**{OURS_ACTOR: "github:octocat", KARGO_ACTOR: "admin"})
    assert mutated_annotations(forged, None, "jane", control_plane=False) == {
        KARGO_ACTOR: "kubernetes:jane"
    }


def test_longshoremans_own_writes_pass_as_they_are() -> None:
    ours = promo(**{OURS_ACTOR: "github:octocat"})
    assert mutated_annotations(ours, None, "system:serviceaccount:x:y", control_plane=True) is None


def test_an_update_keeps_the_creator_as_admitted() -> None:
    old = promo(**{KARGO_ACTOR: "kubernetes:jane"})
    rewritten = promo(**{KARGO_ACTOR: "kubernetes:mallory", OURS_ACTOR: "github:x"})
    assert mutated_annotations(rewritten, old, "mallory", control_plane=False) == {
        KARGO_ACTOR: "kubernetes:jane"
    }
    assert mutated_annotations(old, old, "jane", control_plane=False) is None


def test_an_abort_request_says_who_made_it() -> None:
    old = promo(**{KARGO_ACTOR: "kubernetes:jane"})
    aborted = promo(**{KARGO_ACTOR: "kubernetes:jane", "kargo.akuity.io/abort": "terminate"})
    annotations = mutated_annotations(aborted, old, "bob", control_plane=False)
    assert annotations is not None
    assert json.loads(annotations["kargo.akuity.io/abort"]) == {
        "action": "terminate",
        "actor": "kubernetes:bob",
    }
    assert ann.abort_request({"metadata": {"annotations": annotations}}) == "kubernetes:bob"
    # The same request again (a relabel by someone else) is not restamped.
    stamped = promo(**annotations)
    assert mutated_annotations(stamped, stamped, "eve", control_plane=False) is None


def test_the_recorded_user_is_who_the_views_show() -> None:
    annotations = mutated_annotations(promo(), None, "jane", control_plane=False)
    assert annotations is not None
    view = promotion_view(objects.promotion("p", annotations=annotations))
    assert view.actor == "kubernetes:jane"
