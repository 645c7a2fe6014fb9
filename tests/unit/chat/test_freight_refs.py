"""Which Freight a reference means (pure, table-driven): Kargo's name-then-alias rule, then chat's
prefixes, commits, images and ``latest``.
"""

from __future__ import annotations

from typing import Any

import pytest

from promoter.chat.freight_refs import resolve_freight
from promoter.chat.grammar import parse_command
from promoter.resources.freight_refs import ALIAS_LABEL, FreightList, find_freight, freight_in
from promoter.resources.stages import available_to
from tests.support import objects

# ---- Kargo's rule: exact name first, then alias ---------------------------------------------

# "a1" is a Freight's name and another Freight's alias: the name wins, wherever it is looked up.
NAMED = objects.freight("a1", alias="tauntaun", labels={ALIAS_LABEL: "tauntaun"})
SHADOW = objects.freight("b2", alias="a1", labels={ALIAS_LABEL: "a1"})
LABEL_ONLY = objects.freight("c3", labels={ALIAS_LABEL: "wampa"})
FIELD_ONLY = objects.freight("d4", alias="hoth")
TWIN_B = objects.freight("e5b", labels={ALIAS_LABEL: "twin"})
TWIN_A = objects.freight("e5a", alias="twin")


@pytest.mark.parametrize(
    ("ref", "freights", "expected"),
    [
        # An alias equal to another Freight's name never shadows it, in either order.
        ("a1", [NAMED, SHADOW], "a1"),
        ("a1", [SHADOW, NAMED], "a1"),
        # Without that Freight, the alias is what the reference means.
        ("a1", [SHADOW], "b2"),
        ("tauntaun", [SHADOW, NAMED], "a1"),
        # Kargo selects on the label; a Freight written without its webhook may carry only the
        # field: either answers.
        ("wampa", [LABEL_ONLY], "c3"),
        ("hoth", [FIELD_ONLY], "d4"),
        # Two Freight with one alias (no webhook refused it): the first by name, as the API
        # server lists them.
        ("twin", [TWIN_B, TWIN_A], "e5a"),
        ("nope", [NAMED, SHADOW], None),
        ("", [NAMED], None),
    ],
)
def test_a_reference_means_the_freight_of_that_name_then_of_that_alias(
    ref: str, freights: list[dict[str, Any]], expected: str | None
) -> None:
    found = freight_in(ref, freights)
    assert (found["metadata"]["name"] if found else None) == expected
    assert find_freight(ref, FreightList(freights)) is found
    if expected is not None:
        # Chat resolves names and aliases by the same rule before anything of its own.
        assert resolve_freight(ref, freights)["metadata"]["name"] == expected


def test_a_name_or_alias_wins_over_chats_own_readings() -> None:
    # "1111111" reads as a commit SHA prefix of F1 and "f2bb" as a prefix of F2's name, but a
    # Freight called or aliased so is meant first.
    by_alias = objects.freight("zz", alias="1111111")
    assert resolve_freight("1111111", [F1, by_alias])["metadata"]["name"] == "zz"
    by_name = objects.freight("f2bb")
    assert resolve_freight("f2bb", [F2, by_name])["metadata"]["name"] == "f2bb"


def freight(
    name: str, alias: str, created: str, commit: str, verified: tuple[str, ...] = ()
) -> dict[str, Any]:
    return objects.freight(
        name,
        alias=alias,
        created=created,
        commits=[{"repoURL": "https://x/r.git", "id": commit}],
        status={"verifiedIn": {s: {} for s in verified}},
    )


F1 = freight("f1aaaaaa", "old-one", "2026-01-01T00:00:00Z", "1111111aaaa", verified=("test",))
F2 = freight("f2bbbbbb", "new-one", "2026-01-02T00:00:00Z", "2222222bbbb")
DIRECT = objects.stage("test")
UPSTREAM = objects.stage("uat", upstream=["test"])


