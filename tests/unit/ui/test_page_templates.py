"""The status pages' templates escape by default: every value a view holds comes out as text.

The pages render view models through Jinja2 templates with autoescaping (``app/ui/templates``).
A Promotion page whose every string is hostile markup must show it all as text, each link must go
through the one URL check (only http(s) and our own paths), and the templates must ship inside
the package.
"""

from __future__ import annotations

import re

from app.ui import html as h
from app.ui.views import AnalysisRunView, Link, PromotionPage, StepView

HOSTILE = "<img src=x onerror=alert('1')>\"&"
ESCAPED = "&lt;img src=x onerror=alert(&#x27;1&#x27;)&gt;&quot;&amp;"


def hostile_page() -> PromotionPage:
    step = StepView(1, HOSTILE, HOSTILE, "Running", HOSTILE, HOSTILE, HOSTILE, HOSTILE, 2,
                    [(HOSTILE, HOSTILE)])  # fmt: skip
    return PromotionPage(
        namespace=HOSTILE, name=HOSTILE, stage=HOSTILE, freight=HOSTILE, phase="Running",
        message=HOSTILE, actor=HOSTILE, created=HOSTILE, started=HOSTILE, finished=HOSTILE,
        took=HOSTILE, current_step=0, steps=[step],
        pull_requests=[Link(HOSTILE, "javascript:alert(1)", HOSTILE)],
        urls=[Link(HOSTILE, "https://example.com/?q=" + HOSTILE)],
        apps=[Link(HOSTILE, "//elsewhere.example.com/")],
        analysis_runs=[AnalysisRunView(HOSTILE, HOSTILE, "Failed", HOSTILE, HOSTILE, HOSTILE)],
        warning=HOSTILE, environment=[Link(HOSTILE, "/ui/ok", HOSTILE)],
    )  # fmt: skip


def test_every_value_of_a_promotion_page_is_text() -> None:
    page = h.layout(
        HOSTILE,
        h.promotion_fragment(hostile_page()),
        crumbs=((HOSTILE, "/ui/"), (HOSTILE, None)),
        events="/ui/promotions/x/y/events",
        footer=h.footer("header", HOSTILE, header=HOSTILE, org="", logout_path="/ui/logout"),
        nonce="n0nce",
    )
    assert "<img" not in page and "onerror=alert('1')" not in page
    assert page.count(ESCAPED) >= 25  # each field, in html.escape's spelling as before


def test_only_http_and_our_own_paths_become_links() -> None:
    fragment = h.promotion_fragment(hostile_page())
    targets = re.findall(r'<a href="([^"]*)" rel="noopener noreferrer">', fragment)
    assert targets == [
        "/ui/ok",
        "https://example.com/?q=&lt;img src=x onerror=alert(&#x27;1&#x27;)&gt;&quot;&amp;",
    ]
    assert "javascript:" not in fragment and "//elsewhere" not in fragment


def test_the_templates_ship_inside_the_package() -> None:
    shipped = set(h.LOADER.list_templates())
    assert {"page.html", "project.html", "stage.html", "promotion.html", "live.js"} <= shipped


def test_what_a_freight_changes_is_text_and_links_only_to_http() -> None:
    from promoter.chat.diff import Commit, PullRequest, RangeFacts, RangeKey, freight_diff

    url = "https://github.com/acme/app"
    rude = Commit(
        "c" * 40,
        "<script>alert(1)</script>",
        "<b>dev</b>",
        "javascript:alert(1)",
        (PullRequest(7, "<img src=x>", f"{url}/pull/7", "dev", True),),
    )
    key = RangeKey(url, "a" * 40, "b" * 40)
    facts = {key: RangeFacts((rude,), 30, f"{url}/compare/{'a' * 40}...{'b' * 40}")}
    current = {"metadata": {"name": "old"}, "commits": [{"repoURL": url, "id": "a" * 40}]}
    new = {"metadata": {"name": "new"}, "commits": [{"repoURL": url, "id": "b" * 40}]}
    html = h.changes_fragment("shop", [freight_diff("prod", current, new, facts)])
    assert "<script>" not in html and "&lt;script&gt;" in html and "<img" not in html
    assert "javascript:" not in html
    assert f'<a href="{url}/compare/{"a" * 40}...{"b" * 40}">30 new commits</a>' in html
    assert f'<a href="{url}/pull/7">#7</a>' in html and "and 29 more" in html
    assert '<a href="/ui/stages/shop/prod">prod</a>' in html
