"""The resource model: Kargo v1alpha1 shapes as small typed objects, parsed at the edge.

Kubernetes objects travel as plain dicts (that is what the API server, YAML files and kubectl deal
in); this module turns the parts the engine decides on into frozen dataclasses and back, with
errors that name the field. Field names follow Kargo v1alpha1 exactly so that a Kargo user's
manifests and ``kubectl get -o yaml`` output look the same here.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from promoter.errors import InvalidInput
from promoter.resources.annotations import GROUP as GROUP  # also the API group
from promoter.resources.annotations import (
    ROLLBACK_ANNOTATIONS,
    create_actor,
    created_by,
    is_rollback,
)

VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KARGO_API_VERSION = "kargo.akuity.io/v1alpha1"
# Both apiVersions name the same kinds: a Kargo user's manifests run unchanged.
ACCEPTED_API_VERSIONS = frozenset({API_VERSION, KARGO_API_VERSION})

KINDS = ("Warehouse", "Freight", "Stage", "Promotion", "PromotionTask", "ClusterPromotionTask")
CLUSTER_SCOPED_KINDS = frozenset({"ClusterPromotionTask"})

# Aliases Kargo generates for steps without `as`; users may not claim them.
RESERVED_ALIAS = re.compile(r"^(step|task)-\d+$")
TASK_SEPARATOR = "::"


class Phase(enum.StrEnum):
    """A Promotion's phase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ERRORED = "Errored"
    ABORTED = "Aborted"

    @property
    def terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED, Phase.ERRORED, Phase.ABORTED)


def format_time(t: datetime | None) -> str | None:
    """RFC 3339 in UTC with a Z, as Kubernetes writes metav1.Time (second precision)."""
    if t is None:
        return None
    if t.tzinfo is not UTC:
        t = t.astimezone(UTC)
    # An f-string, not strftime: this runs for every timestamp of every status write.
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"


