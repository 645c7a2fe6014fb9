"""Selection strategies: which discovered versions a subscription accepts, newest first.

Each function follows the Kargo selector named in its docstring. The adapters gather facts
(tags, manifests, index entries, commits) and call these; where Kargo interleaves fetching with
selecting (an image's manifest is fetched only for candidate tags, until the discovery limit is
reached), the split is: :func:`image_candidates` orders the tags to fetch, the adapter fetches
them in that order and :func:`image_accepts` tells it whether one counts, and
:func:`discovered_images` makes the result. Git works the same way with
:func:`ordered_tags` / :func:`paths_match`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from promoter.expressions import ExpressionError, ExpressionSyntaxError, evaluate_expression
from promoter.expressions.dates import UTC_LOCATION, GoTime
from promoter.warehouses.semver import Semver, parse_version, strict_version
from promoter.warehouses.spec import ChartSubscription, GitSubscription, ImageSubscription

__all__ = [
    "CommitFacts",
    "ImageFacts",
    "PlatformFacts",
    "TagFacts",
    "chart_versions",
    "commit_passes",
    "commits_from_branch",
    "commits_from_tags",
    "discovered_images",
    "format_time",
    "git_tag_matches",
    "image_accepts",
    "image_candidates",
    "image_tag_matches",
    "ordered_tags",
    "paths_match",
    "tag_passes",
]


def format_time(moment: datetime) -> str:
    """A ``metav1.Time`` as Kubernetes writes it: RFC 3339 in UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _semver_order(pairs: list[tuple[Semver, Any]]) -> list[Any]:
    """Newest first; equal versions (``v1.0.0`` and ``1.0.0``) by original text, descending,
    as Kargo's ``sort`` does with ``strings.Compare(rhs.Original(), lhs.Original())``."""

    def compare(a: tuple[Semver, Any], b: tuple[Semver, Any]) -> int:
        order = b[0].compare(a[0])
        if order:
            return order
        return (a[0].original < b[0].original) - (a[0].original > b[0].original)

    return [item for _, item in sorted(pairs, key=functools.cmp_to_key(compare))]


# --- images (pkg/image) -----------------------------------------------------------------------


# The OCI image-spec's keys for where an image was built from
# (https://github.com/opencontainers/image-spec/blob/main/annotations.md). Builders set them as
# labels of the image config (``docker build --label``, ``docker/metadata-action``) more often
# than as manifest annotations; discovery records either on the Freight's image ``annotations``
# (a manifest annotation wins), so a Freight diff can list the commits between two images.
SOURCE_LABEL = "org.opencontainers.image.source"
REVISION_LABEL = "org.opencontainers.image.revision"
SOURCE_LABELS = (SOURCE_LABEL, REVISION_LABEL)


