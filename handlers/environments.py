"""Following Promotions as GitHub Deployments: gather the facts, ask, send.

:class:`Environments` is called by :class:`handlers.progress.Progress` with the one read model of
a Promotion each time what it shows may have changed (a step, the phase, the Stage's
verification). It reads what GitHub holds only when memory does not know it (after a restart, a
change of leader), lets :func:`handlers.deployments.plan` decide, and sends the actions.

What it keeps on the Promotion (``longshoreman.dev/github-deployment``): the Deployment ids by
commit, so a new leader needs no search; the environment's name, pages and URL, which the status
pages and ``/status`` link to; a warning when the App may not write Deployments; and, once
GitHub shows all of it, a digest of what it shows (:mod:`promoter.chat.shown`), so a replay after
a restart or on a new leader sends and reads nothing. A SIGKILL between GitHub creating a
Deployment and the ids being recorded loses nothing: the Deployment is found again by its
payload (:func:`handlers.deployments.parse`).

A missing ``deployments`` permission (GitHub's 403 "Resource not accessible by integration": the
installation's owner has not accepted the App's request for it) is logged once per repository,
shown as a warning on the Promotion's page, and changes nothing else: the Promotion, its check
runs and its reply go on as before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import gidgethub
from cachetools import LRUCache, TTLCache

from handlers import deployments as d
from handlers.client import GitHubAPI
from handlers.context import Deps
from promoter.chat.shown import digest
from promoter.chat.views import PromotionView
from promoter.errors import LongshoremanError
from promoter.resources import annotations as ann
from promoter.resources.model import name_of, namespace_of
from promoter.rules.argocd import external_url, touched_apps

log = logging.getLogger(__name__)

# How long a repository that refused Deployments is left alone before trying again (its owner
# may accept the permission meanwhile).
DENIED_TTL = 600.0


@runtime_checkable
class ApplicationSource(Protocol):
    """What a PromotionService may also offer: Argo CD Applications, for ``environment_url``."""

    async def application(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


def _permission_missing(e: gidgethub.BadRequest) -> bool:
    # GitHub: 403 "Resource not accessible by integration". A secondary rate limit is a 403 too,
    # but reaches here only once the client's retries are spent, and says so.
    return int(e.status_code) == 403 and "rate limit" not in str(e).lower()


class Environments:
    """GitHub Deployments for Promotions to Stages that opt in (one per Promotion and commit)."""

    def __init__(self, deps: Deps, api_for: Callable[[str], Awaitable[GitHubAPI | None]]) -> None:
        self.deps = deps
        self._api_for = api_for
        self._ids: LRUCache[tuple[str, str], int] = LRUCache(maxsize=50_000)
        # The newest status GitHub holds for our Deployment, as far as we sent it.
        self._latest: LRUCache[tuple[str, str], dict[str, Any]] = LRUCache(maxsize=50_000)
        # Targets whose predecessor was looked after on success (read the history once).
        self._history_done: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=50_000)
        self._denied: TTLCache[str, str] = TTLCache(
            maxsize=4096, ttl=DENIED_TTL, timer=deps.clock.monotonic
        )
        self._told: set[str] = set()
        # Promotions whose Deployment someone else wrote a status on since (see forget()).
        self._changed: set[str] = set()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def forget(self, deployment: int) -> None:
        """Someone else wrote a status on this Deployment: read it from GitHub next time."""
        for memo, known in list(self._ids.items()):
            if known == deployment:
                self._latest.pop(memo, None)
                self._history_done.pop(memo, None)
                # Its recorded "shown" no longer says what GitHub shows.
                self._changed.add(memo[0])

    async def sync(
        self,
        promotion: Mapping[str, Any],
        view: PromotionView,
        commits: list[tuple[str, str]],
        stage: Mapping[str, Any] | None,
        *,
        siblings: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """``commits``: ``(owner/repo, sha)`` of the Promotion's Freight on GitHub;
        ``siblings``: the project's Promotions (is a later one of the Stage finished? see
        :func:`handlers.deployments.superseded`)."""
        env = ann.github_environment(stage)
        if env is None or not env.name:
            return
        targets = [
            (repo, sha)
            for repo, sha in commits
            if env.covers(repo) and self.deps.settings.deployments_in(repo)
        ]
        superseded = d.superseded(promotion, siblings)
        if superseded:
            # Only what was written already is kept up to date: a Stage that opts in gets one
            # Deployment for what it holds now, not one for each Promotion in its history.
            recorded = ann.read_json(promotion, ann.GITHUB_DEPLOYMENT).get("ids") or {}
            targets = [(r, s) for r, s in targets if f"{r}@{s}" in recorded]
        if not targets:
            return
        key = d.promotion_key(view)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            await self._sync(promotion, view, env, targets, key, superseded)

    async def _sync(
        self,
        promotion: Mapping[str, Any],
        view: PromotionView,
        env: ann.GitHubEnvironment,
        targets: list[tuple[str, str]],
        key: str,
        superseded: bool,
    ) -> None:
        record = ann.read_json(promotion, ann.GITHUB_DEPLOYMENT)
        environment_url = env.url or await self._app_url(promotion)
        status = d.status_fields(view, log_url=view.link, environment_url=environment_url)
        sent = digest(status, targets, env.name, superseded)
        if record.get("shown") == sent and key not in self._changed:
            return  # GitHub shows all of it already (a replay after a restart, a new leader)
        self._changed.discard(key)
        ids: dict[str, int] = {
            str(k): int(v) for k, v in (record.get("ids") or {}).items() if str(v).isdigit()
        }
        warnings: list[str] = []
        complete = True
        for repo, sha in targets:
            target = f"{repo}@{sha}"
            denied = self._denied.get(repo.lower())
            if denied is not None:
                warnings.append(denied)
                continue
            try:
                found = await self._sync_target(
                    repo, sha, target, key, view, env, status, ids, superseded
                )
            except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
                complete = False
                if isinstance(e, gidgethub.BadRequest) and _permission_missing(e):
                    warnings.append(self._deny(repo, env.name, e))
                else:
                    log.warning(
                        "writing the GitHub Deployment of %s in %s failed: %s", key, repo, e
                    )
                continue
            if found is not None:
                ids[target] = found
                self._told.discard(repo.lower())
        web = self.deps.settings.git_base_url
        new: dict[str, Any] = {
            "environment": env.name,
            "ids": ids,
            "links": [
                {"repo": repo, "url": d.environment_page(f"{web}/{repo}", env.name)}
                # Only where a Deployment is: not where the App is not installed.
                for repo in dict.fromkeys(r for r, sha in targets if f"{r}@{sha}" in ids)
            ],
        }
        if environment_url:
            new["environmentURL"] = environment_url
        if warnings:
            new["warning"] = "; ".join(dict.fromkeys(warnings))
        if complete and not warnings:
            new["shown"] = sent
        if new != record:
            try:
                await self.deps.service.annotate(
                    namespace_of(promotion) or "default",
                    name_of(promotion),
                    ann.GITHUB_DEPLOYMENT,
                    json.dumps(new, sort_keys=True),
                )
            except LongshoremanError as e:  # gone, or the cluster refused: recorded next time
                log.info("recording the GitHub Deployments of %s failed: %s", key, e)

    def _deny(self, repo: str, environment: str, e: gidgethub.BadRequest) -> str:
        warning = (
            f"GitHub Deployments to {environment} are not written in {repo}: the App lacks the "
            "deployments permission there (its owner can accept it in the installation's settings)"
        )
        self._denied[repo.lower()] = warning
        if repo.lower() not in self._told:
            self._told.add(repo.lower())
            log.warning("%s; GitHub answered %s: %s", warning, int(e.status_code), e)
        return warning

    async def _app_url(self, promotion: Mapping[str, Any]) -> str | None:
        source = self.deps.service
        if not isinstance(source, ApplicationSource):
            return None
        for namespace, name in touched_apps(promotion):
            url = external_url(await source.application(namespace, name))
            if url:
                return url
        return None

    async def _sync_target(
        self,
        repo: str,
        sha: str,
        target: str,
        key: str,
        view: PromotionView,
        env: ann.GitHubEnvironment,
        status: Mapping[str, Any],
        ids: Mapping[str, int],
        superseded: bool,
    ) -> int | None:
        """Write what this commit's Deployment lacks; the Deployment's id (None: not installed)."""
        api = await self._api_for(repo)
        if api is None:
            return None
        memo = (key, target)
        mine_id = self._ids.get(memo) or ids.get(target)
        mine: d.Existing | None
        if mine_id is not None:
            latest = self._latest.get(memo)
            if latest is None:
                latest = await self._newest_status(api, repo, mine_id)
            mine = d.Existing(mine_id, key, True, latest)
        else:
            mine = await self._find(api, repo, sha, env.name, key)
        older: list[d.Existing] = []
        if d.needs_history(status, mine) and not self._history_done.get(memo):
            older = await self._history(api, repo, env.name, mine.id if mine else None)
        fields = d.deployment_fields(view, env, sha)
        for action in d.plan(key, fields, status, mine, older, superseded=superseded):
            if isinstance(action, d.Create):
                created = await api.post(f"/repos/{repo}/deployments", data=dict(action.fields))
                mine = d.Existing(int(created["id"]), key, True, None)
                self._ids[memo] = mine.id
                await self._post(api, repo, mine.id, action.status)
                self._latest[memo] = dict(action.status)
            elif mine is not None and action.deployment == mine.id:
                await self._post(api, repo, action.deployment, action.status)
                self._latest[memo] = dict(action.status)
            else:
                await self._post(api, repo, action.deployment, action.status)
        if mine is not None and mine.latest is not None and memo not in self._latest:
            self._latest[memo] = dict(mine.latest)
        if status.get("state") == "success":
            self._history_done[memo] = True
        if mine is not None:
            self._ids[memo] = mine.id
        return mine.id if mine is not None else None

    async def _post(
        self, api: GitHubAPI, repo: str, deployment: int, status: Mapping[str, Any]
    ) -> None:
        await api.post(f"/repos/{repo}/deployments/{deployment}/statuses", data=dict(status))

    async def _newest_status(
        self, api: GitHubAPI, repo: str, deployment: int
    ) -> dict[str, Any] | None:
        # GitHub lists statuses newest first: one is all it takes.
        try:
            statuses = await api.getitem(
                f"/repos/{repo}/deployments/{deployment}/statuses{{?per_page}}", {"per_page": 1}
            )
        except gidgethub.BadRequest as e:
            if int(e.status_code) != 404:
                raise
            # Deleted on GitHub (only an inactive Deployment can be): it stays deleted.
            return {"state": "inactive"}
        return dict(statuses[0]) if isinstance(statuses, list) and statuses else None

    async def _find(
        self, api: GitHubAPI, repo: str, sha: str, environment: str, key: str
    ) -> d.Existing | None:
        """Our Deployment for this Promotion on ``sha`` (one made before a restart), by payload."""
        found = []
        async for raw in api.getiter(
            f"/repos/{repo}/deployments{{?sha,environment,task,per_page}}",
            {"sha": sha, "environment": environment, "task": d.TASK, "per_page": 100},
        ):
            found.append(d.parse(raw, self.deps.settings.app_id))
        mine = d.find_mine(found, key)
        if mine is None:
            return None
        return d.Existing(mine.id, key, True, await self._newest_status(api, repo, mine.id))

    async def _history(
        self, api: GitHubAPI, repo: str, environment: str, mine: int | None
    ) -> list[d.Existing]:
        """Our older Deployments of the environment, newest first, read until the one that was
        active (others' are listed without their statuses: they are left alone)."""
        page = await api.getitem(
            f"/repos/{repo}/deployments{{?environment,per_page}}",
            {"environment": environment, "per_page": d.HISTORY},
        )
        out: list[d.Existing] = []
        for raw in page if isinstance(page, list) else ():
            item = d.parse(raw, self.deps.settings.app_id)
            if mine is not None and item.id >= mine:
                continue
            if item.ours:
                item = d.Existing(
                    item.id, item.promotion, True, await self._newest_status(api, repo, item.id)
                )
                out.append(item)
                if item.state in ("success", "inactive"):
                    break
            else:
                out.append(item)
        return out
