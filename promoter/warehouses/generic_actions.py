"""Kargo's generic webhook receiver: configured ``actions`` decide, from the request, which
Warehouses to refresh (pkg/webhook/external/generic.go, generic_actions.go, list.go), purely.

A project's ``generic`` receiver (ProjectConfig ``webhookReceivers[].generic.actions[]``) has
actions of type ``Refresh``, each with:

* ``whenExpression``: an expression over the request that must be ``true`` (empty: always).
  It sees ``request.header(name)``, ``request.headers(name)`` (every value), ``request.body``
  (the JSON body, nil when empty), ``request.params(name)`` (the query), ``params`` (the
  action's ``parameters``) and ``normalizeGit``, ``normalizeImage``, ``normalizeChart``.
* ``targetSelectionCriteria[]``: ``kind`` (``Warehouse``), an optional ``name``, a
  ``labelSelector`` (``matchLabels``, ``matchExpressions`` with ``In``, ``NotIn``, ``Exists``,
  ``DoesNotExist``) and an ``indexSelector`` (``matchIndices[]{key, operator: Equals |
  NotEquals, value}``; the Warehouse index is ``subscribedURLs``, its subscriptions' normalised
  repository URLs). Names, label values and index values may be ``${{ }}`` templates over the
  same variables. The objects every criterion selects, in the receiver's project, are
  refreshed, each once.

Each action reports Kargo's result: ``NotApplicable`` (the request did not match), ``Error``
(an expression failed), else ``Success``, ``PartialSuccess`` or ``Failure`` by how many
refreshes were written. The receiver answers 500 when any action errored or did not fully
succeed, else 200, with ``{"results": [...]}``. ``Promotion`` targets (Kargo refreshes
Promotions waiting on a pull request) are reported as an error: Longshoreman's pull-request
steps follow GitHub through its App.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promoter.expressions import ExpressionError, Scope, evaluate_expression, render_string
from promoter.warehouses.freight import normalize_chart_url, normalize_git_url, normalize_image_url
from promoter.warehouses.refresh import subscription_urls

NOT_APPLICABLE, ERROR, SUCCESS = "NotApplicable", "Error", "Success"
PARTIAL_SUCCESS, FAILURE = "PartialSuccess", "Failure"
NOT_MATCHED = "Request did not match whenExpression"
MATCHING_ERROR = "Error evaluating whenExpression"
SELECTION_ERROR = "Error evaluating targetSelectionCriteria"
SUBSCRIBED_URLS = "subscribedURLs"


@dataclass(frozen=True, slots=True)
class Request:
    """What the actions may read of an HTTP request."""

    headers: Mapping[str, Sequence[str]]  # lower-case names
    body: Any = None
    query: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        query: Sequence[tuple[str, str]] = (),
    ) -> Request:
        """ValueError when the body is not JSON (Kargo's ``invalid request body``)."""
        parsed = None
        if body:
            try:
                parsed = json.loads(body)
            except (ValueError, UnicodeDecodeError) as e:
                raise ValueError(f"invalid request body: {e}") from None
        grouped: dict[str, list[str]] = {}
        for name, value in headers:
            grouped.setdefault(name.lower(), []).append(value)
        params: dict[str, list[str]] = {}
        for name, value in query:
            params.setdefault(name, []).append(value)
        return cls(grouped, parsed, params)

    def variables(self, parameters: Mapping[str, str]) -> dict[str, Any]:
        def header(name: str) -> str:
            return next(iter(self.headers.get(str(name).lower(), ())), "")

        def headers(name: str) -> list[str]:
            return list(self.headers.get(str(name).lower(), ()))

        def param(name: str) -> str:
            return next(iter(self.query.get(str(name), ())), "")

        return {
            "request": {"header": header, "headers": headers, "body": self.body, "params": param},
            "params": dict(parameters),
        }


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "normalizeGit": normalize_git_url,
    "normalizeImage": normalize_image_url,
    "normalizeChart": normalize_chart_url,
}


@dataclass
class ActionResult:
    """One action's outcome, shaped as Kargo's JSON answer (the action's own fields inline)."""

    action: Mapping[str, Any]
    matched: bool = False
    targets: list[tuple[str, str]] = field(default_factory=list)
    result: str = ""
    summary: str = ""
    refreshed: dict[tuple[str, str], bool] = field(default_factory=dict)

    def finish(self, outcomes: Mapping[tuple[str, str], bool]) -> None:
        """Record which refreshes were written (Kargo's refreshObjects)."""
        self.refreshed = {target: outcomes.get(target, False) for target in self.targets}
        done = sum(self.refreshed.values())
        total = len(self.targets)
        self.result = SUCCESS if done == total else FAILURE if done == 0 else PARTIAL_SUCCESS
        self.summary = f"Refreshed {done} of {total} selected resources"

    def to_json(self) -> dict[str, Any]:
        out = dict(self.action)
        out["matchedWhenExpression"] = self.matched
        if self.targets:
            out["selectedTargets"] = [
                {"namespace": ns, "name": name, "success": self.refreshed.get((ns, name), False)}
                for ns, name in self.targets
            ]
        out["result"] = self.result
        out["summary"] = self.summary
        return out

    @property
    def is_error(self) -> bool:
        return self.result in (ERROR, FAILURE, PARTIAL_SUCCESS)


