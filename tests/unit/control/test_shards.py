"""Shards: Kargo's TestGetShardRequirement and TestResponsibleFor tables, and the label rule.

A label selector is checked by what it matches, as Kargo's test does with ``req.Matches``:
the API server emulator's own selector parser evaluates ours here.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.apiserver.selectors import labels_match, parse_label_selector
from promoter.control.shards import SHARD_LABEL, Shard, label_patch
from tests.support import objects


def _labelled(shard: str | None) -> dict[str, Any]:
    return objects.stage("s", labels={SHARD_LABEL: shard} if shard is not None else None)


def _matches(selector: str, shard: str | None) -> bool:
    return labels_match(parse_label_selector(selector), _labelled(shard))


# Kargo's TestGetShardRequirement: (shard name, default?) -> what the selector matches.
@pytest.mark.parametrize(
    ("name", "is_default", "unlabelled", "same", "other"),
    [
        pytest.param("", True, True, False, False, id="no shard name + default controller"),
        # Without a name this controller is the de facto default, whatever the flag says.
        pytest.param("", False, True, False, False, id="no shard name + not default"),
        pytest.param("fake-shard", False, False, True, False, id="shard name + not default"),
    ],
)
def test_the_label_selector_of_a_shard(
    name: str, is_default: bool, unlabelled: bool, same: bool, other: bool
) -> None:
    selector = Shard(name, is_default).label_selector()
    assert selector is not None
    assert _matches(selector, None) is unlabelled
    assert _matches(selector, "fake-shard" if name == "" else name) is same
    assert _matches(selector, "different-fake-shard") is other


def test_a_named_default_controller_has_no_one_selector_and_caches_everything() -> None:
    # "this label or none" is not a label selector: Kargo returns no requirement and filters.
    assert Shard("fake-shard", is_default=True).label_selector() is None


# Kargo's TestResponsibleFor, case for case.
@pytest.mark.parametrize(
    ("name", "is_default", "label", "responsible"),
    [
        ("", True, "fake-shard", False),
        ("", True, None, True),
        ("", False, "fake-shard", False),
        ("", False, None, True),
        ("right-shard", True, "wrong-shard", False),
        ("right-shard", True, "right-shard", True),
        ("right-shard", True, None, True),
        ("right-shard", False, "wrong-shard", False),
        ("right-shard", False, "right-shard", True),
        ("right-shard", False, None, False),
    ],
)
def test_which_objects_a_controller_is_responsible_for(
    name: str, is_default: bool, label: str | None, responsible: bool
) -> None:
    assert Shard(name, is_default).responsible_for(_labelled(label)) is responsible


def test_a_default_controller_caches_every_shard_and_a_shard_only_its_own() -> None:
    # The default collects Freight, which needs every Stage; it filters by responsibility.
    assert Shard().cache_selector() is None
    assert Shard("b", is_default=True).cache_selector() is None
    assert Shard("a").cache_selector() == f"{SHARD_LABEL}=a"


def test_each_shard_elects_its_own_leader() -> None:
    assert Shard().lease_name("longshoreman-controller") == "longshoreman-controller"
    assert Shard("a").lease_name("longshoreman-controller") == "longshoreman-controller-a"
    assert Shard("b", is_default=True).lease_name("l") == "l-b"


@pytest.mark.parametrize(
    ("label", "wanted", "patch"),
    [
        pytest.param(None, "a", {"metadata": {"labels": {SHARD_LABEL: "a"}}}, id="mirrored"),
        pytest.param("a", "a", None, id="already right: no write"),
        pytest.param("a", "b", {"metadata": {"labels": {SHARD_LABEL: "b"}}}, id="moved"),
        pytest.param("a", "", {"metadata": {"labels": {SHARD_LABEL: None}}}, id="removed"),
        pytest.param(None, "", None, id="no shard, no label: no write"),
    ],
)
def test_the_shard_label_follows_the_wanted_shard(
    label: str | None, wanted: str, patch: dict[str, Any] | None
) -> None:
    assert label_patch(_labelled(label), wanted) == patch
