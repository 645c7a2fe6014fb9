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
(``longshoreman.dev/github-reply``). What the runs and the reply show is recorded there too
(``longshoreman.dev/github-shown``, :mod:`promoter.chat.shown`), and so is what the newest
verification's runs show (``longshoreman.dev/github-verify-shown``): a restarted or new leader,
which replays every Promotion and Stage, writes none of them again unless it changed.

Verifications are followed the same way through the controller's Stage listener
(:meth:`Progress.on_stage`): the Stage's newest verification entry gets a ``verify: STAGE`` check
run on the same commits as its Promotion's ``promote: STAGE`` run, one run per verification, with
the AnalysisRun's metrics when the service can read AnalysisRuns (:class:`AnalysisRunSource`).
Their ids are found again after a restart by name and external id through GitHub's "list check
runs for a Git reference" (only when there is something new to write), so nothing needs writing to
the Stage.

A Freight's approvals are part of what those runs show (who let it into which Stage, from a page,
a comment, Slack or the command line: all write ``status.approvedFor`` through the chat planner's
port), so when they change the controller's Freight listener (:meth:`Progress.on_freight`) has
the runs that report that Freight drawn again, in the same per-Promotion and per-Stage queues.

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
from handlers.markdown import diff_markdown
from handlers.queue import KeyedQueue
from promoter.chat.diff import freight_diff, promotion_base, ranges_to_fetch
from promoter.chat.shown import Shown, digest
from promoter.chat.views import PromotionView, freight_label, promotion_view
from promoter.errors import LongshoremanError, StepError
from promoter.resources import annotations as ann
from promoter.resources.model import name_of, namespace_of
from promoter.resources.stages import approvals_of, available_to, downstream_stages, phase_of
from promoter.steps.github import repo_full_name

log = logging.getLogger(__name__)

# Surfaces of a Promotion in its github-shown record (promoter.chat.shown), and the check run's
# page the reply links to when there is no status page.
CHECKS = "checks"
REPLY = "reply"
LINK = "link"


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


def _shown_before(promotion: Mapping[str, Any], view: PromotionView) -> bool:
    """Whether an older release recorded that GitHub shows this finished Promotion: its
    ``github-shown`` was one digest of these inputs (read until every Promotion that finished
    before the upgrade is gone)."""
    legacy = ann.first(promotion, (ann.GITHUB_SHOWN,))
    if not legacy or len(legacy) != 64 or not phase_of(promotion).terminal:
        return False
    inputs = [
        checks.progress_key(promotion),
        view.label.short,
        view.next_stages,
        view.approve_stages,
        view.verifiable,
        ann.read_json(promotion, ann.GITHUB_REPLY),
        view.link,
    ]
    text = json.dumps(inputs, sort_keys=True, default=str)
    return legacy == hashlib.sha256(text.encode()).hexdigest()