def parse_time(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(value: Any, *, field_name: str = "duration") -> float:
    """Parse a Go duration string ("90s", "10m", "1h30m") into seconds, as Kargo's fields take."""
    if isinstance(value, bool):
        raise InvalidInput(f"{value!r} is not a duration such as 30s, 10m or 1h", field=field_name)
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if text in ("0", ""):
        return 0.0
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise InvalidInput(f"{text!r} is not a duration such as 30s, 10m or 1h", field=field_name)
    return total


@dataclass(frozen=True, slots=True)
class Var:
    """A name/value pair (Kargo ExpressionVariable). ``value`` None means "required" in tasks."""

    name: str
    value: Any = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.value is not None:
            out["value"] = self.value
        return out


def parse_vars(raw: Any, where: str) -> tuple[Var, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidInput("must be a list of {name, value}", field=where)
    out = []
    for i, item in enumerate(raw):
        if (
            not isinstance(item, Mapping)
            or not isinstance(item.get("name"), str)
            or not item["name"]
        ):
            raise InvalidInput("must be a map with a non-empty name", field=f"{where}[{i}]")
        out.append(Var(item["name"], item.get("value")))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    timeout: float | None = None  # seconds from the step's first start
    error_threshold: int = 1

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.timeout is not None:
            out["timeout"] = (
                f"{int(self.timeout)}s" if self.timeout == int(self.timeout) else f"{self.timeout}s"
            )
        if self.error_threshold != 1:
            out["errorThreshold"] = self.error_threshold
        return out


@dataclass(frozen=True, slots=True)
class TaskRef:
    name: str
    kind: str = "PromotionTask"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One promotion step as written in a template, a task or a Promotion."""

    uses: str | None = None
    alias: str | None = None  # `as`
    config: Mapping[str, Any] | None = None
    vars: tuple[Var, ...] = ()
    if_: str | None = None  # `if`
    continue_on_error: bool = False
    retry: RetryPolicy | None = None
    task: TaskRef | None = None

    def alias_at(self, index: int) -> str:
        """The step's alias, or Kargo's default for the step at ``index`` (0-based) of its list.

        Kargo's ``PromotionStep.GetAlias`` counts from 1 (``step-1``, ``task-1``) since v1.6, so
        ``outputs['step-1']`` is the first step. Inflated Promotions store their aliases, so one
        created before this rule keeps the names it ran with.
        """
        if self.alias:
            return self.alias
        return f"{'task' if self.task else 'step'}-{index + 1}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.uses is not None:
            out["uses"] = self.uses
        if self.task is not None:
            out["task"] = self.task.to_dict()
        if self.alias:
            out["as"] = self.alias
        if self.if_ is not None:
            out["if"] = self.if_
        if self.continue_on_error:
            out["continueOnError"] = True
        if self.retry is not None and self.retry.to_dict():
            out["retry"] = self.retry.to_dict()
        if self.vars:
            out["vars"] = [v.to_dict() for v in self.vars]
        if self.config is not None:
            out["config"] = dict(self.config)
        return out


def parse_step(raw: Any, where: str) -> StepSpec:
    if not isinstance(raw, Mapping):
        raise InvalidInput("a step must be a map", field=where)
    known = {"uses", "as", "config", "vars", "if", "continueOnError", "retry", "task"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise InvalidInput(
            f"unknown field(s) {', '.join(unknown)}; a step has {', '.join(sorted(known))}",
            field=where,
        )
    uses = raw.get("uses")
    task_raw = raw.get("task")
    if uses is not None and not isinstance(uses, str):
        raise InvalidInput("must be a string", field=f"{where}.uses")
    task: TaskRef | None = None
    if task_raw is not None:
        if not isinstance(task_raw, Mapping) or not isinstance(task_raw.get("name"), str):
            raise InvalidInput("must be a map with a name", field=f"{where}.task")
        kind = task_raw.get("kind") or "PromotionTask"
        if kind not in ("PromotionTask", "ClusterPromotionTask"):
            raise InvalidInput(
                f"kind {kind!r} must be PromotionTask or ClusterPromotionTask",
                field=f"{where}.task",
            )
        task = TaskRef(task_raw["name"], kind)
    if (uses is None) == (task is None):
        raise InvalidInput("a step needs exactly one of `uses` or `task`", field=where)
    alias = raw.get("as")
    if alias is not None and (not isinstance(alias, str) or not alias):
        raise InvalidInput("must be a non-empty string", field=f"{where}.as")
    config = raw.get("config")
    if config is not None and not isinstance(config, Mapping):
        raise InvalidInput("must be a map", field=f"{where}.config")
    if_ = raw.get("if")
    if if_ is not None and not isinstance(if_, str | bool):
        raise InvalidInput("must be an expression string", field=f"{where}.if")
    retry = None
    retry_raw = raw.get("retry")
    if retry_raw is not None:
        if not isinstance(retry_raw, Mapping):
            raise InvalidInput(
                "must be a map with timeout and/or errorThreshold", field=f"{where}.retry"
            )
        timeout = retry_raw.get("timeout")
        threshold = retry_raw.get("errorThreshold", 1)
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise InvalidInput(
                "must be a whole number of at least 1", field=f"{where}.retry.errorThreshold"
            )
        retry = RetryPolicy(
            timeout=parse_duration(timeout, field_name=f"{where}.retry.timeout")
            if timeout
            else None,
            error_threshold=threshold,
        )
    continue_on_error = raw.get("continueOnError", False)
    if not isinstance(continue_on_error, bool):
        raise InvalidInput("must be true or false", field=f"{where}.continueOnError")
    return StepSpec(
        uses=uses,
        alias=alias,
        config=dict(config) if config is not None else None,
        vars=parse_vars(raw.get("vars"), f"{where}.vars"),
        if_=str(if_).lower() if isinstance(if_, bool) else if_,
        continue_on_error=continue_on_error,
        retry=retry,
        task=task,
    )


def parse_steps(raw: Any, where: str) -> tuple[StepSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidInput("must be a list of steps", field=where)
    return tuple(parse_step(s, f"{where}[{i}]") for i, s in enumerate(raw))


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str | None:
    ns = meta(obj).get("namespace")
    return str(ns) if ns else None


@dataclass(frozen=True, slots=True)
class StageSpec:
    """The parts of a Stage the builder needs."""

    name: str
    namespace: str
    vars: tuple[Var, ...]
    template_vars: tuple[Var, ...]
    steps: tuple[StepSpec, ...]
    requested_origins: tuple[Mapping[str, Any], ...] = ()


def parse_stage(obj: Mapping[str, Any], *, source: str | None = None) -> StageSpec:
    name = name_of(obj)
    where = f"Stage {name}"
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidInput("must be a map", source=source, field=f"{where}: spec")
    template = spec.get("promotionTemplate") or {}
    if not isinstance(template, Mapping):
        raise InvalidInput("must be a map", source=source, field=f"{where}: spec.promotionTemplate")
    tspec = template.get("spec") or {}
    if not isinstance(tspec, Mapping):
        raise InvalidInput(
            "must be a map", source=source, field=f"{where}: spec.promotionTemplate.spec"
        )
    try:
        stage_vars = parse_vars(spec.get("vars"), "spec.vars")
        template_vars = parse_vars(tspec.get("vars"), "spec.promotionTemplate.spec.vars")
        steps = parse_steps(tspec.get("steps"), "spec.promotionTemplate.spec.steps")
    except InvalidInput as e:
        raise InvalidInput(e.bare_message, source=source, field=f"{where}: {e.field}") from None
    requested = spec.get("requestedFreight") or []
    origins: tuple[Mapping[str, Any], ...] = tuple(
        r["origin"]
        for r in requested
        if isinstance(r, Mapping) and isinstance(r.get("origin"), Mapping)
    )
    return StageSpec(
        name=name,
        namespace=namespace_of(obj) or "default",
        vars=stage_vars,
        template_vars=template_vars,
        steps=steps,
        requested_origins=origins,
    )


@dataclass(frozen=True, slots=True)
class TaskSpec:
    kind: str
    name: str
    vars: tuple[Var, ...]
    steps: tuple[StepSpec, ...]


def parse_task(obj: Mapping[str, Any], *, source: str | None = None) -> TaskSpec:
    kind = str(obj.get("kind"))
    name = name_of(obj)
    spec = obj.get("spec") or {}
    where = f"{kind} {name}"
    if not isinstance(spec, Mapping):
        raise InvalidInput("must be a map", source=source, field=f"{where}: spec")
    try:
        task_vars = parse_vars(spec.get("vars"), "spec.vars")
        steps = parse_steps(spec.get("steps"), "spec.steps")
    except InvalidInput as e:
        raise InvalidInput(e.bare_message, source=source, field=f"{where}: {e.field}") from None
    return TaskSpec(kind=kind, name=name, vars=task_vars, steps=steps)


# ---- Promotion status -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepExecution:
    """Kargo's StepExecutionMetadata: what happened to one step."""

    alias: str
    status: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error_count: int = 0
    message: str = ""
    # Not in Kargo's shape: when a Running step asked to be entered again. Lets any replica
    # honour the step's own pacing after a restart.
    next_attempt_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"alias": self.alias}
        if self.status:
            out["status"] = self.status
        if self.started_at:
            out["startedAt"] = format_time(self.started_at)
        if self.finished_at:
            out["finishedAt"] = format_time(self.finished_at)
        if self.error_count:
            out["errorCount"] = self.error_count
        if self.message:
            out["message"] = self.message
        if self.next_attempt_at:
            out["nextAttemptAt"] = format_time(self.next_attempt_at)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StepExecution:
        return cls(
            alias=str(raw.get("alias") or ""),
            status=raw.get("status"),
            started_at=parse_time(raw.get("startedAt")),
            finished_at=parse_time(raw.get("finishedAt")),
            error_count=int(raw.get("errorCount") or 0),
            message=str(raw.get("message") or ""),
            next_attempt_at=parse_time(raw.get("nextAttemptAt")),
        )


@dataclass(frozen=True, slots=True)
class PromotionStatus:
    phase: Phase = Phase.PENDING
    message: str = ""
    current_step: int = 0
    steps: tuple[StepExecution, ...] = ()
    state: Mapping[str, Any] = field(default_factory=dict)
    freight: Mapping[str, Any] | None = None
    health_checks: tuple[Mapping[str, Any], ...] = ()
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # Not in Kargo's shape (status.replay): what a replica needs to rebuild the work directory
    # (promoter/engine/replay.py). The token of the work directory the last step ran in, and per
    # step
    # alias the record of a step that a replay runs again or checks.
    replay_token: str = ""
    replay_steps: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.phase.value}
        if self.message:
            out["message"] = self.message
        out["currentStep"] = self.current_step
        if self.steps:
            out["stepExecutionMetadata"] = [s.to_dict() for s in self.steps]
        if self.state:
            out["state"] = dict(self.state)
        if self.freight is not None:
            out["freight"] = dict(self.freight)
        if self.health_checks:
            out["healthChecks"] = [dict(h) for h in self.health_checks]
        if self.started_at:
            out["startedAt"] = format_time(self.started_at)
        if self.finished_at:
            out["finishedAt"] = format_time(self.finished_at)
        if self.replay_token or self.replay_steps:
            # Keys are left out rather than written empty or null (a real API server refuses
            # null for a string field).
            replay: dict[str, Any] = {}
            if self.replay_token:
                replay["workDir"] = self.replay_token
            if self.replay_steps:
                replay["steps"] = dict(self.replay_steps)
            out["replay"] = replay
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> PromotionStatus:
        if not raw:
            return cls()
        try:
            phase = Phase(raw.get("phase") or "Pending")
        except ValueError:
            phase = Phase.PENDING
        replay = raw.get("replay")
        if not isinstance(replay, Mapping):
            replay = {}
        steps = replay.get("steps")
        return cls(
            phase=phase,
            message=str(raw.get("message") or ""),
            current_step=int(raw.get("currentStep") or 0),
            steps=tuple(StepExecution.from_dict(s) for s in raw.get("stepExecutionMetadata") or ()),
            state=dict(raw.get("state") or {}),
            freight=raw.get("freight"),
            health_checks=tuple(raw.get("healthChecks") or ()),
            started_at=parse_time(raw.get("startedAt")),
            finished_at=parse_time(raw.get("finishedAt")),
            replay_token=str(replay.get("workDir") or ""),
            replay_steps=dict(steps) if isinstance(steps, Mapping) else {},
        )