@dataclass(frozen=True, slots=True)
class PlatformFacts:
    """One entry of a multi-arch index."""

    os: str
    arch: str
    variant: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What the registry says about one tag (Kargo's ``image``)."""

    tag: str
    digest: str
    created_at: datetime | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    platforms: tuple[PlatformFacts, ...] = ()


def _tag_filters_pass(sub: ImageSubscription | GitSubscription, tag: str) -> bool:
    """``tagBasedSelector.MatchesTag``: ignore wins; with no allow list, everything is allowed."""
    if any(regex.search(tag) for regex in sub.ignore_tags):
        return False
    return not sub.allow_tags or any(regex.search(tag) for regex in sub.allow_tags)


def image_tag_matches(sub: ImageSubscription, tag: str) -> bool:
    """``Selector.MatchesTag`` of the subscription's strategy (also used by webhooks)."""
    if sub.strategy == "Digest":
        return tag == sub.constraint
    if not _tag_filters_pass(sub, tag):
        return False
    if sub.strategy != "SemVer":
        return True
    version = parse_version(tag, sub.strict_semvers)
    if version is None:
        return False
    return sub.semver_constraint is None or sub.semver_constraint.check(version)


def image_candidates(sub: ImageSubscription, tags: Iterable[str]) -> list[str]:
    """The tags whose manifests to fetch, in the order Kargo fetches them.

    SemVer: matching tags by version, newest first (``semverSelector.sort``); Lexical: reverse
    lexical order; NewestBuild: every matching tag (all are fetched, then sorted by build date);
    Digest: the one mutable tag named by ``constraint``.
    """
    if sub.strategy == "Digest":
        return [sub.constraint]
    matching = [tag for tag in tags if image_tag_matches(sub, tag)]
    if sub.strategy == "SemVer":
        pairs = []
        for tag in matching:
            version = parse_version(tag, sub.strict_semvers)
            if version is not None:
                pairs.append((version, tag))
        return _semver_order(pairs)
    if sub.strategy == "Lexical":
        return sorted(matching, reverse=True)
    return matching


def fetch_all_candidates(sub: ImageSubscription) -> bool:
    """NewestBuild must see every candidate's build date; the others stop at the limit."""
    return sub.strategy == "NewestBuild"


def _platform_of(sub: ImageSubscription, image: ImageFacts) -> PlatformFacts | None:
    if sub.platform is None:
        return None
    os_, arch, variant = sub.platform
    for platform in image.platforms:
        if (platform.os, platform.arch, platform.variant) == (os_, arch, variant):
            return platform
    return None


def image_accepts(sub: ImageSubscription, image: ImageFacts) -> bool:
    """``getImageByTag`` with a platform constraint: only an index listing that platform."""
    return sub.platform is None or _platform_of(sub, image) is not None


def platform_text(sub: ImageSubscription) -> str:
    if sub.platform is None:
        return ""
    return "/".join(part for part in sub.platform if part)


def discovered_images(sub: ImageSubscription, images: Sequence[ImageFacts]) -> list[dict[str, Any]]:
    """``DiscoveredImageReference``s, newest first, at most ``discoveryLimit``.

    ``images`` come in candidate order; those the platform refuses are dropped. NewestBuild
    sorts by creation time (then tag), newest first (``newestBuildSelector.sort``).
    """
    accepted = [image for image in images if image_accepts(sub, image)]
    if sub.strategy == "NewestBuild":
        epoch = datetime.min.replace(tzinfo=UTC)
        accepted.sort(key=lambda i: (i.created_at or epoch, i.tag), reverse=True)
    limit = sub.discovery_limit if sub.strategy != "Digest" else 1
    references: list[dict[str, Any]] = []
    for image in accepted[:limit]:
        annotations = dict(image.annotations)
        platform = _platform_of(sub, image)
        if platform is not None:
            annotations.update(platform.annotations)
        reference: dict[str, Any] = {"tag": image.tag, "digest": image.digest}
        if annotations:
            reference["annotations"] = annotations
        if image.created_at is not None:
            reference["createdAt"] = format_time(image.created_at)
        references.append(reference)
    return references


# --- charts (pkg/helm/chart) ------------------------------------------------------------------


def chart_versions(sub: ChartSubscription, versions: Iterable[str]) -> list[str]:
    """Versions newest first, at most ``discoveryLimit``.

    Classic repositories: every entry that parses (``semver.NewVersion``). OCI: tags that are
    strict semvers once ``_`` is read as ``+`` (OCI tags cannot hold ``+``; Helm writes ``_``),
    and the version is then written with ``+`` (``ociSelector.Select``).
    """
    pairs: list[tuple[Semver, str]] = []
    for text in versions:
        version = strict_version(text.replace("_", "+")) if sub.is_oci else Semver.parse(text)
        if version is None:
            continue
        if sub.semver_constraint is not None and not sub.semver_constraint.check(version):
            continue
        pairs.append((version, version.original))
    ordered: list[str] = _semver_order(pairs)
    return ordered[: sub.discovery_limit]


# --- git (pkg/controller/git/commit) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TagFacts:
    """A tag as ``git for-each-ref --sort=-creatordate refs/tags`` reports it (``TagMetadata``)."""

    tag: str
    commit_id: str
    creator_date: datetime
    subject: str = ""
    author: str = ""
    committer: str = ""


@dataclass(frozen=True, slots=True)
class CommitFacts:
    """A commit of a branch, as ``git log`` reports it (``CommitMetadata``)."""

    id: str
    commit_date: datetime
    subject: str = ""
    author: str = ""
    committer: str = ""


def git_tag_matches(sub: GitSubscription, tag: str) -> bool:
    """``matchesTag`` of the tag-based selectors (``refs/tags/`` may be included)."""
    tag = tag.removeprefix("refs/tags/")
    if not _tag_filters_pass(sub, tag):
        return False
    if sub.strategy != "SemVer":
        return True
    version = parse_version(tag, sub.strict_semvers)
    if version is None:
        return False
    return sub.semver_constraint is None or sub.semver_constraint.check(version)


def branch_matches(sub: GitSubscription, ref: str) -> bool:
    """``newestFromBranchSelector.MatchesRef``: with no branch, ``main`` or ``master``."""
    if sub.tag_based or not ref.startswith("refs/heads/"):
        return False
    branch = ref.removeprefix("refs/heads/")
    return branch in ("main", "master") if not sub.branch else branch == sub.branch


_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _go_time(moment: datetime) -> GoTime:
    return GoTime(int(moment.timestamp()) * 1_000_000_000, UTC_LOCATION)


def _filter_passes(sub: GitSubscription, env: Mapping[str, Any]) -> bool:
    """``expressionFilter`` (expr-lang) over one commit's or tag's metadata: a bool, or a value
    Go's ``strconv.ParseBool`` reads as one. Any other result or an error fails discovery with
    a message naming the field (ValueError), as Kargo's does."""
    where = "spec.subscriptions[].git.expressionFilter"
    try:
        value = evaluate_expression(sub.expression_filter, env, where=where)
    except (ExpressionError, ExpressionSyntaxError) as err:
        raise ValueError(f"error evaluating filter expression: {err}") from None
    if isinstance(value, bool):
        return value
    text = str(value)
    if text in _GO_TRUE or text in _GO_FALSE:
        return text in _GO_TRUE
    raise ValueError(f"{where}: the expression gave {text!r}, which is not a boolean")


def commit_passes(sub: GitSubscription, commit: CommitFacts) -> bool:
    """``newestFromBranchSelector.evaluateCommitExpression``."""
    if not sub.expression_filter:
        return True
    env = {
        "id": commit.id,
        "commitDate": _go_time(commit.commit_date),
        "author": commit.author,
        "committer": commit.committer,
        "subject": commit.subject,
    }
    return _filter_passes(sub, env)


def tag_passes(sub: GitSubscription, tag: TagFacts) -> bool:
    """``tagBasedSelector.filterTagsByExpression`` (we read no tagger or annotation: empty)."""
    if not sub.expression_filter:
        return True
    env = {
        "tag": tag.tag,
        "id": tag.commit_id,
        "creatorDate": _go_time(tag.creator_date),
        "author": tag.author,
        "committer": tag.committer,
        "subject": tag.subject,
        "tagger": "",
        "annotation": "",
    }
    return _filter_passes(sub, env)


def ordered_tags(sub: GitSubscription, tags: Sequence[TagFacts]) -> list[TagFacts]:
    """Matching tags in the order the strategy prefers, before path filtering.

    ``tags`` arrive newest-created first (``--sort=-creatordate``); NewestTag keeps that order,
    Lexical sorts names descending, SemVer sorts versions descending. The ``expressionFilter``
    applies after the tag filters, before ordering, as Kargo's does.
    """
    matching = [tag for tag in tags if git_tag_matches(sub, tag.tag) and tag_passes(sub, tag)]
    if sub.strategy == "Lexical":
        return sorted(matching, key=lambda t: t.tag, reverse=True)
    if sub.strategy == "SemVer":
        pairs = []
        for tag in matching:
            version = parse_version(tag.tag, sub.strict_semvers)
            if version is not None:
                pairs.append((version, tag))
        return _semver_order(pairs)
    return matching


def paths_match(sub: GitSubscription, paths: Iterable[str]) -> bool:
    """``baseSelector.MatchesPaths``: some changed path is included and not excluded."""
    for path in paths:
        if sub.include_paths is not None and not sub.include_paths.matches(path):
            continue
        if sub.exclude_paths is not None and sub.exclude_paths.matches(path):
            continue
        return True
    return False


def _shorten(text: str, length: int = 80) -> str:
    """Kargo's ``shortenString``."""
    return text[: length - 3] + "..." if len(text) > length else text


def commits_from_tags(sub: GitSubscription, tags: Sequence[TagFacts]) -> list[dict[str, Any]]:
    """``tagsToAPICommits``: the tagged commit's subject and author, the tag's creator date."""
    commits = []
    for tag in tags[: sub.discovery_limit]:
        commit: dict[str, Any] = {"id": tag.commit_id, "tag": tag.tag}
        if tag.subject:
            commit["subject"] = _shorten(tag.subject)
        if tag.author:
            commit["author"] = tag.author
        if tag.committer:
            commit["committer"] = tag.committer
        commit["creatorDate"] = format_time(tag.creator_date)
        commits.append(commit)
    return commits


def commits_from_branch(
    sub: GitSubscription, commits: Sequence[CommitFacts], branch: str
) -> list[dict[str, Any]]:
    """``commitsToAPICommits``: the branch as the subscription names it."""
    out = []
    for meta in commits[: sub.discovery_limit]:
        commit: dict[str, Any] = {"id": meta.id}
        if branch:
            commit["branch"] = branch
        if meta.subject:
            commit["subject"] = _shorten(meta.subject)
        if meta.author:
            commit["author"] = meta.author
        if meta.committer:
            commit["committer"] = meta.committer
        commit["creatorDate"] = format_time(meta.commit_date)
        out.append(commit)
    return out
