"""The one neutraliser of text from others (promoter.chat.neutral), surface by surface."""

from __future__ import annotations

import pytest

from promoter.chat import neutral

Z = "\u200b"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ping @alice and @org/team", f"ping @{Z}alice and @{Z}org/team"),
        ("mail a@b.example", f"mail a@{Z}b.example"),
        ("see #12 and owner/repo#3", f"see #{Z}12 and owner/repo#{Z}3"),
        ("<!-- hidden --><details>", "&lt;!-- hidden --&gt;&lt;details&gt;"),
        ("[innocent](https://evil)", "\\[innocent\\](https://evil)"),
        ("plain words, 100% & more", "plain words, 100% & more"),
    ],
)
def test_github_markdown(text: str, shown: str) -> None:
    assert neutral.quiet(text) == shown


def test_a_cell_is_one_line_without_pipes_or_backticks() -> None:
    assert neutral.cell("a | b\n`c` @d") == f"a \\| b 'c' @{Z}d"


def test_a_code_span_cannot_be_ended_early() -> None:
    assert neutral.code("x`@team`\ny") == f"x'@{Z}team' y"


def test_a_fence_cannot_be_ended_early() -> None:
    assert neutral.fenced("a\n```\n@team") == f"a\n'''\n@{Z}team"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("<!channel> <!here>", "&lt;!channel&gt; &lt;!here&gt;"),
        ("<@U123> <https://evil|ok>", "&lt;@U123&gt; &lt;https://evil|ok&gt;"),
        ("a & b", "a &amp; b"),
    ],
)
def test_slack_mrkdwn(text: str, shown: str) -> None:
    assert neutral.mrkdwn(text) == shown


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("https://grafana.example/d?x=1&y=2", "https://grafana.example/d?x=1&y=2"),
        ("https://x.example/a|<!channel>", "https://x.example/a%7C%3C!channel%3E"),
        ("https://x.example/a) [b](c", "https://x.example/a%29%20%5Bb%5D%28c"),
        ("javascript:alert(1)", None),
        ("file:///etc/passwd", None),
        ("//x.example/no-scheme", None),
        ("http://[::1", None),
    ],
)
def test_link_urls(url: str, safe: str | None) -> None:
    assert neutral.link_url(url) == safe
