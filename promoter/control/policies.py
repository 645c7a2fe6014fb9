"""A project's rules from Kargo's ``ProjectConfig`` and ``ClusterConfig``, decided purely.

Kargo keeps a project's rules in one ``ProjectConfig`` named after the project, in its namespace
(``api/v1alpha1/project_config_types.go``), and the cluster's in the one ``ClusterConfig`` named
``cluster``. This module reads both into typed objects and answers what is in force for a Stage:

- **promotion policies** (``spec.promotionPolicies``): the first policy whose ``stageSelector``
  (or deprecated ``stage``) matches the Stage wins, even when a later one matches too (Kargo's
  ``findMatchingPromotionPolicy``). A selector's ``name`` is an exact name, ``glob:`` (doublestar,
  as Kargo's ``pkg/pattern``) or ``regex:``/``regexp:`` (unanchored, Go's ``MatchString``; both
  compile in the one RE2 port, :mod:`promoter.expressions.regex`); its label selector
  (``matchLabels``/``matchExpressions``, inline beside ``name``) is ANDed with it;
- **auto-promotion**: a matching policy's ``autoPromotionEnabled`` decides; a Stage no policy
  matches keeps Longshoreman's Stage-level setting (the ``longshoreman.dev/auto-promote``
  annotation). The ProjectConfig wins because it is the project owner's, guarded by its own
  RBAC, which is why Kargo moved the setting there;
- **auto-rollback** (``autoRollback``): the phases that roll the Stage back, with Kargo's
  defaults (``onVerification: [Failed]``, ``onPromotion: []``);
- **promotion windows**: the union of the ProjectConfig's windows and the ClusterConfig's whose
  ``stageSelector`` (and, on the cluster's, ``projectSelector``) match, as a
  :class:`~promoter.control.windows.Schedule`, with the freezes from chat (the Stage's and the
  project's ``longshoreman.dev/freeze``, :mod:`promoter.control.freezes`) as Deny windows.

What Kargo's admission webhook refuses (two policies naming the same Stage, a pattern with an
unknown prefix or that does not compile, ``stage`` and ``stageSelector`` together) cannot be
refused here (no admission webhook): it is reported on the ProjectConfig's ``Ready`` condition,
and a policy that does not parse matches no Stage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promoter.control.freezes import Freeze, freeze_of, freeze_window
from promoter.control.windows import Schedule, Window, parse_window
from promoter.expressions.regex import RegexError, compile_regex
from promoter.resources import annotations as ann
from promoter.resources.model import meta, name_of, namespace_of
from promoter.warehouses.patterns import PatternError, glob_regex

__all__ = [
    "CLUSTER_CONFIG_NAME",
    "AutoRollback",
    "ClusterConfig",
    "DeepLink",
    "LabelSelector",
    "NameSelector",
    "ProjectConfig",
    "PromotionPolicy",
    "auto_promotion",
    "cluster_config",
    "policy_for",
    "project_config",
    "schedule_for",
]

CLUSTER_CONFIG_NAME = "cluster"  # Kargo allows one ClusterConfig, by this name

PROMOTION_ROLLBACK_PHASES = ("Failed", "Errored")
VERIFICATION_ROLLBACK_PHASES = ("Failed", "Error")


class PolicyError(ValueError):
    """A selector that does not parse."""


# ---- selectors --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        # apimachinery's labels.Requirement.Matches: NotIn and DoesNotExist hold without the key.
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``metav1.LabelSelector``: every label and every expression must hold (empty: all)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions
        )


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _label_selector(obj: Mapping[str, Any], where: str) -> LabelSelector | None:
    if "matchLabels" not in obj and "matchExpressions" not in obj:
        return None
    labels = obj.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise PolicyError(f"{where}.matchLabels must be a map")
    requirements: list[Requirement] = []
    for i, expr in enumerate(obj.get("matchExpressions") or ()):
        expr = expr if isinstance(expr, Mapping) else {}
        operator = str(expr.get("operator") or "")
        values = tuple(str(v) for v in expr.get("values") or ())
        if operator not in _OPERATORS:
            raise PolicyError(
                f"{where}.matchExpressions[{i}].operator: {operator!r} is not a valid label "
                "selector operator"
            )
        if operator in ("In", "NotIn") and not values:
            raise PolicyError(
                f"{where}.matchExpressions[{i}].values: for 'in', 'notin' operators, values "
                "set can't be empty"
            )
        if operator in ("Exists", "DoesNotExist") and values:
            raise PolicyError(
                f"{where}.matchExpressions[{i}].values: values set must be empty for exists "
                "and does not exist"
            )
        requirements.append(Requirement(str(expr.get("key") or ""), operator, values))
    return LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in labels.items())), tuple(requirements)
    )


def name_matcher(pattern: str) -> Callable[[str], bool]:
    """Kargo's ``pattern.ParseNamePattern``: ``glob:``, ``regex:``/``regexp:`` or exact."""
    if pattern.startswith("glob:"):
        try:
            compiled = glob_regex(pattern.removeprefix("glob:"))
        except PatternError as e:
            raise PolicyError(f"syntax error in pattern: {e}") from None
        return compiled.fullmatch
    for prefix in ("regex:", "regexp:"):
        if pattern.startswith(prefix):
            try:
                return compile_regex(pattern.removeprefix(prefix)).search
            except RegexError as e:
                raise PolicyError(e.reason) from None
    return lambda name: name == pattern


