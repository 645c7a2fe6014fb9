"""The expression language itself: literals, access, operators, builtins, errors, sandboxing.

Table-driven: each row is an expression, the variables it sees, and the expected value (or the
expected error text). Semantics follow expr-lang as Kargo uses it.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from promoter.errors import LongshoremanError, StepError
from promoter.expressions import (
    ExpressionError,
    ExpressionSyntaxError,
    Scope,
    compile_expression,
    evaluate_expression,
)
from promoter.expressions.regex import compile_regex
from tests.support.runaway import comes_back

VARIABLES: dict[str, Any] = {
    "ctx": {"stage": "prod", "project": "demo", "targetFreight": {"name": "abc123"}},
    "vars": {"x": "1", "replicas": "3", "tag": None, "list": [1, 2, 3], "n": 5, "f": 2.5},
    "outputs": {"open-pr": {"pr": {"id": 42}}, "read": {"version": "1.2.3"}},
    "task": {"outputs": {"read-version": {"currentVersion": "1.4.2"}}},
    "m": {"a": 1, "b": {"c": [10, 20, {"d": "deep"}]}},
    "s": "hello",
    "empty": {},
}


def ev(source: str, variables: dict[str, Any] | None = None, **functions: Any) -> Any:
    return evaluate_expression(source, VARIABLES if variables is None else variables, functions)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # literals
        ("42", 42),
        ("-7", -7),
        ("1_000", 1000),
        ("0x1F", 31),
        ("0o17", 15),
        ("0b101", 5),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ("2.5e-1", 0.25),
        ('"double"', "double"),
        ("'single'", "single"),
        ("`raw \\n`", "raw \\n"),
        (r"'tab\there'", "tab\there"),
        (r"'quote\'s'", "quote's"),
        (r'"\u00e9\x41\101"', "éAA"),
        ("true", True),
        ("false", False),
        ("nil", None),
        ("[1, 'a', nil]", [1, "a", None]),
        ("[1, 2,]", [1, 2]),
        ("[]", []),
        ('{"k": 1, k2: 2}', {"k": 1, "k2": 2}),
        ("{('a' + 'b'): 1}", {"ab": 1}),
        ("{}", {}),
        ("\n  1 +\n  2\n", 3),
        ("1 /* comment */ + 2 // trailing", 3),
        # access
        ("ctx.stage", "prod"),
        ("outputs['open-pr'].pr.id", 42),
        ('outputs["open-pr"]["pr"]["id"]', 42),
        ("m.b.c[1]", 20),
        ("m.b.c[-1].d", "deep"),
        ("m.b.c[2]['d']", "deep"),
        ("vars.missing", None),
        ("unknownTopLevel", None),
        ("chartRepo", None),
        ("m?.b?.c?.[0]", 10),
        ("nothing?.a.b.c", None),
        ("nothing?.['a'].b", None),
        ("m.zzz?.y.z", None),
        ("nothing?.method()", None),
        ("s[0]", "h"),
        ("s[-1]", "o"),
        ("s[1:3]", "el"),
        ("vars.list[1:]", [2, 3]),
        ("vars.list[:-1]", [1, 2]),
        ("vars.list[-10:10]", [1, 2, 3]),
        ("vars.list[2:1]", []),
        ("task.outputs['read-version'].currentVersion", "1.4.2"),
        # nil coalescing and its precedence (tighter than every other binary operator)
        ("vars.tag ?? 'latest'", "latest"),
        ("vars.x ?? 'latest'", "1"),
        ("nothing ?? nil ?? 3", 3),
        ("vars.missing ?? 1 + 1", 2),
        ("false ?? true", False),
        # arithmetic
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 2 - 3", 5),
        ("7 / 2", 3.5),
        ("4 / 2", 2.0),
        ("7 % 3", 1),
        ("-7 % 3", -1),
        ("7 % -3", 1),
        ("2 ** 10", 1024.0),
        ("2 ^ 3 ^ 2", 512.0),
        ("-2 ** 2", -4.0),
        ("1 + 2.5", 3.5),
        ("vars.n * vars.f", 12.5),
        ("- vars.n", -5),
        ("+ vars.n", 5),
        ("'a' + 'b'", "ab"),
        ("[1] + [2, 3]", [1, 2, 3]),
        ("1..4", [1, 2, 3, 4]),
        ("3..1", []),
        # comparison and equality
        ("1 == 1.0", True),
        ("1 == '1'", False),
        ("true == 1", False),
        ("nil == nil", True),
        ("vars.tag == nil", True),
        ("[1, 2] == [1.0, 2]", True),
        ("{'a': [1]} == {'a': [1]}", True),
        ("{'a': 1} != {'a': 2}", True),
        ("'abc' < 'abd'", True),
        ("2 >= 2.0", True),
        ("1 < 2 == true", True),
        # logic
        ("true && false", False),
        ("true and true", True),
        ("false || true", True),
        ("false or false", False),
        ("!true", False),
        ("not false", True),
        ("not true == false", True),
        ("false && nothing.a.b", False),
        ("true || nothing.a.b", True),
        ("ctx.stage == 'prod' && vars.x != nil", True),
        # membership and string operators
        ("2 in vars.list", True),
        ("2.0 in vars.list", True),
        ("9 in vars.list", False),
        ("9 not in vars.list", True),
        ("'a' in m", True),
        ("'z' in m", False),
        ("'z' not in m", True),
        ("'hello' contains 'ell'", True),
        ("'hello' not contains 'x'", True),
        ("'hello' startsWith 'he'", True),
        ("'hello' endsWith 'lo'", True),
        ("'v1.2.3' matches '^v[0-9]+'", True),
        ("'release' not matches '^v'", True),
        ("s matches 'L+' ", False),
        ("s matches '(?i)L+'", True),
        # ternary
        ("true ? 'y' : 'n'", "y"),
        ("false ? 'y' : 'n'", "n"),
        ("ctx.stage == 'prod' ? 3 : 1", 3),
        ("false ? 1 : true ? 2 : 3", 2),
        ("true ?: false", True),
        # pipes
        ("'abc' | upper()", "ABC"),
        ("'a,b' | split(',') | join('-')", "a-b"),
    ],
)
def test_evaluates(source: str, expected: Any) -> None:
    result = ev(source)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("len('héllo')", 5),
        ("len([1, 2])", 2),
        ("len({'a': 1})", 1),
        ("lower('ABC')", "abc"),
        ("upper('abc')", "ABC"),
        ("trim('  x  ')", "x"),
        ("trim('--x--', '-')", "x"),
        ("trimPrefix('v1.2', 'v')", "1.2"),
        ("trimSuffix('app.git', '.git')", "app"),
        ("split('a,b,c', ',')", ["a", "b", "c"]),
        ("split('a,b,c', ',', 2)", ["a", "b,c"]),
        ("split('a,b,c', ',', 0)", []),
        ("split('abc', '')", ["a", "b", "c"]),
        ("join(['a', 'b'], '/')", "a/b"),
        ("join(['a', 'b'])", "ab"),
        ("replace('a-b-c', '-', '+')", "a+b+c"),
        ("hasPrefix('refs/heads/main', 'refs/')", True),
        ("hasSuffix('x.yaml', '.yaml')", True),
        ("startsWith('abc', 'a')", True),
        ("endsWith('abc', 'bc')", True),
        ("contains('abc', 'b')", True),
        ("contains([1, 2], 2)", True),
        ("indexOf('héllo', 'l')", 2),
        ("indexOf('abc', 'z')", -1),
        ("lastIndexOf('abca', 'a')", 3),
        ("repeat('ab', 3)", "ababab"),
        ("keys({'a': 1, 'b': 2})", ["a", "b"]),
        ("values({'a': 1, 'b': 2})", [1, 2]),
        ("string(42)", "42"),
        ("string(2.5)", "2.5"),
        ("string(1000000.0)", "1e+06"),
        ("string(true)", "true"),
        ("string(nil)", "<nil>"),
        ("string([1, 'a'])", "[1 a]"),
        ("string({'b': 1, 'a': 2})", "map[a:2 b:1]"),
        ("int('42')", 42),
        ("int('-3')", -3),
        ("int(3.9)", 3),
        ("float('2.5')", 2.5),
        ("float(2)", 2.0),
        (
            "toJSON({'b': [1, 2.0], 'a': '<'})",
            '{\n  "a": "\\u003c",\n  "b": [\n    1,\n    2\n  ]\n}',
        ),
        ("fromJSON('{\"a\": [1, 2.5, null]}')", {"a": [1, 2.5, None]}),
        ("toBase64('hi')", "aGk="),
        ("fromBase64('aGk=')", "hi"),
        ("first([3, 4])", 3),
        ("first([])", None),
        ("last([3, 4])", 4),
        ("min(3, 1, 2)", 1),
        ("max([1, 5, 2])", 5),
        ("abs(-3)", 3),
        ("abs(-2.5)", 2.5),
        ("ceil(1.2)", 2.0),
        ("floor(1.8)", 1.0),
        ("round(2.5)", 3.0),
        ("round(-2.5)", -3.0),
        ("sum([1, 2, 3])", 6),
        ("reverse([1, 2])", [2, 1]),
        ("sort([3, 1, 2])", [1, 2, 3]),
        ("sort(['b', 'a'], 'desc')", ["b", "a"]),
        ("uniq([1, 1.0, 2])", [1, 2]),
        ("concat([1], [2], [3])", [1, 2, 3]),
        ("get({'a': 1}, 'b')", None),
        ("get([1], 5)", None),
        ("type(1.5)", "float"),
        ("type([])", "array"),
        ("quote('x')", '"x"'),
        ('quote("a\\"b\\n")', '"a\\"b\\n"'),
        ("quote(42)", '"42"'),
        ("unsafeQuote('x')", '""x""'),
        ("asJSON({'a': 1})", '"{\n  "a": 1\n}\n"'),
        ("asYAML({'b': [1, 2], 'a': 'x'})", '"a: x\nb:\n    - 1\n    - 2\n"'),
        ("asYAML('multi\\nline')", '"|-\n    multi\n    line\n"'),
    ],
)
def test_builtins(source: str, expected: Any) -> None:
    result = ev(source)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("semverParse('1.2.3').IncMinor().String()", "1.3.0"),
        ("semverParse('v1.2.3').IncMajor().String()", "2.0.0"),
        ("semverParse('v1.2.3').IncMajor().Original()", "v2.0.0"),
        ("semverParse('1.2.3-rc.1').IncPatch().String()", "1.2.3"),
        ("semverParse('1.2.3').IncPatch().String()", "1.2.4"),
        ("semverParse('1.2').String()", "1.2.0"),
        ("semverParse('1.2.3-beta+build.5').String()", "1.2.3-beta+build.5"),
        ("semverParse('1.2.3').Major", 1),
        ("semverParse('1.2.3').Minor()", 2),
        ("semverParse('1.2.3')['Patch']", 3),
        ("semverParse('1.2.3-rc.1').Prerelease()", "rc.1"),
        ("semverParse('1.2.3').LessThan(semverParse('1.10.0'))", True),
        ("semverParse('1.0.0-alpha').Compare(semverParse('1.0.0'))", -1),
        ("semverParse('1.2.3') == semverParse('1.2.3')", True),
        ("string(semverParse('1.2.3'))", "1.2.3"),
        ("semverParse(task.outputs['read-version'].currentVersion).IncMinor().String()", "1.5.0"),
        ("semverDiff('1.2.3', '2.0.0')", "Major"),
        ("semverDiff('1.2.3', '1.3.0')", "Minor"),
        ("semverDiff('1.2.3', '1.2.4')", "Patch"),
        ("semverDiff('1.2.3+a', '1.2.3+b')", "Metadata"),
        ("semverDiff('1.2.3', 'v1.2.3')", "None"),
        ("semverDiff('1.2.3-rc.1', '1.2.3')", "None"),
        ("semverDiff('banana', '1.0.0')", "Incomparable"),
    ],
)
def test_semver(source: str, expected: Any) -> None:
    assert ev(source) == expected


def test_scope_functions_extend_and_shadow_builtins() -> None:
    assert ev(
        "success() && status('a') == 'Succeeded'",
        success=lambda: True,
        status=lambda alias: "Succeeded",
    )
    assert ev("upper('x')", upper=lambda s: f"<{s}>") == "<x>"


def test_function_held_in_a_map_is_callable() -> None:
    response = {"header": lambda name: {"content-type": "text/plain"}.get(name.lower(), "")}
    assert ev("response.header('Content-Type')", {"response": response}) == "text/plain"
    with pytest.raises(ExpressionError, match="no function 'nope'"):
        ev("response.nope()", {"response": response})


def test_compile_is_cached_and_compiled_is_reusable() -> None:
    first = compile_expression("ctx.stage + '-x'")
    assert compile_expression("ctx.stage + '-x'") is first
    assert first.evaluate(Scope({"ctx": {"stage": "a"}})) == "a-x"
    assert first.evaluate(Scope({"ctx": {"stage": "b"}})) == "b-x"


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("1 +", "unexpected end of expression"),
        ("(1 + 2", "expected ')'"),
        ("a b", "unexpected token 'b'"),
        ("'open", "literal not terminated"),
        ("1 ? 2", "expected ':'"),
        ("{1 2}", "expected ':'"),
        ("a.", "expected a member name"),
        ("'\\q'", "invalid char escape"),
        ("12abc", "bad number syntax"),
        ("99999999999999999999", "out of range"),
        ("", "empty expression"),
        ("   ", "empty expression"),
        ("${{ x }}", "without ${{ }}"),
        ("# > 1", "can only be used inside a predicate"),
        ("filter(xs, # > 1; true)", "wrap predicate with brackets"),
        ("let = 1; 2", "expected a variable name"),
        ("if true { 1 }", "expected 'else'"),
        ("@", "unexpected character '@'"),
        ("x matches '(unclosed'", "missing closing )"),
        ("x matches 'a\\\\1'", "invalid escape sequence: `\\1`"),  # no backreferences
        ("x matches 1", "matches needs a string pattern"),
        ("x matches '(?=look)'", "unsupported Perl syntax"),
    ],
)
def test_syntax_errors_name_expression_and_where(source: str, message: str) -> None:
    with pytest.raises(ExpressionSyntaxError) as caught:
        evaluate_expression(source, {}, where="config.successExpression")
    error = caught.value
    assert message in error.reason
    assert error.where == "config.successExpression"
    assert error.expression == source
    if source:
        assert str(error).startswith(f"config.successExpression: expression {source!r}: ")


def test_syntax_error_reports_line_and_column() -> None:
    with pytest.raises(ExpressionSyntaxError, match="line 2, column 5"):
        compile_expression("1 +\n  2 )")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("nothing.bar", "cannot fetch 'bar' from nil"),
        ("vars.missing.bar", "cannot fetch 'bar' from nil"),
        ("vars.tag['k']", "cannot fetch 'k' from nil"),
        ("vars.list.x", "cannot fetch 'x' from array"),
        ("s.length", "cannot fetch 'length' from string"),
        ("vars.list[3]", "index out of range: 3 (array length is 3)"),
        ("vars.list[-4]", "index out of range"),
        ("vars.list['a']", "array index must be an int"),
        ("m[[1]]", "invalid map key"),
        ("nope(1)", "unknown function nope()"),
        ("len()", "len() expects 1 argument, got 0"),
        ("len(1)", "invalid argument for len (type int)"),
        ("upper(1)", "upper() argument must be a string, got int"),
        ("'a' + 1", "invalid operation: + (mismatched types string and int)"),
        ("1 - 'a'", "mismatched types int and string"),
        ("'a' < 1", "mismatched types string and int"),
        ("1 / 0", "division by zero"),
        ("1 % 0", "integer divide by zero"),
        ("1.5 % 1", "mismatched types float and int"),
        ("9223372036854775807 + 1", "integer overflow"),
        ("9223372036854775807 * 2", "integer overflow"),
        ("1 && true", "needs bool operands, got int"),
        ("!'x'", "needs bool operands, got string"),
        ("'x' ? 1 : 2", "non-bool expression (type string) used as condition"),
        ("1 in nothing", 'operator "in" not defined on nil'),
        ("1 in 'abc'", 'operator "in" not defined on string'),
        ("1 contains 'a'", "mismatched types int and string"),
        ("s matches vars.n", "mismatched types string and int"),
        ("s.foo()", "type string has no method foo()"),
        ("nothing.foo()", "cannot call method foo() on nil"),
        ("semverParse('x')", "invalid semantic version 'x'"),
        ("semverParse('1.0.0').Bogus()", "has no method Bogus()"),
        ("semverParse('1.0.0').IncMinor(1)", "wrong number of arguments"),
        ("int('3.5')", "invalid syntax"),
        ("fromJSON('{')", "fromJSON()"),
        ("fromJSON('NaN')", "fromJSON()"),
        ("fromBase64('***')", "illegal base64 data"),
        ("repeat('x', -1)", "must not be negative"),
        ("toJSON(1.0 / 3 * 1e308 * 10)", "unsupported value: +Inf"),
        ("min()", "min() expects at least 1 argument, got 0"),
        ("sort([1, 'a'])", "numbers or of strings"),
        ("join([1])", "array of strings"),
    ],
)
def test_evaluation_errors_name_expression_and_where(source: str, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        evaluate_expression(source, VARIABLES, where="config.x")
    error = caught.value
    assert not isinstance(error, ExpressionSyntaxError)
    assert message in error.reason
    assert error.expression == source
    assert error.where == "config.x"
    assert str(error) == f"config.x: expression {source!r}: {error.reason}"


def test_error_without_where_omits_it() -> None:
    with pytest.raises(ExpressionError) as caught:
        evaluate_expression("nothing.bar", {})
    assert str(caught.value) == "expression 'nothing.bar': cannot fetch 'bar' from nil"


def test_error_constructor_matches_attribute_order() -> None:
    error = ExpressionError("a.b", "step 'x': if", "must evaluate to true or false")
    assert (error.expression, error.where, error.reason) == (
        "a.b",
        "step 'x': if",
        "must evaluate to true or false",
    )
    assert str(error) == "step 'x': if: expression 'a.b': must evaluate to true or false"
    assert isinstance(error, LongshoremanError)


def test_function_errors_gain_expression_and_where() -> None:
    def boom() -> None:
        raise ExpressionError(reason="freight not found")

    with pytest.raises(ExpressionError) as caught:
        evaluate_expression("boom()", {}, {"boom": boom}, where="config.y")
    assert str(caught.value) == "config.y: expression 'boom()': freight not found"


def test_unclassified_function_errors_become_expression_errors() -> None:
    def broken() -> None:
        raise KeyError("k")

    with pytest.raises(ExpressionError, match=r"broken\(\): 'k'") as caught:
        evaluate_expression("broken()", {}, {"broken": broken})
    assert isinstance(caught.value.__cause__, KeyError)


def test_engine_error_kinds_pass_through_functions() -> None:
    def unavailable() -> None:
        raise StepError("API server unavailable")

    with pytest.raises(StepError):
        evaluate_expression("unavailable()", {}, {"unavailable": unavailable})


# --- bounds -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("repeat('x', 100000000)", "string result longer than"),
        ("repeat(repeat('x', 1000000), 2)", "string result longer than"),
        ("repeat('x', 600000) + repeat('x', 600000)", "string result longer than"),
        ("replace(repeat('x', 1000), '', repeat('y', 2000))", "string result longer than"),
        ("join([repeat('x', 600000), repeat('x', 600000)])", "string result longer than"),
        ("split(repeat('x', 200000), '')", "list result longer than"),
        ("1..1000000000", "list result longer than"),
        ("2 ** 1000000", "numeric overflow"),
        ("2 ** 10 ** 6", "numeric overflow"),
        ("concat(1..60000, 1..60000)", "list result longer than"),
        ("(1..60000) + (1..60000)", "list result longer than"),
    ],
)
def test_bounds_are_refused_quickly(source: str, message: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ExpressionError, match=message):
        ev(source)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    "source",
    [
        "(" * 10_000 + "1" + ")" * 10_000,
        "[" * 10_000 + "]" * 10_000,
        "-" * 10_000 + "1",
        "!" * 10_000 + "true",
        " + ".join(["1"] * 10_000),
        "a" + ".b" * 10_000,
        "x ?? " * 5_000 + "1",
        "f(" * 10_000 + ")" * 10_000,
    ],
)
def test_deep_nesting_is_a_syntax_error(source: str) -> None:
    with pytest.raises(ExpressionSyntaxError, match="nested too deeply"):
        compile_expression(source)


def test_moderate_nesting_is_fine() -> None:
    assert ev("(" * 30 + "1" + ")" * 30) == 1
    assert ev(" + ".join(["1"] * 150)) == 150


def test_catastrophic_regex_runs_in_linear_time() -> None:
    # A hang guard, not a timing: tests/unit/expressions/test_regex_port.py has the full set.
    with comes_back("matches with a backtracking pattern"):
        assert ev("s matches '(a+)+$'", {"s": "a" * 10_000 + "!"}) is False
        assert ev("s matches '(x|x)*y'", {"s": "x" * 10_000}) is False


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"^v\d+\.\d+\.\d+$", "v1.2.3", True),
        (r"^v\d+\.\d+\.\d+$", "v1.2.3\n", False),  # RE2: $ is end of text
        (r"(?m)^b$", "a\nb\nc", True),
        (r"\bfoo\b", "a foo b", True),
        (r"\bfoo\b", "afoob", False),
        (r"[^a-c]+", "abc", False),
        (r"[[:digit:]]{3}", "a123", True),
        (r"x{2,3}", "xx", True),
        (r"^(a|b)*$", "abcab", False),
        (r"a.c", "a\nc", False),
        (r"(?s)a.c", "a\nc", True),
        (r"\Qa.b\E", "axb", False),
        (r"(?i)ABC", "xabcx", True),
        (r"(?i:a)B", "Ab", False),
        (r"[]a]", "]", True),
        (r"a{,3}", "a{,3}", True),
        (r"^$", "", True),
        (r"(?P<name>x)y", "xy", True),
    ],
)
def test_regex_semantics_follow_re2(pattern: str, text: str, expected: bool) -> None:
    assert compile_regex(pattern).search(text) is expected


# --- sandboxing -------------------------------------------------------------------------------


class _Secret:
    token = "s3cr3t"

    def __repr__(self) -> str:
        return "Secret()"


@pytest.mark.parametrize(
    "source",
    [
        "''.__class__",
        "s.__class__.__mro__",
        "m.__dict__",
        "m.__class__",
        "m.items()",
        "m.get('a')",
        "obj.token",
        "obj['token']",
        "obj.__init__",
        "[].__len__()",
        "(1).real",
        "semverParse('1.0.0').__class__",
        "semverParse('1.0.0').major",
        "semverParse('1.0.0').inc_minor()",
        "semverParse('1.0.0')['__dict__']",
        "len.__globals__",
        "__import__('os')",
        "eval('1')",
        "getattr(s, 'upper')",
        "cls()",
    ],
)
def test_no_python_attribute_is_reachable(source: str) -> None:
    variables = {**VARIABLES, "obj": _Secret(), "cls": {"x": _Secret}}
    try:
        result = ev(source, variables)
    except ExpressionError:
        return
    # Anything that does not fail must be plain data that the mapping itself held.
    assert result is None or isinstance(result, str | int | float | bool | list | dict)
    assert "s3cr3t" not in repr(result)


def test_class_held_in_a_map_cannot_be_called() -> None:
    with pytest.raises(ExpressionError, match="no function"):
        ev("holder.make()", {"holder": {"make": _Secret}})


def test_evaluation_result_is_never_nan() -> None:
    assert not math.isnan(ev("float('1.5')"))
