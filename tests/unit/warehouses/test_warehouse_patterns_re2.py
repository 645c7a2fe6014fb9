"""A Warehouse's patterns go through the RE2 port: tag filters and path selectors never stall.

One Warehouse's ``allowTagsRegexes: ["^(a+)+$"]`` stalled the whole server for 52 s when these
compiled with Python's ``re``. Each place a Warehouse accepts a pattern is fed the runaway pattern
through the subscription as parsed from its manifest, and must answer (as Go's RE2 does).
"""

from __future__ import annotations

import pytest

from promoter.warehouses.selection import git_tag_matches, image_tag_matches, paths_match
from promoter.warehouses.spec import (
    GitSubscription,
    ImageSubscription,
    SpecError,
    parse_subscription,
    repo_url_problems,
)
from tests.support.runaway import RUNAWAY_PATTERN, RUNAWAY_TEXT, comes_back

# A glob that Python's re backtracks on as badly: forty "*" are forty [^/]* in a row.
RUNAWAY_GLOB = "glob:" + "*" * 40 + "!?"


def image(**body: object) -> ImageSubscription:
    sub = parse_subscription(
        {"image": {"repoURL": "example/image", "imageSelectionStrategy": "Lexical", **body}}, 0
    )
    assert isinstance(sub, ImageSubscription)
    return sub


def git(**body: object) -> GitSubscription:
    sub = parse_subscription(
        {
            "git": {
                "repoURL": "https://github.com/x/y",
                "commitSelectionStrategy": "Lexical",
                **body,
            }
        },
        0,
    )
    assert isinstance(sub, GitSubscription)
    return sub


def test_image_tag_filters_answer_a_runaway_pattern() -> None:
    with comes_back("an image's allowTagsRegexes"):
        assert not image_tag_matches(image(allowTagsRegexes=[RUNAWAY_PATTERN]), RUNAWAY_TEXT)
    with comes_back("an image's ignoreTagsRegexes"):
        assert image_tag_matches(image(ignoreTagsRegexes=[RUNAWAY_PATTERN]), RUNAWAY_TEXT)


def test_git_tag_filters_answer_a_runaway_pattern() -> None:
    with comes_back("a git subscription's allowTagsRegexes"):
        assert not git_tag_matches(git(allowTagsRegexes=[RUNAWAY_PATTERN]), RUNAWAY_TEXT)
    with comes_back("a git subscription's ignoreTagsRegexes"):
        assert git_tag_matches(git(ignoreTagsRegexes=[RUNAWAY_PATTERN]), RUNAWAY_TEXT)


@pytest.mark.parametrize(
    "selector", [f"regex:{RUNAWAY_PATTERN}", f"regexp:{RUNAWAY_PATTERN}", RUNAWAY_GLOB]
)
def test_path_selectors_answer_a_runaway_pattern(selector: str) -> None:
    with comes_back(f"includePaths {selector[:12]}..."):
        assert not paths_match(git(includePaths=[selector]), [RUNAWAY_TEXT])
    with comes_back(f"excludePaths {selector[:12]}..."):
        assert paths_match(git(excludePaths=[selector]), [RUNAWAY_TEXT])


def test_a_tag_pattern_go_refuses_is_an_error_of_the_warehouse_in_go_s_words() -> None:
    with pytest.raises(SpecError, match="invalid or unsupported Perl syntax"):
        image(allowTagsRegexes=["^v(?!1)"])
    with pytest.raises(SpecError, match=r"invalid escape sequence: `\\C`"):
        git(includePaths=[r"regex:\C"])


@pytest.mark.parametrize(
    "constraint",
    [
        # Exponential in the terms with Python's re: each run of spaces splits many ways
        # between the optional operator and the whitespace around it.
        "1" + "   1" * 40 + " !",
        # Quadratic in the spaces with Python's re (the range rewrite scans from each one).
        "1" + " " * 200_000 + "-",
    ],
)
def test_a_semver_constraint_built_to_backtrack_is_refused_at_once(constraint: str) -> None:
    """Masterminds' constraint grammar runs on RE2, as in Go."""
    with comes_back("an image's semver constraint"), pytest.raises(SpecError, match="constraint"):
        image(imageSelectionStrategy="SemVer", constraint=constraint)


def test_repo_url_rules_end_at_the_end_of_the_text_as_go_s_do() -> None:
    # Python's $ also matches before a final newline; Go's (and RE2's) only at the end.
    assert repo_url_problems("chart", "https://charts.example.com/stable\n") == [
        "must be a valid Helm repository URL"
    ]
    assert repo_url_problems("chart", "oci://ghcr.io/acme/charts") == []
    assert repo_url_problems("git", "git@github.com:acme/app.git") == []
    assert repo_url_problems("image", "ghcr.io/acme/app") == []
