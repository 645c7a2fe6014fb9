"""The one regex port (RE2): Go's dialect and Go's errors, and ``matches`` never backtracks.

Go's own tables, ported: ``regexp/syntax/parse_test.go``'s ``invalidRegexps`` (every one is
refused, with Go's message where Go's test or parser fixes the text) and ``onlyPerl`` (accepted:
Go's ``regexp.Compile`` parses with the Perl flags). Where RE2 and Go differ, the case is here
with what the port does about it (see the module's docstring).
"""

from __future__ import annotations

import pytest

from promoter.expressions import ExpressionError, ExpressionSyntaxError, evaluate_expression
from promoter.expressions.regex import RegexError, compile_regex, escape
from tests.support.runaway import RUNAWAY_PATTERN, RUNAWAY_TEXT, comes_back

# Go's invalidRegexps, minus the four that spell invalid UTF-8 ("\xff", "[\xff]", ...): a Python
# string always holds valid text (a lone surrogate is below). The deep and the too-long rows
# are further down, where RE2 differs.
GO_INVALID = [
    ("(", "missing closing ): `(`"),
    (")", "unexpected ): `)`"),
    ("(a", "missing closing ): `(a`"),
    ("a)", "unexpected ): `a)`"),
    ("(a))", "unexpected ): `(a))`"),
    ("(a|b|", "missing closing ): `(a|b|`"),
    ("a|b|)", "unexpected ): `a|b|)`"),
    ("(a|b|))", "unexpected ): `(a|b|))`"),
    ("(a|b", "missing closing ): `(a|b`"),
    ("a|b)", "unexpected ): `a|b)`"),
    ("(a|b))", "unexpected ): `(a|b))`"),
    ("[a-z", "missing closing ]: `[a-z`"),
    ("([a-z)", "missing closing ]: `[a-z)`"),
    ("[a-z)", "missing closing ]: `[a-z)`"),
    ("([a-z]))", "unexpected ): `([a-z]))`"),
    ("x{1001}", "invalid repeat count: `{1001}`"),
    ("x{9876543210}", "invalid repeat count: `{9876543210}`"),  # RE2 alone: a literal
    ("x{2,1}", "invalid repeat count: `{2,1}`"),
    ("x{1,9876543210}", "invalid repeat count: `{1,9876543210}`"),  # RE2 alone: a literal
    ("(?P<name>a", "missing closing ): `(?P<name>a`"),
    ("(?P<name>", "missing closing ): `(?P<name>`"),
    ("(?P<name", "invalid named capture: `(?P<name`"),
    ("(?P<x y>a)", "invalid named capture: `(?P<x y>`"),
    ("(?P<>a)", "invalid named capture: `(?P<>`"),
    ("(?<name>a", "missing closing ): `(?<name>a`"),
    ("(?<name>", "missing closing ): `(?<name>`"),
    ("(?<name", "invalid named capture: `(?<name`"),
    ("(?<x y>a)", "invalid named capture: `(?<x y>`"),
    ("(?<>a)", "invalid named capture: `(?<>`"),
    ("[a-Z]", "invalid character class range: `a-Z`"),
    ("(?i)[a-Z]", "invalid character class range: `a-Z`"),
    (r"\Q\E*", "missing argument to repetition operator: `*`"),
    ("a{100000}", "invalid repeat count: `{100000}`"),
    ("a{100000,}", "invalid repeat count: `{100000,}`"),
    ("((((((((((x{2}){2}){2}){2}){2}){2}){2}){2}){2}){2})", "invalid repeat count: `{2}`"),
    ("(" + "(xx?)" * 1000 + "){1000}", "expression too large: ``"),
    ("(xx?){1000}" * 1000, "expression too large: ``"),
    (r"\pL" * 27000, "expression too large: ``"),
    # Beyond Go's table: each of RE2's error codes, in Go's words.
    ("a**", "invalid nested repetition operator: `**`"),
    ("*a", "missing argument to repetition operator: `*`"),
    ("a\\", "trailing backslash at end of expression: ``"),
    (r"(a)\1", r"invalid escape sequence: `\1`"),  # no backreferences, as in Go
    ("(?=a)", "invalid or unsupported Perl syntax: `(?=`"),  # no look-around, as in Go
    (r"\C", r"invalid escape sequence: `\C`"),  # RE2 alone: any byte
]