class Progress:
    def __init__(self, deps: Deps, queue: KeyedQueue) -> None:
        self.deps = deps
        self.queue = queue
        self._latest: dict[str, dict[str, Any]] = {}
        self._views: LRUCache[str, tuple[Any, ...]] = LRUCache(maxsize=10_000)
        self._check_ids: LRUCache[str, dict[str, int]] = LRUCache(maxsize=10_000)
        self._check_urls: LRUCache[str, str] = LRUCache(maxsize=10_000)
        self._sent: LRUCache[tuple[str, str], str] = LRUCache(maxsize=50_000)
        # What each Promotion's check runs and reply show (promoter.chat.shown), and the
        # annotation value last written for it.
        self._shown: LRUCache[str, Shown] = LRUCache(maxsize=10_000)
        self._recorded: LRUCache[str, str] = LRUCache(maxsize=10_000)
        # The same for the newest verification's ``verify:`` runs, by external id.
        self._verify_shown: LRUCache[str, str] = LRUCache(maxsize=10_000)
        self._not_installed: TTLCache[str, bool] = TTLCache(
            maxsize=4096, ttl=600, timer=deps.clock.monotonic
        )
        self._latest_stages: dict[str, dict[str, Any]] = {}
        self._verify_ids: LRUCache[tuple[str, str], int] = LRUCache(maxsize=50_000)
        # What each Freight was last seen approved for (on_freight).
        self._approvals: LRUCache[str, str] = LRUCache(maxsize=50_000)
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
        if not self._enqueue_promotion(key, promotion):
            # Backlog full: forget it, so the next change of this Promotion tries again.
            self._views.pop(key, None)

    def _enqueue_promotion(self, key: str, promotion: Mapping[str, Any]) -> bool:
        """Queue a sync of the Promotion's runs behind any other of the same Promotion (so two
        never race to create its runs), coalesced to the newest copy; False when the backlog
        is full."""
        first = key not in self._latest
        self._latest[key] = copy.deepcopy(dict(promotion))
        if first and not self.queue.submit(f"promotion:{key}", lambda: self._sync_latest(key)):
            self._latest.pop(key, None)
            return False
        return True

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
        if not self._enqueue_stage(key, stage):
            self._views.pop(f"stage:{key}", None)

    def _enqueue_stage(self, key: str, stage: Mapping[str, Any]) -> bool:
        """As :meth:`_enqueue_promotion`, for the Stage's ``verify:`` runs."""
        first = key not in self._latest_stages
        self._latest_stages[key] = copy.deepcopy(dict(stage))
        if first and not self.queue.submit(f"stage:{key}", lambda: self._sync_stage(key)):
            self._latest_stages.pop(key, None)
            return False
        return True

    def on_freight(self, freight: dict[str, Any], old: dict[str, Any] | None) -> None:
        """The controller's Freight listener: when the Freight's approvals change, the runs
        that report it (the ``promote:`` runs of its Promotions, the ``verify:`` run of a Stage
        verifying it) are drawn again, so they show the approval and drop its button.

        ``old`` is not used: the approval's writer puts the Freight into the informer cache
        before the watch event arrives, so ``old`` already holds the approval. What each Freight
        was last seen approved for is remembered here instead, on every replica (a standby that
        becomes leader knows what is new); a Freight seen for the first time is not news, since
        its Promotions' runs are drawn with its approvals when they are replayed.
        """
        key = f"{namespace_of(freight) or 'default'}/{name_of(freight)}"
        approvals = checks.approvals_key(freight)
        before = self._approvals.get(key)
        self._approvals[key] = approvals
        if before is None or before == approvals or not self.deps.service.is_leader():
            return
        if not self.queue.submit(f"freight:{key}", lambda: self._sync_freight(freight)):
            self._approvals[key] = before  # backlog full: the next change tries again

    async def _sync_freight(self, freight: Mapping[str, Any]) -> None:
        namespace, name = namespace_of(freight) or "default", name_of(freight)
        try:
            snapshot = await self.deps.service.snapshot(namespace)
        except LongshoremanError as e:
            log.warning("redrawing the check runs of Freight %s/%s failed: %s", namespace, name, e)
            return
        ours = {name_of(p) for p in snapshot.promotions if checks.freight_of(p) == name}
        for promotion in snapshot.promotions:
            if name_of(promotion) in ours:
                self._enqueue_promotion(checks.external_id(promotion), promotion)
        for stage in snapshot.stages:
            entry = checks.latest_verification(stage)
            if entry is not None and checks.verification_promotion(stage, entry) in ours:
                self._enqueue_stage(f"{namespace}/{name_of(stage)}", stage)

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
            freight_link=self.deps.settings.freight_link_for(
                namespace, checks.freight_of(promotion)
            ),
        )
        await self._sync_environment(
            promotion,
            view,
            freight,
            snapshot.stage(view.stage),
            siblings=snapshot.promotions,
        )
        changes = ""
        if isinstance(freight, Mapping):
            stage = snapshot.stage(view.stage)
            base = promotion_base(stage, freight, snapshot.freight)
            keys = ranges_to_fetch(base, freight, backwards=view.rollback or None)
            facts = await self.deps.diffs.facts(keys) if keys else {}
            diff = freight_diff(view.stage, base, freight, facts, backwards=view.rollback or None)
            changes = diff_markdown(diff, view.label)
        await self._sync_shown(promotion, view, freight, changes)

    async def _sync_shown(
        self,
        promotion: Mapping[str, Any],
        view: PromotionView,
        freight: Mapping[str, Any] | None,
        changes: str = "",
    ) -> None:
        """The check runs and the reply, each written only when what it shows changed
        (:mod:`promoter.chat.shown`); what they show is recorded on the Promotion."""
        key = checks.external_id(promotion)
        recorded = Shown.of(promotion, ann.GITHUB_SHOWN)
        memo = self._shown.get(key)
        if memo is None and _shown_before(promotion, view):
            return  # recorded by an older release: an upgrade must not rewrite history either
        shown = memo if memo is not None else recorded
        # Over the Freight's commits and the pull requests' URLs, not their heads: deciding
        # needs no request. In memory each commit is also remembered on its own (_sent), so a
        # pull request's new head gets the run at the next change.
        fields = checks.check_run_fields(view, changes)
        targets = [commit_targets(freight), pull_targets(promotion)]
        checks_digest = digest(fields, targets)
        if memo is None and recorded.shows(CHECKS, checks_digest):
            pass  # shown before a restart or by the previous leader
        else:
            try:
                await self._sync_checks(promotion, fields, freight)
                shown = shown.showing(CHECKS, checks_digest)
                url = self._check_urls.get(key)
                if url:
                    # The reply links to it when there is no status page: kept, so the reply
                    # renders the same after a restart without writing the run again.
                    shown = shown.noting(LINK, url)
            except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
                log.warning("updating check runs of %s failed: %s", key, e)
        try:
            shown = await self._sync_reply(promotion, view, shown, changes)
        except (gidgethub.GitHubException, LongshoremanError, OSError) as e:
            log.warning("updating the reply for %s failed: %s", key, e)
        self._shown[key] = shown
        value = shown.to_annotation()
        if shown != recorded and self._recorded.get(key) != value:
            try:
                await self.deps.service.annotate(
                    namespace_of(promotion) or "default",
                    name_of(promotion),
                    ann.GITHUB_SHOWN,
                    value,
                )
                self._recorded[key] = value
            except LongshoremanError as e:  # gone, or the cluster refused: recorded next time
                log.info("recording what %s shows failed: %s", key, e)

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

    def page(self, promotion: Mapping[str, Any]) -> str | None:
        """The Promotion's status page, when a public URL is configured."""
        return self.deps.settings.link_for(namespace_of(promotion) or "default", name_of(promotion))

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
        fields: Mapping[str, Any],
        freight: Mapping[str, Any] | None,
    ) -> None:
        key = checks.external_id(promotion)
        ids = dict(ann.read_json(promotion, ann.GITHUB_CHECKS))
        ids.update(self._check_ids.get(key) or {})
        sent = digest(fields)
        created = False
        targets = await self._targets(promotion, freight)
        for repo, sha in targets:
            api = await self._api_for(repo)
            if api is None:
                continue
            target = f"{repo}@{sha}"
            if self._sent.get((key, target)) == sent:
                continue
            run_id = ids.get(target)
            if run_id is None:
                data = await api.post(f"/repos/{repo}/check-runs", data={"head_sha": sha, **fields})
                run_id = int(data["id"])
                ids[target] = run_id
                self._check_urls.setdefault(key, str(data.get("html_url") or ""))
                created = True
            else:
                data = await api.patch(f"/repos/{repo}/check-runs/{run_id}", data=dict(fields))
                self._check_urls.setdefault(key, str(data.get("html_url") or ""))
            self._sent[(key, target)] = sent
        self._check_ids[key] = ids
        if created:
            await self.deps.service.annotate(
                namespace_of(promotion) or "default",
                name_of(promotion),
                ann.GITHUB_CHECKS,
                json.dumps(ids, sort_keys=True),
            )

    async def _sync_reply(
        self, promotion: Mapping[str, Any], view: PromotionView, shown: Shown, changes: str = ""
    ) -> Shown:
        """Edit the reply to the command if what it shows changed; what is shown then."""
        reply = ann.read_json(promotion, ann.GITHUB_REPLY)
        repo, comment = reply.get("repo"), reply.get("comment")
        if not repo or not comment:
            return shown
        key = checks.external_id(promotion)
        link = self.page(promotion) or self._check_urls.get(key) or shown.notes.get(LINK)
        body = checks.reply_body(
            str(reply.get("user") or "someone"),
            str(reply.get("command") or ""),
            replace(view, link=link),
            changes,
        )
        sent = digest(repo, comment, body)
        if shown.shows(REPLY, sent):
            return shown
        api = await self._api_for(str(repo))
        if api is None:
            return shown
        await api.patch(f"/repos/{repo}/issues/comments/{int(comment)}", data={"body": body})
        return shown.showing(REPLY, sent)

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
            approvals=approvals_of(freight),
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
        sent = digest(fields)
        shown = digest(fields, [commit_targets(freight), pull_targets(promotion or {})])
        memo = self._verify_shown.get(external)
        if memo is None and promotion is not None:
            if Shown.of(promotion, ann.GITHUB_VERIFY_SHOWN).shows(external, shown):
                # Shown before a restart or by the previous leader: no search, no write.
                self._verify_shown[external] = shown
                return
        elif memo == shown:
            return
        for repo, sha in await self._targets(promotion, freight):
            target = f"{repo}@{sha}"
            if self._sent.get((external, target)) == sent:
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
            self._sent[(external, target)] = sent
        self._verify_shown[external] = shown
        if promotion is not None:
            # Only the newest verification's runs change: the record holds just that one.
            value = Shown().showing(external, shown).to_annotation()
            if ann.annotations_of(promotion).get(ann.GITHUB_VERIFY_SHOWN) != value:
                try:
                    await self.deps.service.annotate(
                        namespace, promotion_name, ann.GITHUB_VERIFY_SHOWN, value
                    )
                except LongshoremanError as e:  # gone, or the cluster refused
                    log.info("recording what %s shows failed: %s", external, e)

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
