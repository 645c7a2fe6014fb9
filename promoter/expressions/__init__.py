"""Longshoreman's expression language: a Kargo-compatible dialect of expr-lang.

Manifests embed expressions in strings as ``${{ expr }}`` (or ``${% expr %}``); steps such as
``http`` take bare expressions (``response.status == 200``). Both render exactly as Kargo renders
them, including how a rendered string is typed (``"${{ 40 + 2 }}"`` is the number 42,
``"${{ quote(40 + 2) }}"`` the string "42").

The public API, which the engine and steps code against:

* :func:`compile_expression` / :func:`evaluate_expression` for bare expressions;
* :func:`render` / :func:`render_string` for templates, :func:`has_expression` and
  :func:`check_syntax` to inspect and validate manifests up front;
* :class:`Scope` (variables plus extra functions), :func:`freight_functions` for
  ``commitFrom()`` and friends, :func:`revive_result` to restore their results from JSON;
* :class:`ExpressionError` and :class:`ExpressionSyntaxError`.

This package decides purely: it imports no web, GitHub, Slack or Kubernetes library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from promoter.expressions.compiler import Compiled, Scope, compile_expression
from promoter.expressions.errors import ExpressionError, ExpressionSyntaxError
from promoter.expressions.freight import ambiguous_image_request, freight_functions, revive_result
from promoter.expressions.templates import check_syntax, has_expression, render, render_string

__all__ = [
    "Compiled",
    "ExpressionError",
    "ExpressionSyntaxError",
    "Scope",
    "ambiguous_image_request",
    "check_syntax",
    "compile_expression",
    "evaluate_expression",
    "freight_functions",
    "has_expression",
    "render",
    "render_string",
    "revive_result",
]


def evaluate_expression(
    source: str,
    variables: Mapping[str, Any],
    functions: Mapping[str, Callable[..., Any]] | None = None,
    *,
    where: str | None = None,
) -> Any:
    """Evaluate a bare expression (no ``${{ }}``), e.g. ``response.status == 200``.

    Raises :class:`ExpressionSyntaxError` if it does not parse and :class:`ExpressionError` if
    it fails to evaluate; both name ``where``.
    """
    try:
        compiled = compile_expression(source)
    except ExpressionSyntaxError as exc:
        raise exc.add_context(expression=source, where=where) from None
    return compiled.evaluate(Scope(variables, functions or {}), where=where)
