"""The ``argocd-update`` and ``argocd-wait`` steps, over a small port to Argo CD Applications.

The steps read and patch Argo CD ``Application`` objects through :class:`ArgoCDApps`, which the
app layer implements over the Kubernetes API and tests implement in memory
(``tests/support/argocd.py``); they find it at ``ctx.services.extra["argocd"]``. Every decision is
made by the pure functions in :mod:`promoter.rules.argocd`.

Both steps are re-entered until they finish, possibly in another process, so they keep no state
of their own: ``argocd-update`` recognises the operation it started by the Promotion's name in
``operation.info`` (a crash after the patch does not start a second sync), and both report the
Applications they watch as ``output.apps`` so the reconciler can wake exactly the Promotions an
Application change concerns.

Both act on (or watch) Applications outside the work directory (``Effect.EXTERNAL``): a replica
that rebuilds the work directory never syncs again; ``argocd-update``'s ``verify`` hook only
checks that the Applications it synced still exist.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from promoter.errors import ConfigRefused, StepError
from promoter.rules.argocd import (
    DEFAULT_NAMESPACE,
    UPDATE_KIND,
    WAIT_KIND,
    Action,
    AppKey,
    AppRef,
    AppUpdate,
    Decision,
    app_key,
    authorization_problem,
    decide,
    describe,
    desired_revisions,
    desired_sources,
    health_check,
    health_of,
    parse_update_config,
    parse_wait_config,
    sync_patch,
    terminate_patch,
    wait_readiness,
)
from promoter.steps.base import (
    Effect,
    Step,
    StepContext,
    StepResult,
    StepStatus,
    failed,
    running,
    succeeded,
)

log = logging.getLogger(__name__)

PORT_KEY = "argocd"
# Kargo polls a syncing Application this often; an Application change wakes the step sooner.
RUNNING_RETRY_SECONDS = 10.0
# After a write conflict the Application is read again almost at once.
CONFLICT_RETRY_SECONDS = 1.0
ABORT_ATTEMPTS = 3


class ArgoCDApps(Protocol):
    """Reads and merge-patches Argo CD Applications (``argoproj.io/v1alpha1``)."""

    async def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The Application, or None if there is none."""
        ...

    async def list(self, namespace: str, label_selector: str) -> list[Mapping[str, Any]]:
        """Applications in ``namespace`` matching a ``labelSelector`` string (all when empty)."""
        ...

    async def patch(
        self,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Mapping[str, Any]:
        """Apply a JSON merge patch if the object is still at ``resource_version``.

        Raises :class:`ApplicationConflict` when it is not, and a non-terminal StepError for
        other API failures.
        """
        ...


class ApplicationConflict(StepError):
    """The Application changed since it was read (HTTP 409). Adapters raise this for conflicts.

    The steps answer it with Running and a short retry instead of an error: the Argo CD controller
    writes to Applications constantly, and a conflict must not use up ``retry.errorThreshold``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, terminal=False, retry_after=CONFLICT_RETRY_SECONDS)


def apps_port(ctx: StepContext, kind: str) -> ArgoCDApps:
    port = ctx.services.extra.get(PORT_KEY)
    if port is None:
        raise StepError(
            f"{kind} needs the Argo CD port; it runs under `python -m app serve`, not in the local "
            "runner without a cluster",
            terminal=True,
        )
    return port  # type: ignore[no-any-return]


async def find_apps(port: ArgoCDApps, ref: AppRef) -> list[Mapping[str, Any]]:
    """The Applications an ``apps[]`` entry names; finding none is a retryable error (Kargo)."""
    if ref.selector is None:
        app = await port.get(ref.namespace, ref.name)
        if app is None:
            raise StepError(
                f"unable to find Argo CD Application {ref.name!r} in namespace {ref.namespace!r}"
            )
        return [app]
    apps = await port.list(ref.namespace, ref.selector.to_label_selector())
    if not apps:
        raise StepError(
            f"no Argo CD Applications found matching selector "
            f"{ref.selector.to_label_selector()!r} in namespace {ref.namespace!r}"
        )
    return sorted(apps, key=app_key)


def _apps_output(keys: Sequence[AppKey]) -> list[dict[str, str]]:
    return [{"namespace": ns, "name": name} for ns, name in keys]


def _resource_version(app: Mapping[str, Any]) -> str:
    meta = app.get("metadata")
    value = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


# ---- argocd-update -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    update: AppUpdate
    app: Mapping[str, Any]
    key: AppKey
    desired: list[str]
    decision: Decision


class ArgoCDUpdateStep:
    """``argocd-update``: point Applications at the desired revisions and sync them."""

    effect = Effect.EXTERNAL
    uses_work_dir = False

    async def verify(self, ctx: StepContext, config: Mapping[str, Any]) -> None:
        """In a replay: the Applications this step synced are still there (it never syncs)."""
        assert ctx.replay is not None
        port = apps_port(ctx, UPDATE_KIND)
        for key in _keys_from_output(ctx.replay.output):
            if await port.get(*key) is None:
                raise StepError(
                    f"Argo CD Application {key[1]!r} in namespace {key[0]!r}, which this step "
                    "synced, is gone",
                    terminal=True,
                )

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        updates = parse_update_config(config)
        port = apps_port(ctx, UPDATE_KIND)
        syncs = _syncs(ctx.previous_output)
        plans, skipped = await self._plan(ctx, port, updates, syncs)
        keys = [p.key for p in plans]
        output: dict[str, Any] = {"apps": _apps_output(keys), "syncs": syncs}
        notes = [f"skipped {s}" for s in skipped]

        # Fail before writing anything, so one failed Application does not leave the others
        # half-promoted by a sync started in this same pass.
        failures = [p for p in plans if p.decision.action is Action.FAILED]
        if failures:
            message = "; ".join(
                f"Argo CD Application {p.key[1]!r} in namespace {p.key[0]!r} failed with: "
                f"{p.decision.reason}"
                for p in failures
            )
            return failed(message, output)

        progress: list[str] = []
        for plan in plans:
            label = describe(plan.key)
            if plan.decision.action is Action.SYNC:
                patch = sync_patch(plan.app, plan.update, promotion=ctx.promotion, actor=ctx.actor)
                try:
                    await port.patch(
                        plan.key[0],
                        plan.key[1],
                        patch,
                        resource_version=_resource_version(plan.app),
                    )
                except ApplicationConflict as e:
                    return running(f"{label}: {e.message}", CONFLICT_RETRY_SECONDS, output)
                syncs[label] = syncs.get(label, 0) + 1
                log.info(
                    "started Argo CD sync",
                    extra={
                        "promotion": ctx.promotion,
                        "app": label,
                        "reason": plan.decision.reason,
                    },
                )
                progress.append(f"{label}: sync started ({plan.decision.reason})")
            elif plan.decision.action is Action.WAIT:
                progress.append(f"{label}: {plan.decision.reason}")
        if progress:
            return running("; ".join(progress + notes), RUNNING_RETRY_SECONDS, output)
        return StepResult(
            StepStatus.SUCCEEDED,
            message="; ".join([f"synced {describe(k)}" for k in keys] + notes),
            output=output,
            health_check=health_check((p.key, p.desired) for p in plans),
        )

    async def _plan(
        self,
        ctx: StepContext,
        port: ArgoCDApps,
        updates: Sequence[AppUpdate],
        syncs: Mapping[str, int],
    ) -> tuple[list[_Plan], list[str]]:
        plans: list[_Plan] = []
        skipped: list[str] = []
        seen: dict[AppKey, int] = {}
        for index, update in enumerate(updates):
            apps = await find_apps(port, update.ref)
            authorized = []
            denials = []
            for app in apps:
                problem = authorization_problem(app, ctx.project, ctx.stage)
                if problem is None:
                    authorized.append(app)
                else:
                    denials.append(problem)
            if not authorized:
                if update.ref.selector is None:
                    raise StepError(denials[0], terminal=True)
                raise StepError(
                    f"found {len(apps)} Application(s) matching selector "
                    f"{update.ref.selector.to_label_selector()!r} in namespace "
                    f"{update.ref.namespace!r}, but none are authorized: " + "; ".join(denials),
                    terminal=True,
                )
            # Kargo skips unauthorized Applications a selector matched, and updates the rest.
            skipped.extend(
                f"unauthorized {describe(app_key(a))}" for a in apps if a not in authorized
            )
            # Every matched Application must accept the source updates before any is changed.
            problems = []
            for app in authorized:
                try:
                    desired_sources(update, app)
                except StepError as e:
                    problems.append(e.message)
            if problems:
                prefix = (
                    f"selected Applications must have compatible sources; {len(problems)} "
                    "incompatible. No Applications were updated: "
                    if len(authorized) > 1
                    else ""
                )
                raise StepError(prefix + "; ".join(problems), terminal=True)
            for app in authorized:
                key = app_key(app)
                if key in seen:
                    raise ConfigRefused(
                        f"Argo CD Application {key[1]!r} in namespace {key[0]!r} is selected by "
                        f"config.apps[{seen[key]}] and config.apps[{index}]; each Application may "
                        "be updated once per step"
                    )
                seen[key] = index
                desired = desired_revisions(update, app)
                decision = decide(
                    app, desired, ctx.promotion, syncs_started=syncs.get(describe(key), 0)
                )
                plans.append(_Plan(update, app, key, desired, decision))
        return plans, skipped

    async def abort(self, ctx: StepContext, config: Mapping[str, Any]) -> None:
        """Terminate the operations this Promotion started; leave every other operation alone.

        Best effort: each Application is tried even if another fails; failures are raised at the
        end as one StepError for the caller to log.
        """
        port = ctx.services.extra.get(PORT_KEY)
        if port is None:
            return
        keys = _keys_from_output(ctx.previous_output)
        if not keys:
            try:
                updates = parse_update_config(config)
            except StepError:
                return
            keys = [(u.ref.namespace, u.ref.name) for u in updates if u.ref.selector is None]
        errors = []
        for key in keys:
            try:
                await _terminate(port, key, ctx.promotion)
            except StepError as e:
                errors.append(f"{describe(key)}: {e.message}")
        if errors:
            raise StepError("could not terminate every Argo CD operation: " + "; ".join(errors))


async def _terminate(port: ArgoCDApps, key: AppKey, promotion: str) -> None:
    for _ in range(ABORT_ATTEMPTS):
        app = await port.get(*key)
        if app is None:
            return
        patch = terminate_patch(app, promotion)
        if patch is None:
            return
        try:
            await port.patch(*key, patch, resource_version=_resource_version(app))
        except ApplicationConflict:
            continue
        log.info(
            "terminated Argo CD operation", extra={"promotion": promotion, "app": describe(key)}
        )
        return
    raise StepError(f"the Application kept changing; gave up after {ABORT_ATTEMPTS} attempts")


def _syncs(previous_output: Mapping[str, Any]) -> dict[str, int]:
    raw = previous_output.get("syncs")
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}


def _keys_from_output(output: Mapping[str, Any]) -> list[AppKey]:
    keys = []
    for entry in output.get("apps") or []:
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            keys.append((str(entry.get("namespace") or DEFAULT_NAMESPACE), entry["name"]))
    return keys


# ---- argocd-wait ---------------------------------------------------------------------------------

HEALTH_STATUS_KEY = "healthStatus"


class ArgoCDWaitStep:
    """``argocd-wait``: wait until Applications are healthy, synced and idle (or as configured).

    Reads only; unlike argocd-update it needs no authorization annotation (as in Kargo).
    """

    # What it saw is outside the work directory: its recorded output stands in a replay.
    effect = Effect.EXTERNAL
    uses_work_dir = False

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        waits = parse_wait_config(config)
        port = apps_port(ctx, WAIT_KIND)
        raw_previous = ctx.previous_output.get(HEALTH_STATUS_KEY)
        previous = dict(raw_previous) if isinstance(raw_previous, Mapping) else {}
        # Seeded with what was seen before, so an Application not reached this time keeps its
        # last known health for the regression rule.
        health: dict[str, Any] = dict(previous)
        keys: list[AppKey] = []
        pending: list[str] = []
        for wait in waits:
            for app in await find_apps(port, wait.ref):
                key = app_key(app)
                if key not in keys:
                    keys.append(key)
                label = describe(key)
                readiness = wait_readiness(app, wait.wait_for, str(previous.get(label) or ""))
                if readiness.health:
                    health[label] = readiness.health
                if readiness.failure is not None:
                    output = {"apps": _apps_output(keys), HEALTH_STATUS_KEY: health}
                    return failed(readiness.failure, output)
                if not readiness.ready:
                    pending.append(readiness.reason)
        output = {"apps": _apps_output(keys), HEALTH_STATUS_KEY: health}
        if pending:
            return running("; ".join(pending), RUNNING_RETRY_SECONDS, output)
        return succeeded(output, f"{len(keys)} Argo CD Application(s) ready")


ARGOCD_UPDATE = ArgoCDUpdateStep()
ARGOCD_WAIT = ArgoCDWaitStep()

STEPS: dict[str, Step] = {UPDATE_KIND: ARGOCD_UPDATE, WAIT_KIND: ARGOCD_WAIT}

__all__ = [
    "ARGOCD_UPDATE",
    "ARGOCD_WAIT",
    "CONFLICT_RETRY_SECONDS",
    "PORT_KEY",
    "RUNNING_RETRY_SECONDS",
    "STEPS",
    "ApplicationConflict",
    "ArgoCDApps",
    "ArgoCDUpdateStep",
    "ArgoCDWaitStep",
    "apps_port",
    "find_apps",
    "health_of",
]
