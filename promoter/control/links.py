"""Deep links (``freightLinks`` / ``stageLinks`` of ProjectConfig and ClusterConfig), resolved.

Kargo's ``DeepLink`` (``api/v1alpha1/project_config_types.go``; evaluated in ``pkg/deeplinks``):
a title, a URL, an optional description and an optional ``if``. The context is the object
under one key, as its JSON: ``freight`` for Freight links, ``stage`` for Stage links. The
ClusterConfig's links come first, then the ProjectConfig's (Kargo's order). A link whose ``if``
is false is left out; a link that fails (its ``if`` does not parse or is not a boolean, its URL
does not render) is left out too and its error is collected, so one bad link never hides the
others.

Both fields go through Longshoreman's one expression engine (:mod:`promoter.expressions`):

- ``if`` is a bare expression, as in Kargo (``freight.metadata.namespace == "my-project"``);
- ``url`` may use ``${{ expr }}`` like every other template here, and Kargo's Go-template form
  ``{{ .freight.metadata.name }}`` is read too: each ``{{ .a.b | f | g }}`` becomes the
  expression ``g(f(a.b))``, so Kargo manifests work unchanged for paths piped into functions
  of one argument (``upper``, ``lower``, ``trim``, ``urlquery`` ...). Other Go-template actions
  (``if``/``range``, functions with arguments such as ``env``) are refused as errors, which also
  keeps a link from reading the server's environment, as Kargo's blocked functions do.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promoter.control.policies import ClusterConfig, DeepLink, ProjectConfig
from promoter.expressions import ExpressionError, evaluate_expression, render_string
from promoter.expressions.compiler import Scope

__all__ = ["ResolvedLink", "evaluate_links", "freight_links", "stage_links"]


@dataclass(frozen=True, slots=True)
class ResolvedLink:
    title: str
    url: str
    description: str = ""


_GO_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.DOTALL)
_GO_PATH = re.compile(r"^\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_GO_FUNCTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Go templates' own one-argument functions a link might pipe into, where the expression
# language has no function of that name.
_GO_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "urlquery": lambda value: urllib.parse.quote_plus(str(value)),
}


class LinkError(ValueError):
    pass


def _go_action(action: str) -> str:
    """``.a.b | upper`` -> ``upper(a.b)``; anything else is refused."""
    parts = [p.strip() for p in action.split("|")]
    head = parts[0]
    if not _GO_PATH.match(head):
        raise LinkError(f"unsupported template action {{{{ {action} }}}}: use ${{{{ expr }}}}")
    expression = head[1:]
    for name in parts[1:]:
        if not _GO_FUNCTION.match(name):
            raise LinkError(f"unsupported template pipeline {{{{ {action} }}}}")
        expression = f"{name}({expression})"
    return expression


def _render_url(url: str, context: Mapping[str, Any]) -> str:
    scope = Scope(context, _GO_FUNCTIONS)
    if "${{" in url or "${%" in url:
        return str(render_string(url, scope, where="url"))
    out: list[str] = []
    last = 0
    for found in _GO_ACTION.finditer(url):
        out.append(url[last : found.start()])
        value = evaluate_expression(_go_action(found.group(1)), context, _GO_FUNCTIONS, where="url")
        out.append("" if value is None else str(value))
        last = found.end()
    rest = url[last:]
    if "{{" in rest or "}}" in rest:
        raise LinkError("unclosed template action")
    out.append(rest)
    return "".join(out)


def evaluate_links(
    links: Sequence[DeepLink], context: Mapping[str, Any]
) -> tuple[list[ResolvedLink], list[str]]:
    """Kargo's ``EvaluateLinks``: the links that apply, and the errors of those that failed."""
    resolved: list[ResolvedLink] = []
    errors: list[str] = []
    for link in links:
        if link.if_:
            try:
                shown = evaluate_expression(link.if_, context, where="if")
            except ExpressionError as e:
                errors.append(f"error evaluating condition for link {link.title!r}: {e}")
                continue
            if not isinstance(shown, bool):
                errors.append(f"condition for link {link.title!r} evaluated to non-boolean value")
                continue
            if not shown:
                continue
        try:
            url = _render_url(link.url, context)
        except (ExpressionError, LinkError) as e:
            errors.append(f"error evaluating URL template for link {link.title!r}: {e}")
            continue
        resolved.append(ResolvedLink(link.title, url, link.description))
    return resolved, errors


def freight_links(
    freight: Mapping[str, Any], project: ProjectConfig | None, cluster: ClusterConfig | None
) -> tuple[list[ResolvedLink], list[str]]:
    defined = [
        *(cluster.freight_links if cluster else ()),
        *(project.freight_links if project else ()),
    ]
    return evaluate_links(defined, {"freight": freight}) if defined else ([], [])


def stage_links(
    stage: Mapping[str, Any], project: ProjectConfig | None, cluster: ClusterConfig | None
) -> tuple[list[ResolvedLink], list[str]]:
    defined = [*(cluster.stage_links if cluster else ()), *(project.stage_links if project else ())]
    return evaluate_links(defined, {"stage": stage}) if defined else ([], [])
