"""The pure discovery core (promoter/warehouses): Kargo's test tables, ported.

Each case names the Kargo Go test it comes from (akuity/kargo, paths relative to the repository).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from promoter.warehouses.freight import (
    FreightBuildError,
    build_freight,
    freight_alias,
    freight_id,
    normalize_chart_url,
    normalize_git_url,
    normalize_image_url,
)
from promoter.warehouses.patterns import path_matcher
from promoter.warehouses.selection import (
    ImageFacts,
    PlatformFacts,
    TagFacts,
    chart_versions,
    discovered_images,
    git_tag_matches,
    image_candidates,
    image_tag_matches,
    ordered_tags,
    paths_match,
)
from promoter.warehouses.semver import Constraint, ConstraintError, parse_version
from promoter.warehouses.spec import (
    ChartSubscription,
    GitSubscription,
    ImageSubscription,
    SpecError,
    parse_duration,
    parse_spec,
    parse_subscription,
)


def image(**body: object) -> ImageSubscription:
    sub = parse_subscription({"image": {"repoURL": "example/image", **body}}, 0)
    assert isinstance(sub, ImageSubscription)
    return sub


def git(**body: object) -> GitSubscription:
    sub = parse_subscription({"git": {"repoURL": "https://github.com/x/y", **body}}, 0)
    assert isinstance(sub, GitSubscription)
    return sub


def chart(repo: str = "https://charts.example.com", **body: object) -> ChartSubscription:
    if not repo.startswith("oci://"):
        body.setdefault("name", "app")
    sub = parse_subscription({"chart": {"repoURL": repo, **body}}, 0)
    assert isinstance(sub, ChartSubscription)
    return sub


# pkg/controller/semver/parser_test.go TestParse
@pytest.mark.parametrize(
    ("tag", "strict", "expected"),
    [
        ("invalid", True, None),
        ("invalid", False, None),
        ("1", True, None),
        ("1", False, "1.0.0"),
        ("1.0.0", True, "1.0.0"),
        ("1.0.0", False, "1.0.0"),
        ("v1.0.0", True, "1.0.0"),
        ("v1.0.0", False, "1.0.0"),
    ],
)
def test_kargo_semver_parse_refuses_partial_versions_in_strict_mode(
    tag: str, strict: bool, expected: str | None
) -> None:
    version = parse_version(tag, strict)
    assert (str(version) if version else None) == expected
    if version:
        assert version.original == tag


# Masterminds semver v3 constraints_test.go TestConstraintCheck (a selection), and
# pkg/helm/chart/base_selector_test.go Test_baseSelector_filterSemvers.
@pytest.mark.parametrize(
    ("constraint", "version", "ok"),
    [
        ("=2.0.0", "1.2.3", False),
        ("=2.0.0", "2.0.0", True),
        ("4.1", "4.1.0", True),
        ("!=4.1", "5.1.0", True),
        ("!=4.1", "4.1.0", False),
        (">1.1", "4.1.0", True),
        (">1.1", "1.1.0", False),
        ("<1.1", "0.1.0", True),
        ("<1.1", "1.1.0", False),
        (">=1.1", "1.1.0", True),
        ("<=1.1", "1.1.1", True),
        ("<=1.1", "1.2.0", False),
        (">2.x", "3.0.0", True),
        (">2.x", "2.9.9", False),
        ("~1.2.3", "1.2.4", True),
        ("~1.2.3", "1.3.0", False),
        ("~1", "1.9.0", True),
        ("^1.2.3", "1.8.9", True),
        ("^1.2.3", "2.0.0", False),
        ("^0.2.3", "0.2.9", True),
        ("^0.2.3", "0.3.0", False),
        ("^0.0.3", "0.0.4", False),
        ("1.2 - 1.4.5", "1.4.5", True),
        ("1.2 - 1.4.5", "1.4.6", False),
        (">= 1.1, < 2", "1.9.0", True),
        (">=1.1 <2 || >=3", "3.1.0", True),
        (">=1.1 <2 || >=3", "2.1.0", False),
        ("*", "1.0.0-alpha", False),
        (">=1.0.0", "1.1.0-rc.1", False),
        (">=1.0.0-0", "1.1.0-rc.1", True),
        ("1.2.x-0", "1.2.3-alpha.1", True),
        ("1.2.x-0", "1.3.0", False),
        ("1.2.x", "1.2.4", True),
        ("^v1.0.0", "1.4.0", True),
    ],
)
def test_constraints_check_as_masterminds_does(constraint: str, version: str, ok: bool) -> None:
    parsed = parse_version(version)
    assert parsed is not None
    assert Constraint.parse(constraint).check(parsed) is ok


@pytest.mark.parametrize("bad", ["invalid", "1.2.3 ||| 4", ">>1", "^", "foo >1"])
def test_an_improper_constraint_is_refused(bad: str) -> None:
    with pytest.raises(ConstraintError):
        Constraint.parse(bad)


# pkg/image/semver_selector_test.go Test_semverSelector_MatchesTag
@pytest.mark.parametrize(
    ("body", "tag", "matches"),
    [
        ({}, "foo", False),  # non semver ignored
        ({"strictSemvers": True}, "v1.0", False),  # non strict semver ignored
        ({}, "v1.0.0", True),  # no regex specified
        ({"allowTagsRegexes": [r"^v1\."]}, "v1.0.0", True),  # regex matches
        ({"allowTagsRegexes": [r"^v1\."]}, "v2.0.0", False),  # regex does not match
        ({"ignoreTagsRegexes": [r"^v2\.0\.0$"]}, "v2.0.0", False),  # ignored
        ({"ignoreTagsRegexes": [r"^v2\.0\.0$"]}, "v1.0.0", True),  # not ignored
        (
            {"allowTagsRegexes": [r"^v1\."], "ignoreTagsRegexes": [r"^v1\.0\.0$"]},
            "v1.0.0",
            False,
        ),  # regex matches, but ignored
        ({"strictSemvers": False}, "v1.0", True),
        ({"constraint": "^1.0.0"}, "v2.0.0", False),
    ],
)
def test_image_semver_matches_tag(body: dict[str, object], tag: str, matches: bool) -> None:
    assert image_tag_matches(image(**body), tag) is matches


def test_image_semver_candidates_are_sorted_newest_first() -> None:
    # pkg/image/semver_selector_test.go Test_semVerSelector_sort
    tags = ["5.0.0", "0.0.1", "0.2.1", "0.1.1", "1.1.1", "7.0.6", "1.0.0", "1.0.2"]
    assert image_candidates(image(), tags) == [
        "7.0.6",
        "5.0.0",
        "1.1.1",
        "1.0.2",
        "1.0.0",
        "0.2.1",
        "0.1.1",
        "0.0.1",
    ]


def test_equal_versions_are_ordered_by_their_original_text() -> None:
    assert image_candidates(image(), ["1.0.0", "v1.0.0"]) == ["v1.0.0", "1.0.0"]


def test_image_lexical_candidates_are_in_reverse_lexical_order() -> None:
    # pkg/image/lexical_selector_test.go: tags sorted, then reversed
    sub = image(imageSelectionStrategy="Lexical", allowTagsRegexes=["^nightly"])
    tags = ["nightly-20240101", "latest", "nightly-20240301", "nightly-20231231"]
    assert image_candidates(sub, tags) == [
        "nightly-20240301",
        "nightly-20240101",
        "nightly-20231231",
    ]


def test_newest_build_orders_by_creation_time_then_tag() -> None:
    # pkg/image/newest_build_selector_test.go Test_newestBuildSelector_sort
    sub = image(imageSelectionStrategy="NewestBuild", discoveryLimit=2)
    t = [datetime(2024, 1, d, tzinfo=UTC) for d in (1, 2, 3)]
    images = [
        ImageFacts("a", "sha256:a", t[0]),
        ImageFacts("c", "sha256:c", t[2]),
        ImageFacts("b", "sha256:b", t[2]),
        ImageFacts("d", "sha256:d", t[1]),
    ]
    assert [r["tag"] for r in discovered_images(sub, images)] == ["c", "b"]
    assert discovered_images(sub, images)[0]["createdAt"] == "2024-01-03T00:00:00Z"


def test_digest_strategy_follows_one_mutable_tag() -> None:
    # pkg/image/digest_selector_test.go: MatchesTag is equality with the constraint
    sub = image(imageSelectionStrategy="Digest", constraint="latest")
    assert image_candidates(sub, ["latest", "v1.0.0"]) == ["latest"]
    assert image_tag_matches(sub, "latest") and not image_tag_matches(sub, "v1.0.0")


def test_digest_strategy_needs_a_constraint() -> None:
    with pytest.raises(SpecError, match="must be set when imageSelectionStrategy is Digest"):
        image(imageSelectionStrategy="Digest")


def test_a_platform_constraint_keeps_only_indexes_listing_that_platform() -> None:
    # pkg/image/repository_client.go getImageByTag: no matching platform -> no image
    sub = image(platform="linux/arm64")
    amd = PlatformFacts("linux", "amd64")
    arm = PlatformFacts("linux", "arm64", annotations={"arch": "arm"})
    images = [
        ImageFacts("2.0.0", "sha256:2", platforms=(amd,)),
        ImageFacts("1.0.0", "sha256:1", annotations={"idx": "1"}, platforms=(amd, arm)),
        ImageFacts("0.9.0", "sha256:0"),  # a single-platform manifest never matches
    ]
    refs = discovered_images(sub, images)
    assert refs == [
        {"tag": "1.0.0", "digest": "sha256:1", "annotations": {"idx": "1", "arch": "arm"}}
    ]


def test_plain_allow_tags_and_ignore_tags_fail_as_in_kargo_1_11() -> None:
    # pkg/image/tag_based_selector.go newTagBasedSelector
    with pytest.raises(SpecError, match=r"AllowTags is deprecated and unsupported as of v1\.11\.0"):
        image(allowTags="^v1")
    with pytest.raises(SpecError, match="IgnoreTags is deprecated and unsupported"):
        git(commitSelectionStrategy="NewestTag", ignoreTags=["v1"])


def test_a_bad_regex_or_constraint_is_an_error_of_the_warehouse() -> None:
    with pytest.raises(SpecError, match="error compiling regex"):
        image(allowTagsRegexes=["(unclosed"])
    with pytest.raises(SpecError, match="error parsing semver constraint"):
        image(constraint="invalid")


# pkg/helm/chart/http_selector_test.go and oci_selector_test.go
def test_chart_versions_are_filtered_sorted_and_limited() -> None:
    sub = chart(semverConstraint="^1.0.0", discoveryLimit=2)
    versions = ["0.9.0", "1.0.0", "1.2.0", "1.1.0", "2.0.0", "not-a-version"]
    assert chart_versions(sub, versions) == ["1.2.0", "1.1.0"]


def test_oci_chart_tags_must_be_strict_and_underscore_reads_as_plus() -> None:
    sub = chart("oci://ghcr.io/acme/charts/app")
    assert chart_versions(sub, ["1.0", "v1.0.0", "1.0.0_build.1", "0.9.0"]) == [
        "1.0.0+build.1",
        "0.9.0",
    ]


def test_chart_prerelease_constraint() -> None:
    # pkg/helm/chart/base_selector_test.go Test_baseSelector_filterSemvers "prerelease constraint"
    sub = chart(semverConstraint="1.2.x-0")
    assert chart_versions(sub, ["1.2.3-alpha.1", "1.2.3-beta.2", "1.3.0"]) == [
        "1.2.3-beta.2",
        "1.2.3-alpha.1",
    ]


def test_a_classic_chart_repository_needs_a_chart_name_and_oci_must_not_have_one() -> None:
    with pytest.raises(SpecError, match="name: required"):
        parse_subscription({"chart": {"repoURL": "https://charts.example.com"}}, 0)
    with pytest.raises(SpecError, match="must be empty"):
        parse_subscription({"chart": {"repoURL": "oci://r/c", "name": "c"}}, 0)


# pkg/controller/git/commit/semver_selector_test.go Test_semVerSelector_MatchesRef
@pytest.mark.parametrize(
    ("body", "ref", "matches"),
    [
        ({}, "refs/tags/foo", False),  # non semver ignored
        ({"strictSemvers": True}, "refs/tags/v1.0", False),  # non-strict semver ignored
        ({}, "refs/tags/v1.0.0", True),  # no regex specified
        ({"allowTagsRegexes": [r"^v1\."]}, "refs/tags/v1.0.0", True),
        ({"allowTagsRegexes": [r"^v1\."]}, "refs/tags/v2.0.0", False),
        ({"ignoreTagsRegexes": [r"^v2\.0\.0$"]}, "refs/tags/v2.0.0", False),
        ({"ignoreTagsRegexes": [r"^v2\.0\.0$"]}, "refs/tags/v1.0.0", True),
        (
            {"allowTagsRegexes": [r"^v1\."], "ignoreTagsRegexes": [r"^v1\.0\.0$"]},
            "refs/tags/v1.0.0",
            False,
        ),
        ({"semverConstraint": ">=1.2.0"}, "refs/tags/v1.1.0", False),  # Test_..._ListRefs
    ],
)
def test_git_semver_matches_ref(body: dict[str, object], ref: str, matches: bool) -> None:
    assert git_tag_matches(git(commitSelectionStrategy="SemVer", **body), ref) is matches


def _tags(*names: str) -> list[TagFacts]:
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    return [TagFacts(name, f"c-{name}", moment) for name in names]


def test_git_semver_tags_are_correctly_sorted() -> None:
    # pkg/controller/git/commit/semver_selector_test.go Test_semverSelector_Select
    # "tags are correctly sorted" and "non-semver tags are filtered out"
    sub = git(commitSelectionStrategy="SemVer")
    got = ordered_tags(sub, _tags("v3.0.0", "foo", "v5.0.0", "v4.0.0", "v1.0.0", "v2.0.0"))
    assert [t.tag for t in got] == ["v5.0.0", "v4.0.0", "v3.0.0", "v2.0.0", "v1.0.0"]


def test_git_newest_tag_keeps_creator_date_order_and_lexical_sorts_names() -> None:
    # newest_tag_selector.go: repo.ListTags is --sort=-creatordate; lexical_selector.go
    tags = _tags("b", "c", "a")
    assert [t.tag for t in ordered_tags(git(commitSelectionStrategy="NewestTag"), tags)] == [
        "b",
        "c",
        "a",
    ]
    assert [t.tag for t in ordered_tags(git(commitSelectionStrategy="Lexical"), tags)] == [
        "c",
        "b",
        "a",
    ]


# pkg/pattern/matcher_test.go TestGlobMatcher, TestRegexpMatcher, TestBaseDirMatcher
@pytest.mark.parametrize(
    ("selector", "yes", "no"),
    [
        (
            "glob:*.yaml",
            ["deployment.yaml", "service.yaml"],
            ["deployment.yml", "deployment.json", "yaml"],
        ),
        (
            "glob:env/*/deployment.yaml",
            ["env/prod/deployment.yaml", "env/dev/deployment.yaml"],
            ["env/prod/nested/deployment.yaml", "app/guestbook/deployment.yml"],
        ),
        (
            "glob:env/**/deployment.yaml",
            [
                "env/nested/deployment.yaml",
                "env/even/more/nested/deployment.yaml",
                "env/can/it/be/even/more/nested/default/apps/deployment.yaml",
            ],
            ["env/nested/service.yml", "etc/deployment.yaml"],
        ),
        ("glob:app-[a-z].yaml", ["app-a.yaml", "app-z.yaml"], ["app-ab.yaml", "app-1.yaml"]),
        (
            "glob:*.{yaml,yml,json}",
            ["deployment.yaml", "service.yml", "configmap.json"],
            ["deployment.xml", "manifest.jsonnet"],
        ),
        ("regex:app", ["app", "myapp", "app-config"], ["ap", "APP"]),
        ("regexp:^app$", ["app"], ["myapp", "app-config"]),
        (
            "configs",
            ["configs/app.yaml", "configs/dev/database.yaml", "configs"],
            ["app/configs/settings.yaml", "configurations/app.yaml", "../configs/app.yaml"],
        ),
        (
            "environments/prod",
            ["environments/prod/deployment.yaml", "environments/prod"],
            ["environments/dev/deployment.yaml", "environments", "../environments/prod/c.yaml"],
        ),
        (
            "config/shared",
            ["config/shared/common.yaml", "config/shared"],
            ["config/shared/../private/secrets.yaml", "app/config/shared/file.yaml"],
        ),
        (
            "valid/path",
            [],
            ["invalid:path", "\x00malformed", "valid/path/../../secret.txt"],
        ),
    ],
)
def test_path_selectors_match_as_kargo_pattern_does(
    selector: str, yes: list[str], no: list[str]
) -> None:
    matcher = path_matcher([selector], "includePaths")
    assert matcher is not None
    for path in yes:
        assert matcher.matches(path), path
    for path in no:
        assert not matcher.matches(path), path


def test_include_and_exclude_paths_decide_whether_a_commit_counts() -> None:
    # pkg/controller/git/commit/base_selector_test.go Test_baseSelector_MatchesPaths
    sub = git(includePaths=["apps/guestbook"], excludePaths=["glob:**/*.md"])
    assert paths_match(sub, ["apps/guestbook/values.yaml"])
    assert not paths_match(sub, ["apps/guestbook/README.md"])
    assert not paths_match(sub, ["apps/other/values.yaml"])
    assert paths_match(sub, ["apps/guestbook/README.md", "apps/guestbook/x.yaml"])


# pkg/urls/*_test.go
@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("https://github.com/akuity/kargo.git/", "https://github.com/akuity/kargo"),
        ("HTTPS://user:pass@GitHub.com/Akuity/Kargo", "https://github.com/akuity/kargo"),
        ("git@github.com:akuity/kargo.git", "ssh://git@github.com/akuity/kargo"),
        ("ssh://git@github.com/akuity/kargo.git", "ssh://git@github.com/akuity/kargo"),
        ("https://github.com/akuity/kargo?x=1", "https://github.com/akuity/kargo?x=1"),
    ],
)
def test_git_urls_normalize_as_kargo(url: str, normalized: str) -> None:
    assert normalize_git_url(url) == normalized


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("nginx", "nginx"),
        ("docker.io/nginx", "nginx"),
        ("index.docker.io/library/nginx", "nginx"),
        ("docker.io/library/nginx:1.2", "nginx"),
        ("ghcr.io/akuity/kargo", "ghcr.io/akuity/kargo"),
        ("localhost:5000/app", "localhost:5000/app"),
    ],
)
def test_image_urls_normalize_as_kargo(url: str, normalized: str) -> None:
    assert normalize_image_url(url) == normalized


def test_chart_urls_drop_oci_and_keep_classic_urls() -> None:
    assert normalize_chart_url("oci://GHCR.io/acme/charts/app") == "ghcr.io/acme/charts/app"
    assert normalize_chart_url("https://Charts.example.com") == "https://charts.example.com"


def test_freight_id_is_kargos_hash() -> None:
    # pkg/api/freight.go GenerateFreightID; the text hashed is spelled out here.
    import hashlib

    origin = {"kind": "Warehouse", "name": "w"}
    commits = [{"repoURL": "https://github.com/x/y.git", "id": "abc", "tag": "v1.0.0"}]
    images = [{"repoURL": "ghcr.io/x/y", "tag": "1.0.0", "digest": "sha256:d"}]
    charts = [{"repoURL": "oci://ghcr.io/x/charts/app", "version": "1.0.0"}]
    text = (
        "Warehouse/w:ghcr.io/x/charts/app:1.0.0|ghcr.io/x/y:1.0.0@sha256:d|"
        "https://github.com/x/y:v1.0.0:abc"
    )
    assert freight_id(origin, commits, images, charts) == hashlib.sha1(text.encode()).hexdigest()


def test_freight_id_changes_with_anything_and_includes_subscription_names() -> None:
    # pkg/api/freight_test.go TestGenerateFreightID, TestSubscriptionNameAffectsFreightID
    origin = {"kind": "fake-kind", "name": "fake-name"}
    commits = [{"repoURL": "fake-git-repo", "id": "fake-commit-id"}]
    images = [{"repoURL": "fake-image-repo", "tag": "fake-image-tag"}]
    charts = [{"repoURL": "fake-chart-repo", "name": "fake-chart", "version": "v"}]
    first = freight_id(origin, commits, images, charts)
    assert all(freight_id(origin, commits, images, charts) == first for _ in range(100))
    assert freight_id(origin, [{**commits[0], "id": "other"}], images, charts) != first
    named = [{**images[0], "subscriptionName": "api"}]
    assert freight_id(origin, commits, named, charts) != first


def test_freight_carries_the_newest_artifact_of_every_subscription() -> None:
    warehouse = {
        "apiVersion": "kargo.akuity.io/v1alpha1",
        "metadata": {"name": "w", "namespace": "demo"},
    }
    discovered = {
        "git": [
            {
                "repoURL": "https://github.com/x/y",
                "commits": [{"id": "new", "subject": "s", "tag": "v2"}, {"id": "old"}],
            }
        ],
        "images": [{"repoURL": "ghcr.io/x/y", "references": [{"tag": "2", "digest": "sha256:2"}]}],
        "charts": [{"repoURL": "oci://r/c", "versions": ["1.1.0", "1.0.0"]}],
    }
    freight = build_freight(warehouse, discovered, alias="calm-otter")
    assert freight["commits"] == [
        {"repoURL": "https://github.com/x/y", "id": "new", "tag": "v2", "message": "s"}
    ]
    assert freight["images"] == [{"repoURL": "ghcr.io/x/y", "tag": "2", "digest": "sha256:2"}]
    assert freight["charts"] == [{"repoURL": "oci://r/c", "version": "1.1.0"}]
    assert freight["origin"] == {"kind": "Warehouse", "name": "w"}
    assert freight["metadata"]["namespace"] == "demo"
    assert freight["alias"] == freight["metadata"]["labels"]["kargo.akuity.io/alias"]
    assert freight["metadata"]["name"] == freight_id(
        freight["origin"], freight["commits"], freight["images"], freight["charts"]
    )


def test_no_freight_while_a_subscription_has_found_nothing() -> None:
    discovered = {
        "git": [{"repoURL": "https://g/x", "commits": [{"id": "a"}]}],
        "images": [{"repoURL": "ghcr.io/x/y", "references": []}],
    }
    with pytest.raises(FreightBuildError, match="no images discovered"):
        build_freight({"metadata": {"name": "w"}}, discovered)


def test_aliases_are_stable_and_avoid_those_taken() -> None:
    name = "ab901a73a473be2a38620389534ee9956fd35dab"
    alias = freight_alias(name)
    assert alias == freight_alias(name)
    assert freight_alias(name, [alias]) == f"{alias}-ab901a"


def test_spec_defaults_follow_kargo() -> None:
    spec = parse_spec({"subscriptions": [{"image": {"repoURL": "ghcr.io/x/y"}}]})
    (sub,) = spec.subscriptions
    assert isinstance(sub, ImageSubscription)
    assert (spec.interval, spec.freight_creation_policy) == (300.0, "Automatic")
    assert (sub.strategy, sub.strict_semvers, sub.discovery_limit) == ("SemVer", True, 20)
    gsub = git()
    assert (gsub.strategy, gsub.strict_semvers) == ("NewestFromBranch", True)


def test_a_subscription_names_exactly_one_type() -> None:
    with pytest.raises(SpecError, match="exactly one top-level field"):
        parse_spec({"subscriptions": [{"image": {"repoURL": "a"}, "git": {"repoURL": "b"}}]})


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m0s", 300), ("1h30m", 5400), ("90s", 90), ("1.5m", 90), ("0", 0)]
)
def test_intervals_are_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_discovery_limit_is_bounded_like_kargo() -> None:
    with pytest.raises(SpecError, match="must be <= 100"):
        image(discoveryLimit=101)
