"""Freight verification, decided purely: the AnalysisRun to create, and what its status means.

After a Promotion succeeds and the Stage is healthy, the Stage's ``spec.verification`` becomes an
Argo Rollouts AnalysisRun. :func:`build_analysis_run` turns the Stage, the Freight and the
(Cluster)AnalysisTemplates the Stage lists into that AnalysisRun as a plain dict (no Argo Rollouts
code is imported); the lifecycle helpers (:func:`verification_phase`,
:func:`verification_message`, :func:`verification_entry`, :func:`record_verification`) turn the
run's status into Kargo's ``VerificationInfo`` entries on the Stage.

Mirrors Kargo's ``pkg/rollouts`` (``AnalysisRunBuilder``, ``flattenTemplates``, ``mergeArgs``)
and Argo Rollouts' own argument merge (``utils/analysis.MergeArgs``):

* metrics, ``dryRun`` and ``measurementRetention`` of all templates are concatenated; a name used
  twice is an error;
* template args are merged by name: a declaration without a value takes another template's
  value, two different values (or value vs. valueFrom) are an error;
* the Stage's ``spec.verification.args`` are rendered as expressions and override only args the
  templates declare. An arg no template declares is ignored, as both Kargo and Argo Rollouts
  ignore it: a Stage may keep one set of args while swapping the templates it lists;
* every arg must end with a ``value`` or ``valueFrom``.

Deliberate deviations, each where Kargo would create a run that can only fail later, or lose data:

* templates are combined in the order the Stage lists them (Kargo puts all AnalysisTemplates
  before all ClusterAnalysisTemplates);
* spec fields other than the four above are kept (the first template that has one wins); Kargo
  drops them. Nested ``spec.templates`` are refused: an AnalysisRun cannot carry them;
* a Stage value for an arg the template takes ``valueFrom`` replaces the ``valueFrom`` (Kargo
  sets both, and Argo Rollouts then silently reads the Secret instead);
* a Stage arg that renders to a number or bool is used as its JSON text instead of an error;
* templates are validated up front (metrics, providers, ``{{args.x}}`` references, quantities in
  job containers, ``valueFrom`` shape) so the user reads which template, metric and field is
  wrong on the Stage, not a generic Error phase on the AnalysisRun;
* the run's name keeps Kargo's ``<stage>.<ulid>.<suffix>`` shape, but the suffix is the first 7
  characters of the Freight's name (like Promotion names) rather than a Freight collection id.

Labels name the Stage, Freight and Promotion (``longshoreman.dev/...``) so runs can be found by
label; values too long for a label are shortened the way Kargo's ``ShortenLabelValue`` does
(leading characters, a dash and 8 hex digits of the value's SHA-256), with the full value kept
in an annotation.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from promoter.engine.builder import new_ulid
from promoter.errors import LongshoremanError
from promoter.expressions import ExpressionError, Scope, freight_functions, render
from promoter.expressions.values import go_json
from promoter.resources import annotations as ann
from promoter.resources.model import API_VERSION, GROUP, format_time, meta, name_of

ROLLOUTS_API_VERSION = "argoproj.io/v1alpha1"
TEMPLATE_KINDS = ("AnalysisTemplate", "ClusterAnalysisTemplate")

STAGE_LABEL = f"{GROUP}/stage"
FREIGHT_LABEL = f"{GROUP}/freight"
PROMOTION_LABEL = f"{GROUP}/promotion"

# Argo Rollouts' AnalysisRun phases; the last four are final.
ANALYSIS_PHASES = ("Pending", "Running", "Successful", "Failed", "Error", "Inconclusive")
ANALYSIS_TERMINAL = frozenset({"Successful", "Failed", "Error", "Inconclusive"})
# Kargo keeps the 10 newest VerificationInfo entries per Freight (VerificationInfoStack).
VERIFICATION_HISTORY_LIMIT = 10

_MAX_NAME = 253
_MAX_LABEL = 63
_SHORT_HASH = 8  # Kargo's shortHashLen: never change it, or shortened values stop matching.
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
# Argo Rollouts substitutes exactly "{{args.<name>}}" (fasttemplate: no whitespace allowed).
_ARG_REFERENCE = re.compile(r"\{\{args\.([^{}]+?)\}\}")
# k8s.io/apimachinery resource.Quantity: a signed decimal number and an optional binary-SI,
# decimal-SI or exponent suffix ("128Mi", "0.5", "100m", "1e3").
_QUANTITY = re.compile(
    r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$"
)
_SPEC_MERGED = ("metrics", "args", "dryRun", "measurementRetention")


class VerificationError(LongshoremanError, ValueError):
    """The Stage's verification cannot become an AnalysisRun; the message says which part."""


