"""Pure decisions for the Argo CD steps (``argocd-update``, ``argocd-wait``) and their health check.

Everything here is a function of plain dicts (Argo CD ``Application`` objects as the API server
returns them, and rendered step configs) and returns plain data; the steps in
:mod:`promoter.steps.argocd` do the reading and patching. The rules follow Kargo's
``argocd-update`` step, ``argocd-wait`` step and Argo CD health checker
(akuity/kargo ``pkg/promotion/runner/builtin/argocd_updater.go``, ``argocd_waiter.go``,
``argocd_revisions.go`` and ``pkg/health/checker/builtin/argocd.go``):

- **Authorization.** An Application may be changed only when its annotation
  ``longshoreman.dev/authorized-stage`` or Kargo's ``kargo.akuity.io/authorized-stage`` is exactly
  ``<project>:<stage>``. Kargo accepts one value, no list; globs (``*``) were deprecated and are
  now refused with their own message.
- **Desired revisions.** One entry per Application source (``spec.sources``, or ``[spec.source]``),
  taken from the ``sources[]`` update that targets it, ``""`` where none does.
- **Decide.** No operation -> sync; an operation someone else (or another Promotion) started ->
  wait while it runs, then sync; ours still running -> wait; ours finished at the desired revisions
  -> its phase decides; ours finished elsewhere -> sync again.
- **Health.** Unknown while an operation is unfinished or not Succeeded; Progressing while Argo CD
  says Progressing or Suspended; Unhealthy when Argo CD says so, on a ComparisonError or
  InvalidSpecError condition, or when a source is synced to another revision than desired.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from promoter.errors import StepError
from promoter.resources import annotations as ann
from promoter.steps.base import Config
from promoter.steps.git import normalize_repo_url

# ---- names Argo CD, Kargo and we agree on ------------------------------------------------------

# Kargo's default: the namespace the Argo CD control plane (and its Applications) lives in.
DEFAULT_NAMESPACE = "argocd"
# The operation.info entry naming the Promotion that started an operation.
DEFAULT_INITIATOR = "longshoreman"
SYNC_REASON = "Promotion triggered a sync of this Application resource."
# Setting it makes Argo CD re-read the sources before syncing, so a commit pushed a moment ago
# is seen (https://argo-cd.readthedocs.io/en/stable/user-guide/commands/argocd_app_get/).
REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"

PHASE_RUNNING = "Running"
PHASE_TERMINATING = "Terminating"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
PHASE_ERROR = "Error"
COMPLETED_PHASES = frozenset({PHASE_SUCCEEDED, PHASE_FAILED, PHASE_ERROR})

HEALTHY = "Healthy"
PROGRESSING = "Progressing"
UNKNOWN = "Unknown"
UNHEALTHY = "Unhealthy"
# Kargo's HealthState.Merge order: the more severe state wins.
_HEALTH_SEVERITY = {HEALTHY: 0, PROGRESSING: 1, UNKNOWN: 2, UNHEALTHY: 3}
# Conditions that make Argo CD's own health and sync status unreliable.
ERROR_CONDITIONS = frozenset({"ComparisonError", "InvalidSpecError"})

# How many syncs one Promotion starts on one Application before giving up on reaching the
# desired revisions (Kargo retries until the step times out; our engine has no default timeout).
MAX_SYNC_ATTEMPTS = 3

WAIT_HEALTH = "health"
WAIT_SYNC = "sync"
WAIT_OPERATION = "operation"
WAIT_SUSPENDED = "suspended"
WAIT_DEGRADED = "degraded"
WAIT_FOR_VALUES = (WAIT_HEALTH, WAIT_SYNC, WAIT_OPERATION, WAIT_SUSPENDED, WAIT_DEGRADED)
# Kargo's default, the same as `argocd app wait` without flags.
DEFAULT_WAIT_FOR = (WAIT_HEALTH, WAIT_SYNC, WAIT_OPERATION)
_HEALTH_WAITS = {WAIT_HEALTH: "Healthy", WAIT_SUSPENDED: "Suspended", WAIT_DEGRADED: "Degraded"}

UPDATE_KIND = "argocd-update"
WAIT_KIND = "argocd-wait"

AppKey = tuple[str, str]

# ---- reading Application objects ---------------------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def app_key(app: Mapping[str, Any]) -> AppKey:
    """(namespace, name) of an Application."""
    meta = _map(app.get("metadata"))
    return (_str(meta.get("namespace")) or DEFAULT_NAMESPACE, _str(meta.get("name")))


def describe(key: AppKey) -> str:
    return f"{key[0]}/{key[1]}"


def app_sources(app: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``spec.sources`` when it has entries, else ``[spec.source]``, else nothing (as Kargo)."""
    spec = _map(app.get("spec"))
    sources = [_map(s) for s in _list(spec.get("sources"))]
    if sources:
        return sources
    source = spec.get("source")
    return [_map(source)] if isinstance(source, Mapping) else []


