"""What the status pages show, decided purely: plain objects and ``now`` in, view models out.

Nothing here renders HTML or does I/O, so every rule (masking, links, timings, the queue) is
tested without a server. Stage rows reuse :func:`promoter.chat.views.stage_views` (what ``/status``
prints in chat) and the queue order is :class:`promoter.resources.stages.StageQueue`'s, so the
pages and
the chat commands always agree.

Masking: a step output whose key looks secret (``token``, ``password``, ``secret``, ``key``,
``credential``...) is shown as ``MASK``; so is any configured secret value wherever it appears
in an output or a message, and the password of a URL with credentials.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.ui.graph import PipelineGraph, pipeline_graph
from app.ui.timeline import FreightTimeline, freight_timeline
from promoter.chat import views as shared
from promoter.chat.views import freight_label, stage_views, step_lines
from promoter.control.links import freight_links, stage_links
from promoter.control.policies import ClusterConfig, ProjectConfig
from promoter.resources.freight_refs import FreightList
from promoter.resources.model import meta, name_of, namespace_of, parse_time
from promoter.resources.stages import StageQueue, get_condition, phase_of
from promoter.rules.argocd import touched_apps

MASK = "••••••"
# Words that make an output key secret. Keys are split into words first (camelCase, snake_case,
# kebab-case), so ``sshKey`` and ``api_key`` are masked but ``monkey`` and ``keyboard`` are not.
SECRET_WORDS = frozenset(
    {
        "token",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "key",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "cookie",
        "session",
        "signature",
        "private",
        "pat",
    }
)
# Configured secrets shorter than this are not searched for in text: masking every "ab" in a
# page would destroy it and protect nothing.
MIN_SECRET_LENGTH = 4
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@:\s]*):[^/@\s]*@", re.I)
# https://<token>@host: over http(s) a user name alone is how tokens ride in URLs (ssh's
# git@ is not a secret, so only http(s) is masked).
_URL_USER_TOKEN = re.compile(r"(?P<scheme>https?://)[^/@:\s]+@", re.I)
_HTTP_URL = re.compile(r"^https?://[^\s]+$")
OUTPUT_VALUE_LIMIT = 2000


def secret_key(key: str) -> bool:
    """Does an output key look like it names a secret (``apiToken``, ``ssh_keys``...)?"""
    words = {w.lower() for w in _WORDS.findall(key)}
    words |= {w[:-1] for w in words if w.endswith("s")}  # plurals: tokens, keys, secrets
    return bool(words & SECRET_WORDS) or key.lower() in SECRET_WORDS


class Masker:
    """Hides secrets in text shown on the pages."""

    def __init__(self, secret_values: Iterable[str | None] = ()) -> None:
        values = {v for v in secret_values if v and len(v) >= MIN_SECRET_LENGTH}
        # Longest first, so a secret containing another is hidden whole.
        self.values = sorted(values, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.values:
            if secret in value:
                value = value.replace(secret, MASK)
        value = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", value)
        return _URL_USER_TOKEN.sub(lambda m: f"{m['scheme']}{MASK}@", value)

    def output(self, key: str, value: Any) -> Any:
        """``value`` with secret keys masked at any depth and secret values hidden."""
        if secret_key(key):
            return MASK
        if isinstance(value, Mapping):
            return {str(k): self.output(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.output(key, v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


# ---- small pieces ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Link:
    label: str
    href: str | None = None  # None: shown as text (nowhere to link to)
    note: str = ""


def duration(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return ""
    seconds = max(0, int((end - start).total_seconds()))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _time(value: Any) -> str:
    parsed = parse_time(value)
    return parsed.strftime("%Y-%m-%d %H:%M:%S UTC") if parsed else ""


def _freight(ref: str, freights: Iterable[Mapping[str, Any]]) -> str:
    return freight_label(ref, freights).full


def _flatten(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out.extend(_flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return [(prefix, value)]


def _display(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value) if not isinstance(value, list | tuple) else ", ".join(map(str, value))
    if len(text) > OUTPUT_VALUE_LIMIT:
        return text[:OUTPUT_VALUE_LIMIT] + "… (truncated)"
    return text


# ---- one Promotion -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepView:
    index: int
    alias: str
    uses: str
    status: str
    started: str
    finished: str
    took: str
    message: str
    errors: int
    outputs: list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class AnalysisRunView:
    name: str
    namespace: str
    phase: str
    message: str
    started: str
    finished: str


@dataclass(frozen=True, slots=True)
class PromotionPage:
    """A Promotion's page: the shared read model (:class:`promoter.chat.views.PromotionView`, the
    same data chat formats) plus what only a page shows (times, links, AnalysisRuns)."""

    namespace: str
    name: str
    stage: str
    freight: str
    phase: str
    message: str
    actor: str
    created: str
    started: str
    finished: str
    took: str
    current_step: int
    steps: list[StepView]
    pull_requests: list[Link] = field(default_factory=list)
    urls: list[Link] = field(default_factory=list)
    apps: list[Link] = field(default_factory=list)
    analysis_runs: list[AnalysisRunView] = field(default_factory=list)
    core: shared.PromotionView | None = None
    rollback: bool = False  # an automatic rollback to the Stage's stable Freight
    environment: list[Link] = field(default_factory=list)  # its GitHub Deployments
    warning: str = ""  # why some GitHub Deployments could not be written

    @property
    def done(self) -> int:
        return sum(1 for s in self.steps if s.status in ("Succeeded", "Skipped"))


def _steps(
    promotion: Mapping[str, Any], masker: Masker, now: datetime
) -> tuple[list[StepView], list[tuple[str, str, str]]]:
    """Step views, and every http(s) URL found in the outputs as (alias, key path, url)."""
    state = (promotion.get("status") or {}).get("state") or {}
    views: list[StepView] = []
    urls: list[tuple[str, str, str]] = []
    for line in step_lines(promotion):
        alias = line.alias
        st = line.status or "Pending"
        took = duration(line.started_at, line.finished_at or (now if st == "Running" else None))
        output = state.get(alias) if isinstance(state, Mapping) else None
        shown: list[tuple[str, str]] = []
        if isinstance(output, Mapping):
            masked = masker.output("", output)
            for path, value in _flatten("", masked):
                text = _display(value)
                shown.append((path, text))
                if isinstance(value, str) and _HTTP_URL.match(value) and MASK not in value:
                    urls.append((alias, path, value))
        views.append(
            StepView(
                index=line.index,
                alias=alias,
                uses=line.kind,
                status=st,
                started=_time(line.started_at),
                finished=_time(line.finished_at),
                took=took,
                message=masker.text(line.message),
                errors=line.errors,
                outputs=shown,
            )
        )
    return views, urls


def _apps(promotion: Mapping[str, Any], argocd_url: str | None) -> list[Link]:
    """Argo CD Applications the Promotion touched (:func:`promoter.rules.argocd.touched_apps`)."""
    seen = touched_apps(promotion)
    return [
        Link(
            f"{ns}/{name}",
            f"{argocd_url}/applications/{ns}/{name}" if argocd_url else None,
        )
        for ns, name in seen
    ]


def analysis_runs(
    stage: Mapping[str, Any] | None,
    promotion: str | None = None,
    masker: Masker | None = None,
) -> list[AnalysisRunView]:
    """The Stage's verifications (newest first): the current Freight's, or (``promotion``) those
    that followed one Promotion."""
    masker = masker or Masker()
    history = ((stage or {}).get("status") or {}).get("freightHistory") or []
    out = []
    for collection in history:
        if not isinstance(collection, Mapping):
            continue
        for entry in collection.get("verificationHistory") or ():
            if not isinstance(entry, Mapping):
                continue
            if promotion is not None and entry.get("promotion") != promotion:
                continue
            run = entry.get("analysisRun") or {}
            out.append(
                AnalysisRunView(
                    name=str(run.get("name") or ""),
                    namespace=str(run.get("namespace") or ""),
                    phase=str(entry.get("phase") or run.get("phase") or ""),
                    message=masker.text(str(entry.get("message") or "")),
                    started=_time(entry.get("startTime")),
                    finished=_time(entry.get("finishTime")),
                )
            )
        if promotion is None:
            break  # the current Freight's verifications only
    return out


def promotion_page(
    promotion: Mapping[str, Any],
    *,
    now: datetime,
    stage: Mapping[str, Any] | None = None,
    freights: Sequence[Mapping[str, Any]] = (),
    masker: Masker | None = None,
    argocd_url: str | None = None,
) -> PromotionPage:
    masker = masker or Masker()
    # The one read model first; the page adds only what chat does not show.
    core = shared.promotion_view(promotion, stage=stage, freights=freights)
    status = promotion.get("status") or {}
    steps, urls = _steps(promotion, masker, now)
    phase = phase_of(promotion).value
    started = parse_time(status.get("startedAt"))
    finished = parse_time(status.get("finishedAt"))
    pull_requests: list[Link] = []
    other: list[Link] = []
    for alias, path, url in urls:
        if path == "pr.url" or "/pull/" in url:
            number = url.rstrip("/").rsplit("/", 1)[-1]
            label = f"Pull request #{number}" if number.isdigit() else "Pull request"
            if all(link.href != url for link in pull_requests):
                pull_requests.append(Link(label, url, alias))
        else:
            other.append(Link(f"{alias}: {path}", url))
    return PromotionPage(
        namespace=core.namespace,
        name=core.name,
        stage=core.stage,
        freight=core.label.full,
        phase=core.phase,
        message=masker.text(core.message),
        actor=core.actor,
        rollback=core.rollback,
        created=_time(meta(promotion).get("creationTimestamp")),
        started=_time(status.get("startedAt")),
        finished=_time(status.get("finishedAt")),
        took=duration(started, finished or (now if phase == "Running" else None)),
        current_step=core.current_step,
        steps=steps,
        pull_requests=pull_requests,
        urls=other,
        apps=_apps(promotion, argocd_url),
        analysis_runs=analysis_runs(stage, name_of(promotion), masker) if stage else [],
        core=core,
        environment=environment_links(core.environment),
        warning=core.environment.warning if core.environment else "",
    )


def environment_links(env: shared.EnvironmentLink | None) -> list[Link]:
    """A GitHub environment as links: its Deployments page in each repository, and its URL."""
    if env is None:
        return []
    links = [Link(f"{env.name} in {repo}", url, "GitHub environment") for repo, url in env.pages]
    if env.url:
        links.append(Link(env.url, env.url, f"where {env.name} runs"))
    return links


# ---- a project's Stages ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromotionItem:
    name: str
    stage: str
    freight: str
    phase: str
    when: str


@dataclass(frozen=True, slots=True)
class StageCard:
    name: str
    freight: str
    health: str
    health_message: str
    verification: str
    verification_message: str
    ready: str
    running: PromotionItem | None
    queued: list[PromotionItem]
    last: PromotionItem | None
    environment: list[Link] = field(default_factory=list)  # its GitHub environment
    # Its promotion windows, as the controller last recorded them ("" while open).
    window: str = ""


@dataclass(frozen=True, slots=True)
class ProjectView:
    namespace: str
    stages: list[StageCard]
    recent: list[PromotionItem]
    # The pipeline picture and the Freight timeline (app.ui.graph, app.ui.timeline).
    graph: PipelineGraph | None = None
    timeline: FreightTimeline | None = None


def _item(promotion: Mapping[str, Any], freights: Sequence[Mapping[str, Any]]) -> PromotionItem:
    spec = promotion.get("spec") or {}
    status = promotion.get("status") or {}
    when = status.get("finishedAt") or status.get("startedAt")
    when = when or meta(promotion).get("creationTimestamp")
    return PromotionItem(
        name=name_of(promotion),
        stage=str(spec.get("stage") or ""),
        freight=_freight(str(spec.get("freight") or ""), freights),
        phase=phase_of(promotion).value,
        when=_time(when),
    )


def _recency(promotion: Mapping[str, Any]) -> str:
    status = promotion.get("status") or {}
    return str(
        status.get("finishedAt")
        or status.get("startedAt")
        or meta(promotion).get("creationTimestamp")
        or ""
    )


def stage_card(
    stage: Mapping[str, Any],
    promotions: Sequence[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
    masker: Masker,
) -> StageCard:
    (row,) = stage_views([stage], promotions, freights)
    status = stage.get("status") or {}
    mine = [p for p in promotions if (p.get("spec") or {}).get("stage") == name_of(stage)]
    queue = StageQueue(mine)
    running = queue.running()
    finished = sorted((p for p in mine if phase_of(p).terminal), key=_recency)
    healthy = get_condition(status, "Healthy") or {}
    verified = get_condition(status, "Verified") or {}
    ready = get_condition(status, "Ready") or {}
    return StageCard(
        name=row.stage,
        freight=row.freight,
        health=row.health,
        health_message=masker.text(str(healthy.get("message") or "")),
        verification=row.verification,
        verification_message=masker.text(str(verified.get("message") or "")),
        ready=str(ready.get("status") or "Unknown"),
        running=_item(running[0], freights) if running else None,
        queued=[_item(p, freights) for p in queue.pending()],
        last=_item(finished[-1], freights) if finished else None,
        environment=environment_links(row.environment),
        window=window_text(status.get("promotionWindowStatus")),
    )


def window_text(recorded: Any) -> str:
    """``frozen until 2026-01-12 08:00 UTC: Deny window `weekend-freeze` is in effect`` from the
    Stage's ``status.promotionWindowStatus``; "" while open."""
    if not isinstance(recorded, Mapping) or not recorded.get("closed"):
        return ""
    reason = str(recorded.get("reason") or "")
    opens = parse_time(recorded.get("nextOpen"))
    until = f"until {opens:%Y-%m-%d %H:%M} UTC" if opens else "with no known end"
    return f"frozen {until}" + (f": {reason}" if reason else "")