@pytest.mark.parametrize(("pattern", "message"), GO_INVALID, ids=[p[:30] for p, _ in GO_INVALID])
def test_what_go_refuses_is_refused_in_go_s_words(pattern: str, message: str) -> None:
    with pytest.raises(RegexError) as refused:
        compile_regex(pattern)
    assert refused.value.reason == f"error parsing regexp: {message}"


# Go's onlyPerl: Perl syntax that regexp.Compile accepts; and what is literal text in both.
@pytest.mark.parametrize(
    "pattern",
    [r"[a-b-c]", r"\Qabc\E", r"\Q*+?{[\E", r"\Q\\E", r"\Q\\\E", r"\Q\\\\E", r"\Q\\\\\E",
     r"(?:a)", r"(?P<name>a)", r"(?<name>a)", r"\\C", r"\Q\C\E", r"[{9876543210}]",
     r"x{01,9876543210}", r"(?P<n>a)(?P<n>b)"],
)  # fmt: skip
def test_what_go_accepts_is_accepted(pattern: str) -> None:
    compile_regex(pattern)


def test_go_refuses_deep_nesting_and_re2_runs_it_in_linear_time() -> None:
    # Go's invalidRegexps "too deep" rows: Go guards its recursive code at 1000 levels; RE2's
    # parser and matcher are not recursive, so the port accepts them (a documented difference).
    deep = "(" * 1000 + ")" * 1000
    assert compile_regex(deep).search("anything")
    assert compile_regex("(?:" * 1000 + ")*" * 1000).search("")


def test_a_lone_surrogate_is_read_as_go_reads_it_from_json() -> None:
    assert compile_regex("^a.b$").search("a\ud800b")  # U+FFFD, one character
    assert compile_regex("^\U0001f600$").search("\ud83d\ude00")  # a pair is its character


def test_escape_makes_a_literal() -> None:
    text = r"a.b*c(d)[e]{1}\f|g^$"
    assert compile_regex("^" + escape(text) + "$").search(text)
    assert not compile_regex("^" + escape(text) + "$").search("a-b*c(d)[e]{1}\\f|g^$")


def test_matches_with_a_runaway_pattern_comes_back() -> None:
    variables = {"s": RUNAWAY_TEXT, "p": RUNAWAY_PATTERN}
    with comes_back("matches with a constant pattern"):
        assert evaluate_expression(f"s matches '{RUNAWAY_PATTERN}'", variables) is False
    with comes_back("matches with a pattern from a variable"):
        assert evaluate_expression("s matches p", variables) is False
    with comes_back("matches with an alternation that backtracks in Python"):
        assert evaluate_expression("s matches '(x|x)*y'", {"s": "x" * 10_000}) is False


def test_a_bad_pattern_in_matches_is_a_syntax_error_before_anything_runs() -> None:
    with pytest.raises(ExpressionSyntaxError, match=r"missing closing \): `\(a`"):
        evaluate_expression("s matches '(a'", {"s": ""})


def test_a_go_layout_that_backtracks_in_python_comes_back() -> None:
    # date()'s layout is the user's: forty "2" elements are forty \d{1,2} in a row.
    variables = {"s": "1" * 10_000 + "x", "layout": "2" * 40}
    with comes_back("date() with a runaway layout"), pytest.raises(ExpressionError):
        evaluate_expression("date(s, layout)", variables)
    assert evaluate_expression("date('2024-01-02', '2006-01-02').Day()", {}) == 2


def test_a_bad_pattern_writes_nothing_to_the_server_s_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # RE2 logs parse errors through absl unless told not to: a user's typo is theirs to read.
    with pytest.raises(RegexError):
        compile_regex("(unclosed-and-unique-to-this-test")
    assert capfd.readouterr().err == ""