def operation_state(app: Mapping[str, Any]) -> Mapping[str, Any] | None:
    state = _map(app.get("status")).get("operationState")
    return state if isinstance(state, Mapping) else None


def promotion_of(operation: Mapping[str, Any] | None) -> str | None:
    """The Promotion named in an operation's ``info``, or None if a person or Argo CD started it."""
    for entry in _list(_map(operation).get("info")):
        entry = _map(entry)
        if entry.get("name") in ann.PROMOTION_INFO_KEYS:
            return _str(entry.get("value"))
    return None


def owns_operation(operation: Mapping[str, Any] | None, promotion: str) -> bool:
    """Whether ``operation`` was started for ``promotion``.

    Ownership is the ``info`` entry, as in Kargo: ``initiatedBy.username`` carries the Promotion's
    actor (so Argo CD applies that user's sync windows) and so cannot identify us.
    """
    return promotion_of(operation) == promotion


def initiator(operation: Mapping[str, Any] | None) -> str:
    return _str(_map(_map(operation).get("initiatedBy")).get("username")) or "unknown"


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def operation_in_progress(app: Mapping[str, Any]) -> bool:
    """Kargo's rule: an operation is requested, or the last one has not finished."""
    if app.get("operation"):
        return True
    state = operation_state(app)
    if state is None:
        return False
    return not state.get("finishedAt")


# ---- config --------------------------------------------------------------------------------------

