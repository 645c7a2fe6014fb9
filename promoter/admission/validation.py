"""The validating half of admission: an object and the facts -> every problem, naming fields.

What is refused, per kind, and where the rule comes from (Kargo's ``pkg/webhook/kubernetes``
and its CRDs; the rule itself lives once, here or in the module named):

- **Stage** (``spec.promotionTemplate.spec.steps``) and **(Cluster)PromotionTask**
  (``spec.steps``): a step runs either a known step kind (``uses``; an unknown one is named
  with the nearest known kind) or a task (``task.name``, which must exist: a PromotionTask in
  the namespace, or a ClusterPromotionTask); a known step's config has the fields Kargo's JSON
  schema for it requires (``REQUIRED_CONFIG``); every ``${{ }}`` expression in configs, ``if``
  and vars parses (``promoter.expressions.templates.check_syntax``).
- **Stage** also: each request's ``autoPromotionOptions.selectionPolicy`` is known, and
  ``MatchUpstream`` has exactly one upstream Stage and no direct source
  (``promoter.control.selection.selection_problems``).
- **Warehouse**: each subscription's ``repoURL`` as Kargo's subscribers check it
  (``promoter.warehouses.spec.repo_url_problems``), then the rest of the subscription as
  discovery reads it (``promoter.warehouses.spec.parse_subscription``), and the names as
  Kargo's webhook checks them (``subscription_name_problems``: a generic subscription needs
  one; DNS labels, unique).
- **Promotion** (create): the Stage exists, the Freight exists in the namespace and is
  available to the Stage (``promoter.resources.stages.available_to``: approved, direct, or
  verified upstream, soak time included), as Kargo's promotion webhook refuses.
- **Freight**: it holds at least one commit, image, chart or artifact (created); ``origin``,
  ``commits``, ``images``, ``charts`` and ``artifacts`` never change
  (Kargo: "Freight is immutable"); an alias (the ``alias`` field or the ``kargo.akuity.io/alias``
  label) another Freight of the namespace answers to is refused, as Kargo's webhook refuses it
  (so two ``set-freight-alias`` steps racing for one alias cannot both win).
- **ProjectConfig / ClusterConfig**: what ``promoter.control.policies`` reports on their
  status, all of it.

- **every kind**: the limits of ``promoter.rules.limits`` (an object's size; a Promotion's
  steps), called here as the controller calls them. Whether a Promotion may bring steps of its
  own is decided where its Stage's template is inflated (the controller), not here.

A problem's ``message`` reads as kube-apiserver's field errors do (``Invalid value: "x": ...``,
``Required value``, ``Unsupported value``, ``Not found``, ``Forbidden``), so a refusal from the
emulator, the webhook or a real server looks the same to kubectl users.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from promoter.control.policies import cluster_config, project_config
from promoter.control.selection import selection_problems
from promoter.expressions.errors import ExpressionSyntaxError
from promoter.expressions.templates import check_syntax
from promoter.resources.freight_refs import aliases_of
from promoter.resources.model import name_of, namespace_of
from promoter.resources.stages import available_to
from promoter.rules.limits import DEFAULT_LIMITS, Limits, object_size_problems, promotion_problems
from promoter.warehouses.spec import (
    SpecError,
    parse_subscription,
    repo_url_problems,
    subscription_name_problems,
)

__all__ = ["REQUIRED_CONFIG", "Facts", "Lookup", "Problem", "validate"]

# Kargo's step schemas' top-level `required` (pkg/promotion/runner/builtin/schemas/*.json).
REQUIRED_CONFIG: Mapping[str, tuple[str, ...]] = {
    "argocd-update": ("apps",),
    "argocd-wait": ("apps",),
    "copy": ("inPath", "outPath"),
    "file-write": ("path", "contents"),
    "git-clear": ("path",),
    "git-clone": ("repoURL", "checkout"),
    "git-commit": ("path", "message"),
    "git-merge-pr": ("repoURL", "prNumber"),
    "git-open-pr": ("repoURL", "targetBranch", "sourceBranch"),
    "git-push": ("path",),
    "git-tag": ("path", "tag", "message"),
    "git-wait-for-pr": ("repoURL", "prNumber"),
    "github-push": ("path",),
    "helm-update-chart": ("path",),
    "http": ("url",),
    "http-download": ("url", "outPath"),
    "json-parse": ("path", "outputs"),
    "json-update": ("path", "updates"),
    "kustomize-build": ("path", "outPath"),
    "kustomize-set-image": ("path",),
    "oci-download": ("imageRef", "outPath"),
    "oci-push": ("srcRef", "destRef"),
    "set-freight-alias": ("name", "alias"),
    "set-metadata": ("updates",),
    "tar": ("inPath", "outPath"),
    "toml-parse": ("path", "outputs"),
    "toml-update": ("path", "updates"),
    "untar": ("inPath", "outPath"),
    "yaml-merge": ("inFiles", "outFile"),
    "yaml-parse": ("path", "outputs"),
    "yaml-update": ("path", "updates"),
}

# Where a step still accepts another field in place of a required one (Kargo's deprecated
# forms our steps keep), that field stands in for it.
_STANDS_IN: Mapping[tuple[str, str], str] = {("git-commit", "message"): "messageFromSteps"}

_FREIGHT_ARTIFACTS = ("commits", "images", "charts", "artifacts")
_FREIGHT_CONTENT = ("origin", *_FREIGHT_ARTIFACTS)


@dataclass(frozen=True, slots=True)
class Problem:
    """One refused field: ``field`` its path, ``message`` what is wrong, in the API server's
    words; ``reason`` the StatusCause type (``FieldValueInvalid``...)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class Lookup(Protocol):
    """The cluster's objects of our kinds: ``kind`` is Stage, Freight, PromotionTask,
    ClusterPromotionTask...; ``namespace`` is empty for cluster-scoped kinds."""

    def __call__(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


def _no_aliases(namespace: str, alias: str) -> Sequence[Mapping[str, Any]]:
    return ()


@dataclass(frozen=True, slots=True)
class Facts:
    """``aliased(namespace, alias)``: the Freight answering to an alias there."""

    lookup: Lookup
    step_kinds: frozenset[str]
    now: datetime
    aliased: Callable[[str, str], Sequence[Mapping[str, Any]]] = _no_aliases
    limits: Limits = DEFAULT_LIMITS


def _invalid(path: str, value: Any, detail: str) -> Problem:
    return Problem(path, f"Invalid value: {json.dumps(value, default=str)}: {detail}")


def _required(path: str, detail: str) -> Problem:
    return Problem(path, f"Required value: {detail}", "FieldValueRequired")


def _syntax(value: Any, where: str) -> list[Problem]:
    try:
        check_syntax(value, where=where)
    except ExpressionSyntaxError as e:
        text = str(e)
        field, _, detail = text.partition(": ")
        return [Problem(field or where, f"Invalid value: {detail or text}")]
    return []


def _vars(items: Any, where: str) -> list[Problem]:
    problems: list[Problem] = []
    for i, var in enumerate(items if isinstance(items, list) else ()):
        if isinstance(var, Mapping) and "value" in var:
            problems += _syntax(var["value"], f"{where}[{i}].value")
    return problems


def _steps(steps: Any, where: str, namespace: str, facts: Facts) -> list[Problem]:
    problems: list[Problem] = []
    for i, step in enumerate(steps if isinstance(steps, list) else ()):
        path = f"{where}[{i}]"
        if not isinstance(step, Mapping):
            problems.append(_invalid(path, step, "must be an object"))
            continue
        uses, task = step.get("uses"), step.get("task")
        if uses and task:
            forbidden = "Forbidden: uses and task are mutually exclusive"
            problems.append(Problem(path, forbidden, "FieldValueForbidden"))
        elif task is not None:
            problems += _task_ref(task, f"{path}.task", namespace, facts)
        elif not uses:
            problems.append(_required(f"{path}.uses", "a step names a step kind or a task"))
        else:
            problems += _step_kind(str(uses), step.get("config"), path, facts)
        if step.get("if") is not None:
            problems += _syntax(step["if"], f"{path}.if")
        problems += _vars(step.get("vars"), f"{path}.vars")
        config = step.get("config")
        if isinstance(config, Mapping):
            for key, value in config.items():
                problems += _syntax(value, f"{path}.config.{key}")
    return problems


def _task_ref(task: Any, path: str, namespace: str, facts: Facts) -> list[Problem]:
    if not isinstance(task, Mapping) or not task.get("name"):
        return [_required(f"{path}.name", "a task reference names the task")]
    kind = str(task.get("kind") or "PromotionTask")
    name = str(task["name"])
    if kind not in ("PromotionTask", "ClusterPromotionTask"):
        return [
            Problem(
                f"{path}.kind",
                f'Unsupported value: {json.dumps(kind)}: supported values: "PromotionTask", '
                '"ClusterPromotionTask"',
                "FieldValueNotSupported",
            )
        ]
    scope = namespace if kind == "PromotionTask" else ""
    if facts.lookup(kind, scope, name) is None:
        where = f" in namespace {json.dumps(namespace)}" if scope else ""
        return [
            Problem(
                f"{path}.name",
                f"Not found: {json.dumps(name)}: no {kind} of that name{where}",
                "FieldValueNotFound",
            )
        ]
    return []


def _step_kind(uses: str, config: Any, path: str, facts: Facts) -> list[Problem]:
    if uses not in facts.step_kinds:
        near = difflib.get_close_matches(uses, sorted(facts.step_kinds), n=1)
        hint = f" (did you mean {json.dumps(near[0])}?)" if near else ""
        return [
            Problem(
                f"{path}.uses",
                f"Unsupported value: {json.dumps(uses)}: not a known step kind{hint}",
                "FieldValueNotSupported",
            )
        ]
    if config is not None and not isinstance(config, Mapping):
        return [_invalid(f"{path}.config", config, "must be an object")]
    given = config or {}
    return [
        _required(f"{path}.config.{key}", f"{uses} needs {key}")
        for key in REQUIRED_CONFIG.get(uses, ())
        if given.get(key) is None and given.get(_STANDS_IN.get((uses, key), "")) is None
    ]


def _stage(obj: Mapping[str, Any], facts: Facts) -> list[Problem]:
    spec = obj.get("spec") or {}
    template = (spec.get("promotionTemplate") or {}).get("spec") or {}
    where = "spec.promotionTemplate.spec"
    return [
        *_vars(spec.get("vars"), "spec.vars"),
        *_vars(template.get("vars"), f"{where}.vars"),
        *_steps(template.get("steps"), f"{where}.steps", namespace_of(obj) or "", facts),
        *_selection(obj),
    ]


def _selection(stage: Mapping[str, Any]) -> list[Problem]:
    """Kargo's Stage webhook on ``autoPromotionOptions.selectionPolicy`` (MatchUpstream needs
    exactly one upstream Stage and no direct source)."""
    problems = []
    for text in selection_problems(stage):
        field, _, message = text.partition(": ")
        unsupported = message.startswith("Unsupported value")
        problems.append(
            Problem(
                field, message, "FieldValueNotSupported" if unsupported else "FieldValueInvalid"
            )
        )
    return problems


def _task(obj: Mapping[str, Any], facts: Facts) -> list[Problem]:
    spec = obj.get("spec") or {}
    return [
        *_vars(spec.get("vars"), "spec.vars"),
        *_steps(spec.get("steps"), "spec.steps", namespace_of(obj) or "", facts),
    ]


def _warehouse(obj: Mapping[str, Any]) -> list[Problem]:
    problems: list[Problem] = []
    subscriptions = (obj.get("spec") or {}).get("subscriptions")
    for i, entry in enumerate(subscriptions if isinstance(subscriptions, list) else ()):
        url_problems: list[Problem] = []
        for kind in ("image", "git", "chart"):
            body = entry.get(kind) if isinstance(entry, Mapping) else None
            if isinstance(body, Mapping):
                url = str(body.get("repoURL") or "")
                path = f"spec.subscriptions[{i}].{kind}.repoURL"
                url_problems += [_invalid(path, url, p) for p in repo_url_problems(kind, url)]
        problems += url_problems
        try:
            parse_subscription(entry, i)
        except SpecError as e:
            field, _, detail = str(e).partition(": ")
            if not any(p.field == field for p in url_problems):
                problems.append(Problem(field, f"Invalid value: {detail or e}"))
    if isinstance(subscriptions, list):
        problems += [
            _required(where, problem) if value is None else _invalid(where, value, problem)
            for where, value, problem in subscription_name_problems(subscriptions)
        ]
    return problems


def _promotion(obj: Mapping[str, Any], facts: Facts) -> list[Problem]:
    spec = obj.get("spec") or {}
    namespace = namespace_of(obj) or ""
    where = f"in namespace {json.dumps(namespace)}"
    stage_name, freight_name = str(spec.get("stage") or ""), str(spec.get("freight") or "")
    stage = facts.lookup("Stage", namespace, stage_name) if stage_name else None
    freight = facts.lookup("Freight", namespace, freight_name) if freight_name else None
    problems: list[Problem] = []
    if stage_name and stage is None:
        missing = f"could not find Stage {json.dumps(stage_name)} {where}"
        problems.append(_invalid("spec.stage", stage_name, missing))
    if freight_name and freight is None:
        missing = f"could not find Freight {json.dumps(freight_name)} {where}"
        problems.append(_invalid("spec.freight", freight_name, missing))
    if stage is not None and freight is not None and not available_to(stage, freight, facts.now):
        problems.append(
            _invalid(
                "spec.freight",
                freight_name,
                f"Freight is not available to Stage {json.dumps(stage_name)}: it must be "
                "approved for it, or verified in the upstream Stages it requests Freight from",
            )
        )
    return problems


def _freight_update(obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Problem]:
    return [
        _invalid(key, obj.get(key), "Freight is immutable")
        for key in _FREIGHT_CONTENT
        if (obj.get(key) or None) != (old.get(key) or None)
    ]


def _freight_content(obj: Mapping[str, Any]) -> list[Problem]:
    """Freight holds something to promote: Kargo's webhook refuses it otherwise, with these
    words (a Freight made by hand without its artifacts would promote nothing)."""
    if any(obj.get(key) for key in _FREIGHT_ARTIFACTS):
        return []
    return [_required("commits", "freight must contain at least one commit, image, or chart")]


def _alias_taken(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, facts: Facts
) -> list[Problem]:
    namespace = namespace_of(obj) or ""
    before = set(aliases_of(old)) if old is not None else set()
    problems = []
    for alias in aliases_of(obj):
        if alias in before:
            continue  # kept as it was admitted
        others = sorted(name_of(f) for f in facts.aliased(namespace, alias))
        others = [n for n in others if n != name_of(obj)]
        if others:
            problems.append(
                _invalid(
                    "alias",
                    alias,
                    f"already used by Freight {json.dumps(others[0])} in namespace "
                    f"{json.dumps(namespace)}",
                )
            )
    return problems


def _config_problems(problems: Iterable[str]) -> list[Problem]:
    out = []
    for text in problems:
        field, sep, detail = text.partition(": ")
        if not sep or " " in field:
            out.append(Problem("spec", f"Invalid value: {text}"))
        else:
            out.append(Problem(field, f"Invalid value: {detail}"))
    return out


def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None, facts: Facts) -> list[Problem]:
    """Every problem admission refuses ``obj`` for (``old``: the stored object, on an update);
    empty when it may be stored. Kinds other than ours pass.

    An update that leaves ``spec`` as it was is not judged again (a label, an annotation, a
    finalizer): what was admitted stays writable even when the world around it changed (a
    PromotionTask deleted under its Stage), as Kubernetes' validation ratcheting does.
    """
    kind = str(obj.get("kind") or "")
    limited = (
        promotion_problems(obj, facts.limits)
        if kind == "Promotion"
        else object_size_problems(obj, facts.limits)
    )
    return _config_problems(limited) + _judged(kind, obj, old, facts)


def _judged(
    kind: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None, facts: Facts
) -> list[Problem]:
    if kind == "Freight":
        content = _freight_update(obj, old) if old is not None else _freight_content(obj)
        return content + _alias_taken(obj, old, facts)
    if kind == "Promotion":
        # Kargo checks a Promotion's Stage and Freight when it is created; what happens to
        # them later must not make the Promotion itself unwritable (aborts, annotations).
        return _promotion(obj, facts) if old is None else []
    if old is not None and obj.get("spec") == old.get("spec"):
        return []
    if kind == "Stage":
        return _stage(obj, facts)
    if kind in ("PromotionTask", "ClusterPromotionTask"):
        return _task(obj, facts)
    if kind == "Warehouse":
        return _warehouse(obj)
    if kind == "ProjectConfig":
        return _config_problems(getattr(project_config(obj), "problems", ()))
    if kind == "ClusterConfig":
        return _config_problems(getattr(cluster_config(obj), "problems", ()))
    return []
