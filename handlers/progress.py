"""Following Promotions on GitHub: check runs on the Freight's commits, and command replies.

Each GitHub commit of the Promotion's Freight gets a ``promote: STAGE`` check run, and so does the
head commit of any pull request the Promotion's steps opened or wait on (``output.pr.url``).

The controller calls :meth:`Progress.on_promotion` for every Promotion change on every replica;
only the leader acts, and only when something a user would see changed
(:func:`handlers.checks.progress_key`). Work is queued per Promotion on the integration's
:class:`~handlers.queue.KeyedQueue`, coalesced to the newest copy, so a burst of step updates
becomes one request per check run. Check-run ids are kept on the Promotion
(``longshoreman.dev/github-checks``) so a restarted or new leader updates the same runs instead
of creating new ones; the reply to a command is found the same way
(``longshoreman.dev/github-reply``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

import gidgethub
from cachetools import LRUCache, TTLCache

from handlers import checks
from handlers.client import GitHubAPI
from handlers.context import CHECKS_ANNOTATION, REPLY_ANNOTATION, Deps, read_json_annotation
from handlers.queue import KeyedQueue
from promoter.chatops import Snapshot
from promoter.errors import LongshoremanError, StepError
from promoter.model import name_of, namespace_of
from promoter.steps.github import repo_full_name

log = logging.getLogger(__name__)


def freight_label(freight: Mapping[str, Any] | None, name: str) -> str:
    if freight and freight.get("alias"):
        return str(freight["alias"])
    return name[:12] or "?"


def commit_targets(freight: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """``(owner/repo, sha)`` of the Freight's git commits that live on GitHub-like URLs."""
    out: list[tuple[str, str]] = []
    for commit in (freight or {}).get("commits") or ():
        if not isinstance(commit, Mapping) or not commit.get("id"):
            continue
        try:
            repo = repo_full_name(str(commit.get("repoURL") or ""))
        except StepError:
            continue
        target = (repo, str(commit["id"]))
        if target not in out:
            out.append(target)
    return out


_PULL_URL = re.compile(r"^https?://[^/]+/(?P<repo>[^/]+/[^/]+)/pull/(?P<number>\d+)$")