# Kubernetes label grammar (k8s.io/apimachinery validation), so a selector we build is one the
# API server accepts and no value can smuggle in another requirement.
_LABEL_KEY_RE = re.compile(
    r"^(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE_RE = re.compile(r"^(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Selector:
    """A Kubernetes label selector (matchLabels and matchExpressions, all ANDed)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def to_label_selector(self) -> str:
        """The ``labelSelector`` query string the API server understands."""
        terms = [f"{k}={v}" for k, v in self.match_labels]
        for r in self.match_expressions:
            if r.operator == "In":
                terms.append(f"{r.key} in ({','.join(r.values)})")
            elif r.operator == "NotIn":
                terms.append(f"{r.key} notin ({','.join(r.values)})")
            elif r.operator == "Exists":
                terms.append(r.key)
            else:
                terms.append(f"!{r.key}")
        return ",".join(terms)


@dataclass(frozen=True, slots=True)
class KustomizeImage:
    repo_url: str
    tag: str = ""
    digest: str = ""
    new_name: str = ""

    def render(self) -> str:
        """Argo CD's kustomize image form: ``repo[=newName](@digest|:tag)``."""
        text = self.repo_url
        if self.new_name:
            text = f"{text}={self.new_name}"
        return f"{text}@{self.digest}" if self.digest else f"{text}:{self.tag}"


@dataclass(frozen=True, slots=True)
class HelmImage:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class SourceUpdate:
    """One ``apps[].sources[]`` entry: which source it targets and what to change in it."""

    repo_url: str
    chart: str = ""
    desired_revision: str = ""
    update_target_revision: bool = False
    kustomize_images: tuple[KustomizeImage, ...] = ()
    helm_images: tuple[HelmImage, ...] = ()

    def targets(self, source: Mapping[str, Any]) -> bool:
        """Kargo's matching: chart sources by exact repoURL and chart, git by normalized URL."""
        source_chart = _str(source.get("chart"))
        source_url = _str(source.get("repoURL"))
        if source_chart or self.chart:
            return source_url == self.repo_url and source_chart == self.chart
        return normalize_repo_url(source_url) == normalize_repo_url(self.repo_url)

    def describe(self) -> str:
        if self.chart:
            return f"repoURL {self.repo_url} and chart {self.chart!r}"
        return f"repoURL {self.repo_url}"


@dataclass(frozen=True, slots=True)
class AppRef:
    """How one ``apps[]`` entry finds Applications: by name or by label selector."""

    namespace: str
    name: str = ""
    selector: Selector | None = None

    def describe(self) -> str:
        if self.selector is not None:
            return (
                f"Applications matching {self.selector.to_label_selector()!r} in {self.namespace}"
            )
        return f"Argo CD Application {self.name!r} in namespace {self.namespace!r}"


@dataclass(frozen=True, slots=True)
class AppUpdate:
    """One ``argocd-update`` ``apps[]`` entry."""

    ref: AppRef
    sources: tuple[SourceUpdate, ...] = ()


@dataclass(frozen=True, slots=True)
class AppWait:
    """One ``argocd-wait`` ``apps[]`` entry."""

    ref: AppRef
    wait_for: tuple[str, ...] = DEFAULT_WAIT_FOR


def _known(cfg: Config, known: Iterable[str]) -> None:
    unknown = sorted(set(cfg.data) - set(known))
    if unknown:
        hint = ""
        if "useDigest" in unknown:
            # Kargo dropped Freight-derived images in v1.0; the digest is now given explicitly.
            hint = " (useDigest is no longer supported by Kargo; set digest instead)"
        raise StepError(
            f"{cfg.kind}: {cfg.prefix} has unknown field(s) {', '.join(unknown)}{hint}; known "
            f"fields are {', '.join(sorted(known))}",
            terminal=True,
        )


def _nonempty(cfg: Config, key: str) -> str:
    value = cfg.str(key)
    if not value:
        raise StepError(f"{cfg.kind}: {cfg.prefix}.{key} must not be empty", terminal=True)
    return value


def _parse_selector(cfg: Config) -> Selector:
    _known(cfg, ("matchLabels", "matchExpressions"))
    where = f"{cfg.kind}: {cfg.prefix}"
    labels: list[tuple[str, str]] = []
    for key, value in sorted(cfg.map("matchLabels").items()):
        if not isinstance(value, str):
            raise StepError(f"{where}.matchLabels.{key} must be a string", terminal=True)
        if not _LABEL_KEY_RE.match(str(key)) or not _LABEL_VALUE_RE.match(value):
            raise StepError(f"{where}.matchLabels: invalid label {key}={value}", terminal=True)
        labels.append((str(key), value))
    expressions: list[Requirement] = []
    for expr in cfg.items("matchExpressions"):
        _known(expr, ("key", "operator", "values"))
        key = expr.str("key")
        operator = expr.str("operator")
        values = tuple(str(v) for v in expr.list("values"))
        if not _LABEL_KEY_RE.match(key):
            raise StepError(
                f"{expr.kind}: {expr.prefix}.key {key!r} is not a label key", terminal=True
            )
        if operator not in _OPERATORS:
            raise StepError(
                f"{expr.kind}: {expr.prefix}.operator {operator!r} must be one of "
                + ", ".join(_OPERATORS),
                terminal=True,
            )
        if operator in ("In", "NotIn") and not values:
            raise StepError(
                f"{expr.kind}: {expr.prefix}.values must not be empty for {operator}", terminal=True
            )
        if operator in ("Exists", "DoesNotExist") and values:
            raise StepError(
                f"{expr.kind}: {expr.prefix}.values must be empty for {operator}", terminal=True
            )
        for value in values:
            if not _LABEL_VALUE_RE.match(value):
                raise StepError(
                    f"{expr.kind}: {expr.prefix}.values: {value!r} is not a label value",
                    terminal=True,
                )
        expressions.append(Requirement(key, operator, values))
    if not labels and not expressions:
        raise StepError(f"{where} must have matchLabels or matchExpressions", terminal=True)
    return Selector(tuple(labels), tuple(expressions))


def _parse_ref(cfg: Config) -> AppRef:
    namespace = cfg.str("namespace", "") or DEFAULT_NAMESPACE
    name = cfg.str("name", "")
    if cfg.has("selector"):
        if name:
            raise StepError(
                f"{cfg.kind}: {cfg.prefix} has both name and selector; they are mutually exclusive",
                terminal=True,
            )
        selector = _parse_selector(Config(cfg.kind, cfg.map("selector"), f"{cfg.prefix}.selector"))
        return AppRef(namespace=namespace, selector=selector)
    if not name:
        raise StepError(f"{cfg.kind}: {cfg.prefix} needs a name or a selector", terminal=True)
    return AppRef(namespace=namespace, name=name)


def _parse_source(cfg: Config) -> SourceUpdate:
    _known(
        cfg,
        (
            "repoURL",
            "chart",
            "desiredRevision",
            "desiredCommit",
            "updateTargetRevision",
            "kustomize",
            "helm",
        ),
    )
    revision = cfg.str("desiredRevision", "")
    # desiredCommit is the field's name before Kargo v1.0; accepted so older manifests run.
    legacy = cfg.str("desiredCommit", "")
    if revision and legacy and revision != legacy:
        raise StepError(
            f"{cfg.kind}: {cfg.prefix} has desiredRevision and desiredCommit with different "
            "values; desiredCommit is the deprecated name of desiredRevision",
            terminal=True,
        )
    revision = revision or legacy
    update_target = cfg.bool("updateTargetRevision")
    if update_target and not revision:
        raise StepError(
            f"{cfg.kind}: {cfg.prefix}.updateTargetRevision needs desiredRevision", terminal=True
        )
    kustomize: list[KustomizeImage] = []
    if cfg.has("kustomize"):
        k = Config(cfg.kind, cfg.map("kustomize"), f"{cfg.prefix}.kustomize")
        _known(k, ("images",))
        for image in k.items("images", required=True):
            _known(image, ("repoURL", "tag", "digest", "newName"))
            tag, digest = image.str("tag", ""), image.str("digest", "")
            if bool(tag) == bool(digest):
                raise StepError(
                    f"{image.kind}: {image.prefix} needs exactly one of tag and digest",
                    terminal=True,
                )
            kustomize.append(
                KustomizeImage(_nonempty(image, "repoURL"), tag, digest, image.str("newName", ""))
            )
    helm: list[HelmImage] = []
    if cfg.has("helm"):
        h = Config(cfg.kind, cfg.map("helm"), f"{cfg.prefix}.helm")
        _known(h, ("images",))
        for image in h.items("images", required=True):
            _known(image, ("key", "value"))
            helm.append(HelmImage(_nonempty(image, "key"), image.str("value", "")))
    return SourceUpdate(
        repo_url=_nonempty(cfg, "repoURL"),
        chart=cfg.str("chart", ""),
        desired_revision=revision,
        update_target_revision=update_target,
        kustomize_images=tuple(kustomize),
        helm_images=tuple(helm),
    )


def parse_update_config(config: Mapping[str, Any] | None) -> tuple[AppUpdate, ...]:
    """``argocd-update`` config, checked like Kargo's JSON schema (every problem is terminal)."""
    cfg = Config(UPDATE_KIND, config)
    _known(cfg, ("apps",))
    apps = cfg.items("apps", required=True)
    if not apps:
        raise StepError(f"{UPDATE_KIND}: config.apps must list at least one app", terminal=True)
    updates = []
    for app in apps:
        _known(app, ("name", "namespace", "selector", "sources"))
        sources = tuple(_parse_source(s) for s in app.items("sources"))
        updates.append(AppUpdate(ref=_parse_ref(app), sources=sources))
    return tuple(updates)


def parse_wait_config(config: Mapping[str, Any] | None) -> tuple[AppWait, ...]:
    """``argocd-wait`` config, checked like Kargo's JSON schema."""
    cfg = Config(WAIT_KIND, config)
    _known(cfg, ("apps",))
    apps = cfg.items("apps", required=True)
    if not apps:
        raise StepError(f"{WAIT_KIND}: config.apps must list at least one app", terminal=True)
    waits = []
    for app in apps:
        _known(app, ("name", "namespace", "selector", "waitFor"))
        wait_for = tuple(str(w) for w in app.list("waitFor"))
        for w in wait_for:
            if w not in WAIT_FOR_VALUES:
                raise StepError(
                    f"{WAIT_KIND}: {app.prefix}.waitFor: {w!r} must be one of "
                    + ", ".join(WAIT_FOR_VALUES),
                    terminal=True,
                )
        if len(set(wait_for)) != len(wait_for):
            raise StepError(f"{WAIT_KIND}: {app.prefix}.waitFor lists a value twice", terminal=True)
        waits.append(AppWait(ref=_parse_ref(app), wait_for=wait_for or DEFAULT_WAIT_FOR))
    return tuple(waits)


# ---- authorization -------------------------------------------------------------------------------


def authorization_problem(app: Mapping[str, Any], project: str, stage: str) -> str | None:
    """Why the Stage may not change this Application, or None when it may.

    Either annotation authorizes; a value that parses but names another Stage does not stop the
    other annotation from authorizing.
    """
    key = app_key(app)
    expected = f"{project}:{stage}"
    annotations = _map(_map(app.get("metadata")).get("annotations"))
    problems: list[str] = []
    for annotation in ann.AUTHORIZATION_ANNOTATIONS:
        value = annotations.get(annotation)
        if not isinstance(value, str):
            continue
        value = value.strip()
        project_name, sep, stage_name = value.partition(":")
        if not sep:
            problems.append(f"its annotation {annotation}={value!r} is not <project>:<stage>")
        elif "*" in value:
            # Kargo deprecated glob patterns here and now refuses them outright.
            problems.append(
                f"its annotation {annotation}={value!r} uses a glob, which is no longer supported"
            )
        elif (project_name, stage_name) == (project, stage):
            return None
        else:
            problems.append(f"its annotation {annotation} authorizes {value!r}")
    found = "; ".join(problems) if problems else "it has no authorization annotation"
    return (
        f"Argo CD Application {key[1]!r} in namespace {key[0]!r} does not permit mutation by "
        f"Stage {stage!r} of project {project!r}: {found}; annotate it with "
        f"{ann.AUTHORIZED_STAGE}: {expected!r} (or {ann.KARGO_AUTHORIZED_STAGE})"
    )


# ---- source updates --------------------------------------------------------------------------


def _find_update(update: AppUpdate, source: Mapping[str, Any]) -> SourceUpdate | None:
    for source_update in update.sources:
        if source_update.targets(source):
            return source_update
    return None


def desired_revisions(update: AppUpdate, app: Mapping[str, Any]) -> list[str]:
    """One desired revision per source of ``app`` (``""`` where no update names one)."""
    revisions = []
    for source in app_sources(app):
        found = _find_update(update, source)
        revisions.append(found.desired_revision if found else "")
    return revisions


def _apply(source_update: SourceUpdate, source: Mapping[str, Any]) -> dict[str, Any]:
    out = deepcopy(dict(source))
    if source_update.update_target_revision and source_update.desired_revision:
        out["targetRevision"] = source_update.desired_revision
    if source_update.kustomize_images:
        kustomize = dict(_map(out.get("kustomize")))
        # Kargo replaces the list rather than merging into it: the step states the images.
        kustomize["images"] = [image.render() for image in source_update.kustomize_images]
        out["kustomize"] = kustomize
    if source_update.helm_images:
        helm = dict(_map(out.get("helm")))
        parameters = [dict(_map(p)) for p in _list(helm.get("parameters"))]
        for image in source_update.helm_images:
            for parameter in parameters:
                if parameter.get("name") == image.key:
                    parameter["value"] = image.value
                    break
            else:
                parameters.append({"name": image.key, "value": image.value})
        helm["parameters"] = parameters
        out["helm"] = helm
    return out


def desired_sources(update: AppUpdate, app: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Application's sources with ``update`` applied; each update goes to the first source it
    targets. Raises a terminal StepError naming the update that targets no source."""
    sources = [deepcopy(dict(s)) for s in app_sources(app)]
    key = app_key(app)
    for source_update in update.sources:
        for i, source in enumerate(sources):
            if source_update.targets(source):
                sources[i] = _apply(source_update, source)
                break
        else:
            raise StepError(
                f"no source of Argo CD Application {key[1]!r} in namespace {key[0]!r} matched "
                f"update for source with {source_update.describe()}",
                terminal=True,
            )
    return sources


# ---- deciding ------------------------------------------------------------------------------------


class Action(enum.StrEnum):
    SYNC = "sync"
    WAIT = "wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str


def observed_sync_revisions(sync_result: Mapping[str, Any]) -> list[str]:
    revisions = [_str(r) for r in _list(sync_result.get("revisions"))]
    return revisions or [_str(sync_result.get("revision"))]


def _revision_mismatch(observed: Sequence[str], desired: Sequence[str]) -> bool:
    for i, want in enumerate(desired):
        if want and (i >= len(observed) or observed[i] != want):
            return True
    return False


def decide(
    app: Mapping[str, Any],
    desired: Sequence[str],
    promotion: str,
    *,
    syncs_started: int = 0,
) -> Decision:
    """What ``argocd-update`` does next for one Application (Kargo's ``mustPerformUpdate``).

    ``syncs_started``: syncs this Promotion already started on it (bounds re-syncs that keep
    landing on another revision than desired).
    """
    state = operation_state(app)
    phase = _str(state.get("phase")) if state else ""
    requested = _map(app.get("operation"))
    if requested and (state is None or phase in COMPLETED_PHASES):
        # Argo CD clears `operation` when an operation completes, so one next to a finished (or
        # no) operationState has not been picked up yet: ours after a crash, or someone else's.
        who = "this Promotion" if owns_operation(requested, promotion) else initiator(requested)
        return Decision(Action.WAIT, f"a sync requested by {who} has not started yet")
    if state is None:
        return Decision(Action.SYNC, "no operation has run yet")
    operation = _map(state.get("operation"))
    completed = phase in COMPLETED_PHASES
    owner = promotion_of(operation)
    if owner is None:
        if not completed:
            return Decision(
                Action.WAIT,
                f"an operation initiated by {initiator(operation)!r} is {phase or 'pending'}; "
                "waiting for it to complete",
            )
        return Decision(Action.SYNC, f"last operation was initiated by {initiator(operation)!r}")
    if owner != promotion:
        if not completed:
            return Decision(
                Action.WAIT,
                f"an operation for Promotion {owner!r} is {phase or 'pending'}; waiting for it to "
                "complete",
            )
        return Decision(Action.SYNC, f"last operation was for Promotion {owner!r}")
    if not completed:
        return Decision(Action.WAIT, f"sync is {phase or 'pending'}")
    message = _str(state.get("message"))
    sync_result = state.get("syncResult")
    if not isinstance(sync_result, Mapping):
        if phase != PHASE_SUCCEEDED:
            # Nothing was synced (manifests could not be generated, the sync was terminated):
            # the same request would fail the same way.
            return Decision(Action.FAILED, message or f"sync ended {phase}")
        return _resync(syncs_started, "operation completed without a sync result", message)
    if any(desired):
        observed = observed_sync_revisions(sync_result)
        if _revision_mismatch(observed, desired):
            return _resync(
                syncs_started,
                f"sync result revisions {observed} do not match desired revisions {list(desired)}",
                message,
            )
    if phase == PHASE_SUCCEEDED:
        return Decision(Action.SUCCEEDED, message or "synced")
    return Decision(Action.FAILED, message or f"sync ended {phase}")


def _resync(syncs_started: int, why: str, message: str) -> Decision:
    if syncs_started >= MAX_SYNC_ATTEMPTS:
        detail = f" (Argo CD: {message})" if message else ""
        return Decision(
            Action.FAILED, f"{why} after {syncs_started} sync(s) started by this Promotion{detail}"
        )
    return Decision(Action.SYNC, why)


def sync_patch(
    app: Mapping[str, Any], update: AppUpdate, *, promotion: str, actor: str
) -> dict[str, Any]:
    """The merge patch that applies ``update`` and starts a sync for ``promotion``.

    Like Kargo, it requests a hard refresh, copies ``spec.syncPolicy.syncOptions`` and ``retry``
    into the operation, and clears ``status.operationState`` (Argo CD's API server does that when
    it starts a sync; the controller does not: https://github.com/argoproj/argo-cd/issues/20875).
    """
    sources = desired_sources(update, app)
    spec = _map(app.get("spec"))
    patch: dict[str, Any] = {
        "metadata": {"annotations": {REFRESH_ANNOTATION: "hard"}},
    }
    multi_source = bool(_list(spec.get("sources")))
    if update.sources:
        patch["spec"] = {"sources": sources} if multi_source else {"source": sources[0]}
    sync: dict[str, Any] = {}
    if multi_source:
        sync["revisions"] = [_str(s.get("targetRevision")) for s in sources]
    elif sources and _str(sources[0].get("targetRevision")):
        sync["revision"] = _str(sources[0].get("targetRevision"))
    policy = _map(spec.get("syncPolicy"))
    if _list(policy.get("syncOptions")):
        sync["syncOptions"] = list(policy["syncOptions"])
    operation: dict[str, Any] = {
        # automated=false: Argo CD reserves automated for its own auto-sync; a Promotion is a
        # user action, and Argo CD applies the user's sync windows to it.
        "initiatedBy": {"username": actor or DEFAULT_INITIATOR, "automated": False},
        "info": [
            {"name": "Reason", "value": SYNC_REASON},
            {"name": ann.PROMOTION_INFO, "value": promotion},
        ],
        "sync": sync,
    }
    if isinstance(policy.get("retry"), Mapping):
        operation["retry"] = deepcopy(dict(policy["retry"]))
    patch["operation"] = operation
    if isinstance(app.get("status"), Mapping):
        patch["status"] = {"operationState": None}
    return patch


def terminate_patch(app: Mapping[str, Any], promotion: str) -> dict[str, Any] | None:
    """The patch that stops the operation ``promotion`` started, or None if none is running.

    A running operation is terminated as ``argocd app terminate-op`` does (phase Terminating;
    the controller then ends it Failed). A request Argo CD has not picked up yet is withdrawn.
    Operations anyone else started are never touched.
    """
    state = operation_state(app)
    phase = _str(state.get("phase")) if state else ""
    if state is not None and phase == PHASE_RUNNING:
        if owns_operation(_map(state.get("operation")), promotion):
            return {"status": {"operationState": {"phase": PHASE_TERMINATING}}}
        return None
    requested = _map(app.get("operation"))
    if requested and owns_operation(requested, promotion):
        if state is None or phase in COMPLETED_PHASES:
            return {"operation": None}
    return None


# ---- health --------------------------------------------------------------------------------------


def merge_health(a: str, b: str) -> str:
    """The more severe of two health states (Kargo's HealthState.Merge)."""
    return a if _HEALTH_SEVERITY.get(a, 2) > _HEALTH_SEVERITY.get(b, 2) else b


def _error_conditions(app: Mapping[str, Any]) -> list[str]:
    key = app_key(app)
    out = []
    for condition in _list(_map(app.get("status")).get("conditions")):
        condition = _map(condition)
        if condition.get("type") in ERROR_CONDITIONS:
            out.append(
                f"Argo CD Application {key[1]!r} in namespace {key[0]!r} has "
                f"{condition.get('type')!r} condition: {_str(condition.get('message'))}"
            )
    return out


def app_health(
    app: Mapping[str, Any] | None,
    desired: Sequence[str] = (),
    *,
    key: AppKey | None = None,
) -> tuple[str, str]:
    """The Stage health one Application implies: (Healthy|Progressing|Unhealthy|Unknown, why).

    Kargo's checker, plus one rule of ours: the Application must also be ``Synced``, so a live
    change that drifted from git shows even when Argo CD calls the resources Healthy.
    """
    if app is None:
        ns, name = key or ("?", "?")
        return UNKNOWN, f"unable to find Argo CD Application {name!r} in namespace {ns!r}"
    ns, name = app_key(app)
    who = f"Argo CD Application {name!r} in namespace {ns!r}"
    status = _map(app.get("status"))
    state = operation_state(app)
    if state is not None and state.get("phase") != PHASE_SUCCEEDED:
        return UNKNOWN, (
            f"last operation of {who} has status {_str(state.get('phase')) or 'unknown'!r}; "
            "Application health status not trusted"
        )
    if not reconciled_after_operation(app):
        return UNKNOWN, (
            f"{who} was not reconciled after its most recent operation completed; "
            "Application health status not trusted"
        )
    conditions = _error_conditions(app)
    if conditions:
        return UNHEALTHY, "; ".join(conditions)
    health = _str(_map(status.get("health")).get("status"))
    if health in ("", "Progressing"):
        return PROGRESSING, f"{who} is progressing"
    if health == "Suspended":
        # Kargo counts a suspended Application as progressing until it is resumed.
        return PROGRESSING, f"{who} is suspended"
    if health != "Healthy":
        return UNHEALTHY, f"{who} has health state {health!r}"
    sync = _map(status.get("sync"))
    sync_status = _str(sync.get("status"))
    if sync_status == "OutOfSync":
        return UNHEALTHY, f"{who} is OutOfSync: its live state has drifted from its sources"
    if sync_status != "Synced":
        return UNKNOWN, f"{who} has sync status {sync_status or 'Unknown'!r}"
    if not any(desired):
        return HEALTHY, f"{who} is Healthy and Synced"
    if app.get("operation") or state is None or not state.get("finishedAt"):
        return UNKNOWN, f"{who} is being synced"
    sources = app_sources(app)
    if len(sources) != len(desired):
        return UNKNOWN, f"{who} has {len(sources)} sources but {len(desired)} desired revisions"
    observed = [_str(r) for r in _list(sync.get("revisions"))] or [_str(sync.get("revision"))]
    if len(observed) != len(desired):
        return UNKNOWN, (
            f"{who} has {len(observed)} observed revisions but {len(desired)} desired revisions"
        )
    issues = [
        f"source {i} ({_str(sources[i].get('repoURL'))}) is synced to {observed[i]!r}, "
        f"not the desired revision {want!r}"
        for i, want in enumerate(desired)
        if want and observed[i] != want
    ]
    if issues:
        return UNHEALTHY, f"not all sources of {who} are synced to the desired revisions: " + (
            "; ".join(issues)
        )
    return HEALTHY, f"{who} is Healthy and Synced to the desired revisions"


def reconciled_after_operation(app: Mapping[str, Any]) -> bool:
    """Whether Argo CD assessed the Application's health after its last operation finished.

    Argo CD runs operations and assesses health in separate loops, so health read just after an
    operation may predate it. Kargo (since akuity/kargo#5995, which replaced a fixed ten-second
    distrust) trusts it once ``status.reconciledAt`` is at or after the operation's
    ``finishedAt``: the same second counts, as Argo CD always enqueues the refresh after setting
    ``finishedAt``. No finished operation: nothing to wait for.
    """
    state = operation_state(app)
    finished = _parse_time(state.get("finishedAt")) if state else None
    if finished is None:
        return True
    reconciled = _parse_time(_map(app.get("status")).get("reconciledAt"))
    return reconciled is not None and reconciled >= finished


def health_check(apps: Iterable[tuple[AppKey, Sequence[str]]]) -> dict[str, Any]:
    """The health check ``argocd-update`` registers on success (Kargo's ``argocd-update`` input)."""
    return {
        "uses": UPDATE_KIND,
        "config": {
            "apps": [
                {"namespace": ns, "name": name, "desiredRevisions": list(desired)}
                for (ns, name), desired in apps
            ]
        },
    }


def health_check_keys(check_config: Mapping[str, Any]) -> list[AppKey]:
    """The Applications a health check config reads, so the caller knows what to fetch."""
    keys = []
    for entry in _list(_map(check_config).get("apps")):
        entry = _map(entry)
        keys.append((_str(entry.get("namespace")) or DEFAULT_NAMESPACE, _str(entry.get("name"))))
    return keys


def health_of(
    check_config: Mapping[str, Any],
    apps_by_key: Mapping[AppKey, Mapping[str, Any] | None],
) -> tuple[str, str]:
    """A Stage's health from an ``argocd-update`` health check config and the Applications it
    names (keyed ``(namespace, name)``; missing or None means not found): the most severe state,
    and every non-healthy reason joined."""
    entries = _list(_map(check_config).get("apps"))
    if not entries:
        return UNKNOWN, "the argocd-update health check names no Applications"
    overall = HEALTHY
    issues: list[str] = []
    for key, entry in zip(health_check_keys(check_config), entries, strict=True):
        desired = [_str(r) for r in _list(_map(entry).get("desiredRevisions"))]
        status, why = app_health(apps_by_key.get(key), desired, key=key)
        overall = merge_health(overall, status)
        if status != HEALTHY:
            issues.append(why)
    if overall == HEALTHY:
        return HEALTHY, f"{len(entries)} Argo CD Application(s) Healthy and Synced"
    return overall, "; ".join(issues)


# ---- argocd-wait ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    health: str
    reason: str
    # Set when waiting cannot help (an error condition, health regressed to Degraded).
    failure: str | None = None


def wait_readiness(
    app: Mapping[str, Any], wait_for: Sequence[str], previous_health: str
) -> Readiness:
    """Whether one Application meets ``waitFor`` (Kargo's ``checkAppReadiness``).

    The health values (health, suspended, degraded) are ORed; sync and operation are ANDed.
    ``previous_health`` is what the last attempt saw, for Kargo's regression rule: waiting for
    ``health`` fails at once when the Application turns Degraded from anything but Degraded or
    Unknown.
    """
    ns, name = app_key(app)
    who = f"Argo CD Application {name!r} in namespace {ns!r}"
    status = _map(app.get("status"))
    health = _str(_map(status.get("health")).get("status"))
    conditions = _error_conditions(app)
    if conditions:
        return Readiness(False, health, conditions[0], failure="; ".join(conditions))
    if WAIT_OPERATION in wait_for and operation_in_progress(app):
        return Readiness(False, health, f"{who}: an operation is in progress")
    health_waits = [w for w in wait_for if w in _HEALTH_WAITS]
    if health_waits:
        if not reconciled_after_operation(app):
            return Readiness(False, health, f"{who}: not yet reconciled after its last operation")
        if (
            WAIT_HEALTH in wait_for
            and health == "Degraded"
            and previous_health not in ("", "Degraded", "Unknown")
        ):
            return Readiness(
                False,
                health,
                f"{who} health regressed",
                failure=f"{who} health has regressed from {previous_health} to {health}",
            )
        if health not in {_HEALTH_WAITS[w] for w in health_waits}:
            wanted = " or ".join(_HEALTH_WAITS[w] for w in health_waits)
            return Readiness(False, health, f"{who} is {health or 'Unknown'}, waiting for {wanted}")
    if WAIT_SYNC in wait_for:
        sync_status = _str(_map(status.get("sync")).get("status"))
        if sync_status != "Synced":
            return Readiness(False, health, f"{who} is {sync_status or 'Unknown'}, not Synced")
    return Readiness(True, health, f"{who} is ready")


# ---- what a Promotion touched, and where it runs ---------------------------------------------


def touched_apps(promotion: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(namespace, name)`` of the Applications a Promotion touched: its recorded health checks,
    else its ``argocd-update`` steps' configs (when they name Applications literally)."""
    seen: list[tuple[str, str]] = []
    status = _map(promotion.get("status"))
    configs: list[Any] = [_map(h).get("config") for h in _list(status.get("healthChecks"))]
    for step in _list(_map(promotion.get("spec")).get("steps")):
        if isinstance(step, Mapping) and step.get("uses") == "argocd-update":
            configs.append(step.get("config"))
    for config in configs:
        for app in _list(_map(config).get("apps")):
            if not isinstance(app, Mapping):
                continue
            name = _str(app.get("name"))
            namespace = _str(app.get("namespace")) or "argocd"
            if not name or "${" in name or "${" in namespace or (namespace, name) in seen:
                continue
            seen.append((namespace, name))
    return seen


def external_url(app: Mapping[str, Any] | None) -> str | None:
    """Where an Application is reached: the first of Argo CD's ``status.summary.externalURLs``
    (from its Ingresses and Services), if any."""
    urls = _list(_map(_map(_map(app).get("status")).get("summary")).get("externalURLs"))
    return next((u for u in urls if isinstance(u, str) and ann.SAFE_URL.match(u)), None)
