"""What a Freight changes in a Stage: the one diff view every promotion message formats.

A promotion moves a Stage from the Freight it runs now to another one. What people want to know
before they confirm (akuity/kargo#821, #5113, #6349) is what that brings: for each git artifact
the commits between the two and the pull requests they came from; for each image the old and new
tag, and, where the image names its source (the OCI labels ``org.opencontainers.image.source``
and ``org.opencontainers.image.revision``, recorded on the Freight's image ``annotations`` at
discovery), the same commit list for that repository; for each chart the old and new version.

This module decides in two pure steps, with the fetching in between left to an adapter
(``handlers/diff_facts.py``, over GitHub's compare API):

1. :func:`ranges_to_fetch` names the commit ranges worth asking about, as :class:`RangeKey`
   (repository URL, base, head). Nothing changed -> no range -> no request.
2. :func:`freight_diff` builds the :class:`FreightDiff` from both Freights and whatever facts
   came back; a range with no facts (the App is not installed there, GitHub did not answer)
   shows the old and new revision without commits, never an error.

A rollback (the new Freight is older than the Stage's, or the caller knows the Promotion is one)
goes backwards: its ranges run from the new Freight's revision to the current one, so their
commits are what the promotion *removes*, and the view says so (:attr:`FreightDiff.backwards`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from promoter.resources.model import meta, name_of, parse_time
from promoter.urls import without_credentials
from promoter.warehouses.selection import REVISION_LABEL, SOURCE_LABEL

# GitHub's compare lists at most this many commits of a range (and counts them all in
# ``total_commits``); a diff shows the newest this many and the count.
MAX_COMMITS = 250

Kind = Literal["git", "image", "chart"]


@dataclass(frozen=True, slots=True)
class RangeKey:
    """One commit range of one repository: what GitHub's compare is asked about, and the key
    the answer is cached under."""

    repo_url: str
    base: str
    head: str


@dataclass(frozen=True, slots=True)
class PullRequest:
    number: int
    title: str
    url: str
    author: str
    merged: bool


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    summary: str  # the first line of the message
    author: str  # the GitHub login when GitHub knows it, else the git author's name
    url: str
    pulls: tuple[PullRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class RangeFacts:
    """What GitHub said about a range: the newest commits (at most :data:`MAX_COMMITS`, oldest
    first as GitHub lists them), how many there are in all, and the compare page."""

    commits: tuple[Commit, ...]
    total: int
    compare_url: str

    @property
    def truncated(self) -> int:
        """How many commits of the range are not listed."""
        return max(0, self.total - len(self.commits))


@dataclass(frozen=True, slots=True)
class Change:
    """One artifact of the new Freight against the Stage's: old -> new, and its commits when a
    range was looked up. ``old`` is ``""`` for an artifact the Stage does not run yet, ``new``
    is ``""`` for one the new Freight no longer carries."""

    kind: Kind
    name: str  # repository URL (git, image) or ``repoURL`` + chart name
    old: str
    new: str
    source: RangeKey | None = None
    facts: RangeFacts | None = None

    @property
    def changed(self) -> bool:
        return self.old != self.new


@dataclass(frozen=True, slots=True)
class FreightDiff:
    """What promoting ``freight`` into ``stage`` changes, against ``current`` (the Freight the
    Stage runs now; ``""`` when it runs none)."""

    stage: str
    freight: str
    current: str
    backwards: bool
    changes: tuple[Change, ...]

    @property
    def unchanged(self) -> bool:
        return not any(change.changed for change in self.changes)

    @property
    def commits(self) -> tuple[Commit, ...]:
        """Every commit listed, each once, in the order the changes list them."""
        seen: dict[str, Commit] = {}
        for change in self.changes:
            for commit in change.facts.commits if change.facts else ():
                seen.setdefault(commit.sha, commit)
        return tuple(seen.values())

    @property
    def pulls(self) -> tuple[PullRequest, ...]:
        """Every pull request the listed commits came from, each once, by URL."""
        seen: dict[str, PullRequest] = {}
        for commit in self.commits:
            for pull in commit.pulls:
                seen.setdefault(pull.url, pull)
        return tuple(seen.values())


def _items(freight: Mapping[str, Any] | None, key: str) -> list[Mapping[str, Any]]:
    values = (freight or {}).get(key)
    return [v for v in values if isinstance(v, Mapping)] if isinstance(values, list) else []


def _commit_id(commit: Mapping[str, Any]) -> str:
    return str(commit.get("id") or commit.get("tag") or "")


def _image_version(image: Mapping[str, Any]) -> str:
    tag, digest = str(image.get("tag") or ""), str(image.get("digest") or "")
    if tag and digest:
        return f"{tag}@{digest}"
    return tag or digest


def _labels(image: Mapping[str, Any] | None) -> tuple[str, str]:
    annotations = (image or {}).get("annotations")
    if not isinstance(annotations, Mapping):
        return "", ""
    return _url(annotations, SOURCE_LABEL), str(annotations.get(REVISION_LABEL) or "")


def is_backwards(current: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """True when ``new`` is older than ``current`` (by creation time): promoting it rolls the
    Stage back."""
    if not current or name_of(current) == name_of(new):
        return False
    then = parse_time(meta(current).get("creationTimestamp"))
    now = parse_time(meta(new).get("creationTimestamp"))
    return then is not None and now is not None and now < then


def _range(repo_url: str, old: str, new: str, backwards: bool) -> RangeKey | None:
    if not repo_url or not old or not new or old == new:
        return None
    # Backwards, the range is the one the Stage leaves: what the promotion removes.
    return RangeKey(repo_url, new, old) if backwards else RangeKey(repo_url, old, new)


def _url(artifact: Mapping[str, Any], key: str = "repoURL") -> str:
    # Freight written with kubectl may carry a password in a URL: never shown, never a key.
    return without_credentials(str(artifact.get(key) or ""))


def _changes(
    current: Mapping[str, Any] | None, new: Mapping[str, Any], backwards: bool
) -> list[Change]:
    changes: list[Change] = []
    old_commits = {_url(c): c for c in _items(current, "commits")}
    new_commits = {_url(c): c for c in _items(new, "commits")}
    for url in [*new_commits, *(u for u in old_commits if u not in new_commits)]:
        old_id = _commit_id(old_commits[url]) if url in old_commits else ""
        new_id = _commit_id(new_commits[url]) if url in new_commits else ""
        changes.append(Change("git", url, old_id, new_id, _range(url, old_id, new_id, backwards)))
    old_images = {_url(i): i for i in _items(current, "images")}
    new_images = {_url(i): i for i in _items(new, "images")}
    for url in [*new_images, *(u for u in old_images if u not in new_images)]:
        before, after = old_images.get(url), new_images.get(url)
        source, old_rev = _labels(before)
        new_source, new_rev = _labels(after)
        # Only a range within one source repository means anything.
        key = _range(source, old_rev, new_rev, backwards) if source == new_source else None
        changes.append(
            Change(
                "image",
                url,
                _image_version(before) if before else "",
                _image_version(after) if after else "",
                key,
            )
        )

    def chart_name(chart: Mapping[str, Any]) -> str:
        repo, name = _url(chart), str(chart.get("name") or "")
        return f"{repo.rstrip('/')}/{name}" if name else repo

    old_charts = {chart_name(c): c for c in _items(current, "charts")}
    new_charts = {chart_name(c): c for c in _items(new, "charts")}
    for name in [*new_charts, *(n for n in old_charts if n not in new_charts)]:
        changes.append(
            Change(
                "chart",
                name,
                str((old_charts.get(name) or {}).get("version") or ""),
                str((new_charts.get(name) or {}).get("version") or ""),
            )
        )
    return changes


def ranges_to_fetch(
    current: Mapping[str, Any] | None, new: Mapping[str, Any], *, backwards: bool | None = None
) -> tuple[RangeKey, ...]:
    """The commit ranges :func:`freight_diff` can use facts about, each once: none when nothing
    changed, when the Stage runs no Freight yet, or for an artifact without a known revision."""
    back = is_backwards(current, new) if backwards is None else backwards
    keys = (change.source for change in _changes(current, new, back))
    return tuple(dict.fromkeys(key for key in keys if key is not None))


def freight_diff(
    stage: str,
    current: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    facts: Mapping[RangeKey, RangeFacts] | None = None,
    *,
    backwards: bool | None = None,
) -> FreightDiff:
    """The diff of promoting ``new`` into ``stage``, which runs ``current`` now (None: nothing).

    ``facts`` are what the adapter learned about :func:`ranges_to_fetch`'s ranges; a range
    missing from it is shown without commits. ``backwards`` overrides the creation-time rule
    (a Promotion annotated as a rollback knows it is one).
    """
    back = is_backwards(current, new) if backwards is None else backwards
    known = facts or {}
    changes = tuple(
        Change(c.kind, c.name, c.old, c.new, c.source, known.get(c.source) if c.source else None)
        for c in _changes(current, new, back)
    )
    return FreightDiff(
        stage=stage,
        freight=name_of(new),
        current=name_of(current) if current else "",
        backwards=back,
        changes=changes,
    )


def current_freight(
    stage: Mapping[str, Any], new: Mapping[str, Any], freights: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The Freight ``stage`` runs now from ``new``'s origin (the newest ``freightHistory``
    entry), as the project's Freight list has it, else as the Stage recorded it; None when the
    Stage runs none from that origin."""
    history = (stage.get("status") or {}).get("freightHistory") or []
    items = history[0].get("items") if history and isinstance(history[0], Mapping) else None
    origin = (new.get("origin") or {}).get("name")
    for ref in items.values() if isinstance(items, Mapping) else ():
        if not isinstance(ref, Mapping):
            continue
        theirs = (ref.get("origin") or {}).get("name")
        if origin and theirs and theirs != origin:
            continue
        name = str(ref.get("name") or "")
        found = next((f for f in freights if name_of(f) == name), None)
        return found if found is not None else {"metadata": {"name": name}, **ref}
    return None