def pull_targets(promotion: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(owner/repo, number)`` of the pull requests the Promotion's steps opened or wait on."""
    out: list[tuple[str, int]] = []
    for output in ((promotion.get("status") or {}).get("state") or {}).values():
        pr = output.get("pr") if isinstance(output, Mapping) else None
        match = _PULL_URL.match(str(pr.get("url") or "")) if isinstance(pr, Mapping) else None
        if match:
            target = (match.group("repo"), int(match.group("number")))
            if target not in out:
                out.append(target)
    return out


class Progress:
    def __init__(self, deps: Deps, queue: KeyedQueue) -> None:
        self.deps = deps
        self.queue = queue
        self._latest: dict[str, dict[str, Any]] = {}
        self._views: LRUCache[str, tuple[Any, ...]] = LRUCache(maxsize=10_000)
        self._check_ids: LRUCache[str, dict[str, int]] = LRUCache(maxsize=10_000)
        self._check_urls: LRUCache[str, str] = LRUCache(maxsize=10_000)
        self._sent: LRUCache[tuple[str, str], str] = LRUCache(maxsize=50_000)
        self._not_installed: TTLCache[str, bool] = TTLCache(maxsize=4096, ttl=600)
        self.synced = 0

    # ---- controller listener ----------------------------------------------------------------

    def on_promotion(self, promotion: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Called by the controller; must not block: queue and return.

        ``old`` is not used: the controller puts its own writes into the informer cache before
        their watch events arrive, so for those ``old`` is already the new object. What was last
        shown is remembered here instead.
        """
        if not self.deps.service.is_leader():
            return
        key = checks.external_id(promotion)
        view = (checks.progress_key(promotion), read_json_annotation(promotion, REPLY_ANNOTATION))
        if self._views.get(key) == view:
            return
        self._views[key] = view
        first = key not in self._latest
        self._latest[key] = copy.deepcopy(promotion)
        if first and not self.queue.submit(f"promotion:{key}", lambda: self._sync_latest(key)):
            # Backlog full: forget it, so the next change of this Promotion tries again.
            self._latest.pop(key, None)
            self._views.pop(key, None)

    async def _sync_latest(self, key: str) -> None:
        promotion = self._latest.pop(key, None)
        if promotion is not None:
            await self.sync(promotion)

    # ---- syncing ----------------------------------------------------------------------------

    async def sync(self, promotion: Mapping[str, Any]) -> None:
        namespace = namespace_of(promotion) or "default"
        snapshot = await self.deps.service.snapshot(namespace)
        freight = next(
            (f for f in snapshot.freight if name_of(f) == checks.freight_of(promotion)),
            (promotion.get("status") or {}).get("freight"),
        )
        label = freight_label(freight, checks.freight_of(promotion))
        try:
            await self._sync_checks(promotion, snapshot, freight, label)
        except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
            log.warning("updating check runs of %s failed: %s", checks.external_id(promotion), e)
        try:
            await self._sync_reply(promotion, label)
        except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
            log.warning("updating the reply for %s failed: %s", checks.external_id(promotion), e)
        self.synced += 1

    def link(self, promotion: Mapping[str, Any]) -> str | None:
        key = checks.external_id(promotion)
        return self.deps.settings.link_for(
            namespace_of(promotion) or "default", name_of(promotion)
        ) or self._check_urls.get(key)

    async def _api_for(self, repo: str) -> GitHubAPI | None:
        if repo.lower() in self._not_installed:
            return None
        try:
            return await self.deps.client.repo_api(repo)
        except gidgethub.BadRequest as e:
            if int(e.status_code) in (403, 404):
                self._not_installed[repo.lower()] = True
                return None
            raise

    async def _sync_checks(
        self,
        promotion: Mapping[str, Any],
        snapshot: Snapshot,
        freight: Mapping[str, Any] | None,
        label: str,
    ) -> None:
        key = checks.external_id(promotion)
        ids = dict(read_json_annotation(promotion, CHECKS_ANNOTATION))
        ids.update(self._check_ids.get(key) or {})
        downstream = checks.downstream_stages(checks.stage_of(promotion), snapshot.stages)
        created = False
        targets = commit_targets(freight)
        for repo, number in pull_targets(promotion):
            # The PR a step opened gets the check too, on its head commit (an ETag-cached read).
            api = await self._api_for(repo)
            if api is not None:
                pull = await api.getitem(f"/repos/{repo}/pulls/{number}")
                head = str((pull.get("head") or {}).get("sha") or "")
                if head and (repo, head) not in targets:
                    targets.append((repo, head))
        for repo, sha in targets:
            api = await self._api_for(repo)
            if api is None:
                continue
            fields = checks.check_run_fields(
                promotion, freight_label=label, link=self.link(promotion), downstream=downstream
            )
            target = f"{repo}@{sha}"
            digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
            if self._sent.get((key, target)) == digest:
                continue
            run_id = ids.get(target)
            if run_id is None:
                data = await api.post(f"/repos/{repo}/check-runs", data={"head_sha": sha, **fields})
                run_id = int(data["id"])
                ids[target] = run_id
                self._check_urls.setdefault(key, str(data.get("html_url") or ""))
                created = True
            else:
                data = await api.patch(f"/repos/{repo}/check-runs/{run_id}", data=fields)
                self._check_urls.setdefault(key, str(data.get("html_url") or ""))
            self._sent[(key, target)] = digest
        self._check_ids[key] = ids
        if created:
            await self.deps.service.annotate(
                namespace_of(promotion) or "default",
                name_of(promotion),
                CHECKS_ANNOTATION,
                json.dumps(ids, sort_keys=True),
            )

    async def _sync_reply(self, promotion: Mapping[str, Any], label: str) -> None:
        reply = read_json_annotation(promotion, REPLY_ANNOTATION)
        repo, comment = reply.get("repo"), reply.get("comment")
        if not repo or not comment:
            return
        body = checks.reply_body(
            str(reply.get("user") or "someone"),
            str(reply.get("command") or ""),
            promotion,
            freight_label=label,
            link=self.link(promotion),
        )
        key = (checks.external_id(promotion), f"reply:{comment}")
        digest = hashlib.sha256(body.encode()).hexdigest()
        if self._sent.get(key) == digest:
            return
        api = await self._api_for(str(repo))
        if api is None:
            return
        await api.patch(f"/repos/{repo}/issues/comments/{int(comment)}", data={"body": body})
        self._sent[key] = digest