def _scope(request: Request, action: Mapping[str, Any]) -> Scope:
    parameters = action.get("parameters")
    parameters = parameters if isinstance(parameters, Mapping) else {}
    return Scope(request.variables({str(k): str(v) for k, v in parameters.items()}), FUNCTIONS)


def _when(expression: str, scope: Scope) -> bool:
    if not expression:
        return True
    value = evaluate_expression(
        expression, scope.variables, scope.functions, where="whenExpression"
    )
    if not isinstance(value, bool):
        raise ExpressionError(f"match expression result {value!r} is not a bool")
    return value


def _text(template: Any, scope: Scope, where: str) -> str:
    value = render_string(str(template), scope, where=where)
    if not isinstance(value, str):
        raise ExpressionError(f"{where}: expression result {value!r} is not a string")
    return value


def _labels_match(selector: Mapping[str, Any], labels: Mapping[str, str], scope: Scope) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != _text(value, scope, f"matchLabels.{key}"):
            return False
    for requirement in selector.get("matchExpressions") or ():
        key, operator = requirement.get("key"), requirement.get("operator")
        values = [
            _text(v, scope, f"matchExpressions.{key}") for v in requirement.get("values") or ()
        ]
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ExpressionError(f"unsupported label selector operator {operator!r}")
    return True


def _indices_match(selector: Mapping[str, Any], warehouse: Mapping[str, Any], scope: Scope) -> bool:
    for requirement in selector.get("matchIndices") or ():
        key, operator = requirement.get("key"), requirement.get("operator")
        if key != SUBSCRIBED_URLS:
            raise ExpressionError(f"unsupported index {key!r} for Warehouses")
        value = _text(requirement.get("value", ""), scope, f"matchIndices.{key}")
        urls = {url for _, url in subscription_urls(warehouse)}
        if operator == "Equals" and value not in urls:
            return False
        if operator == "NotEquals" and value in urls:
            return False
        if operator not in ("Equals", "NotEquals"):
            raise ExpressionError(f"unsupported operator {operator!r} in index selector expression")
    return True


def _select(
    criteria: Sequence[Mapping[str, Any]], warehouses: Sequence[Mapping[str, Any]], scope: Scope
) -> list[tuple[str, str]]:
    selected: set[tuple[str, str]] = set()
    for i, criterion in enumerate(criteria):
        if criterion.get("kind") != "Warehouse":
            raise ExpressionError(
                f"targetSelectionCriteria[{i}]: unsupported target kind {criterion.get('kind')!r}"
            )
        name = _text(criterion["name"], scope, "name") if criterion.get("name") else None
        for warehouse in warehouses:
            metadata = warehouse.get("metadata") or {}
            if name is not None and metadata.get("name") != name:
                continue
            if not _labels_match(
                criterion.get("labelSelector") or {}, metadata.get("labels") or {}, scope
            ):
                continue
            if not _indices_match(criterion.get("indexSelector") or {}, warehouse, scope):
                continue
            selected.add((str(metadata.get("namespace") or ""), str(metadata.get("name") or "")))
    return sorted(selected)


def plan(
    actions: Sequence[Mapping[str, Any]],
    request: Request,
    warehouses: Sequence[Mapping[str, Any]],
) -> list[ActionResult]:
    """Each action's decision; the targets of a matched action are still to be refreshed
    (then :meth:`ActionResult.finish`). ``warehouses`` are the receiver's project's."""
    results = []
    for action in actions:
        outcome = ActionResult(action)
        results.append(outcome)
        scope = _scope(request, action)
        try:
            outcome.matched = _when(str(action.get("whenExpression") or ""), scope)
        except ExpressionError:
            outcome.result, outcome.summary = ERROR, MATCHING_ERROR
            continue
        if not outcome.matched:
            outcome.result, outcome.summary = NOT_APPLICABLE, NOT_MATCHED
            continue
        try:
            outcome.targets = _select(
                action.get("targetSelectionCriteria") or (), warehouses, scope
            )
        except (ExpressionError, KeyError, TypeError, AttributeError):
            outcome.result, outcome.summary = ERROR, SELECTION_ERROR
            continue
        outcome.finish({})  # nothing refreshed yet; the receiver records what it wrote
    return results
