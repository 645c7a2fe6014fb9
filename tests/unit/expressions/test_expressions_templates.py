"""Template rendering: ``${{ }}`` substitution and Kargo's typing of the result.

Mirrors Kargo's pkg/expressions/json_templates.go (and its test table). The examples from Kargo's
expressions documentation are rendered with the variables below in
tests/conformance/test_kargo_docs_expressions.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from promoter.expressions import (
    ExpressionError,
    ExpressionSyntaxError,
    Scope,
    check_syntax,
    freight_functions,
    has_expression,
    render,
    render_string,
)
from promoter.expressions.templates import type_template_result
from tests.support import objects

FREIGHT = objects.freight(
    "f00dfeed",
    namespace="demo",
    alias="frozen-tauntaun",
    warehouse="my-warehouse",
    commits=[{"repoURL": "https://github.com/example/repo.git", "id": "abc123", "tag": "v1"}],
    images=[{"repoURL": "public.ecr.aws/nginx/nginx", "tag": "1.27.0", "digest": "sha256:x"}],
    charts=[
        {"repoURL": "oci://example.com/my-chart", "version": "1.2.3"},
        {"repoURL": "https://example.com/charts", "name": "my-chart", "version": "4.5.6"},
    ],
)
VARIABLES: dict[str, Any] = {
    "ctx": {"stage": "test", "project": "demo", "targetFreight": {"name": "f00dfeed"}},
    "vars": {
        "replicas": "3",
        "gitRepo": "https://github.com/example/repo.git",
        "imageRepo": "public.ecr.aws/nginx/nginx",
        "srcPath": "./src",
        "flag": "true",
        "tag": "1.10",
    },
    # Step outputs that Kargo's documentation examples read (tests/conformance).
    "outputs": {
        "read-config": {"appConfig": {"name": "app", "ports": [80, 443]}},
        "read-version": {"currentVersion": "1.26.1"},
        "update-image": {"commitMessage": "Updated image"},
        "commit": {"commit": "deadbeef"},
        "indirect-push": {"branch": "kargo/promotion/abc"},
    },
    "task": {"outputs": {"read-version": {"currentVersion": "1.4.2"}}},
    "aString": "hello",
    "anInt": 42,
    "aFloat": 3.14,
    "aBool": True,
    "aStringMap": {"aString": "hello", "anotherString": "world"},
    "anIntArr": [1, 2, 3],
}
SCOPE = Scope(VARIABLES, freight_functions([FREIGHT]))


def rs(template: str) -> Any:
    return render_string(template, SCOPE, where="config.field")


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        # no delimiters: unchanged, whatever it looks like
        ("42", "42"),
        ("true", "true"),
        ('{"a": 1}', '{"a": 1}'),
        ("", ""),
        ("${ not an expression }", "${ not an expression }"),
        # one expression
        ("${{ 40 + 2 }}", 42),
        ("${{ vars.replicas }}", 3),
        ("${{ aString }}", "hello"),
        ("${{ anInt }}", 42),
        ("${{ aFloat }}", 3.14),
        ("${{ aBool }}", True),
        ("${{ aStringMap }}", {"aString": "hello", "anotherString": "world"}),
        ("${{ anIntArr }}", [1, 2, 3]),
        ("${{ chartRepo }}", None),
        ('${{ "null" }}', None),
        ("${{ 4 / 2 }}", 2),
        ("${{ 2.5 }}", 2.5),
        ("${{ vars.tag }}", 1.1),
        ("${{ quote(vars.tag) }}", "1.10"),
        ("${{ vars.flag }}", True),
        ("${{ 'T' }}", True),
        ("${{ 'F' }}", False),
        ("${{ '1' }}", 1),
        ("${{ '007' }}", 7),
        ("${{ '1_000' }}", 1000),
        ("${{ '1e3' }}", 1000),
        ("${{ '0x1p-2' }}", 0.25),
        ("${{ '+5' }}", 5),
        ("${{ ' 42' }}", 42),
        ("${{ 'NaN' }}", "NaN"),
        ("${{ 'Infinity' }}", "Infinity"),
        ("${{ '1e400' }}", "1e400"),
        ("${{ '[1, \"a\"]' }}", [1, "a"]),
        ("${{ 'abc' }}", "abc"),
        ("${{ 'abc\\n' }}", "abc\n"),
        ("${{ '42\\n' }}", 42),
        # quoting (Kargo's quote / unsafeQuote and the outer-quote rule)
        ("${{ quote(40 + 2) }}", "42"),
        ("${{ quote(true) }}", "true"),
        ("${{ quote(nil) }}", "null"),
        ("${{ quote('foo') }}", "foo"),
        ("${{ quote({'foo': 'bar'}) }}", '{"foo":"bar"}'),
        ("${{ unsafeQuote('foo') }}", '"foo"'),
        ("${{ unsafeQuote(40 + 2) }}", "42"),
        ("${{ '\"quoted\"' }}", "quoted"),
        # several expressions, and text around them
        ("stage/${{ ctx.stage }}", "stage/test"),
        ("${{ ctx.stage }}-${{ vars.replicas }}", "test-3"),
        ("v${{ 1 + 1 }}", "v2"),
        ("${{ 1 }}${{ 2 }}", 12),
        ("${{ aString }}, ${{ anInt }}!", "hello, 42!"),
        ("x ${{ nil }} y", "x null y"),
        ("x ${{ true }}", "x true"),
        ("x ${{ 2.5 * 2 }}", "x 5"),
        ("x ${{ 1e21 }}", "x 1e+21"),
        ("x ${{ {'b': 1, 'a': '<&>'} }}", 'x {"a":"\\u003c\\u0026\\u003e","b":1}'),
        ("x ${{ [1, 'a'] }}", 'x [1,"a"]'),
        ("foo ${{ aString }} and ${% 'bar' %}", "foo hello and bar"),
        ("${% '{{.domain}}' %}", "{{.domain}}"),
        ("${{ semverParse('1.2.3') }}", "1.2.3"),
    ],
)
def test_render_string_types_like_kargo(template: str, expected: Any) -> None:
    result = rs(template)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('""', ""),
        ('"', '"'),
        ('"a" and "b"', 'a" and "b'),
        ('"x"\n', "x\n"),
        ("0", 0),
        ("-0.5", -0.5),
        ("1.", 1),
        (".5", 0.5),
        ("12345678901234567890", 12345678901234567890.0),
        ("9223372036854775807", 9223372036854775807),
        ("t", True),
        ("TRUE", True),
        ("False", False),
        ("tRuE", "tRuE"),
        ("null", None),
        (" null ", None),
        ('{"a": [1, {"b": null}]}', {"a": [1, {"b": None}]}),
        ("{not json", "{not json"),
        ("[1, 2", "[1, 2"),
        ("[" * 5000, "[" * 5000),
        ("1__0", "1__0"),
        ("_1", "_1"),
        ("0x10", "0x10"),
        ("inf", "inf"),
    ],
)
def test_typing_of_rendered_text(text: str, expected: Any) -> None:
    result = type_template_result(text)
    assert result == expected
    assert type(result) is type(expected)


def test_yaml_block_scalars_and_quotes_like_kargo() -> None:
    # Kargo's TestEvaluateJSONTemplate "a variety of tricky cases dealing with YAML and quotes".
    document = yaml.safe_load(
        """