def promotion_base(
    stage: Mapping[str, Any] | None,
    promoted: Mapping[str, Any],
    freights: Sequence[Mapping[str, Any]],
) -> Mapping[str, Any] | None:
    """The Freight a Promotion of ``promoted`` moves ``stage`` away from, for as long as the
    Promotion is shown: before it lands, what the Stage runs now; once it is in the Stage's
    ``freightHistory``, the entry after it (so the diff does not drift when the Stage moves on).
    None when the Stage ran nothing from that origin before."""
    history = ((stage or {}).get("status") or {}).get("freightHistory") or []
    name = name_of(promoted)
    origin = (promoted.get("origin") or {}).get("name")

    def named(entry: Any) -> tuple[str, Mapping[str, Any]] | None:
        items = entry.get("items") if isinstance(entry, Mapping) else None
        for ref in items.values() if isinstance(items, Mapping) else ():
            theirs = (ref.get("origin") or {}).get("name") if isinstance(ref, Mapping) else None
            if isinstance(ref, Mapping) and not (origin and theirs and theirs != origin):
                return str(ref.get("name") or ""), ref
        return None

    refs = [found for found in map(named, history) if found is not None]
    landed = next((i for i, (n, _) in enumerate(refs) if n == name), None)
    older = refs if landed is None else refs[landed + 1 :]
    for other, ref in older:
        if other != name:
            found = next((f for f in freights if name_of(f) == other), None)
            return found if found is not None else {"metadata": {"name": other}, **ref}
    return None


