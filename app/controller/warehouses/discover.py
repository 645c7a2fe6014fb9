"""Run one discovery: every subscription's facts gathered, then selected by its strategy.

The result is ``status.discoveredArtifacts`` as Kargo writes it (``git``/``images``/``charts``,
each with its ``repoURL``, the subscription's ``name`` and the selected versions newest first;
``results`` for generic subscriptions, from the subscriber registered for their type).

Every subscription reads its repository with the credentials the port
(:class:`promoter.ports.credentials.Credentials`) finds for the Warehouse's project and the
subscription's type (``git``, ``image``, ``helm``) and ``repoURL``: asked once per subscription
and discovery, for registries only when the registry asks for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.controller.warehouses.charts import ChartClient
from app.controller.warehouses.gitsource import GitError, GitSource
from app.controller.warehouses.registry import (
    OCIClient,
    RegistryAuth,
    RegistryError,
    gather_limited,
)
from promoter.ports.credentials import (
    NO_CREDENTIALS,
    Credential,
    Credentials,
    CredentialsError,
    CredentialType,
)
from promoter.urls import without_credentials
from promoter.warehouses import selection as sel
from promoter.warehouses.generic import NO_SUBSCRIBERS, Subscribers, discovery_result
from promoter.warehouses.spec import (
    ChartSubscription,
    GenericSubscription,
    GitSubscription,
    ImageSubscription,
    WarehouseSpec,
)

__all__ = ["Discoverer", "GitCredentialsError"]

# Kargo fetches NewestBuild candidates concurrently (a process-wide semaphore); per discovery
# this bounds how many manifests are in flight against one registry.
_IMAGE_CONCURRENCY = 8
# Newest-from-branch with path filters walks history in growing batches, as Kargo does.
_MAX_WALK = 10_000


class GitCredentialsError(GitError):
    """The credentials of a git subscription could not be looked up (a discovery failure)."""


class Discoverer:
    def __init__(
        self,
        oci: OCIClient,
        charts: ChartClient,
        git: GitSource,
        credentials: Credentials = NO_CREDENTIALS,
        subscribers: Subscribers = NO_SUBSCRIBERS,
    ) -> None:
        self.oci = oci
        self.charts = charts
        self.git = git
        self.credentials = credentials
        self.subscribers = subscribers

    def _auth(self, project: str, kind: CredentialType) -> RegistryAuth:
        """The project's registry credentials, looked up when a registry asks (once per
        repository and discovery)."""
        found: dict[str, tuple[str, str] | None] = {}

        async def lookup(repo_url: str) -> tuple[str, str] | None:
            if repo_url not in found:
                try:
                    credential = await self.credentials.get(project, kind, repo_url)
                except CredentialsError as err:
                    raise RegistryError(str(err)) from None
                found[repo_url] = (credential.username, credential.password) if credential else None
            return found[repo_url]

        return RegistryAuth(project, lookup)

    async def _git_credential(self, project: str, repo_url: str) -> Credential | None:
        try:
            return await self.credentials.get(project, CredentialType.GIT, repo_url)
        except CredentialsError as err:
            raise GitCredentialsError(str(err)) from None

    async def discover(
        self,
        spec: WarehouseSpec,
        last: Mapping[str, Any] | None,
        now: datetime,
        project: str = "",
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "discoveredAt": sel.format_time(now),
            "git": [],
            "images": [],
            "charts": [],
            "results": [],
        }
        previous_git = list((last or {}).get("git") or ())
        git_index = 0
        for sub in spec.subscriptions:
            if isinstance(sub, ImageSubscription):
                result["images"].append(await self._image(sub, project))
            elif isinstance(sub, ChartSubscription):
                result["charts"].append(await self._chart(sub, project))
            elif isinstance(sub, GenericSubscription):
                subscriber = self.subscribers.get(sub.subscription_type)
                references = await subscriber.discover(project, sub)
                result["results"].append(discovery_result(sub, references))
            else:
                prev = previous_git[git_index] if git_index < len(previous_git) else None
                git_index += 1
                credential = await self._git_credential(project, sub.repo_url)
                result["git"].append(await self._git(sub, prev, _GitAccess(project, credential)))
        for key in ("git", "images", "charts", "results"):
            if not result[key]:
                del result[key]
        return result

    async def _image(self, sub: ImageSubscription, project: str) -> dict[str, Any]:
        auth = self._auth(project, CredentialType.IMAGE)
        tags = await self.oci.tags(sub.repo_url, auth) if sub.strategy != "Digest" else []
        # Selection parses and sorts every tag (semvers, RE2 filters): thousands of them cost
        # a second of CPU, which must not hold the loop every other project is waiting on.
        candidates = await asyncio.to_thread(sel.image_candidates, sub, tags)
        # A Digest subscription follows a mutable tag: caching it by tag would defeat it.
        cached = sub.cache_by_tag and sub.strategy != "Digest"
        facts: list[sel.ImageFacts] = []
        if sel.fetch_all_candidates(sub):
            fetched = await gather_limited(
                _IMAGE_CONCURRENCY,
                [self.oci.image(sub.repo_url, tag, by_tag=cached, auth=auth) for tag in candidates],
            )
            facts = [f for f in fetched if f is not None]
        else:
            for tag in candidates:
                image = await self.oci.image(sub.repo_url, tag, by_tag=cached, auth=auth)
                if image is not None and sel.image_accepts(sub, image):
                    facts.append(image)
                    if len(facts) >= sub.discovery_limit:
                        break
        out: dict[str, Any] = {
            "repoURL": without_credentials(sub.repo_url),
            "references": sel.discovered_images(sub, facts),
        }
        if sub.platform is not None:
            out["platform"] = sel.platform_text(sub)
        if sub.name:
            out["subscriptionName"] = sub.name
        return out

    async def _chart(self, sub: ChartSubscription, project: str) -> dict[str, Any]:
        auth = self._auth(project, CredentialType.HELM)
        versions = await self.charts.versions(sub.repo_url, sub.chart_name, auth)
        out: dict[str, Any] = {
            "repoURL": without_credentials(sub.repo_url),
            "versions": await asyncio.to_thread(sel.chart_versions, sub, versions),
        }
        if sub.chart_name:
            out["name"] = sub.chart_name
        if sub.semver_constraint is not None:
            out["semverConstraint"] = sub.semver_constraint.text
        if sub.name:
            out["subscriptionName"] = sub.name
        return out

    async def _observed(self, sub: GitSubscription, access: _GitAccess) -> dict[str, Any] | None:
        insecure = sub.insecure_skip_tls_verify
        if sub.tag_based:
            refs = await self.git.ls_remote(
                sub.repo_url, "refs/tags/*", insecure=insecure, credential=access.credential
            )
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
        refs = await self.git.ls_remote(
            sub.repo_url, ref, insecure=insecure, credential=access.credential
        )
        return {"branchHead": refs[ref]} if ref in refs else None

    async def _git(
        self, sub: GitSubscription, prev: Mapping[str, Any] | None, access: _GitAccess
    ) -> dict[str, Any]:
        observed = await self._observed(sub, access)
        out: dict[str, Any] = {"repoURL": without_credentials(sub.repo_url)}
        if sub.name:
            out["subscriptionName"] = sub.name
        if (
            prev is not None
            and prev.get("repoURL") == out["repoURL"]
            and observed is not None
            and prev.get("observedRefs") == observed
        ):
            # Nothing relevant moved: the previous selection stands (Kargo skips the clone).
            out["commits"] = list(prev.get("commits") or ())
            out["observedRefs"] = observed
            return out
        insecure = sub.insecure_skip_tls_verify
        if sub.tag_based:
            found = await self.git.tags(
                sub.repo_url,
                insecure=insecure,
                project=access.project,
                credential=access.credential,
            )
            ordered = await asyncio.to_thread(sel.ordered_tags, sub, found)
            if sub.filters_paths:
                kept = []
                for tag in ordered:
                    paths = await self.git.changed_paths(
                        sub.repo_url, tag.commit_id, access.project
                    )
                    if sel.paths_match(sub, paths):
                        kept.append(tag)
                        if len(kept) >= sub.discovery_limit:
                            break
                ordered = kept
            out["commits"] = sel.commits_from_tags(sub, ordered)
        else:
            out["commits"] = sel.commits_from_branch(
                sub, await self._branch(sub, access), sub.branch
            )
        if observed is not None:
            out["observedRefs"] = observed
        return out

    async def _branch(self, sub: GitSubscription, access: _GitAccess) -> list[sel.CommitFacts]:
        insecure = sub.insecure_skip_tls_verify
        if not sub.filters_paths and not sub.expression_filter:
            return await self.git.branch_commits(
                sub.repo_url,
                sub.branch,
                sub.discovery_limit,
                insecure=insecure,
                project=access.project,
                credential=access.credential,
            )
        selected: list[sel.CommitFacts] = []
        skip, batch = 0, sub.discovery_limit
        while skip < _MAX_WALK:
            commits = await self.git.branch_commits(
                sub.repo_url,
                sub.branch,
                batch,
                insecure=insecure,
                skip=skip,
                project=access.project,
                credential=access.credential,
            )
            if not commits:
                break
            for commit in commits:
                if not sel.commit_passes(sub, commit):
                    continue
                if not sub.filters_paths or sel.paths_match(
                    sub, await self.git.changed_paths(sub.repo_url, commit.id, access.project)
                ):
                    selected.append(commit)
                    if len(selected) >= sub.discovery_limit:
                        return selected
            skip, batch = skip + batch, min(batch * 2, 1000)
        return selected


@dataclass(frozen=True, slots=True)
class _GitAccess:
    """Who reads a git subscription: the project (its own mirror) and what credential it has."""

    project: str
    credential: Credential | None
