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

Verifications are followed the same way through the controller's Stage listener
(:meth:`Progress.on_stage`): the Stage's newest verification entry gets a ``verify: STAGE`` check
run on the same commits as its Promotion's ``promote: STAGE`` run, one run per verification, with
the AnalysisRun's metrics when the service can read AnalysisRuns (:class:`AnalysisRunSource`).
Their ids are found again after a restart by name and external id through GitHub's "list check
runs for a Git reference", so nothing needs writing to the Stage.

For Stages that opt in, each change is also handed to :class:`handlers.environments.Environments`
with the same read model: the Promotion's GitHub Deployments (and their verification
description, from the Stage listener).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

import gidgethub
from cachetools import LRUCache, TTLCache

from handlers import checks
from handlers.client import GitHubAPI
from handlers.context import Deps
from handlers.environments import Environments
from handlers.queue import KeyedQueue
from promoter.chat.views import PromotionView, freight_label, promotion_view
from promoter.errors import LongshoremanError, StepError
from promoter.resources import annotations as ann
from promoter.resources.model import name_of, namespace_of
from promoter.resources.stages import available_to, downstream_stages, phase_of
from promoter.steps.github import repo_full_name

log = logging.getLogger(__name__)


@runtime_checkable
class AnalysisRunSource(Protocol):
    """What a PromotionService may also offer: AnalysisRuns to read, for ``verify:`` runs."""

    async def analysis_run(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


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
        self._not_installed: TTLCache[str, bool] = TTLCache(
            maxsize=4096, ttl=600, timer=deps.clock.monotonic
        )
        self._latest_stages: dict[str, dict[str, Any]] = {}
        self._verify_ids: LRUCache[tuple[str, str], int] = LRUCache(maxsize=50_000)
        # GitHub Deployments, for Stages that opt in (handlers/environments.py).
        self.environments = Environments(deps, self._api_for)

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
        view = (checks.progress_key(promotion), ann.read_json(promotion, ann.GITHUB_REPLY))
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

    def on_stage(self, stage: dict[str, Any], old: dict[str, Any] | None) -> None:
        """The controller's Stage listener; like :meth:`on_promotion`, it only queues."""
        if not self.deps.service.is_leader():
            return
        view = checks.verification_key(stage)
        if not view:
            return
        key = f"{namespace_of(stage) or 'default'}/{name_of(stage)}"
        if self._views.get(f"stage:{key}") == view:
            return
        self._views[f"stage:{key}"] = view
        first = key not in self._latest_stages
        self._latest_stages[key] = copy.deepcopy(stage)
        if first and not self.queue.submit(f"stage:{key}", lambda: self._sync_stage(key)):
            self._latest_stages.pop(key, None)
            self._views.pop(f"stage:{key}", None)

    async def _sync_stage(self, key: str) -> None:
        stage = self._latest_stages.pop(key, None)
        if stage is None:
            return
        try:
            await self.sync_verification(stage)
        except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
            log.warning("updating the verify check runs of Stage %s failed: %s", key, e)
            # Forget what was shown, so the next change of the Stage tries again.
            self._views.pop(f"stage:{key}", None)

    # ---- syncing ----------------------------------------------------------------------------

    async def sync(self, promotion: Mapping[str, Any]) -> None:
        namespace = namespace_of(promotion) or "default"
        snapshot = await self.deps.service.snapshot(namespace)
        freight = next(
            (f for f in snapshot.freight if name_of(f) == checks.freight_of(promotion)),
            (promotion.get("status") or {}).get("freight"),
        )
        # The one read model, built once; the check runs and the reply only format it.
        view = promotion_view(
            promotion,
            stage=snapshot.stage(checks.stage_of(promotion)),
            stages=snapshot.stages,
            freights=snapshot.freight,
            # Without a Promotion page the run has no better place to link to than itself,
            # which GitHub already shows: no Details link then.
            link=self.page(promotion),
            project=snapshot.project_config,
            cluster=snapshot.cluster_config,
        )
        await self._sync_environment(
            promotion,
            view,
            freight,
            snapshot.stage(view.stage),
            siblings=snapshot.promotions,
        )
        shown = self._shown(promotion, view)
        if shown is not None and shown == ann.first(promotion, (ann.GITHUB_SHOWN,)):
            # Finished, and GitHub shows exactly this already (a replay after a restart or a
            # change of leader): writing it again would cost requests in proportion to history.
            return
        done = True
        try:
            await self._sync_checks(promotion, view, freight)
        except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
            done = False
            log.warning("updating check runs of %s failed: %s", checks.external_id(promotion), e)
        try:
            await self._sync_reply(promotion, view)
        except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
            done = False
            log.warning("updating the reply for %s failed: %s", checks.external_id(promotion), e)
        if done and shown is not None:
            try:
                await self.deps.service.annotate(
                    namespace_of(promotion) or "default",
                    name_of(promotion),
                    ann.GITHUB_SHOWN,
                    shown,
                )
            except LongshoremanError as e:  # gone, or the cluster refused: shown again later
                log.info("recording what %s shows failed: %s", checks.external_id(promotion), e)

    async def _sync_environment(
        self,
        promotion: Mapping[str, Any],
        view: PromotionView,
        freight: Mapping[str, Any] | None,
        stage: Mapping[str, Any] | None,
        *,
        siblings: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        try:
            await self.environments.sync(
                promotion, view, commit_targets(freight), stage, siblings=siblings
            )
        except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
            log.warning("updating the GitHub Deployments of %s failed: %s", view.name, e)

    def _shown(self, promotion: Mapping[str, Any], view: PromotionView) -> str | None:
        """A digest of what a finished Promotion's check runs and reply show (None while it
        runs: an active Promotion is resent after a restart, which costs one write per Stage at
        most). Only inputs that survive a restart go in, so the same Promotion digests the same
        on any replica."""
        if not phase_of(promotion).terminal:
            return None
        shown = [
            checks.progress_key(promotion),
            view.label.short,
            view.next_stages,
            view.approve_stages,
            view.verifiable,
            ann.read_json(promotion, ann.GITHUB_REPLY),
            view.link,
        ]
        return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()

    def page(self, promotion: Mapping[str, Any]) -> str | None:
        """The Promotion's status page, when a public URL is configured."""
        return self.deps.settings.link_for(namespace_of(promotion) or "default", name_of(promotion))

    def link(self, promotion: Mapping[str, Any]) -> str | None:
        """Where a reply links: the status page, else the check run."""
        return self.page(promotion) or self._check_urls.get(checks.external_id(promotion))

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

    async def _targets(
        self, promotion: Mapping[str, Any] | None, freight: Mapping[str, Any] | None
    ) -> list[tuple[str, str]]:
        """The commits a Promotion's checks go on: the Freight's, and its pull requests' heads."""
        targets = commit_targets(freight)
        for repo, number in pull_targets(promotion or {}):
            # The PR a step opened gets the check too, on its head commit (an ETag-cached read).
            api = await self._api_for(repo)
            if api is not None:
                pull = await api.getitem(f"/repos/{repo}/pulls/{number}")
                head = str((pull.get("head") or {}).get("sha") or "")
                if head and (repo, head) not in targets:
                    targets.append((repo, head))
        return targets

    async def _sync_checks(
        self,
        promotion: Mapping[str, Any],
        view: PromotionView,
        freight: Mapping[str, Any] | None,
    ) -> None:
        key = checks.external_id(promotion)
        ids = dict(ann.read_json(promotion, ann.GITHUB_CHECKS))
        ids.update(self._check_ids.get(key) or {})
        fields = checks.check_run_fields(view)
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        created = False
        targets = await self._targets(promotion, freight)
        for repo, sha in targets:
            api = await self._api_for(repo)
            if api is None:
                continue
            target = f"{repo}@{sha}"
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
                ann.GITHUB_CHECKS,
                json.dumps(ids, sort_keys=True),
            )

    async def _sync_reply(self, promotion: Mapping[str, Any], view: PromotionView) -> None:
        reply = ann.read_json(promotion, ann.GITHUB_REPLY)
        repo, comment = reply.get("repo"), reply.get("comment")
        if not repo or not comment:
            return
        body = checks.reply_body(
            str(reply.get("user") or "someone"),
            str(reply.get("command") or ""),
            replace(view, link=self.link(promotion)),
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

    # ---- verify: STAGE ----------------------------------------------------------------------

    async def sync_verification(self, stage: Mapping[str, Any]) -> None:
        """Create or update the ``verify: STAGE`` check runs of the Stage's newest verification."""
        entry = checks.latest_verification(stage)
        if entry is None:
            return
        namespace = namespace_of(stage) or "default"
        stage_name = name_of(stage)
        snapshot = await self.deps.service.snapshot(namespace)
        promotion_name = checks.verification_promotion(stage, entry)
        promotion = next((p for p in snapshot.promotions if name_of(p) == promotion_name), None)
        last = (stage.get("status") or {}).get("lastPromotion") or {}
        freight_name = (
            checks.freight_of(promotion)
            if promotion is not None
            else str((last.get("freight") or {}).get("name") or "")
        )
        freight = next((f for f in snapshot.freight if name_of(f) == freight_name), None)
        run = await self._analysis_run(entry)
        external = checks.verification_external_id(namespace, promotion_name, entry)
        link = self.deps.settings.link_for(namespace, promotion_name) if promotion_name else None
        fields = checks.verification_check_fields(
            stage_name,
            entry,
            run,
            external=external,
            freight_label=freight_label(freight_name, fallback=freight).short,
            link=link,
            downstream=downstream_stages(stage_name, snapshot.stages),
            # Where a person may still let it in: not available there (nor approved) yet.
            approvable=[
                name_of(s)
                for s in snapshot.stages
                if name_of(s) in downstream_stages(stage_name, snapshot.stages)
                and freight is not None
                and not available_to(s, freight, self.deps.clock.now())
            ],
        )
        if promotion is not None and ann.github_environment(stage) is not None:
            # The verification's end is told in the Deployment's description too.
            view = promotion_view(
                promotion, stage=stage, stages=snapshot.stages, freights=snapshot.freight,
                link=self.page(promotion),
            )  # fmt: skip
            await self._sync_environment(
                promotion, view, freight, stage, siblings=snapshot.promotions
            )
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        for repo, sha in await self._targets(promotion, freight):
            target = f"{repo}@{sha}"
            if self._sent.get((external, target)) == digest:
                continue
            api = await self._api_for(repo)
            if api is None:
                continue
            run_id = self._verify_ids.get((external, target))
            if run_id is None:
                run_id = await self._find_check_run(api, repo, sha, fields["name"], external)
            if run_id is None:
                data = await api.post(f"/repos/{repo}/check-runs", data={"head_sha": sha, **fields})
                run_id = int(data["id"])
            else:
                await api.patch(f"/repos/{repo}/check-runs/{run_id}", data=fields)
            self._verify_ids[(external, target)] = run_id
            self._sent[(external, target)] = digest

    async def _analysis_run(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        ref = entry.get("analysisRun") or {}
        source = self.deps.service
        if not ref.get("name") or not isinstance(source, AnalysisRunSource):
            return None
        return await source.analysis_run(str(ref.get("namespace") or ""), str(ref["name"]))

    async def _find_check_run(
        self, api: GitHubAPI, repo: str, sha: str, name: str, external: str
    ) -> int | None:
        """Our run with this name and external id on ``sha`` (one made before a restart)."""
        app_id = self.deps.settings.app_id
        async for run in api.getiter(
            f"/repos/{repo}/commits/{sha}/check-runs{{?check_name,filter,per_page}}",
            {"check_name": name, "filter": "all", "per_page": 100},
            iterable_key="check_runs",
        ):
            if (
                run.get("name") == name
                and run.get("external_id") == external
                and str((run.get("app") or {}).get("id")) == str(app_id)
            ):
                return int(run["id"])
        return None