value1: {"foo": "bar"}
value2: '${{ quote({"foo": "bar"}) }}'
value3: |
  {"foo": "bar"}
value4: |
  ${{ {"foo": "bar"} }}
value5: |
  ${{ quote({"foo": "bar"}) }}
value6: |
  ${{ quote({"foo": "bar"}) }}

value7: 42
value8: "42"
value10: '${{ quote(42) }}'
value11: |
  42
value12: |
  ${{ 42 }}
value13: |
  ${{ quote(42) }}
"""
    )
    assert render(document, SCOPE) == {
        "value1": {"foo": "bar"},
        "value2": '{"foo":"bar"}',
        "value3": '{"foo": "bar"}\n',
        "value4": {"foo": "bar"},
        "value5": '{"foo":"bar"}\n',
        "value6": '{"foo":"bar"}\n',
        "value7": 42,
        "value8": "42",
        "value10": "42",
        "value11": "42\n",
        "value12": 42,
        "value13": "42\n",
    }


def test_render_walks_dicts_and_lists_and_never_evaluates_keys() -> None:
    config = {
        "${{ ctx.stage }}": "${{ ctx.stage }}",
        "nested": [{"n": "${{ vars.replicas }}"}, 7, None, True, ("${{ 1 }}",)],
        "plain": "keep",
    }
    assert render(config, SCOPE) == {
        "${{ ctx.stage }}": "test",
        "nested": [{"n": 3}, 7, None, True, [1]],
        "plain": "keep",
    }
    assert config["nested"][0] == {"n": "${{ vars.replicas }}"}, "input left untouched"


def test_render_errors_name_the_field_path() -> None:
    config = {"checkout": [{"path": "ok"}, {"branch": "${{ nothing.bar }}"}]}
    with pytest.raises(ExpressionError) as caught:
        render(config, SCOPE)
    assert caught.value.where == "config.checkout[1].branch"
    assert caught.value.expression == "nothing.bar"
    assert str(caught.value) == (
        "config.checkout[1].branch: expression 'nothing.bar': cannot fetch 'bar' from nil"
    )


def test_render_syntax_errors_name_the_field_path() -> None:
    with pytest.raises(ExpressionSyntaxError) as caught:
        render({"a": {"b": ["x", "${{ 1 + }}"]}}, SCOPE, where="spec")
    assert caught.value.where == "spec.a.b[1]"
    assert caught.value.expression == "1 +"


def test_unclosed_delimiter_is_a_syntax_error() -> None:
    with pytest.raises(ExpressionSyntaxError, match="unclosed expression") as caught:
        rs("${{ aString ")
    assert caught.value.where == "config.field"


def test_closing_delimiter_inside_a_literal_ends_the_expression_as_in_kargo() -> None:
    with pytest.raises(ExpressionSyntaxError, match="literal not terminated"):
        rs("${{ '{{.domain}}' }}")


def test_unsafe_result_is_an_error_not_a_crash() -> None:
    with pytest.raises(ExpressionError, match="unsupported value"):
        rs("x ${{ 1e308 * 10 }}")
    with pytest.raises(ExpressionError, match="unsupported type"):
        render_string("${{ f() }}", Scope({}, {"f": lambda: object()}), where="w")


def test_rendered_string_is_bounded() -> None:
    template = "${{ repeat('x', 700000) }}${{ repeat('y', 700000) }}"
    with pytest.raises(ExpressionError, match="longer than"):
        rs(template)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", False),
        ("a ${{ b }}", True),
        ("a ${% b %}", True),
        ({"k": ["x", {"y": "${{ z }}"}]}, True),
        ({"${{ key }}": "v"}, False),
        ([1, None, True], False),
        (42, False),
    ],
)
def test_has_expression(value: Any, expected: bool) -> None:
    assert has_expression(value) is expected


def test_check_syntax_accepts_valid_and_names_the_bad_field() -> None:
    check_syntax({"a": ["${{ ctx.stage }}", 1, {"b": "v${% 1 + 1 %}"}]}, where="steps[0].config")
    with pytest.raises(ExpressionSyntaxError) as caught:
        check_syntax({"a": ["ok", {"b": "${{ (1 }}"}]}, where="steps[0].config")
    assert caught.value.where == "steps[0].config.a[1].b"
    assert "steps[0].config.a[1].b: expression '(1': expected ')'" in str(caught.value)
