"""Property tests: whatever text a manifest holds, the expression language fails only with
:class:`ExpressionError` (never a RecursionError, MemoryError, TypeError... from Python)."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promoter.expressions import (
    ExpressionError,
    Scope,
    check_syntax,
    compile_expression,
    freight_functions,
    render_string,
)
from tests.support import objects

SCOPE = Scope(
    {
        "ctx": {"stage": "dev"},
        "vars": {"x": "1", "n": 3, "l": [1, "a", None], "m": {"k": 2.5}},
        "s": "abc",
    },
    freight_functions([objects.freight()]),
)

# Fragments that make token soup look like expressions, so generated text reaches the
# evaluator and not only the lexer.
TOKENS = [
    "ctx", "vars", "x", "n", "l", "m", "k", "s", "nil", "true", "false", "0", "1", "-1", "2.5",
    "99999", "1e308", "'a'", '"b"', "`c`", "'", '"', ".", "?.", "??", "?", ":", "[", "]", "(",
    ")", "{", "}", ",", "+", "-", "*", "/", "%", "**", "^", "..", "==", "!=", "<", ">=", "&&",
    "||", "!", "not", "in", "and", "or", "matches", "contains", "startsWith", "endsWith", "|",
    "len", "upper", "split", "join", "repeat", "replace", "int", "float", "string", "toJSON",
    "fromJSON", "quote", "unsafeQuote", "asYAML", "asJSON", "semverParse", "semverDiff",
    "keys", "first", "max", "sort", "imageFrom", "warehouse", "chartFrom", "get", "type",
    "'(a+)+$'", "'[a-'", "'\\\\1'", " ", "\n", "__class__", "#", "$", "${{", "}}", "${%", "%}",
]  # fmt: skip

# CI runs 400 examples per property; raise the count locally for a longer hunt.
soup = st.lists(st.sampled_from(TOKENS), max_size=25).map("".join)
text = st.text(max_size=200)
PROPERTY_SETTINGS = settings(
    max_examples=int(os.environ.get("EXPRESSIONS_PROPERTY_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def evaluate_or_error(source: str) -> Any:
    try:
        return compile_expression(source).evaluate(SCOPE, where="prop")
    except ExpressionError as error:
        # The evaluator's safety net turns a bug of ours into "internal error"; that must not
        # happen either.
        assert not error.reason.startswith("internal error"), error
        return None


@PROPERTY_SETTINGS
@given(st.one_of(text, soup))
def test_compile_and_evaluate_raise_only_expression_errors(source: str) -> None:
    evaluate_or_error(source)


@PROPERTY_SETTINGS
@given(st.lists(st.one_of(text, soup.map(lambda s: "${{ " + s + " }}")), max_size=4).map("".join))
def test_render_raises_only_expression_errors(template: str) -> None:
    try:
        render_string(template, SCOPE, where="prop")
    except ExpressionError as error:
        assert error.where == "prop"
        assert not error.reason.startswith("internal error"), error


@PROPERTY_SETTINGS
@given(
    st.recursive(
        st.one_of(text, soup.map(lambda s: "${% " + s + " %}")),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=5), children, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_check_syntax_raises_only_expression_errors(value: Any) -> None:
    try:
        check_syntax(value, where="prop")
    except ExpressionError as error:
        assert error.where is not None and error.where.startswith("prop")
