"""Run one discovery: every subscription's facts gathered, then selected by its strategy.

The result is ``status.discoveredArtifacts`` as Kargo writes it (``git``/``images``/``charts``,
each with its ``repoURL``, the subscription's ``name`` and the selected versions newest first).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.controller.warehouses.charts import ChartClient
from app.controller.warehouses.gitsource import GitSource
from app.controller.warehouses.registry import OCIClient, gather_limited
from promoter.warehouses import selection as sel
from promoter.warehouses.spec import (
    ChartSubscription,
    GitSubscription,
    ImageSubscription,
    WarehouseSpec,
)

__all__ = ["Discoverer"]

# Kargo fetches NewestBuild candidates concurrently (a process-wide semaphore); per discovery
# this bounds how many manifests are in flight against one registry.
_IMAGE_CONCURRENCY = 8
# Newest-from-branch with path filters walks history in growing batches, as Kargo does.
_MAX_WALK = 10_000


class Discoverer:
    def __init__(self, oci: OCIClient, charts: ChartClient, git: GitSource) -> None:
        self.oci = oci
        self.charts = charts
        self.git = git

    async def discover(
        self, spec: WarehouseSpec, last: Mapping[str, Any] | None, now: datetime
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "discoveredAt": sel.format_time(now),
            "git": [],
            "images": [],
            "charts": [],
        }
        previous_git = list((last or {}).get("git") or ())
        git_index = 0
        for sub in spec.subscriptions:
            if isinstance(sub, ImageSubscription):
                result["images"].append(await self._image(sub))
            elif isinstance(sub, ChartSubscription):
                result["charts"].append(await self._chart(sub))
            else:
                prev = previous_git[git_index] if git_index < len(previous_git) else None
                git_index += 1
                result["git"].append(await self._git(sub, prev))
        for key in ("git", "images", "charts"):
            if not result[key]:
                del result[key]
        return result

    async def _image(self, sub: ImageSubscription) -> dict[str, Any]:
        tags = await self.oci.tags(sub.repo_url) if sub.strategy != "Digest" else []
        candidates = sel.image_candidates(sub, tags)
        # A Digest subscription follows a mutable tag: caching it by tag would defeat it.
        cached = sub.cache_by_tag and sub.strategy != "Digest"
        facts: list[sel.ImageFacts] = []
        if sel.fetch_all_candidates(sub):
            fetched = await gather_limited(
                _IMAGE_CONCURRENCY,
                [self.oci.image(sub.repo_url, tag, by_tag=cached) for tag in candidates],
            )
            facts = [f for f in fetched if f is not None]
        else:
            for tag in candidates:
                image = await self.oci.image(sub.repo_url, tag, by_tag=cached)
                if image is not None and sel.image_accepts(sub, image):
                    facts.append(image)
                    if len(facts) >= sub.discovery_limit:
                        break
        out: dict[str, Any] = {
            "repoURL": sub.repo_url,
            "references": sel.discovered_images(sub, facts),
        }
        if sub.platform is not None:
            out["platform"] = sel.platform_text(sub)
        if sub.name:
            out["subscriptionName"] = sub.name
        return out

    async def _chart(self, sub: ChartSubscription) -> dict[str, Any]:
        versions = await self.charts.versions(sub.repo_url, sub.chart_name)
        out: dict[str, Any] = {
            "repoURL": sub.repo_url,
            "versions": sel.chart_versions(sub, versions),
        }
        if sub.chart_name:
            out["name"] = sub.chart_name
        if sub.semver_constraint is not None:
            out["semverConstraint"] = sub.semver_constraint.text
        if sub.name:
            out["subscriptionName"] = sub.name
        return out

    async def _observed(self, sub: GitSubscription) -> dict[str, Any] | None:
        insecure = sub.insecure_skip_tls_verify
        if sub.tag_based:
            refs = await self.git.ls_remote(sub.repo_url, "refs/tags/*", insecure=insecure)
            tags = sorted(
                (
                    {"name": name.removeprefix("refs/tags/"), "id": object_id}
                    for name, object_id in refs.items()
                    if sel.git_tag_matches(sub, name)
                ),
                key=lambda t: t["name"],
            )
            return {"tags": tags} if len(tags) <= 1000 else None
        ref = f"refs/heads/{sub.branch}" if sub.branch else "HEAD"
        refs = await self.git.ls_remote(sub.repo_url, ref, insecure=insecure)
        return {"branchHead": refs[ref]} if ref in refs else None

    async def _git(self, sub: GitSubscription, prev: Mapping[str, Any] | None) -> dict[str, Any]:
        observed = await self._observed(sub)
        out: dict[str, Any] = {"repoURL": sub.repo_url}
        if sub.name:
            out["subscriptionName"] = sub.name
        if (
            prev is not None
            and prev.get("repoURL") == sub.repo_url
            and observed is not None
            and prev.get("observedRefs") == observed
        ):
            # Nothing relevant moved: the previous selection stands (Kargo skips the clone).
            out["commits"] = list(prev.get("commits") or ())
            out["observedRefs"] = observed
            return out
        insecure = sub.insecure_skip_tls_verify
        if sub.tag_based:
            ordered = sel.ordered_tags(sub, await self.git.tags(sub.repo_url, insecure=insecure))
            if sub.filters_paths:
                kept = []
                for tag in ordered:
                    paths = await self.git.changed_paths(sub.repo_url, tag.commit_id)
                    if sel.paths_match(sub, paths):
                        kept.append(tag)
                        if len(kept) >= sub.discovery_limit:
                            break
                ordered = kept
            out["commits"] = sel.commits_from_tags(sub, ordered)
        else:
            out["commits"] = sel.commits_from_branch(sub, await self._branch(sub), sub.branch)
        if observed is not None:
            out["observedRefs"] = observed
        return out

    async def _branch(self, sub: GitSubscription) -> list[sel.CommitFacts]:
        insecure = sub.insecure_skip_tls_verify
        if not sub.filters_paths and not sub.expression_filter:
            return await self.git.branch_commits(
                sub.repo_url, sub.branch, sub.discovery_limit, insecure=insecure
            )
        selected: list[sel.CommitFacts] = []
        skip, batch = 0, sub.discovery_limit
        while skip < _MAX_WALK:
            commits = await self.git.branch_commits(
                sub.repo_url, sub.branch, batch, insecure=insecure, skip=skip
            )
            if not commits:
                break
            for commit in commits:
                if not sel.commit_passes(sub, commit):
                    continue
                if not sub.filters_paths or sel.paths_match(
                    sub, await self.git.changed_paths(sub.repo_url, commit.id)
                ):
                    selected.append(commit)
                    if len(selected) >= sub.discovery_limit:
                        return selected
            skip, batch = skip + batch, min(batch * 2, 1000)
        return selected