@dataclass(frozen=True, slots=True)
class NameSelector:
    """``PromotionPolicySelector``: a name (exact or pattern) ANDed with a label selector."""

    name: str = ""
    labels: LabelSelector | None = None
    _matches_name: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self._matches_name is not None and not self._matches_name(name):
            return False
        return self.labels is None or self.labels.matches(labels)

    def describe(self) -> str:
        parts = [self.name] if self.name else []
        if self.labels is not None:
            terms = [f"{k}={v}" for k, v in self.labels.match_labels]
            terms += [
                f"{r.key} {r.operator} ({','.join(r.values)})"
                if r.values
                else f"{r.operator} {r.key}"
                for r in self.labels.match_expressions
            ]
            parts.append("labels " + (", ".join(terms) or "(any)"))
        return " and ".join(parts) or "every Stage"


def parse_selector(obj: Mapping[str, Any] | None, where: str) -> NameSelector:
    """A ``stageSelector``/``projectSelector``; None or ``{}`` selects everything."""
    obj = obj or {}
    name = str(obj.get("name") or "")
    if name and ":" in name and not name.startswith(("glob:", "regex:", "regexp:")):
        prefix = name.split(":", 1)[0]
        raise PolicyError(
            f'{where}.name: invalid pattern identifier "{prefix}": must be "regex", "regexp" '
            'or "glob"'
        )
    try:
        matcher = name_matcher(name) if name else None
    except PolicyError as e:
        raise PolicyError(f"{where}.name: {e}") from None
    return NameSelector(name, _label_selector(obj, where), matcher)


# ---- the objects ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AutoRollback:
    """``autoRollback``: which terminal phases roll the Stage back to its stable Freight."""

    on_promotion: tuple[str, ...] = ()
    on_verification: tuple[str, ...] = ("Failed",)


@dataclass(frozen=True, slots=True)
class PromotionPolicy:
    selector: NameSelector
    auto_promotion_enabled: bool = False
    auto_rollback: AutoRollback | None = None
    index: int = 0


@dataclass(frozen=True, slots=True)
class DeepLink:
    """``DeepLink``: a link shown with a Freight or a Stage; ``url`` and ``if`` are expressions."""

    title: str
    url: str
    description: str = ""
    if_: str = ""


@dataclass(frozen=True, slots=True)
class ScopedWindow:
    window: Window
    stages: NameSelector
    projects: NameSelector | None = None  # ClusterConfig windows only


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    namespace: str
    policies: tuple[PromotionPolicy, ...] = ()
    windows: tuple[ScopedWindow, ...] = ()
    freight_links: tuple[DeepLink, ...] = ()
    stage_links: tuple[DeepLink, ...] = ()
    webhook_receivers: tuple[Mapping[str, Any], ...] = ()
    problems: tuple[str, ...] = ()  # what Kargo's admission would refuse, as users read it
    freeze: Freeze | None = None  # the whole project's, from chat (its annotation)
    freezers: str = ""  # who may freeze and unfreeze (its annotation); "": each Stage's promoters


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    windows: tuple[ScopedWindow, ...] = ()
    freight_links: tuple[DeepLink, ...] = ()
    stage_links: tuple[DeepLink, ...] = ()
    webhook_receivers: tuple[Mapping[str, Any], ...] = ()
    problems: tuple[str, ...] = ()


