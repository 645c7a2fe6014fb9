"""A fake Argo Rollouts analysis controller for tests: AnalysisRuns end as a test scripts them.

Pieces, all over one small async port (:class:`AnalysisRunStore`: ``get``/``list``/``patch``/
``create`` of AnalysisRun dicts, patches being JSON merge patches):

- :class:`InMemoryAnalysisRuns` keeps runs in a dict (label selectors use the API server
  emulator's parser), for tests that need no HTTP.
- :class:`KubernetesAnalysisRuns` is the same port over the Kubernetes API (the emulator in
  ``tests/support/kube.py``) with the real ``kubernetes.aio`` client. Argo Rollouts' AnalysisRun
  CRD has no status subresource, so status is written with a merge patch on the resource itself,
  exactly as Argo Rollouts' ``persistAnalysisRunStatus`` does.
- :class:`FakeRolloutsController` plays Argo Rollouts' analysis controller: a new run goes
  ``Pending`` (for ``Outcome.pending`` passes), then ``Running`` with one in-flight measurement
  per metric (for ``Outcome.ticks`` passes and at least ``Outcome.seconds`` on its clock), then
  ends with the scripted phase. The status it writes has Argo's shape and messages
  (``phase``, ``message``, ``startedAt``, ``completedAt``, ``metricResults[]`` with counts and
  measurements, ``runSummary``, ``dryRunSummary``): a ``Failed`` run says
  ``Metric "web" assessed Failed due to failed (1) > failureLimit (0)``.

Argo Rollouts behaviours mirrored on purpose:

- ``spec.terminate: true`` (what Kargo writes to abort a verification) ends a run that is not
  yet complete. Argo then marks metrics without a finished measurement ``Successful`` and the run
  takes the worst completed metric phase, which here is always ``Successful``, with the message
  "Run Terminated" (``assessRunStatus``). That is why Kargo records an aborted verification as
  Failed itself instead of reading the run's phase. A completed run is never touched again.
- Dry-run metrics (``spec.dryRun[].metricName``: a regular expression, ``*`` for all) do not
  count towards the run's phase: a scripted failure of a dry-run metric leaves the run
  ``Successful`` and the failure in the metric's ``message`` and ``dryRunSummary``.
- With a controller instance id, only runs labelled ``argo-rollouts.argoproj.io/
  controller-instance-id: <id>`` are processed; without one, only runs without that label.

Not modelled: metric providers (nothing is queried or run), intervals between measurements,
measurement garbage collection beyond Argo's default history of 10.

It is deterministic: nothing happens until a test calls ``await controller.process()`` (one
pass) or ``settle()``; ``async with controller.running():`` adds a background loop for
end-to-end tests and stops it on exit, and ``async with controller.reacting():`` one that passes
only when told a watch saw a change (``notify()``), as Argo Rollouts reacts to its informers.

    runs = KubernetesAnalysisRuns(kube.api_client())
    controller = FakeRolloutsController(runs)
    controller.script_stage("uat", Outcome("Failed"))
    await runs.create(build_analysis_run(...))
    await controller.settle()
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from app.apiserver.patching import merge_patch
from app.apiserver.selectors import labels_match, parse_label_selector
from promoter.resources.model import format_time, parse_time
from tests.support.polling import PollingController

ROLLOUTS_GROUP, ROLLOUTS_VERSION, ANALYSIS_RUNS = "argoproj.io", "v1alpha1", "analysisruns"
INSTANCE_ID_LABEL = "argo-rollouts.argoproj.io/controller-instance-id"
STAGE_LABELS = ("longshoreman.dev/stage", "kargo.akuity.io/stage")

SUCCESSFUL, FAILED, ERROR, INCONCLUSIVE = "Successful", "Failed", "Error", "Inconclusive"
PENDING, RUNNING = "Pending", "Running"
COMPLETED = frozenset({SUCCESSFUL, FAILED, ERROR, INCONCLUSIVE})
HANG = "hang"  # an Outcome phase: stays Running until terminated

TERMINATED_MESSAGE = "Run Terminated"
METRIC_TERMINATED_MESSAGE = "Metric Terminated"
ERROR_MESSAGE = (
    'Get "http://prometheus.monitoring:9090/api/v1/query": dial tcp 10.96.0.10:9090: '
    "connect: connection refused"
)
# Argo Rollouts' defaults (utils/defaults, analysis.DefaultMeasurementHistoryLimit).
DEFAULT_CONSECUTIVE_ERROR_LIMIT = 4
MEASUREMENT_HISTORY_LIMIT = 10

_ARG_REFERENCE = re.compile(r"\{\{args\.([^{}]+?)\}\}")

Key = tuple[str, str]


class AnalysisRunGone(LookupError):
    """The run was deleted between reading and writing it."""


class AnalysisRunStore(Protocol):
    """Where AnalysisRuns live; ``patch`` applies a JSON merge patch."""

    async def get(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    async def list(
        self, namespace: str | None = None, label_selector: str = ""
    ) -> list[Mapping[str, Any]]: ...

    async def patch(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]: ...

    async def create(self, run: Mapping[str, Any]) -> Mapping[str, Any]: ...


def key_of(run: Mapping[str, Any]) -> Key:
    metadata = run.get("metadata") or {}
    return (str(metadata.get("namespace") or "default"), str(metadata.get("name") or ""))


class InMemoryAnalysisRuns:
    """AnalysisRuns in a dict, with resourceVersion bumps and label selectors."""

    def __init__(self, runs: Iterable[Mapping[str, Any]] = ()) -> None:
        self._objects: dict[Key, dict[str, Any]] = {}
        self._version = 0
        # Every patch accepted, in order: (namespace, name, patch).
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        for run in runs:
            self._store(deepcopy(dict(run)))

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("namespace", "default")
        metadata.setdefault("uid", f"uid-{self._version}")
        metadata["resourceVersion"] = str(self._version)
        self._objects[key_of(obj)] = obj
        return deepcopy(obj)

    async def create(self, run: Mapping[str, Any]) -> Mapping[str, Any]:
        obj = deepcopy(dict(run))
        if key_of(obj) in self._objects:
            raise ValueError(f"AnalysisRun {key_of(obj)} already exists")
        return self._store(obj)

    async def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        obj = self._objects.get((namespace, name))
        return deepcopy(obj) if obj is not None else None

    async def list(
        self, namespace: str | None = None, label_selector: str = ""
    ) -> list[Mapping[str, Any]]:
        requirements = parse_label_selector(label_selector)
        return [
            deepcopy(obj)
            for (ns, _), obj in sorted(self._objects.items())
            if namespace in (None, ns) and labels_match(requirements, obj)
        ]

    async def patch(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Mapping[str, Any]:
        current = self._objects.get((namespace, name))
        if current is None:
            raise AnalysisRunGone(f"AnalysisRun {namespace}/{name} not found")
        updated = merge_patch(current, deepcopy(dict(patch)))
        updated["metadata"]["name"], updated["metadata"]["namespace"] = name, namespace
        self.patches.append((namespace, name, deepcopy(dict(patch))))
        return self._store(updated)

    async def delete(self, namespace: str, name: str) -> None:
        self._objects.pop((namespace, name), None)


class KubernetesAnalysisRuns:
    """The AnalysisRunStore port over the Kubernetes API, for tests against the emulator."""

    def __init__(self, api: aio_client.ApiClient) -> None:
        self._crs = aio_client.CustomObjectsApi(api)

    async def create(self, run: Mapping[str, Any]) -> Mapping[str, Any]:
        namespace = key_of(run)[0]
        created: Any = await self._crs.create_namespaced_custom_object(
            ROLLOUTS_GROUP, ROLLOUTS_VERSION, namespace, ANALYSIS_RUNS, dict(run)
        )
        return dict(created)

    async def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            obj: Any = await self._crs.get_namespaced_custom_object(
                ROLLOUTS_GROUP, ROLLOUTS_VERSION, namespace, ANALYSIS_RUNS, name
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return dict(obj)

    async def list(
        self, namespace: str | None = None, label_selector: str = ""
    ) -> list[Mapping[str, Any]]:
        found: Any
        if namespace is None:
            found = await self._crs.list_cluster_custom_object(
                ROLLOUTS_GROUP, ROLLOUTS_VERSION, ANALYSIS_RUNS, label_selector=label_selector
            )
        else:
            found = await self._crs.list_namespaced_custom_object(
                ROLLOUTS_GROUP,
                ROLLOUTS_VERSION,
                namespace,
                ANALYSIS_RUNS,
                label_selector=label_selector,
            )
        return list(found.get("items") or [])

    async def patch(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            obj: Any = await self._crs.patch_namespaced_custom_object(
                ROLLOUTS_GROUP,
                ROLLOUTS_VERSION,
                namespace,
                ANALYSIS_RUNS,
                name,
                deepcopy(dict(patch)),
                _content_type="application/merge-patch+json",
            )
        except ApiException as e:
            if e.status == 404:
                raise AnalysisRunGone(f"AnalysisRun {namespace}/{name} not found") from None
            raise
        return dict(obj)


@dataclass(frozen=True)
class Outcome:
    """How the fake controller ends one AnalysisRun."""

    # Successful | Failed | Error | Inconclusive | hang
    phase: str = SUCCESSFUL
    # process() passes spent Pending, then Running, before the next phase.
    pending: int = 1
    ticks: int = 1
    # Also wait this long after startedAt (on the controller's clock) before finishing.
    seconds: float = 0.0
    # The metric that fails, errs or is inconclusive (default: the first non-dry-run metric).
    metric: str | None = None
    # The failing measurement's message (for Error, default ERROR_MESSAGE).
    message: str | None = None

    def __post_init__(self) -> None:
        if self.phase not in (*COMPLETED, HANG):
            raise ValueError(f"unknown outcome phase {self.phase!r}")


@dataclass
class _Run:
    outcome: Outcome
    pending: int
    ticks: int
    # When this controller marked it Running (startedAt has only second precision).
    running_since: datetime | None = None


def _args(run: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(a.get("name")): str(a["value"])
        for a in (run.get("spec") or {}).get("args") or []
        if isinstance(a, Mapping) and isinstance(a.get("value"), str)
    }


def _int_field(metric: Mapping[str, Any], name: str, args: Mapping[str, str], default: int) -> int:
    """An int-or-string metric field, with ``{{args.x}}`` resolved as Argo resolves it."""
    value = metric.get(name)
    if value is None:
        return default
    text = _ARG_REFERENCE.sub(lambda m: args.get(m.group(1), m.group(0)), str(value))
    try:
        return int(text)
    except ValueError:
        return default


def _dry_run_metrics(run: Mapping[str, Any]) -> set[str]:
    spec = run.get("spec") or {}
    names = [str(m.get("name")) for m in spec.get("metrics") or []]
    out: set[str] = set()
    for entry in spec.get("dryRun") or []:
        pattern = str((entry or {}).get("metricName") or "")
        for name in names:
            # Argo Rollouts' GetDryRunMetrics: "*" means all, anything else is a regexp.
            if pattern == "*" or (pattern and re.search(pattern, name)):
                out.add(name)
    return out


@dataclass
class FakeRolloutsController(PollingController):
    """Runs AnalysisRuns reached through any AnalysisRunStore to scripted outcomes."""

    description = "the fake Rollouts controller"

    runs: AnalysisRunStore
    # Namespaces to watch; None watches all of them.
    namespaces: Sequence[str] | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    default: Outcome = field(default_factory=Outcome)
    instance_id: str | None = None
    _prefixes: list[tuple[str, list[Outcome]]] = field(default_factory=list)
    _stages: dict[str, list[Outcome]] = field(default_factory=dict)
    _state: dict[Key, _Run] = field(default_factory=dict)
    # Every run started, in order, with the outcome it was given.
    started: list[tuple[Key, Outcome]] = field(default_factory=list)

    def script(self, name_prefix: str, *outcomes: Outcome) -> None:
        """Outcomes for the next runs whose name starts with ``name_prefix`` (then ``default``)."""
        for prefix, queue in self._prefixes:
            if prefix == name_prefix:
                queue.extend(outcomes)
                return
        self._prefixes.append((name_prefix, list(outcomes)))

    def script_stage(self, stage: str, *outcomes: Outcome) -> None:
        """Outcomes for the next runs labelled with this Stage (then ``default``)."""
        self._stages.setdefault(stage, []).extend(outcomes)

    def _choose(self, run: Mapping[str, Any]) -> Outcome:
        name = key_of(run)[1]
        # The longest matching prefix is the most specific script.
        for prefix, queue in sorted(self._prefixes, key=lambda p: -len(p[0])):
            if name.startswith(prefix) and queue:
                return queue.pop(0)
        labels = (run.get("metadata") or {}).get("labels") or {}
        for label in STAGE_LABELS:
            scripted = self._stages.get(str(labels.get(label) or ""))
            if scripted:
                return scripted.pop(0)
        return self.default

    async def terminate(self, namespace: str, name: str) -> None:
        """What Kargo does to abort a verification: set ``spec.terminate``."""
        await self.runs.patch(namespace, name, {"spec": {"terminate": True}})

    def due_in(self) -> float | None:
        """Seconds until the soonest Running run has taken its scripted time."""
        now = self.clock()
        waits = [
            state.outcome.seconds - (now - state.running_since).total_seconds()
            for state in self._state.values()
            if state.running_since is not None
            and state.outcome.phase != HANG
            and state.outcome.seconds > 0
        ]
        return max(0.0, min(waits)) if waits else None

    async def process(self) -> int:
        """One reconciliation pass over every AnalysisRun; returns how many it changed."""
        runs: list[Mapping[str, Any]] = []
        for namespace in self.namespaces if self.namespaces is not None else [None]:
            runs.extend(await self.runs.list(namespace))
        changed = 0
        for run in runs:
            labels = (run.get("metadata") or {}).get("labels") or {}
            if labels.get(INSTANCE_ID_LABEL) != self.instance_id:
                continue
            try:
                changed += await self._reconcile(run)
            except AnalysisRunGone:
                self._state.pop(key_of(run), None)
        return changed

    # ---- reconciliation -------------------------------------------------------------------------

    async def _write(self, run: Mapping[str, Any], status: Mapping[str, Any]) -> int:
        await self.runs.patch(*key_of(run), {"status": dict(status)})
        return 1

    async def _reconcile(self, run: Mapping[str, Any]) -> int:
        key = key_of(run)
        status = run.get("status") or {}
        phase = status.get("phase") or ""
        if phase in COMPLETED:
            self._state.pop(key, None)
            return 0
        now = self.clock()
        if (run.get("spec") or {}).get("terminate"):
            self._state.pop(key, None)
            return await self._write(run, self._terminated(run, now))
        state = self._state.get(key)
        if state is None:
            outcome = self.default if phase else self._choose(run)
            if not phase:
                self.started.append((key, outcome))
            # A run first seen Pending/Running was started by another controller instance.
            state = self._state[key] = _Run(outcome, max(1, outcome.pending), max(1, outcome.ticks))
            if not phase:
                return await self._write(run, {"phase": PENDING, "message": None})
        if phase in ("", PENDING):
            state.pending -= 1
            if state.pending > 0:
                return 0
            state.running_since = now
            return await self._write(run, self._started(run, now))
        if state.outcome.phase == HANG:
            return 0
        state.ticks = max(0, state.ticks - 1)
        started = state.running_since or parse_time(status.get("startedAt")) or now
        if state.ticks > 0 or (now - started).total_seconds() < state.outcome.seconds:
            return 0
        del self._state[key]
        return await self._write(run, self._completed(run, state.outcome, now))

    def _metrics(self, run: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return [m for m in (run.get("spec") or {}).get("metrics") or [] if isinstance(m, Mapping)]

    def _started(self, run: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        dry = _dry_run_metrics(run)
        results = []
        for metric in self._metrics(run):
            result: dict[str, Any] = {
                "name": metric["name"],
                "phase": RUNNING,
                "measurements": [{"phase": RUNNING, "startedAt": format_time(now)}],
            }
            if metric["name"] in dry:
                result["dryRun"] = True
            results.append(result)
        return {
            "phase": RUNNING,
            "message": None,
            "startedAt": format_time(now),
            "metricResults": results,
        }

    def _terminated(self, run: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        status = run.get("status") or {}
        started = str(status.get("startedAt") or format_time(now))
        previous = {r.get("name"): r for r in status.get("metricResults") or []}
        dry = _dry_run_metrics(run)
        results = []
        for metric in self._metrics(run):
            result = deepcopy(dict(previous.get(metric["name"]) or {"name": metric["name"]}))
            measurements = list(result.get("measurements") or [])
            if measurements and measurements[-1].get("phase") == RUNNING:
                # provider.Terminate: the in-flight measurement ends Successful.
                measurements[-1] = {
                    **measurements[-1],
                    "phase": SUCCESSFUL,
                    "finishedAt": format_time(now),
                    "message": METRIC_TERMINATED_MESSAGE,
                }
                result["count"] = int(result.get("count") or 0) + 1
                result["successful"] = int(result.get("successful") or 0) + 1
                result["message"] = METRIC_TERMINATED_MESSAGE
            result["phase"] = SUCCESSFUL
            result["measurements"] = measurements
            if metric["name"] in dry:
                result["dryRun"] = True
            results.append(result)
        real = [r for r in results if not r.get("dryRun")]
        dry_results = [r for r in results if r.get("dryRun")]
        return {
            "phase": SUCCESSFUL,
            "message": TERMINATED_MESSAGE,
            "startedAt": started,
            "completedAt": format_time(now),
            "metricResults": results,
            "runSummary": _summary(real),
            "dryRunSummary": _summary(dry_results),
        }

    def _completed(self, run: Mapping[str, Any], outcome: Outcome, now: datetime) -> dict[str, Any]:
        status = run.get("status") or {}
        started = str(status.get("startedAt") or format_time(now))
        args = _args(run)
        metrics = self._metrics(run)
        dry = _dry_run_metrics(run)
        culprit = outcome.metric
        if culprit is None and outcome.phase != SUCCESSFUL and metrics:
            real = [m["name"] for m in metrics if m["name"] not in dry]
            culprit = real[0] if real else metrics[0]["name"]
        results = []
        worst, message = SUCCESSFUL, ""
        for metric in metrics:
            bad = metric["name"] == culprit and outcome.phase != SUCCESSFUL
            result, reason = (
                _bad_result(metric, outcome, args, started, now)
                if bad
                else (_good_result(metric, args, started, now), "")
            )
            if metric["name"] in dry:
                result["dryRun"] = True
                if reason:
                    result["message"] = f"Metric assessed {result['phase']} due to {reason}"
            elif bad:
                worst = result["phase"]
                message = f'Metric "{metric["name"]}" assessed {worst} due to {reason}'
                if result.get("message"):
                    message += f': "Error Message: {result["message"]}"'
            results.append(result)
        return {
            "phase": worst,
            "message": message or None,
            "startedAt": started,
            "completedAt": format_time(now),
            "metricResults": results,
            "runSummary": _summary([r for r in results if not r.get("dryRun")]),
            "dryRunSummary": _summary([r for r in results if r.get("dryRun")]),
        }


def _measurements(phase: str, count: int, started: str, now: datetime, **extra: Any) -> list[Any]:
    one = {"phase": phase, "startedAt": started, "finishedAt": format_time(now), **extra}
    return [dict(one) for _ in range(min(count, MEASUREMENT_HISTORY_LIMIT))]


def _good_result(
    metric: Mapping[str, Any], args: Mapping[str, str], started: str, now: datetime
) -> dict[str, Any]:
    count = max(1, _int_field(metric, "count", args, 1))
    return {
        "name": metric["name"],
        "phase": SUCCESSFUL,
        "count": count,
        "successful": count,
        "measurements": _measurements(SUCCESSFUL, count, started, now, value="1"),
    }


def _bad_result(
    metric: Mapping[str, Any],
    outcome: Outcome,
    args: Mapping[str, str],
    started: str,
    now: datetime,
) -> tuple[dict[str, Any], str]:
    """The metric result Argo writes when the limit for ``outcome.phase`` is exceeded."""
    name = metric["name"]
    if outcome.phase == ERROR:
        limit = _int_field(metric, "consecutiveErrorLimit", args, DEFAULT_CONSECUTIVE_ERROR_LIMIT)
        errors = limit + 1
        text = outcome.message or ERROR_MESSAGE
        result = {
            "name": name,
            "phase": ERROR,
            "error": errors,
            "consecutiveError": errors,
            "message": text,
            "measurements": _measurements(ERROR, errors, started, now, message=text),
        }
        return result, f"consecutiveErrors ({errors}) > consecutiveErrorLimit ({limit})"
    field_name, counter, value = {
        FAILED: ("failureLimit", "failed", "0"),
        INCONCLUSIVE: ("inconclusiveLimit", "inconclusive", ""),
    }[outcome.phase]
    limit = _int_field(metric, field_name, args, 0)
    times = limit + 1
    extra: dict[str, Any] = {"value": value} if value else {}
    if outcome.message:
        extra["message"] = outcome.message
    result = {
        "name": name,
        "phase": outcome.phase,
        "count": times,
        counter: times,
        "measurements": _measurements(outcome.phase, times, started, now, **extra),
    }
    if outcome.message:
        result["message"] = outcome.message
    return result, f"{counter} ({times}) > {field_name} ({limit})"


def _summary(results: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = {SUCCESSFUL: 0, FAILED: 0, INCONCLUSIVE: 0, ERROR: 0}
    for result in results:
        counts[str(result.get("phase"))] = counts.get(str(result.get("phase")), 0) + 1
    return {
        "count": len(results),
        "successful": counts[SUCCESSFUL],
        "failed": counts[FAILED],
        "inconclusive": counts[INCONCLUSIVE],
        "error": counts[ERROR],
    }