@dataclass(frozen=True, slots=True)
class Promotion:
    """A Promotion as the engine sees it: identity, inflated steps, vars and status."""

    name: str
    namespace: str
    stage: str
    freight: str
    steps: tuple[StepSpec, ...]
    vars: tuple[Var, ...] = ()
    actor: str = ""
    status: PromotionStatus = field(default_factory=PromotionStatus)
    # Created to put back Freight the Stage had before (ctx.meta.promotion.rollback).
    rollback: bool = False

    def with_status(self, status: PromotionStatus) -> Promotion:
        return replace(self, status=status)

    def to_object(
        self, *, api_version: str = API_VERSION, extra_meta: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        annotations = create_actor(self.actor) if self.actor else {}
        if self.rollback:
            annotations[ROLLBACK_ANNOTATIONS[0]] = "true"
        if annotations:
            metadata["annotations"] = annotations
        if extra_meta:
            metadata.update(extra_meta)
        spec: dict[str, Any] = {"stage": self.stage, "freight": self.freight}
        if self.vars:
            spec["vars"] = [v.to_dict() for v in self.vars]
        spec["steps"] = [s.to_dict() for s in self.steps]
        return {
            "apiVersion": api_version,
            "kind": "Promotion",
            "metadata": metadata,
            "spec": spec,
            "status": self.status.to_dict(),
        }

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Promotion:
        spec = obj.get("spec") or {}
        name = name_of(obj)
        actor = created_by(obj) or ""
        return cls(
            name=name,
            namespace=namespace_of(obj) or "default",
            stage=str(spec.get("stage") or ""),
            freight=str(spec.get("freight") or ""),
            steps=parse_steps(spec.get("steps"), "spec.steps"),
            vars=parse_vars(spec.get("vars"), "spec.vars"),
            actor=actor,
            status=PromotionStatus.from_dict(obj.get("status")),
            rollback=is_rollback(obj),
        )


def freight_reference(freight: Mapping[str, Any]) -> dict[str, Any]:
    """The compact Freight reference Kargo stores on Promotion and Stage status.

    ``freight`` is a Freight object or already a reference (a Promotion's ``status.freight``).
    """
    out: dict[str, Any] = {"name": name_of(freight) or str(freight.get("name") or "")}
    for key in ("origin", "commits", "images", "charts", "artifacts"):
        if freight.get(key):
            out[key] = freight[key]
    return out


def describe_freight(freight: Mapping[str, Any]) -> str:
    """A Freight for people: its alias (the short name they say) first, then the full name
    where precision matters."""
    alias = freight.get("alias")
    name = name_of(freight)
    return f"{alias} ({name})" if alias else name