def _phases(value: Any, allowed: Sequence[str], where: str, problems: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for i, phase in enumerate(value or ()):
        if phase not in allowed:
            problems.append(f"{where}[{i}] must be {' or '.join(allowed)}, not {phase!r}")
            continue
        if phase not in out:
            out.append(str(phase))
    return tuple(out)


def _policies(items: Iterable[Any], problems: list[str]) -> tuple[PromotionPolicy, ...]:
    out: list[PromotionPolicy] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"spec.promotionPolicies[{i}]"
        item = item if isinstance(item, Mapping) else {}
        stage = str(item.get("stage") or "")
        raw_selector = item.get("stageSelector")
        if stage and raw_selector is not None:
            problems.append(
                f"{where}: PromotionPolicy must have exactly one of stage or stageSelector set"
            )
            continue
        if not stage and raw_selector is None:
            problems.append(
                f"{where}: PromotionPolicy must have exactly one of stage or stageSelector set"
            )
            continue
        try:
            selector = (
                parse_selector({"name": stage}, where + ".stage")
                if stage
                else parse_selector(raw_selector, where + ".stageSelector")
            )
        except PolicyError as e:
            problems.append(str(e))
            continue
        exact = selector.name if selector.name and ":" not in selector.name else ""
        if exact:
            if exact in seen:
                problems.append(
                    f"{where}: stage name already defined at spec.promotionPolicies[{seen[exact]}]"
                )
            else:
                seen[exact] = i
        rollback: AutoRollback | None = None
        raw_rollback = item.get("autoRollback")
        if isinstance(raw_rollback, Mapping):
            on_verification = _phases(
                raw_rollback.get("onVerification"),
                VERIFICATION_ROLLBACK_PHASES,
                where + ".autoRollback.onVerification",
                problems,
            )
            rollback = AutoRollback(
                on_promotion=_phases(
                    raw_rollback.get("onPromotion"),
                    PROMOTION_ROLLBACK_PHASES,
                    where + ".autoRollback.onPromotion",
                    problems,
                ),
                # Kargo: "When absent or empty, defaults to [Failed]".
                on_verification=on_verification or ("Failed",),
            )
        out.append(PromotionPolicy(selector, bool(item.get("autoPromotionEnabled")), rollback, i))
    return tuple(out)


def _windows(
    items: Iterable[Any], problems: list[str], *, cluster: bool
) -> tuple[ScopedWindow, ...]:
    out: list[ScopedWindow] = []
    names: set[str] = set()
    for i, item in enumerate(items):
        where = f"spec.promotionWindows[{i}]"
        item = item if isinstance(item, Mapping) else {}
        window = parse_window(item)
        if window.name in names:
            problems.append(f"{where}.name: Duplicate value: {window.name!r}")
        names.add(window.name)
        if window.error:
            problems.append(f"{where}: window `{window.name}` is invalid: {window.error}")
        try:
            stages = parse_selector(item.get("stageSelector"), where + ".stageSelector")
            projects: NameSelector | None = None
            if item.get("projectSelector") is not None:
                if not cluster:
                    raise PolicyError(
                        f"{where}.projectSelector: only meaningful on a ClusterConfig"
                    )
                projects = parse_selector(item.get("projectSelector"), where + ".projectSelector")
        except PolicyError as e:
            # A window whose selector is broken would match nothing: keep everything closed
            # instead, as for a window whose times do not parse.
            problems.append(str(e))
            window = Window(window.name, window.kind, error=str(e))
            stages, projects = NameSelector(), None
        out.append(ScopedWindow(window, stages, projects))
    return tuple(out)


def _links(items: Iterable[Any] | None, where: str, problems: list[str]) -> tuple[DeepLink, ...]:
    out: list[DeepLink] = []
    for i, item in enumerate(items or ()):
        item = item if isinstance(item, Mapping) else {}
        if not item.get("title") or not item.get("url"):
            problems.append(f"{where}[{i}]: title and url are required")
            continue
        out.append(
            DeepLink(
                str(item["title"]),
                str(item["url"]),
                str(item.get("description") or ""),
                str(item.get("if") or ""),
            )
        )
    return tuple(out)


def project_config(obj: Mapping[str, Any] | None) -> ProjectConfig | None:
    """A ProjectConfig object as what is in force; None for None."""
    if obj is None:
        return None
    spec = obj.get("spec") or {}
    problems: list[str] = []
    namespace = namespace_of(obj) or ""
    if name_of(obj) != namespace:
        problems.append(
            f"metadata.name: {name_of(obj)!r} must match the project namespace {namespace!r}"
        )
    return ProjectConfig(
        namespace=namespace,
        policies=_policies(spec.get("promotionPolicies") or (), problems),
        windows=_windows(spec.get("promotionWindows") or (), problems, cluster=False),
        freight_links=_links(spec.get("freightLinks"), "spec.freightLinks", problems),
        stage_links=_links(spec.get("stageLinks"), "spec.stageLinks", problems),
        webhook_receivers=tuple(spec.get("webhookReceivers") or ()),
        problems=tuple(problems),
        freeze=freeze_of(obj),
        freezers=str(ann.annotations_of(obj).get(ann.FREEZERS) or "").strip(),
    )


def cluster_config(obj: Mapping[str, Any] | None) -> ClusterConfig | None:
    """The ClusterConfig named ``cluster`` as what is in force; None for None or another name."""
    if obj is None or name_of(obj) != CLUSTER_CONFIG_NAME:
        return None
    spec = obj.get("spec") or {}
    problems: list[str] = []
    return ClusterConfig(
        windows=_windows(spec.get("promotionWindows") or (), problems, cluster=True),
        freight_links=_links(spec.get("freightLinks"), "spec.freightLinks", problems),
        stage_links=_links(spec.get("stageLinks"), "spec.stageLinks", problems),
        webhook_receivers=tuple(spec.get("webhookReceivers") or ()),
        problems=tuple(problems),
    )


# ---- what is in force for a Stage -------------------------------------------------------------


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return {str(k): str(v) for k, v in (meta(obj).get("labels") or {}).items()}


def policy_for(stage: Mapping[str, Any], config: ProjectConfig | None) -> PromotionPolicy | None:
    """The first policy matching the Stage (Kargo: "the first match wins")."""
    if config is None:
        return None
    labels = _labels(stage)
    for policy in config.policies:
        if policy.selector.matches(name_of(stage), labels):
            return policy
    return None


@dataclass(frozen=True, slots=True)
class AutoPromotion:
    enabled: bool
    source: str  # what decided: "ProjectConfig policy N" or "Stage annotation"


def auto_promotion(stage: Mapping[str, Any], config: ProjectConfig | None) -> AutoPromotion:
    """Whether the Stage auto-promotes, and what decided it (a matching policy wins)."""
    policy = policy_for(stage, config)
    if policy is not None:
        return AutoPromotion(
            policy.auto_promotion_enabled, f"ProjectConfig promotionPolicies[{policy.index}]"
        )
    return AutoPromotion(ann.auto_promotes(stage), f"annotation {ann.AUTO_PROMOTE}")


def auto_rollback(stage: Mapping[str, Any], config: ProjectConfig | None) -> AutoRollback | None:
    policy = policy_for(stage, config)
    return policy.auto_rollback if policy is not None else None


def schedule_for(
    stage: Mapping[str, Any],
    project: ProjectConfig | None,
    cluster: ClusterConfig | None,
    project_labels: Mapping[str, str] | None = None,
) -> Schedule:
    """The union of the windows that match the Stage, the project's first.

    A ClusterConfig window's ``projectSelector`` matches the project's name and the labels of
    its namespace (``project_labels``), as Kargo's matches its Project's."""
    name, labels = name_of(stage), _labels(stage)
    project_name = namespace_of(stage) or ""
    windows: list[Window] = []
    for scoped in project.windows if project is not None else ():
        if scoped.stages.matches(name, labels):
            windows.append(scoped.window)
    for scoped in cluster.windows if cluster is not None else ():
        if scoped.projects is not None and not scoped.projects.matches(
            project_name, project_labels or {}
        ):
            continue
        if scoped.stages.matches(name, labels):
            windows.append(scoped.window)
    if project is not None and project.freeze is not None:
        windows.append(freeze_window(project.freeze, project_name))
    stage_freeze = freeze_of(stage)
    if stage_freeze is not None:
        windows.append(freeze_window(stage_freeze, ""))
    return Schedule(tuple(windows))


def in_force(config: ProjectConfig, stages: Iterable[Mapping[str, Any]]) -> str:
    """One line for the ProjectConfig's printer column: which Stages each rule holds now."""
    stages = sorted(stages, key=name_of)
    auto = [name_of(s) for s in stages if (p := policy_for(s, config)) and p.auto_promotion_enabled]
    rollback = [name_of(s) for s in stages if (p := policy_for(s, config)) and p.auto_rollback]
    parts = [
        "auto-promotion: " + (", ".join(auto) or "none"),
        "auto-rollback: " + (", ".join(rollback) or "none"),
    ]
    if config.windows:
        parts.append("windows: " + ", ".join(w.window.name for w in config.windows))
    return "; ".join(parts)