@pytest.mark.parametrize(
    ("ref", "stage", "expected"),
    [
        ("f2bbbbbb", None, "f2bbbbbb"),
        ("old-one", None, "f1aaaaaa"),
        ("2222222", None, "f2bbbbbb"),
        ("latest", DIRECT, "f2bbbbbb"),
        ("latest", UPSTREAM, "f1aaaaaa"),
    ],
)
def test_freight_resolution(ref: str, stage: dict[str, Any] | None, expected: str) -> None:
    assert resolve_freight(ref, [F1, F2], stage)["metadata"]["name"] == expected


def with_image(f: dict[str, Any], repo: str, tag: str, digest: str) -> dict[str, Any]:
    return {**f, "images": [{"repoURL": repo, "tag": tag, "digest": digest}]}


I1 = with_image(F1, "ghcr.io/acme/app", "1.4.1", "sha256:" + "1" * 64)
I2 = with_image(F2, "ghcr.io/acme/app", "1.4.2", "sha256:" + "2" * 64)
I3 = with_image(
    freight("f3cccccc", "same-image", "2026-01-03T00:00:00Z", "3333333cccc"),
    "ghcr.io/acme/app",
    "1.4.2",
    "sha256:" + "2" * 64,
)
HUB = with_image(F1, "docker.io/library/nginx", "1.27.0", "sha256:" + "3" * 64)


@pytest.mark.parametrize(
    ("ref", "freights", "stage", "expected"),
    [
        ("ghcr.io/acme/app:1.4.1", [I1, I2], None, "f1aaaaaa"),
        ("ghcr.io/acme/app:1.4.2", [I1, I2], None, "f2bbbbbb"),
        ("GHCR.io/acme/app:1.4.2", [I1, I2], None, "f2bbbbbb"),
        ("ghcr.io/acme/app@sha256:" + "1" * 64, [I1, I2], None, "f1aaaaaa"),
        ("ghcr.io/acme/app:1.4.2@sha256:" + "2" * 64, [I1, I2], None, "f2bbbbbb"),
        # The same image in two Freight (another commit): the newest, unless the Stage may
        # only take one of them.
        ("ghcr.io/acme/app:1.4.2", [I2, I3], None, "f3cccccc"),
        (
            "ghcr.io/acme/app:1.4.2",
            [with_image(F1, *I2["images"][0].values()), I3],
            UPSTREAM,
            "f1aaaaaa",
        ),
        # Docker Hub's spellings of one repository.
        ("nginx:1.27.0", [HUB, I2], None, "f1aaaaaa"),
        ("docker.io/nginx:1.27.0", [HUB, I2], None, "f1aaaaaa"),
        # A commit SHA still resolves in Freight that also holds an image.
        ("3333333", [I1, I2, I3], None, "f3cccccc"),
    ],
)
def test_an_image_reference_resolves_to_the_freight_holding_it(
    ref: str, freights: list[dict[str, Any]], stage: dict[str, Any] | None, expected: str
) -> None:
    assert resolve_freight(ref, freights, stage)["metadata"]["name"] == expected
    assert parse_command("promote", f"{ref} to test").freight == ref


def test_an_image_no_freight_holds_says_so() -> None:
    with pytest.raises(
        LookupError, match=r"no Freight holds the image `ghcr\.io/acme/app:9\.9\.9`"
    ):
        resolve_freight("ghcr.io/acme/app:9.9.9", [I1, I2])


def test_unknown_freight_and_empty_latest_say_so() -> None:
    with pytest.raises(
        LookupError, match="no Freight named, aliased or with a name or commit starting 'nope'"
    ):
        resolve_freight("nope", [F1, F2])
    with pytest.raises(LookupError, match="no Freight is available to Stage 'uat' yet"):
        resolve_freight("latest", [F2], UPSTREAM)
    assert available_to(UPSTREAM, F1) and not available_to(UPSTREAM, F2)