def project_view(
    namespace: str,
    stages: Sequence[Mapping[str, Any]],
    promotions: Sequence[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
    *,
    masker: Masker | None = None,
    recent: int = 10,
    warehouses: Sequence[Mapping[str, Any]] | None = None,
    now: datetime | None = None,
) -> ProjectView:
    """``warehouses``: the project's Warehouses, None when the server keeps none; ``now``
    decides which Freight is available (soak times) for the timeline."""
    masker = masker or Masker()
    freights = FreightList.of(freights)  # indexed once for every card's, item's and node's lookup
    cards = [stage_card(s, promotions, freights, masker) for s in sorted(stages, key=name_of)]
    newest = sorted(promotions, key=lambda p: (_recency(p), name_of(p)), reverse=True)
    graph = pipeline_graph(namespace, stages, cards, freights, warehouses, masker.text)
    timeline = freight_timeline(
        stages, promotions, freights, order=graph.stage_order, now=now, mask=masker.text
    )
    return ProjectView(
        namespace, cards, [_item(p, freights) for p in newest[:recent]], graph, timeline
    )


# ---- one Stage ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConditionView:
    type: str
    status: str
    reason: str
    message: str
    since: str


@dataclass(frozen=True, slots=True)
class StageView:
    namespace: str
    card: StageCard
    conditions: list[ConditionView]
    freight_history: list[str]
    verifications: list[AnalysisRunView]
    promotions: list[PromotionItem]
    # The project's deep links for the Stage and its current Freight, and the errors of those
    # that did not render (shown here, where the ProjectConfig's owner looks).
    links: list[Link] = field(default_factory=list)
    link_errors: list[str] = field(default_factory=list)


def stage_view(
    stage: Mapping[str, Any],
    promotions: Sequence[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
    *,
    masker: Masker | None = None,
    project: ProjectConfig | None = None,
    cluster: ClusterConfig | None = None,
) -> StageView:
    masker = masker or Masker()
    freights = FreightList.of(freights)
    status = stage.get("status") or {}
    mine = [p for p in promotions if (p.get("spec") or {}).get("stage") == name_of(stage)]
    history = []
    for collection in status.get("freightHistory") or ():
        items = (collection or {}).get("items") or {} if isinstance(collection, Mapping) else {}
        history.append(
            ", ".join(
                _freight(str(v.get("name") or ""), freights)
                for v in items.values()
                if isinstance(v, Mapping)
            )
            or "-"
        )
    conditions = [
        ConditionView(
            type=str(c.get("type") or ""),
            status=str(c.get("status") or ""),
            reason=str(c.get("reason") or ""),
            message=masker.text(str(c.get("message") or "")),
            since=_time(c.get("lastTransitionTime")),
        )
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    ]
    newest = sorted(mine, key=lambda p: (_recency(p), name_of(p)), reverse=True)
    links, errors = stage_links(stage, project, cluster)
    current = (status.get("freightHistory") or [{}])[0] or {}
    for item in (current.get("items") or {}).values():
        found = freights.named(str((item or {}).get("name") or ""))
        if found is not None:
            more, more_errors = freight_links(found, project, cluster)
            links, errors = links + more, errors + more_errors
    return StageView(
        namespace=namespace_of(stage) or "default",
        card=stage_card(stage, promotions, freights, masker),
        conditions=conditions,
        freight_history=history,
        verifications=analysis_runs(stage, masker=masker),
        promotions=[_item(p, freights) for p in newest],
        links=[Link(x.title, x.url, x.description) for x in links],
        link_errors=[masker.text(x) for x in errors],
    )