class RangeSource(Protocol):
    """Where the facts of commit ranges come from (GitHub's compare: ``handlers/diff_facts.py``);
    wired in by the app, so both front ends show the same diff from one cache."""

    async def facts(self, keys: Iterable[RangeKey]) -> Mapping[RangeKey, RangeFacts]: ...


@dataclass(frozen=True, slots=True)
class Row:
    """One changed artifact as every renderer shows it: versions short, the commits newest
    first (at most the renderer's limit) and how many more there are."""

    kind: Kind
    name: str
    old: str  # "" for none
    new: str
    count: str  # "3 new commits" / "3 removed commits"; "" without facts
    compare_url: str
    commits: tuple[Commit, ...]
    more: int


def _short(kind: Kind, value: str) -> str:
    # A full commit id reads like git's short hash; tags and versions as they are.
    return value[:7] if kind == "git" and len(value) == 40 else value


def rows(diff: FreightDiff, limit: int) -> tuple[Row, ...]:
    """The changed artifacts of ``diff``, each with its newest ``limit`` commits."""
    out = []
    word = "removed" if diff.backwards else "new"
    for change in diff.changes:
        if not change.changed:
            continue
        facts = change.facts
        shown = tuple(reversed(facts.commits[-limit:])) if facts else ()
        count = f"{facts.total} {word} commit{'s' if facts.total != 1 else ''}" if facts else ""
        out.append(
            Row(
                change.kind,
                change.name,
                _short(change.kind, change.old),
                _short(change.kind, change.new),
                count,
                facts.compare_url if facts else "",
                shown,
                (facts.total - len(shown)) if facts else 0,
            )
        )
    return tuple(out)


def merged_pulls(diff: FreightDiff) -> tuple[PullRequest, ...]:
    """The merged pull requests of the diff, in the order their commits came."""
    return tuple(pull for pull in diff.pulls if pull.merged)
