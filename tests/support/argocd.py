"""A fake Argo CD for tests: an Application store and an application controller with scripts.

Two pieces, both speaking the :class:`promoter.steps.argocd.ArgoCDApps` port shape
(``get``/``list``/``patch`` with a resource version):

- :class:`InMemoryApps` keeps Applications in a dict with Kubernetes semantics where the steps
  depend on them: every write bumps ``metadata.resourceVersion``, a patch naming a stale one
  raises :class:`ApplicationConflict`, patches are JSON merge patches (``None`` deletes), label
  selectors use the API server emulator's parser.
- :class:`KubernetesApps` is the same port over the Kubernetes API (the emulator in
  ``tests/support/kube.py``) with the real ``kubernetes.aio`` client, so the controller and the
  steps can run against an API server too, until the app layer's own adapter replaces it.
- :class:`FakeArgoCDController` plays Argo CD's application controller over *any* object with
  that shape (the in-memory store, or an adapter over the Kubernetes API emulator): it notices a
  requested ``operation``, records ``status.operationState`` Running, and after the scripted
  number of passes (and at least the scripted seconds) finishes it with the scripted outcome
  (``succeed``, ``fail``, ``error``, ``hang``). A ``Terminating`` operation ends ``Failed``
  with "Operation terminated", as ``argocd app terminate-op`` makes Argo CD do.

It is deterministic: nothing happens until a test calls ``await controller.process()`` (one
pass) or ``settle()``; ``async with controller.running():`` adds a background loop for
end-to-end tests and stops it on exit, and ``async with controller.reacting():`` one that passes
only when told a watch saw a change (``notify()``), as Argo CD reacts to its informers.

    apps = InMemoryApps([make_app("web", stage="demo:test")])
    controller = FakeArgoCDController(apps)
    controller.script("argocd", "web", Outcome("fail"))
    ... run the step, await controller.process(), run the step again ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from app.apiserver.patching import merge_patch
from app.apiserver.selectors import labels_match, parse_label_selector
from promoter.errors import StepError
from promoter.resources import annotations as ann
from promoter.rules.argocd import (
    COMPLETED_PHASES,
    DEFAULT_NAMESPACE,
    PHASE_ERROR,
    PHASE_FAILED,
    PHASE_RUNNING,
    PHASE_SUCCEEDED,
    PHASE_TERMINATING,
    AppKey,
    app_key,
    app_sources,
)
from promoter.steps.argocd import ApplicationConflict, ArgoCDApps
from tests.support.polling import PollingController

FAIL_MESSAGE = (
    'one or more objects failed to apply, reason: Deployment.apps "web" is invalid: '
    "spec.template.spec.containers[0].image: Required value"
)
ERROR_MESSAGE = (
    "rpc error: code = Unknown desc = Manifest generation error (cached): "
    "`kustomize build .` failed exit status 1"
)
SUCCESS_MESSAGE = "successfully synced (all tasks run)"
TERMINATED_MESSAGE = "Operation terminated"


def timestamp(when: datetime) -> str:
    """Kubernetes' RFC 3339 form (second precision, ``Z``)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_app(
    name: str,
    namespace: str = DEFAULT_NAMESPACE,
    *,
    authorized: str | None = "demo:test",
    annotation: str = ann.KARGO_AUTHORIZED_STAGE,
    repo_url: str = "https://github.com/example/repo.git",
    target_revision: str = "main",
    sources: Sequence[Mapping[str, Any]] | None = None,
    labels: Mapping[str, str] | None = None,
    sync_options: Sequence[str] | None = None,
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An Application as Argo CD stores it: one git source unless ``sources`` is given."""
    spec: dict[str, Any] = {"project": "default", "destination": {"namespace": name}}
    if sources is not None:
        spec["sources"] = [dict(s) for s in sources]
    else:
        spec["source"] = {"repoURL": repo_url, "targetRevision": target_revision, "path": "."}
    if sync_options is not None:
        spec["syncPolicy"] = {"syncOptions": list(sync_options)}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if authorized is not None:
        metadata["annotations"] = {annotation: authorized}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": metadata,
        "spec": spec,
        "status": dict(
            status
            or {"health": {"status": "Healthy"}, "sync": {"status": "Synced", "revision": "old"}}
        ),
    }


class InMemoryApps:
    """Applications in a dict, behind the ArgoCDApps port, with resourceVersion conflicts."""

    def __init__(self, apps: Iterable[Mapping[str, Any]] = ()) -> None:
        self._objects: dict[AppKey, dict[str, Any]] = {}
        self._version = 0
        # Every patch accepted, in order: (namespace, name, patch).
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        # Called with the key of every Application written (to wake waiting Promotions).
        self.watchers: list[Callable[[AppKey], None]] = []
        self._forced_conflicts = 0
        for app in apps:
            self.put(app)

    def _bump(self, key: AppKey, obj: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        self._objects[key] = obj
        for watcher in self.watchers:
            watcher(key)
        return deepcopy(obj)

    def put(self, app: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace an Application (no conflict check), as a test fixture."""
        obj = deepcopy(dict(app))
        obj.setdefault("metadata", {}).setdefault("namespace", DEFAULT_NAMESPACE)
        return self._bump(app_key(obj), obj)

    def snapshot(self, namespace: str, name: str) -> dict[str, Any]:
        return deepcopy(self._objects[(namespace, name)])

    def force_conflicts(self, count: int = 1) -> None:
        """Make the next ``count`` patches fail as if someone wrote first."""
        self._forced_conflicts = count

    async def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        obj = self._objects.get((namespace, name))
        return deepcopy(obj) if obj is not None else None

    async def list(self, namespace: str, label_selector: str) -> list[Mapping[str, Any]]:
        requirements = parse_label_selector(label_selector)
        return [
            deepcopy(obj)
            for (ns, _), obj in sorted(self._objects.items())
            if ns == namespace and labels_match(requirements, obj)
        ]

    async def patch(
        self,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Mapping[str, Any]:
        key = (namespace, name)
        current = self._objects.get(key)
        if current is None:
            raise StepError(
                f'applications.argoproj.io "{name}" not found in namespace {namespace!r}'
            )
        stale = resource_version and resource_version != current["metadata"]["resourceVersion"]
        if self._forced_conflicts or stale:
            self._forced_conflicts = max(0, self._forced_conflicts - 1)
            raise ApplicationConflict(
                f'conflict: Operation cannot be fulfilled on applications.argoproj.io "{name}": '
                "the object has been modified; will retry"
            )
        updated = merge_patch(deepcopy(current), deepcopy(dict(patch)))
        updated["metadata"]["name"], updated["metadata"]["namespace"] = name, namespace
        self.patches.append((namespace, name, deepcopy(dict(patch))))
        return self._bump(key, updated)


ARGO_GROUP, ARGO_VERSION, ARGO_PLURAL = "argoproj.io", "v1alpha1", "applications"


class KubernetesApps:
    """The ArgoCDApps port over the Kubernetes API, for tests against the emulator."""

    def __init__(self, api: aio_client.ApiClient) -> None:
        self._crs = aio_client.CustomObjectsApi(api)

    async def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            obj: Any = await self._crs.get_namespaced_custom_object(
                ARGO_GROUP, ARGO_VERSION, namespace, ARGO_PLURAL, name
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise StepError(f"reading Application {namespace}/{name}: {e.reason}") from None
        return dict(obj)

    async def list(self, namespace: str, label_selector: str) -> list[Mapping[str, Any]]:
        try:
            found: Any = await self._crs.list_namespaced_custom_object(
                ARGO_GROUP, ARGO_VERSION, namespace, ARGO_PLURAL, label_selector=label_selector
            )
        except ApiException as e:
            raise StepError(f"listing Applications in {namespace}: {e.reason}") from None
        return list(found.get("items") or [])

    async def put(self, app: Mapping[str, Any]) -> Mapping[str, Any]:
        namespace = app["metadata"].get("namespace") or DEFAULT_NAMESPACE
        created: Any = await self._crs.create_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, namespace, ARGO_PLURAL, dict(app)
        )
        return dict(created)

    async def patch(
        self,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Mapping[str, Any]:
        body = deepcopy(dict(patch))
        if resource_version:
            # A merge patch carrying metadata.resourceVersion is an optimistic-concurrency write.
            body.setdefault("metadata", {})["resourceVersion"] = resource_version
        try:
            obj: Any = await self._crs.patch_namespaced_custom_object(
                ARGO_GROUP,
                ARGO_VERSION,
                namespace,
                ARGO_PLURAL,
                name,
                body,
                _content_type="application/merge-patch+json",
            )
        except ApiException as e:
            if e.status == 409:
                raise ApplicationConflict(
                    f"conflict writing Application {namespace}/{name}; will retry"
                ) from None
            raise StepError(f"patching Application {namespace}/{name}: {e.reason}") from None
        return dict(obj)


@dataclass(frozen=True)
class Outcome:
    """How the fake controller ends one sync operation."""

    # succeed | fail | error | hang
    result: str = "succeed"
    # process() passes the operation stays Running before it finishes.
    ticks: int = 1
    # And at least this long after it started (on the controller's clock): how long the sync
    # takes, for end-to-end runs and benchmarks.
    seconds: float = 0.0
    message: str | None = None
    # Health Argo CD reports after a successful sync.
    health: str = "Healthy"


@dataclass
class _Running:
    outcome: Outcome
    remaining: int
    started: datetime


@dataclass
class FakeArgoCDController(PollingController):
    """Runs sync operations on Applications reached through any ArgoCDApps-shaped store."""

    description = "the fake Argo CD controller"

    apps: ArgoCDApps
    namespaces: Sequence[str] = (DEFAULT_NAMESPACE,)
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    default: Outcome = field(default_factory=Outcome)
    _scripts: dict[AppKey, list[Outcome]] = field(default_factory=dict)
    _running: dict[AppKey, _Running] = field(default_factory=dict)
    _heads: dict[tuple[str, str], str] = field(default_factory=dict)
    # Resolves a (repoURL, ref) that set_head() did not name, as Argo CD's repo server does
    # against the real repository (None: the ref as it is).
    resolver: Callable[[str, str], str | None] | None = None
    # Every operation started, in order: (key, operation).
    started: list[tuple[AppKey, dict[str, Any]]] = field(default_factory=list)

    def script(self, namespace: str, name: str, *outcomes: Outcome) -> None:
        """Outcomes for the next operations on one Application, in order (then ``default``)."""
        self._scripts.setdefault((namespace, name), []).extend(outcomes)

    def set_head(self, repo_url: str, ref: str, revision: str) -> None:
        """What a branch or tag of a repository resolves to when Argo CD syncs it."""
        self._heads[(repo_url, ref)] = revision

    def resolve(self, repo_url: str, ref: str) -> str:
        key = (repo_url, ref or "HEAD")
        if key not in self._heads and self.resolver is not None:
            return self.resolver(repo_url, ref or "HEAD") or ref or "HEAD"
        return self._heads.get(key, ref or "HEAD")

    def due_in(self) -> float | None:
        """Seconds until the soonest sync in flight has taken its scripted time."""
        now = self.clock()
        waits = [
            run.outcome.seconds - (now - run.started).total_seconds()
            for run in self._running.values()
            if run.outcome.result != "hang" and run.outcome.seconds > 0
        ]
        return max(0.0, min(waits)) if waits else None

    async def process(self) -> int:
        """One reconciliation pass over every Application; returns how many it changed."""
        changed = 0
        for namespace in self.namespaces:
            for app in await self.apps.list(namespace, ""):
                try:
                    changed += await self._reconcile(app)
                except ApplicationConflict:
                    # Someone wrote in between; the next pass sees the new version.
                    continue
        return changed

    async def drift(self, namespace: str, name: str) -> None:
        """Someone changed live resources by hand: Argo CD reports OutOfSync."""
        await self._write(namespace, name, {"status": {"sync": {"status": "OutOfSync"}}})

    async def set_health(self, namespace: str, name: str, health: str) -> None:
        await self._write(namespace, name, {"status": {"health": {"status": health}}})

    async def set_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        await self._write(namespace, name, {"status": dict(status)})

    async def _write(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        app = await self.apps.get(namespace, name)
        assert app is not None, f"no Application {namespace}/{name}"
        await self.apps.patch(
            namespace, name, patch, resource_version=app["metadata"]["resourceVersion"]
        )

    async def _reconcile(self, app: Mapping[str, Any]) -> int:
        key = app_key(app)
        status = app.get("status") or {}
        state = status.get("operationState")
        phase = (state or {}).get("phase", "")
        requested = app.get("operation")
        now = self.clock()
        if requested and (state is None or phase in COMPLETED_PHASES):
            return await self._start(app, key, requested, now)
        if phase == PHASE_TERMINATING:
            self._running.pop(key, None)
            return await self._finish(
                app, key, now, PHASE_FAILED, TERMINATED_MESSAGE, sync_result=None, status={}
            )
        if phase != PHASE_RUNNING:
            return 0
        run = self._running.get(key)
        if run is None:
            # Started by another controller instance; finish it the default way.
            run = self._running[key] = _Running(self.default, self.default.ticks, now)
        if run.outcome.result == "hang":
            return 0
        run.remaining = max(0, run.remaining - 1)
        if run.remaining > 0 or (now - run.started).total_seconds() < run.outcome.seconds:
            return 0
        del self._running[key]
        return await self._complete(app, key, run.outcome, now)

    async def _start(
        self, app: Mapping[str, Any], key: AppKey, requested: Mapping[str, Any], now: datetime
    ) -> int:
        queue = self._scripts.get(key) or []
        outcome = queue.pop(0) if queue else self.default
        self._running[key] = _Running(outcome, max(1, outcome.ticks), now)
        self.started.append((key, deepcopy(dict(requested))))
        state = {
            "operation": deepcopy(dict(requested)),
            "phase": PHASE_RUNNING,
            "message": "",
            "startedAt": timestamp(now),
        }
        # A merge patch would blend the new state into the last one; clear it, then write.
        cleared = await self.apps.patch(
            *key,
            {"status": {"operationState": None}},
            resource_version=app["metadata"]["resourceVersion"],
        )
        await self.apps.patch(
            *key,
            {"status": {"operationState": state}},
            resource_version=cleared["metadata"]["resourceVersion"],
        )
        return 1

    def _synced_revisions(self, app: Mapping[str, Any]) -> list[str]:
        state = app["status"]["operationState"]
        sync = (state.get("operation") or {}).get("sync") or {}
        sources = app_sources(app)
        requested = list(sync.get("revisions") or [])
        if not requested and sync.get("revision"):
            requested = [sync["revision"]]
        out = []
        for i, source in enumerate(sources):
            ref = requested[i] if i < len(requested) and requested[i] else ""
            ref = ref or str(source.get("targetRevision") or "")
            out.append(self.resolve(str(source.get("repoURL") or ""), ref))
        return out

    @staticmethod
    def _revisions(app: Mapping[str, Any], revisions: list[str]) -> dict[str, Any]:
        if (app.get("spec") or {}).get("sources"):
            return {"revisions": revisions}
        return {"revision": revisions[0] if revisions else ""}

    async def _complete(
        self, app: Mapping[str, Any], key: AppKey, outcome: Outcome, now: datetime
    ) -> int:
        revisions = self._revisions(app, self._synced_revisions(app))
        if outcome.result == "succeed":
            return await self._finish(
                app,
                key,
                now,
                PHASE_SUCCEEDED,
                outcome.message or SUCCESS_MESSAGE,
                sync_result={**revisions, "resources": []},
                status={
                    "sync": {"status": "Synced", **revisions},
                    "health": {"status": outcome.health},
                },
            )
        if outcome.result == "fail":
            return await self._finish(
                app,
                key,
                now,
                PHASE_FAILED,
                outcome.message or FAIL_MESSAGE,
                sync_result={**revisions, "resources": []},
                status={"sync": {"status": "OutOfSync", **revisions}},
            )
        if outcome.result == "error":
            return await self._finish(
                app, key, now, PHASE_ERROR, outcome.message or ERROR_MESSAGE, None, {}
            )
        raise AssertionError(f"unknown scripted outcome {outcome.result!r}")

    async def _finish(
        self,
        app: Mapping[str, Any],
        key: AppKey,
        now: datetime,
        phase: str,
        message: str,
        sync_result: Mapping[str, Any] | None,
        status: Mapping[str, Any],
    ) -> int:
        state: dict[str, Any] = {
            "phase": phase,
            "message": message,
            "finishedAt": timestamp(now),
        }
        if sync_result is not None:
            state["syncResult"] = dict(sync_result)
        # Argo CD clears the request when the operation completes, then refreshes the app, so
        # reconciledAt is at or after finishedAt.
        patch: dict[str, Any] = {
            "operation": None,
            "status": {
                **status,
                "operationState": state,
                "reconciledAt": timestamp(now),
            },
        }
        await self.apps.patch(*key, patch, resource_version=app["metadata"]["resourceVersion"])
        return 1
