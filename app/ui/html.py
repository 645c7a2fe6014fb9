"""The status pages' HTML: view models (:mod:`app.ui.views`) in, strings out, through Jinja2.

The HTML lives in templates (``app/ui/templates/``) rendered with autoescaping, so every value
from the cluster or a user is escaped unless a template says otherwise, rather than by a rule
each line of Python had to remember; every URL goes through :func:`href` (only http(s) and our
own paths). A page is a layout (``page.html``) around a *fragment*; server-sent events carry
re-rendered fragments, which the page's small inline script (``live.js``) swaps in. No
JavaScript framework, and the pages work without JavaScript (a meta refresh in ``<noscript>``).
The server's environment is aiohttp-jinja2's (:mod:`app.ui.pages`); the functions here take it
as ``env`` and default to one made the same way, for tests and benchmarks.

Layout is mobile-first: below 640 px wide tables turn into cards (each cell labelled by
``data-label``), so a Stage or a step reads on a phone without sideways scrolling.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from app.ui.freight import FreightPage
from app.ui.graph import GRAPH_CSS, freight_href, graph_html
from app.ui.marks import THEME_CSS, mark
from app.ui.timeline import TIMELINE_CSS, FreightTimeline
from app.ui.views import ProjectView, PromotionItem, PromotionPage, StageView
from promoter.chat.diff import FreightDiff, merged_pulls, rows
from promoter.chat.views import SHORT_NAME

NO_JS_REFRESH_SECONDS = 15

# Badge colours by what a status means (GitHub Primer's palette: readable on white, AA contrast).
GREEN, BLUE, GREY, RED, AMBER = "#1a7f37", "#0969da", "#6e7781", "#cf222e", "#9a6700"
_KIND = {
    "succeeded": "ok",
    "successful": "ok",
    "healthy": "ok",
    "true": "ok",
    "verified": "ok",
    "ready": "ok",
    "running": "run",
    "verifying": "run",
    "progressing": "run",
    "failed": "bad",
    "errored": "bad",
    "error": "bad",
    "false": "bad",
    "unhealthy": "bad",
    "inconclusive": "bad",
    "degraded": "bad",
    "aborted": "warn",
    "skipped": "warn",
}

CSS = f"""
*{{box-sizing:border-box}}
body{{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
background:#f6f8fa}}
header{{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.6rem 1rem;
background:#24292f;color:#fff}}
header a{{color:#fff;text-decoration:none}} header .brand{{font-weight:700}}
nav{{flex:1;min-width:0;overflow-wrap:anywhere}} nav a{{color:#c9d1d9}}
main{{max-width:72rem;margin:0 auto;padding:1rem}}
h1{{font-size:1.35rem;margin:.2rem 0 .6rem;overflow-wrap:anywhere}}
h2{{font-size:1.1rem;margin:1.4rem 0 .5rem}}
code{{font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;overflow-wrap:anywhere}}
a{{color:{BLUE}}}
.badge{{display:inline-block;padding:.1rem .55rem;border-radius:1rem;color:#fff;
font-size:.8rem;font-weight:600;white-space:nowrap;background:{GREY}}}
.b-ok{{background:{GREEN}}} .b-run{{background:{BLUE}}} .b-bad{{background:{RED}}}
.b-warn{{background:{AMBER}}}
.live{{font-size:.8rem;color:#c9d1d9}} .live.on::before{{content:"● ";color:#3fb950}}
.card{{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:.8rem 1rem;
margin:.6rem 0}}
.message{{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0;font-size:.9rem}}
.muted{{color:#57606a;font-size:.85rem}}
dl.facts{{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;margin:.4rem 0}}
dl.facts dt{{color:#57606a}} dl.facts dd{{margin:0;overflow-wrap:anywhere}}
table{{width:100%;border-collapse:collapse;background:#fff;border:1px solid #d0d7de}}
th,td{{text-align:left;vertical-align:top;padding:.45rem .6rem;border-top:1px solid #d0d7de}}
th{{background:#f6f8fa;font-size:.85rem}}
td{{overflow-wrap:normal}}
/* Names (Stages, steps, Promotions, Freight, kinds) and times never break inside: a table too
   wide for the window scrolls in its own box instead. Messages may break anywhere: prose. */
td code,td a,td .badge,td[data-label="Kind"],td[data-label="#"],.nw{{white-space:nowrap}}
td[data-label="When"],td[data-label="Started"],td[data-label="Finished"],
td[data-label="Since"],td[data-label="Took"]{{white-space:nowrap}}
td .message{{overflow-wrap:anywhere}}
.table-wrap{{overflow-x:auto;max-width:100%}}
tr.outputs td{{border-top:0;padding-top:0}}
ul.links{{padding-left:1.2rem}}
footer{{max-width:72rem;margin:1.5rem auto;padding:0 1rem 1rem;color:#57606a;font-size:.8rem}}
footer form{{display:inline}}
@media (max-width:640px){{
  main{{padding:.6rem}}
  table,thead,tbody,tr,td{{display:block;width:100%}}
  table{{border:0;background:none}}
  thead{{display:none}}
  tr{{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:.5rem 0;padding:.3rem 0}}
  tr.outputs{{margin-top:-.6rem;border-top:0;border-radius:0 0 6px 6px}}
  td{{border:0;padding:.2rem .8rem}}
  td[data-label]{{display:grid;grid-template-columns:6.2rem minmax(0,1fr);gap:.6rem}}
  td[data-label]::before{{content:attr(data-label);font-size:.8rem;color:#57606a;
  font-weight:600;padding-top:.1rem}}
  td[data-label]:empty,td[data-label="#"]{{display:none}}
  td code,td a,td[data-label="Kind"]{{white-space:normal;overflow-wrap:anywhere}}
}}
"""
# The pipeline graph and Freight timeline, and the dark theme (colour variables) they share.
CSS += THEME_CSS + GRAPH_CSS + TIMELINE_CSS
# The action forms (app.ui.actions): plain forms, so they work without JavaScript.
CSS += """
form.act{display:inline-flex;gap:.4rem;align-items:center;flex-wrap:wrap;margin:0 .6rem .3rem 0}
div.action{margin:.4rem 0}
form.act button{font:inherit;padding:.25rem .8rem;border-radius:6px;border:1px solid #1f883d;
background:#1f883d;color:#fff;cursor:pointer}
form.act button[disabled]{background:#94d3a2;border-color:#94d3a2;cursor:not-allowed}
code.cmd{white-space:nowrap}
"""


def _escaped(value: object) -> Markup:
    """Every ``{{ value }}`` passes here before autoescape: escaped as :func:`html.escape` spells
    it (``&#x27;``, ``&quot;``), which the pages have always used, instead of MarkupSafe's
    (``&#39;``, ``&#34;``); what a template or a macro already built (Markup) stays as it is."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def href(url: str | None) -> str | None:
    """Only http(s) URLs and our own absolute paths become links (the template escapes them)."""
    if not url:
        return None
    ours = url.startswith("/") and not url.startswith("//")
    if url.startswith(("https://", "http://")) or ours:
        return url
    return None


def path(*segments: str) -> str:
    return "/".join(quote(s, safe="") for s in segments)


def promotion_path(namespace: str, name: str) -> str:
    return f"/ui/promotions/{path(namespace, name)}"


def stage_path(namespace: str, name: str) -> str:
    return f"/ui/stages/{path(namespace, name)}"


def project_path(namespace: str) -> str:
    return f"/ui/projects/{path(namespace)}"


def freight_path(namespace: str, name: str) -> str:
    return freight_href(namespace, name)


def e(value: object) -> str:
    """Escaped as the templates escape (for the few pieces built in Python: app.ui.actions)."""
    return html.escape(str(value), quote=True)


def unbroken(text: str) -> Markup:
    """Prose whose hyphenated words (dates, names) never break at their hyphens: each such
    word in a ``nowrap`` span, the spaces between words still free to wrap."""
    return Markup(
        " ".join(
            f'<span class="nw">{e(word)}</span>' if "-" in word else e(word)
            for word in str(text).split(" ")
        )
    )


# The templates ship inside the package (pyproject's package data).
LOADER = jinja2.PackageLoader("app.ui", "templates")
# How every environment that renders these templates is made: autoescape on, a name the
# template misspells is an error rather than an empty string, and block tags leave no blank lines.
OPTIONS: dict[str, Any] = {
    "autoescape": True,
    "finalize": _escaped,
    "undefined": jinja2.StrictUndefined,
    "trim_blocks": True,
    "lstrip_blocks": True,
}


def configure(env: jinja2.Environment) -> jinja2.Environment:
    """Give an environment made with :data:`LOADER` and :data:`OPTIONS` what the templates call."""
    env.filters["badge_kind"] = lambda text: _KIND.get(str(text).strip().lower(), "none")
    env.filters["unbroken"] = unbroken
    env.globals.update(
        href=href,
        project_path=project_path,
        stage_path=stage_path,
        promotion_path=promotion_path,
        freight_path=freight_path,
        # The pipeline picture is SVG geometry, drawn in Python with its own escaping (graph.py);
        # the templates place it, and the marks it shares with the timeline.
        graph=lambda graph: Markup(graph_html(graph)),
        mark=lambda kind: Markup(mark(kind)),
        short_name=SHORT_NAME,
        refresh_seconds=NO_JS_REFRESH_SECONDS,
    )
    return env


# For callers without an aiohttp application (tests, benchmarks); the server renders through
# the environment aiohttp-jinja2 keeps on its application (app.ui.pages), made the same way.
DEFAULT = configure(jinja2.Environment(loader=LOADER, **OPTIONS))


def _render(env: jinja2.Environment, template: str, **context: Any) -> str:
    return env.get_template(template).render(**context)


def layout(
    title: str,
    fragment: str,
    *,
    crumbs: Sequence[tuple[str, str | None]] = (),
    events: str | None = None,
    footer: str = "",
    nonce: str = "",
    env: jinja2.Environment = DEFAULT,
) -> str:
    """The page around a fragment (both already rendered: they are placed, not escaped)."""
    return _render(
        env,
        "page.html",
        title=title,
        fragment=Markup(fragment),
        crumbs=crumbs,
        events=events,
        footer=Markup(footer),
        nonce=nonce,
        css=Markup(CSS),
    )


def footer(
    mode: str,
    user: str,
    *,
    header: str,
    org: str,
    logout_path: str,
    env: jinja2.Environment = DEFAULT,
) -> str:
    """Who is reading, by the access control ``mode`` (``none``, ``header``, ``github``)."""
    return _render(
        env, "footer.html", mode=mode, user=user, header=header, org=org, logout_path=logout_path
    )


def index_fragment(
    projects: Sequence[tuple[str, int, int]], *, env: jinja2.Environment = DEFAULT
) -> str:
    """``projects``: (namespace, Stages, running Promotions)."""
    return _render(env, "index.html", projects=projects)


def timeline_html(
    namespace: str, timeline: FreightTimeline, *, env: jinja2.Environment = DEFAULT
) -> str:
    """The project's Freight timeline (a section of the project page)."""
    return _render(env, "timeline.html", ns=namespace, timeline=timeline)


def project_fragment(
    view: ProjectView, *, actions: str = "", env: jinja2.Environment = DEFAULT
) -> str:
    """``actions``: what to do next (app.ui.actions), already rendered."""
    return _render(env, "project.html", view=view, actions=Markup(actions))


def stage_fragment(view: StageView, *, actions: str = "", env: jinja2.Environment = DEFAULT) -> str:
    return _render(env, "stage.html", view=view, actions=Markup(actions))


def promotion_fragment(
    view: PromotionPage, *, actions: str = "", env: jinja2.Environment = DEFAULT
) -> str:
    return _render(env, "promotion.html", view=view, actions=Markup(actions))


def freight_fragment(
    view: FreightPage,
    promotions: Sequence[PromotionItem],
    *,
    actions: str = "",
    changes: str = "",
    env: jinja2.Environment = DEFAULT,
) -> str:
    """``changes``: what the Freight would change in each Stage it can go to (issue 39's diff),
    rendered; until it is given, its section says so."""
    return _render(
        env,
        "freight.html",
        view=view,
        promotions=promotions,
        actions=Markup(actions),
        changes=Markup(changes),
    )


# How many commits of a range and merged pull requests the Freight page lists (the rest counted).
PAGE_COMMITS = 20


def changes_fragment(
    namespace: str, diffs: Sequence[FreightDiff], *, env: jinja2.Environment = DEFAULT
) -> str:
    """What a Freight would change in each Stage of ``diffs``, for the Freight page's slot."""
    changes = [(d.stage, rows(d, PAGE_COMMITS), merged_pulls(d)[:PAGE_COMMITS], d) for d in diffs]
    return _render(env, "changes.html", namespace=namespace, changes=changes)


def message_page(
    title: str, text: str, *, footer: str = "", nonce: str = "", env: jinja2.Environment = DEFAULT
) -> str:
    fragment = _render(env, "message.html", title=title, text=text)
    return layout(
        title, fragment, crumbs=(("Projects", "/ui/"),), footer=footer, nonce=nonce, env=env
    )