# ---- names and labels ---------------------------------------------------------------------------


def _short_hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:_SHORT_HASH]


def _hash_shorten(value: str, limit: int) -> str:
    """Kargo's ``strings.HashShorten(value, limit, "-", 8)``."""
    if len(value) <= limit:
        return value
    prefix = value[: limit - (_SHORT_HASH + 1)].rstrip("-")
    return f"{prefix}-{_short_hash(value)}"


def label_value(value: str) -> str:
    """``value`` as a valid label value: as is when it is one, else deterministically shortened.

    A Kubernetes name (Stage, Freight, Promotion) that is merely too long is shortened exactly
    as Kargo's ``ShortenLabelValue`` does; anything else has its invalid characters replaced and
    its ends trimmed, and then always carries the hash of the original, so two different values
    cannot end up with the same label.
    """
    if len(value) <= _MAX_LABEL and _LABEL_VALUE.match(value):
        return value
    cleaned = re.sub(r"[^-A-Za-z0-9_.]", "-", value)
    if cleaned == value and len(value) > _MAX_LABEL:
        short = _hash_shorten(value, _MAX_LABEL)
        if _LABEL_VALUE.match(short):
            return short
    prefix = cleaned[: _MAX_LABEL - (_SHORT_HASH + 1)]
    prefix = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", prefix)
    return f"{prefix}-{_short_hash(value)}" if prefix else _short_hash(value)


def analysis_run_name(stage: str, freight: str, ulid: str) -> str:
    """``<stage>.<ulid>.<first 7 of freight>``, lower-case, within 253 characters."""
    suffix = f".{ulid}.{freight[:7]}".lower()
    return _hash_shorten(stage.lower(), _MAX_NAME - len(suffix)) + suffix


# ---- templates ----------------------------------------------------------------------------------


def _describe(template: Mapping[str, Any]) -> str:
    return f"{template.get('kind') or 'AnalysisTemplate'} {name_of(template)!r}"


def _template_key(kind: Any, name: Any) -> tuple[str, str]:
    return (str(kind or "AnalysisTemplate"), str(name or ""))


def _order_templates(
    refs: Sequence[Any], templates: Sequence[Mapping[str, Any]], where: str
) -> list[Mapping[str, Any]]:
    """The templates in the order the Stage lists them, each matched by kind and name."""
    by_key: dict[tuple[str, str], Mapping[str, Any]] = {}
    for template in templates:
        if not isinstance(template, Mapping):
            raise VerificationError(f"{where}: an analysis template must be a map")
        kind = template.get("kind") or "AnalysisTemplate"
        if kind not in TEMPLATE_KINDS:
            raise VerificationError(
                f"{where}: {kind} {name_of(template)!r} is not an AnalysisTemplate or "
                "ClusterAnalysisTemplate"
            )
        by_key[_template_key(kind, name_of(template))] = template
    ordered: list[Mapping[str, Any]] = []
    used: set[tuple[str, str]] = set()
    for i, ref in enumerate(refs):
        if not isinstance(ref, Mapping) or not ref.get("name"):
            raise VerificationError(
                f"{where}: spec.verification.analysisTemplates[{i}] needs a name"
            )
        kind = ref.get("kind") or "AnalysisTemplate"
        if kind not in TEMPLATE_KINDS:
            raise VerificationError(
                f"{where}: spec.verification.analysisTemplates[{i}]: kind {kind!r} must be "
                "AnalysisTemplate or ClusterAnalysisTemplate"
            )
        key = _template_key(kind, ref["name"])
        if key not in by_key:
            raise VerificationError(f"{where}: {kind} {ref['name']!r} was not found")
        if key not in used:  # listing a template twice would duplicate every metric
            used.add(key)
            ordered.append(by_key[key])
    extra = sorted(set(by_key) - used)
    if extra:
        kind, name = extra[0]
        raise VerificationError(
            f"{where}: {kind} {name!r} is not listed in spec.verification.analysisTemplates"
        )
    return ordered


