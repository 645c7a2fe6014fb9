"""The Freight diff, decided purely: which ranges to ask about, and the view built from facts."""

from __future__ import annotations

from typing import Any

import pytest

from promoter.chat.diff import (
    Commit,
    PullRequest,
    RangeFacts,
    RangeKey,
    freight_diff,
    ranges_to_fetch,
)
from promoter.warehouses.selection import REVISION_LABEL, SOURCE_LABEL

APP = "https://github.com/acme/app"
IMAGE = "ghcr.io/acme/app"
CHART = "oci://ghcr.io/acme/charts"


def freight(
    name: str,
    created: str = "2026-01-01T00:00:00Z",
    *,
    commit: str | None = None,
    image: tuple[str, str] | None = None,  # (tag, revision label)
    chart: str | None = None,
) -> dict[str, Any]:
    f: dict[str, Any] = {"metadata": {"name": name, "creationTimestamp": created}}
    if commit is not None:
        f["commits"] = [{"repoURL": APP, "id": commit}]
    if image is not None:
        tag, revision = image
        labels = {SOURCE_LABEL: APP, REVISION_LABEL: revision} if revision else {}
        f["images"] = [{"repoURL": IMAGE, "tag": tag, "digest": "", "annotations": labels}]
    if chart is not None:
        f["charts"] = [{"repoURL": CHART, "name": "app", "version": chart}]
    return f


OLD, NEW = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"


@pytest.mark.parametrize(
    ("current", "new", "expected"),
    [
        # A new commit: the range from the Stage's to the Freight's.
        (freight("a", commit="c1"), freight("b", NEW, commit="c2"), [RangeKey(APP, "c1", "c2")]),
        # The same commit: nothing to ask.
        (freight("a", commit="c1"), freight("b", NEW, commit="c1"), []),
        # The Stage runs nothing yet: nothing to compare against.
        (None, freight("b", commit="c2"), []),
        # An image naming its source: the range of its revisions.
        (
            freight("a", image=("1.0", "r1")),
            freight("b", NEW, image=("1.1", "r2")),
            [RangeKey(APP, "r1", "r2")],
        ),
        # An image without the labels: versions only.
        (freight("a", image=("1.0", "")), freight("b", NEW, image=("1.1", "")), []),
        # A commit and an image of the same source and revisions: asked once.
        (
            freight("a", commit="c1", image=("1.0", "c1")),
            freight("b", NEW, commit="c2", image=("1.1", "c2")),
            [RangeKey(APP, "c1", "c2")],
        ),
        # Backwards (the new Freight is older): the range the Stage leaves.
        (
            freight("b", NEW, commit="c2"),
            freight("a", OLD, commit="c1"),
            [RangeKey(APP, "c1", "c2")],
        ),
        # Charts have no commits.
        (freight("a", chart="1.0.0"), freight("b", NEW, chart="1.1.0"), []),
    ],
)
def test_ranges_to_fetch(
    current: dict[str, Any] | None, new: dict[str, Any], expected: list[RangeKey]
) -> None:
    assert list(ranges_to_fetch(current, new)) == expected


def test_the_view_shows_every_artifact_old_to_new_with_the_commits_and_pulls_known() -> None:
    current = freight("a", commit="c1", image=("1.0", "c1"), chart="1.0.0")
    new = freight("b", NEW, commit="c2", image=("1.1", "c2"), chart="1.1.0")
    pull = PullRequest(7, "Fix login", "https://github.com/acme/app/pull/7", "alice", True)
    facts = {
        RangeKey(APP, "c1", "c2"): RangeFacts(
            (Commit("c2", "Fix login (#7)", "alice", "u", (pull,)),), 1, "cmp"
        )
    }
    diff = freight_diff("prod", current, new, facts)
    assert (diff.stage, diff.freight, diff.current, diff.backwards) == ("prod", "b", "a", False)
    assert [(c.kind, c.old, c.new) for c in diff.changes] == [
        ("git", "c1", "c2"),
        ("image", "1.0", "1.1"),
        ("chart", "1.0.0", "1.1.0"),
    ]
    assert diff.changes[0].facts is diff.changes[1].facts is not None
    assert [c.sha for c in diff.commits] == ["c2"]  # listed once though two artifacts name it
    assert diff.pulls == (pull,)
    assert not diff.unchanged


def test_a_range_without_facts_shows_versions_only() -> None:
    diff = freight_diff("prod", freight("a", commit="c1"), freight("b", NEW, commit="c2"), {})
    (change,) = diff.changes
    assert change.changed and change.source == RangeKey(APP, "c1", "c2") and change.facts is None
    assert diff.commits == () and diff.pulls == ()


def test_an_artifact_the_new_freight_drops_is_listed_as_removed() -> None:
    diff = freight_diff("prod", freight("a", chart="1.0.0"), freight("b", NEW, commit="c2"))
    assert [(c.kind, c.old, c.new) for c in diff.changes] == [
        ("git", "", "c2"),
        ("chart", "1.0.0", ""),
    ]


def test_a_rollback_says_it_goes_backwards_and_a_caller_may_say_so() -> None:
    newer, older = freight("b", NEW, commit="c2"), freight("a", OLD, commit="c1")
    assert freight_diff("prod", newer, older).backwards
    assert not freight_diff("prod", older, newer).backwards
    assert freight_diff("prod", older, newer, backwards=True).backwards
    assert ranges_to_fetch(older, newer, backwards=True) == (RangeKey(APP, "c2", "c1"),)


def test_the_same_freight_changes_nothing() -> None:
    same = freight("a", commit="c1", chart="1.0.0")
    assert freight_diff("prod", same, same).unchanged


def test_urls_with_credentials_are_neither_shown_nor_asked_about() -> None:
    secret = "https://robot:pa55word@github.com/acme/app"
    current = {"metadata": {"name": "a"}, "commits": [{"repoURL": secret, "id": "c1"}]}
    new = {"metadata": {"name": "b"}, "commits": [{"repoURL": secret, "id": "c2"}]}
    (change,) = freight_diff("prod", current, new).changes
    assert change.name == APP and change.source == RangeKey(APP, "c1", "c2")


def _stage(*history: str) -> dict[str, Any]:
    entries = [
        {"items": {"Warehouse/app": {"name": n, "origin": {"kind": "Warehouse", "name": "app"}}}}
        for n in history
    ]
    return {"metadata": {"name": "prod"}, "status": {"freightHistory": entries}}


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        (["x"], "x"),  # not landed yet: what the Stage runs now
        (["f", "x"], "x"),  # landed: the one it replaced
        (["y", "f", "x"], "x"),  # the Stage moved on since: still the one it replaced
        ([], None),  # the Stage ran nothing before
        (["f"], None),
    ],
)
def test_a_promotion_is_shown_against_the_freight_it_replaces(
    history: list[str], expected: str | None
) -> None:
    from promoter.chat.diff import promotion_base

    promoted = {"metadata": {"name": "f"}, "origin": {"kind": "Warehouse", "name": "app"}}
    known = [{"metadata": {"name": "x"}, "commits": [{"repoURL": APP, "id": "c1"}]}]
    base = promotion_base(_stage(*history), promoted, known)
    assert (base and base["metadata"]["name"]) == expected
    if expected == "x":
        assert base is known[0]  # the project's Freight, with its artifacts