def _spec_of(template: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        raise VerificationError(f"{_describe(template)}: spec must be a map")
    if spec.get("templates"):
        raise VerificationError(
            f"{_describe(template)}: spec.templates (nested templates) cannot be carried by an "
            "AnalysisRun; list each template in the Stage's spec.verification.analysisTemplates"
        )
    return spec


def _list_field(template: Mapping[str, Any], field: str) -> list[Any]:
    value = _spec_of(template).get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise VerificationError(f"{_describe(template)}: spec.{field} must be a list")
    return value


def _merge_metrics(templates: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    metrics: list[dict[str, Any]] = []
    owner: dict[str, Mapping[str, Any]] = {}
    for template in templates:
        where = _describe(template)
        found = _list_field(template, "metrics")
        if not found:
            raise VerificationError(f"{where}: spec.metrics is empty; a template needs a metric")
        for i, metric in enumerate(found):
            if not isinstance(metric, Mapping):
                raise VerificationError(f"{where}: spec.metrics[{i}] must be a map")
            name = metric.get("name")
            if not isinstance(name, str) or not name:
                raise VerificationError(f"{where}: spec.metrics[{i}] has no name")
            provider = metric.get("provider")
            if not isinstance(provider, Mapping) or not provider:
                raise VerificationError(f"{where}: metric {name!r} has no provider")
            if len(provider) > 1:
                raise VerificationError(
                    f"{where}: metric {name!r} names {len(provider)} providers "
                    f"({', '.join(sorted(map(str, provider)))}); a metric takes exactly one"
                )
            if name in owner:
                first = owner[name]
                both = (
                    f"twice in {where}"
                    if first is template
                    else f"in {_describe(first)} and {where}"
                )
                raise VerificationError(f"duplicate metric name {name!r}: {both}")
            owner[name] = template
            metrics.append(copy.deepcopy(dict(metric)))
    return metrics


def _merge_metric_options(templates: Sequence[Mapping[str, Any]], field: str) -> list[Any]:
    """Concatenate ``dryRun`` or ``measurementRetention`` entries, one per metricName."""
    out: list[Any] = []
    owner: dict[str, Mapping[str, Any]] = {}
    for template in templates:
        where = _describe(template)
        for i, entry in enumerate(_list_field(template, field)):
            name = entry.get("metricName") if isinstance(entry, Mapping) else None
            if not isinstance(name, str) or not name:
                raise VerificationError(f"{where}: spec.{field}[{i}] needs a metricName")
            if name in owner:
                first = owner[name]
                both = (
                    f"twice in {where}"
                    if first is template
                    else f"in {_describe(first)} and {where}"
                )
                raise VerificationError(f"duplicate {field} metricName {name!r}: {both}")
            owner[name] = template
            out.append(copy.deepcopy(dict(entry)))
    return out


def _arg_source(arg: Mapping[str, Any]) -> tuple[str, Any] | None:
    if arg.get("value") is not None:
        return ("value", arg["value"])
    if arg.get("valueFrom") is not None:
        return ("valueFrom", arg["valueFrom"])
    return None


def _merge_template_args(
    templates: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, Mapping[str, Any]]]:
    """Merged template args (first declaration's position) and the template declaring each."""
    args: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    owner: dict[str, Mapping[str, Any]] = {}
    for template in templates:
        where = _describe(template)
        for i, arg in enumerate(_list_field(template, "args")):
            if not isinstance(arg, Mapping):
                raise VerificationError(f"{where}: spec.args[{i}] must be a map")
            name = arg.get("name")
            if not isinstance(name, str) or not name:
                raise VerificationError(f"{where}: spec.args[{i}] has no name")
            value = arg.get("value")
            if value is not None and not isinstance(value, str):
                raise VerificationError(
                    f'{where}: arg {name!r}: value must be a string (quote it: "{value}")'
                )
            if arg.get("value") is not None and arg.get("valueFrom") is not None:
                raise VerificationError(f"{where}: arg {name!r} has both value and valueFrom")
            if name not in index:
                index[name] = len(args)
                owner[name] = template
                args.append(copy.deepcopy(dict(arg)))
                continue
            existing = args[index[name]]
            ours, theirs = _arg_source(existing), _arg_source(arg)
            if ours is not None and theirs is not None and ours != theirs:
                raise VerificationError(
                    f"conflicting definitions of arg {name!r}: {_describe(owner[name])} has "
                    f"{ours[0]} {ours[1]!r}, {where} has {theirs[0]} {theirs[1]!r}"
                )
            if ours is None and theirs is not None:
                # Kargo's flattenArgs: a declaration without a value takes another's value.
                existing[theirs[0]] = copy.deepcopy(theirs[1])
                owner[name] = template
    return args, owner


def _check_value_from(value_from: Any, where: str) -> None:
    # The analysis controller resolves only secretKeyRef; fieldRef is resolved by the Rollout
    # controller when it creates runs, so in a run we create it would stay unresolved.
    ref = value_from.get("secretKeyRef") if isinstance(value_from, Mapping) else None
    if isinstance(value_from, Mapping) and value_from.get("fieldRef") is not None and ref is None:
        raise VerificationError(
            f"{where}: valueFrom.fieldRef is only resolved for Rollouts; set the arg in the "
            "Stage's spec.verification.args instead"
        )
    if not isinstance(ref, Mapping) or not ref.get("name") or not ref.get("key"):
        raise VerificationError(f"{where}: valueFrom needs secretKeyRef with a name and a key")


# ---- Stage args ---------------------------------------------------------------------------------


def _arg_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        raise VerificationError(f"{where}: evaluated to null; an argument needs a value")
    try:
        return go_json(value)
    except ExpressionError as e:
        raise VerificationError(f"{where}: {e.reason}") from None


def _stage_vars(
    raw: Any,
    base: Mapping[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    where: str,
) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise VerificationError(f"{where}: spec.vars must be a list of {{name, value}}")
    out: dict[str, Any] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise VerificationError(f"{where}: spec.vars[{i}] must be a map with a name")
        name = item["name"]
        try:
            out[name] = render(
                item.get("value"),
                Scope({**base, "vars": dict(out)}, functions),
                where=f"{where}: spec.vars.{name}",
            )
        except ExpressionError as e:
            raise VerificationError(str(e)) from None
    return out


def _stage_args(raw: Any, scope: Scope, where: str) -> list[tuple[str, str]]:
    """The Stage's args as (name, rendered value); args without a value override nothing."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise VerificationError(f"{where}: spec.verification.args must be a list")
    out: list[tuple[str, str]] = []
    for i, arg in enumerate(raw):
        if not isinstance(arg, Mapping) or not isinstance(arg.get("name"), str) or not arg["name"]:
            raise VerificationError(
                f"{where}: spec.verification.args[{i}] must be a map with a name"
            )
        name, value = arg["name"], arg.get("value")
        if value is None or value == "":
            continue  # Kargo: an empty value leaves the template's value in place
        field = f"{where}: spec.verification.args[{i}] ({name})"
        try:
            rendered = render(value, scope, where=field)
        except ExpressionError as e:
            raise VerificationError(str(e)) from None
        out.append((name, _arg_text(rendered, field)))
    return out


def _apply_stage_args(
    args: list[dict[str, Any]], overrides: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    index = {arg["name"]: i for i, arg in enumerate(args)}
    for name, value in overrides:
        i = index.get(name)
        if i is None:
            continue  # undeclared: ignored, as Kargo and Argo Rollouts do (module docstring)
        args[i] = {"name": name, "value": value}
    return args


def _check_resolved(args: Sequence[Mapping[str, Any]], owner: Mapping[str, Any]) -> None:
    for arg in args:
        where = f"arg {arg['name']!r} of {_describe(owner[arg['name']])}"
        if _arg_source(arg) is None:
            raise VerificationError(
                f"{where} has no value: set it in the Stage's spec.verification.args"
            )
        if arg.get("value") is None:
            _check_value_from(arg["valueFrom"], where)


# ---- metric validation --------------------------------------------------------------------------


def _substitute(text: str, values: Mapping[str, str]) -> str:
    return _ARG_REFERENCE.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def _walk_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in _walk_strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _walk_strings(item)]
    return []


def _check_arg_references(
    metrics: Sequence[Mapping[str, Any]],
    declared: set[str],
    owner_of_metric: Mapping[str, str],
) -> None:
    for metric in metrics:
        for text in _walk_strings(metric):
            for match in _ARG_REFERENCE.finditer(text):
                if match.group(1) not in declared:
                    raise VerificationError(
                        f"{owner_of_metric[metric['name']]}: metric {metric['name']!r} uses "
                        f"{match.group(0)}, but no template declares arg {match.group(1)!r}"
                    )


def _check_quantity(value: Any, where: str, values: Mapping[str, str]) -> None:
    if isinstance(value, bool):
        raise VerificationError(f"{where}: {value!r} is not a Kubernetes quantity")
    if isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, str):
        text = _substitute(value, values)
        if "{{" in text:
            return  # taken from a Secret at run time: cannot be checked here
    else:
        raise VerificationError(f"{where}: {value!r} is not a Kubernetes quantity")
    if not _QUANTITY.match(text) or text.startswith("-"):
        raise VerificationError(
            f"{where}: {text!r} is not a valid Kubernetes quantity (such as 128Mi, 1Gi, 0.5 "
            "or 100m)"
        )


def _check_job_resources(metric: Mapping[str, Any], where: str, values: Mapping[str, str]) -> None:
    job = (metric.get("provider") or {}).get("job")
    if not isinstance(job, Mapping):
        return
    pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    if not isinstance(pod, Mapping):
        return
    for field in ("initContainers", "containers"):
        containers = pod.get(field) or []
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            if not isinstance(container, Mapping):
                continue
            label = f"{field[:-1]} {container.get('name') or i!r}"
            resources = container.get("resources") or {}
            if not isinstance(resources, Mapping):
                continue
            for kind in ("requests", "limits"):
                amounts = resources.get(kind) or {}
                if not isinstance(amounts, Mapping):
                    raise VerificationError(
                        f"{where}: metric {metric['name']!r}: job {label}: resources.{kind} must "
                        "be a map"
                    )
                for resource, amount in amounts.items():
                    _check_quantity(
                        amount,
                        f"{where}: metric {metric['name']!r}: job {label}: "
                        f"resources.{kind}.{resource}",
                        values,
                    )


# ---- the builder --------------------------------------------------------------------------------


def _string_map(raw: Any, where: str, *, labels: bool) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise VerificationError(f"{where} must be a map of strings")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(value, str):
            raise VerificationError(f"{where}.{key}: must be a string (quote it)")
        if labels and (len(value) > _MAX_LABEL or not _LABEL_VALUE.match(value)):
            raise VerificationError(
                f"{where}.{key}: {value!r} is not a valid label value (at most 63 characters of "
                "A-Z, a-z, 0-9, '-', '_' and '.', starting and ending with a letter or digit)"
            )
        out[str(key)] = value
    return out


def build_analysis_run(
    *,
    stage: Mapping[str, Any],
    freight: Mapping[str, Any],
    templates: Sequence[Mapping[str, Any]],
    promotion: str | None,
    namespace: str,
    actor: str | None = None,
    ulid: str | None = None,
    stage_vars: Mapping[str, Any] | None = None,
    freights: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The AnalysisRun verifying ``freight`` in ``stage``, from the templates the Stage lists.

    ``templates`` are the (Cluster)AnalysisTemplate objects named by the Stage's
    ``spec.verification.analysisTemplates`` (matched by kind and name, used in the Stage's
    order). Stage args may use ``${{ }}`` expressions with ``ctx`` (project, stage, promotion,
    targetFreight), ``vars`` and the Freight functions over ``freights`` (default: the Freight
    itself). ``vars`` are the Stage's ``spec.vars`` evaluated in order, or ``stage_vars`` as
    given when the caller has already evaluated them. Raises :class:`VerificationError`.
    """
    stage_name = name_of(stage)
    where = f"Stage {stage_name!r}"
    freight_name = name_of(freight)
    if not stage_name:
        raise VerificationError("the Stage has no metadata.name")
    if not freight_name:
        raise VerificationError(f"{where}: the Freight to verify has no metadata.name")
    spec = stage.get("spec") or {}
    verification = spec.get("verification") if isinstance(spec, Mapping) else None
    if not isinstance(verification, Mapping):
        raise VerificationError(f"{where}: no spec.verification to build an AnalysisRun from")
    refs = verification.get("analysisTemplates") or []
    if not isinstance(refs, list) or not refs:
        raise VerificationError(f"{where}: spec.verification.analysisTemplates is empty")
    ordered = _order_templates(refs, templates, where)

    metrics = _merge_metrics(ordered)
    dry_run = _merge_metric_options(ordered, "dryRun")
    retention = _merge_metric_options(ordered, "measurementRetention")
    args, arg_owner = _merge_template_args(ordered)

    origin = freight.get("origin") or {}
    ctx = {
        "project": namespace,
        "stage": stage_name,
        "promotion": promotion or "",
        "targetFreight": {
            "name": freight_name,
            "alias": freight.get("alias") or "",
            "origin": {"kind": origin.get("kind", "Warehouse"), "name": origin.get("name", "")},
        },
    }
    functions = freight_functions(list(freights) or [freight])
    if stage_vars is not None:
        variables = dict(stage_vars)
    else:
        variables = _stage_vars(spec.get("vars"), {"ctx": ctx}, functions, where)
    scope = Scope({"ctx": ctx, "vars": variables}, functions)
    args = _apply_stage_args(args, _stage_args(verification.get("args"), scope, where))
    _check_resolved(args, arg_owner)

    metric_owner = {}
    for template in ordered:
        for metric in _list_field(template, "metrics"):
            metric_owner[metric["name"]] = _describe(template)
    _check_arg_references(metrics, {a["name"] for a in args}, metric_owner)
    known = {a["name"]: a["value"] for a in args if isinstance(a.get("value"), str)}
    for metric in metrics:
        _check_job_resources(metric, metric_owner[metric["name"]], known)

    run_spec: dict[str, Any] = {"metrics": metrics, "args": args}
    if dry_run:
        run_spec["dryRun"] = dry_run
    if retention:
        run_spec["measurementRetention"] = retention
    for template in ordered:  # other spec fields: the first template that sets one wins
        for key, value in _spec_of(template).items():
            if key not in _SPEC_MERGED and key not in run_spec:
                run_spec[key] = copy.deepcopy(value)

    run_metadata = verification.get("analysisRunMetadata") or {}
    if not isinstance(run_metadata, Mapping):
        raise VerificationError(f"{where}: spec.verification.analysisRunMetadata must be a map")
    labels = _string_map(
        run_metadata.get("labels"), f"{where}: spec.verification.analysisRunMetadata.labels",
        labels=True,
    )  # fmt: skip
    annotations = _string_map(
        run_metadata.get("annotations"),
        f"{where}: spec.verification.analysisRunMetadata.annotations",
        labels=False,
    )
    ours = {
        STAGE_LABEL: label_value(stage_name),
        FREIGHT_LABEL: label_value(freight_name),
        PROMOTION_LABEL: label_value(promotion or ""),
    }
    labels.update(ours)  # ours win: the controller finds its runs by them
    for key, full, annotation in (
        (STAGE_LABEL, stage_name, ann.VERIFICATION_STAGE),
        (FREIGHT_LABEL, freight_name, ann.VERIFICATION_FREIGHT),
    ):
        if ours[key] != full:
            annotations[annotation] = full
    if promotion:
        annotations[ann.VERIFICATION_PROMOTION] = promotion
    if actor:
        annotations[ann.VERIFICATION_ACTOR] = actor

    metadata: dict[str, Any] = {
        "name": analysis_run_name(stage_name, freight_name, ulid or new_ulid()),
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations,
    }
    uid = meta(freight).get("uid")
    if uid:
        # Deleting the Freight deletes its runs. Kargo sets blockOwnerDeletion false and no
        # controller flag. Without a uid (Freight read from a file) no valid reference exists.
        metadata["ownerReferences"] = [
            {
                "apiVersion": str(freight.get("apiVersion") or API_VERSION),
                "kind": "Freight",
                "name": freight_name,
                "uid": str(uid),
                "blockOwnerDeletion": False,
            }
        ]
    return {
        "apiVersion": ROLLOUTS_API_VERSION,
        "kind": "AnalysisRun",
        "metadata": metadata,
        "spec": run_spec,
    }


# ---- lifecycle ----------------------------------------------------------------------------------


def verification_phase(analysis_run: Mapping[str, Any]) -> str:
    """The run's ``status.phase`` if it is one of Argo Rollouts' phases, else "" (not started)."""
    status = analysis_run.get("status") or {}
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if phase in ANALYSIS_PHASES else ""


def verification_message(analysis_run: Mapping[str, Any]) -> str:
    """``status.message``, or a summary of the first metric that did not succeed."""
    status = analysis_run.get("status") or {}
    if not isinstance(status, Mapping):
        return ""
    if status.get("message"):
        return str(status["message"])
    for result in status.get("metricResults") or []:
        if not isinstance(result, Mapping) or result.get("dryRun"):
            continue
        phase = result.get("phase")
        if phase in ("Failed", "Error", "Inconclusive"):
            text = f"metric {result.get('name')!r} assessed {phase}"
            message = result.get("message")
            if not message:
                measurements = result.get("measurements") or []
                last = measurements[-1] if measurements else {}
                message = last.get("message") if isinstance(last, Mapping) else None
            return f"{text}: {message}" if message else text
    return ""


def verification_entry(
    *,
    id: str,
    actor: str | None,
    start: datetime,
    analysis_run: Mapping[str, Any] | None,
    phase: str,
    message: str = "",
    finish: datetime | None = None,
) -> dict[str, Any]:
    """A Kargo ``VerificationInfo``: empty optional fields are left out, as Go's omitempty does."""
    entry: dict[str, Any] = {"id": id}
    if actor:
        entry["actor"] = actor
    entry["startTime"] = format_time(start)
    if finish is not None:
        entry["finishTime"] = format_time(finish)
    entry["phase"] = phase
    if message:
        entry["message"] = message
    if analysis_run is not None:
        run_meta = meta(analysis_run)
        entry["analysisRun"] = {
            "name": str(run_meta.get("name") or ""),
            "namespace": str(run_meta.get("namespace") or ""),
            "phase": verification_phase(analysis_run),
        }
    return entry


def record_verification(
    history: Sequence[Mapping[str, Any]],
    entry: Mapping[str, Any],
    *,
    limit: int = VERIFICATION_HISTORY_LIMIT,
) -> list[dict[str, Any]]:
    """Kargo's ``VerificationInfoStack.UpdateOrPush``: newest first, at most ``limit`` entries.

    An entry with the same ``id`` is replaced where it stands; a new one goes on top and the
    oldest fall off the bottom.
    """
    out = [copy.deepcopy(dict(item)) for item in history]
    new = copy.deepcopy(dict(entry))
    for i, item in enumerate(out):
        if item.get("id") == new.get("id"):
            out[i] = new
            break
    else:
        out.insert(0, new)
    return out[: max(0, limit)]
