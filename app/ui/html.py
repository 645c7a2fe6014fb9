"""The status pages' HTML: view models (:mod:`app.ui.views`) in, strings out.

Plain Python string building with one rule: every value from the cluster or a user goes through
:func:`e` (``html.escape`` with quotes), and every URL through :func:`href` (only http(s) and
our own paths). A page is a layout around a *fragment*; server-sent events carry re-rendered
fragments, which the page's small inline script swaps in. No JavaScript framework, and the pages
work without JavaScript (a meta refresh in ``<noscript>``).

Layout is mobile-first: below 640 px wide tables turn into cards (each cell labelled by
``data-label``), so a Stage or a step reads on a phone without sideways scrolling.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from app.ui.freight import FreightPage
from app.ui.graph import GRAPH_CSS, freight_href, graph_html
from app.ui.marks import THEME_CSS
from app.ui.timeline import TIMELINE_CSS, timeline_html
from app.ui.views import (
    AnalysisRunView,
    Link,
    ProjectView,
    PromotionItem,
    PromotionPage,
    StageCard,
    StageView,
)

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
/* Names (Stages, steps, Promotions, Freight, kinds) never break inside: a table too wide for the
   window scrolls in its own box instead. Messages may break anywhere: they are prose. */
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

SCRIPT = """
(function () {
  var main = document.getElementById("live"), state = document.getElementById("live-state");
  var url = main && main.getAttribute("data-events");
  if (!url) { return; }
  if (!window.EventSource) {
    setTimeout(function () { location.reload(); }, NO_JS_REFRESH_MS);
    return;
  }
  var source = new EventSource(url);
  function show(text, on) { state.textContent = text; state.className = on ? "live on" : "live"; }
  source.onopen = function () { show("live", true); };
  source.onerror = function () { show("reconnecting…", false); };
  source.addEventListener("update", function (event) {
    main.innerHTML = event.data;  /* rendered and escaped by the server */
    show("live", true);
  });
  source.addEventListener("gone", function () { show("deleted", false); source.close(); });
})();
""".replace("NO_JS_REFRESH_MS", str(NO_JS_REFRESH_SECONDS * 1000))


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def href(url: str | None) -> str | None:
    """Only http(s) URLs and our own absolute paths become links."""
    if not url:
        return None
    ours = url.startswith("/") and not url.startswith("//")
    if url.startswith(("https://", "http://")) or ours:
        return e(url)
    return None


def path(*segments: str) -> str:
    return "/".join(quote(s, safe="") for s in segments)


def promotion_path(namespace: str, name: str) -> str:
    return f"/ui/promotions/{path(namespace, name)}"


def stage_path(namespace: str, name: str) -> str:
    return f"/ui/stages/{path(namespace, name)}"


def project_path(namespace: str) -> str:
    return f"/ui/projects/{path(namespace)}"


def badge(text: str, *, id_: str | None = None) -> str:
    kind = _KIND.get(text.strip().lower(), "none")
    attrs = f' id="{e(id_)}"' if id_ else ""
    return f'<span class="badge b-{kind}"{attrs} data-status="{e(text)}">{e(text or "-")}</span>'


def link(item: Link) -> str:
    target = href(item.href)
    label = e(item.label)
    body = f'<a href="{target}" rel="noopener noreferrer">{label}</a>' if target else label
    return body + (f' <span class="muted">({e(item.note)})</span>' if item.note else "")


def unbroken(text: str) -> str:
    """Prose whose hyphenated words (dates, names) never break at their hyphens: each such
    word in a ``nowrap`` span, the spaces between words still free to wrap."""
    return " ".join(
        f'<span class="nw">{e(word)}</span>' if "-" in word else e(word) for word in text.split(" ")
    )


def td(label: str, content: str) -> str:
    # Empty cells stay empty (no whitespace), so phone cards can hide them with :empty.
    if not content:
        return f'<td data-label="{e(label)}"></td>'
    return f'<td data-label="{e(label)}"><div class="v">{content}</div></td>'


def table(headers: Sequence[str], rows: Iterable[str], *, cls: str = "") -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join(rows)
    if not body:
        return '<p class="muted">None.</p>'
    return (
        f'<div class="table-wrap"><table class="{e(cls)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def layout(
    title: str,
    fragment: str,
    *,
    crumbs: Sequence[tuple[str, str | None]] = (),
    events: str | None = None,
    footer: str = "",
    nonce: str = "",
) -> str:
    nav = " / ".join(
        f'<a href="{href(url)}">{e(label)}</a>' if url else e(label) for label, url in crumbs
    )
    refresh = (
        f'<noscript><meta http-equiv="refresh" content="{NO_JS_REFRESH_SECONDS}"></noscript>'
        if events
        else ""
    )
    live = '<span id="live-state" class="live">connecting…</span>' if events else ""
    events_attr = f' data-events="{e(events)}"' if events else ""
    script = f'<script nonce="{e(nonce)}">{SCRIPT}</script>' if events else ""
    return (
        "<!doctype html>"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No favicon request (it would 404): an empty inline icon.
        '<link rel="icon" href="data:,">'
        f"<title>{e(title)} · Longshoreman</title>{refresh}"
        f'<style nonce="{e(nonce)}">{CSS}</style></head><body>'
        f'<header><a class="brand" href="/ui/">Longshoreman</a><nav>{nav}</nav>{live}</header>'
        f'<main id="live"{events_attr}>{fragment}</main>'
        f"<footer>{footer}</footer>{script}</body></html>"
    )


# ---- fragments ---------------------------------------------------------------------------------


def index_fragment(projects: Sequence[tuple[str, int, int]]) -> str:
    """``projects``: (namespace, Stages, running Promotions)."""
    rows = (
        "<tr>"
        + td("Project", f'<a href="{project_path(ns)}">{e(ns)}</a>')
        + td("Stages", e(stages))
        + td("Running", e(running))
        + "</tr>"
        for ns, stages, running in projects
    )
    return "<h1>Projects</h1>" + table(("Project", "Stages", "Running"), rows, cls="projects")


def _promotion_cell(namespace: str, item: PromotionItem | None) -> str:
    if item is None:
        return "-"
    return (
        f'<a href="{promotion_path(namespace, item.name)}">{e(item.name)}</a> {badge(item.phase)}'
    )


def _stage_row(namespace: str, card: StageCard) -> str:
    queued = (
        "<br>".join(
            f'<a href="{promotion_path(namespace, q.name)}">{e(q.name)}</a>' for q in card.queued
        )
        or "-"
    )
    health = badge(card.health) + (
        f'<div class="muted">{e(card.health_message)}</div>' if card.health_message else ""
    )
    verification = badge(card.verification) + (
        f'<div class="muted">{e(card.verification_message)}</div>'
        if card.verification_message
        else ""
    )
    return (
        f'<tr data-stage="{e(card.name)}">'
        + td(
            "Stage",
            f'<a href="{stage_path(namespace, card.name)}">{e(card.name)}</a>'
            + (
                f'<div class="muted" data-window>{unbroken(card.window)}</div>'
                if card.window
                else ""
            ),
        )
        + td("Freight", f"<code>{e(card.freight)}</code>")
        + td("Health", health)
        + td("Verification", verification)
        + td("Running", _promotion_cell(namespace, card.running))
        + td("Queued", queued)
        + td("Last", _promotion_cell(namespace, card.last))
        + "</tr>"
    )


def _promotion_rows(namespace: str, items: Sequence[PromotionItem]) -> list[str]:
    return [
        "<tr>"
        + td("Promotion", f'<a href="{promotion_path(namespace, p.name)}">{e(p.name)}</a>')
        + td("Stage", f'<a href="{stage_path(namespace, p.stage)}">{e(p.stage)}</a>')
        + td("Freight", f"<code>{e(p.freight)}</code>")
        + td("Phase", badge(p.phase))
        + td("When", e(p.when))
        + "</tr>"
        for p in items
    ]


STAGE_HEADERS = ("Stage", "Freight", "Health", "Verification", "Running", "Queued", "Last")
PROMOTION_HEADERS = ("Promotion", "Stage", "Freight", "Phase", "When")


def project_fragment(view: ProjectView, *, actions: str = "") -> str:
    ns = view.namespace
    pipeline = '<h2 id="pipeline">Pipeline</h2>' + graph_html(view.graph) if view.graph else ""
    freight = (
        '<h2 id="freight">Freight</h2>' + timeline_html(ns, view.timeline) if view.timeline else ""
    )
    return (
        f"<h1>Project <code>{e(ns)}</code></h1>"
        + pipeline
        + actions
        + freight
        + "<h2>Stages</h2>"
        + table(STAGE_HEADERS, (_stage_row(ns, c) for c in view.stages), cls="stages")
        + "<h2>Recent Promotions</h2>"
        + table(PROMOTION_HEADERS, _promotion_rows(ns, view.recent), cls="promotions")
    )


def _analysis_rows(runs: Sequence[AnalysisRunView]) -> list[str]:
    return [
        f'<tr id="analysisrun-{e(r.name)}">'
        + td(
            "AnalysisRun", f"<code>{e(f'{r.namespace}/' if r.namespace else '')}{e(r.name)}</code>"
        )
        + td("Phase", badge(r.phase))
        + td("Started", e(r.started))
        + td("Finished", e(r.finished))
        + td("Message", f'<div class="message">{e(r.message)}</div>' if r.message else "")
        + "</tr>"
        for r in runs
    ]


ANALYSIS_HEADERS = ("AnalysisRun", "Phase", "Started", "Finished", "Message")


def stage_fragment(view: StageView, *, actions: str = "") -> str:
    ns, card = view.namespace, view.card
    conditions = [
        "<tr>"
        + td("Type", e(c.type))
        + td("Status", badge(c.status))
        + td("Reason", e(c.reason))
        + td("Message", f'<div class="message">{e(c.message)}</div>' if c.message else "")
        + td("Since", e(c.since))
        + "</tr>"
        for c in view.conditions
    ]
    history = "".join(f"<li><code>{e(h)}</code></li>" for h in view.freight_history)
    return (
        f"<h1>Stage <code>{e(card.name)}</code></h1>"
        + table(STAGE_HEADERS, [_stage_row(ns, card)], cls="stages")
        + actions
        + "<h2>Conditions</h2>"
        + table(("Type", "Status", "Reason", "Message", "Since"), conditions, cls="conditions")
        + (
            '<h2>GitHub environment</h2><ul class="links">'
            + "".join(f"<li>{link(env)}</li>" for env in card.environment)
            + "</ul>"
            if card.environment
            else ""
        )
        + (
            '<h2 id="links">Links</h2><ul class="links">'
            + "".join(f"<li>{link(x)}</li>" for x in view.links)
            + "".join(f'<li class="muted">{e(x)}</li>' for x in view.link_errors)
            + "</ul>"
            if view.links or view.link_errors
            else ""
        )
        + "<h2>Freight history</h2>"
        + (f"<ol>{history}</ol>" if history else '<p class="muted">None.</p>')
        + '<h2 id="verification">Verification</h2>'
        + table(ANALYSIS_HEADERS, _analysis_rows(view.verifications), cls="verifications")
        + "<h2>Promotions</h2>"
        + table(PROMOTION_HEADERS, _promotion_rows(ns, view.promotions), cls="promotions")
    )


STEP_HEADERS = ("#", "Step", "Kind", "Status", "Started", "Took", "Message")


def _step_rows(view: PromotionPage) -> list[str]:
    rows = []
    for s in view.steps:
        errors = f' <span class="muted">({s.errors} error(s))</span>' if s.errors else ""
        rows.append(
            f'<tr class="step" data-step="{e(s.alias)}">'
            + td("#", e(s.index))
            + td("Step", f"<code>{e(s.alias)}</code>")
            + td("Kind", e(s.uses))
            + td("Status", badge(s.status) + errors)
            + td("Started", e(s.started))
            + td("Took", e(s.took))
            + td("Message", f'<div class="message">{e(s.message)}</div>' if s.message else "")
            + "</tr>"
        )
        if s.outputs:
            facts = "".join(
                f"<dt><code>{e(k)}</code></dt><dd><code>{e(v)}</code></dd>" for k, v in s.outputs
            )
            rows.append(
                f'<tr class="outputs" data-step="{e(s.alias)}"><td colspan="{len(STEP_HEADERS)}">'
                f"<details><summary>Outputs ({len(s.outputs)})</summary>"
                f'<dl class="facts">{facts}</dl></details></td></tr>'
            )
    return rows


def _freight_link(ns: str, view: PromotionPage) -> str:
    name = view.core.label.name if view.core is not None else ""
    code = f"<code>{e(view.freight)}</code>"
    return f'<a id="freight-link" href="{freight_path(ns, name)}">{code}</a>' if name else code


def promotion_fragment(view: PromotionPage, *, actions: str = "") -> str:
    ns = view.namespace
    total = len(view.steps)
    where = ""
    if view.phase == "Running" and total:
        current = view.steps[min(view.current_step, total - 1)]
        where = f" · step {current.index} of {total} (<code>{e(current.alias)}</code>)"
    elif total:
        where = f" · {view.done} of {total} steps done"
    facts = [
        ("Project", f'<a href="{project_path(ns)}">{e(ns)}</a>'),
        ("Stage", f'<a href="{stage_path(ns, view.stage)}">{e(view.stage)}</a>'),
        ("Freight", _freight_link(ns, view)),
        ("By", e(view.actor or "-")),
        ("Created", e(view.created or "-")),
        ("Started", e(view.started or "-")),
        ("Finished", e(view.finished or "-")),
        ("Took", e(view.took or "-")),
    ]
    message = (
        f'<div class="card"><div class="message" id="promotion-message">{e(view.message)}</div>'
        "</div>"
        if view.message
        else ""
    )
    links = [link(pr) for pr in view.pull_requests]
    links += [link(env) for env in view.environment]
    links += [f'{link(a)} <span class="muted">(Argo CD Application)</span>' for a in view.apps]
    links += [link(u) for u in view.urls]
    links_html = (
        '<ul class="links">' + "".join(f"<li>{item}</li>" for item in links) + "</ul>"
        if links
        else '<p class="muted">None yet.</p>'
    )
    warning = (
        f'<div class="card"><p class="message" id="github-warning">Warning: {e(view.warning)}</p>'
        "</div>"
        if view.warning
        else ""
    )
    return (
        f"<h1>{'Rollback' if view.rollback else 'Promotion'} <code>{e(view.name)}</code></h1>"
        + f"<p>{badge(view.phase, id_='phase')}{where}</p>"
        + message
        + warning
        + actions
        + '<dl class="facts">'
        + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in facts)
        + "</dl>"
        + "<h2>Steps</h2>"
        + table(STEP_HEADERS, _step_rows(view), cls="steps")
        + "<h2>Links</h2>"
        + links_html
        + f'<h2>Verification</h2><p class="muted">AnalysisRuns that followed this Promotion; see '
        f'also <a href="{stage_path(ns, view.stage)}#verification">the Stage</a>.</p>'
        + table(ANALYSIS_HEADERS, _analysis_rows(view.analysis_runs), cls="verifications")
    )


def message_page(title: str, text: str, *, footer: str = "", nonce: str = "") -> str:
    return layout(
        title,
        f"<h1>{e(title)}</h1><p>{e(text)}</p>",
        crumbs=(("Projects", "/ui/"),),
        footer=footer,
        nonce=nonce,
    )


# ---- the Freight page ---------------------------------------------------------------------------

ARTIFACT_HEADERS = ("Kind", "Repository", "Version", "Detail")


def freight_path(namespace: str, name: str) -> str:
    return freight_href(namespace, name)


def _stage_links(ns: str, names: Iterable[str]) -> str:
    return ", ".join(f'<a href="{stage_path(ns, n)}">{e(n)}</a>' for n in names) or "-"


def freight_fragment(
    view: FreightPage,
    promotions: Sequence[PromotionItem],
    *,
    actions: str = "",
    changes: str = "",
) -> str:
    """``changes``: what the Freight would change in each Stage it can go to (issue 39's diff);
    until it is given, the section says so."""
    ns, where = view.namespace, view.where
    title = (
        f"Freight <code>{e(view.alias)}</code>"
        if view.alias
        else f"Freight <code>{e(view.name)}</code>"
    )
    promoting = ", ".join(
        f'<a href="{stage_path(ns, stage)}">{e(stage)}</a> ({e(what)})'
        for stage, what in where.promoting
    )
    approved = ", ".join(
        f'<a href="{stage_path(ns, a.stage)}">{e(a.stage)}</a>'
        + (
            f' <span class="muted">by {e(a.by)}{" at " + e(a.at) if a.at else ""}</span>'
            if a.by
            else ""
        )
        for a in view.approved
    )
    facts = [
        ("Name", f"<code>{e(view.name)}</code>"),
        ("Origin", e(view.origin)),
        ("Created", e(view.created or "-")),
        ("Now in", _stage_links(ns, where.now_in)),
        ("Verified in", _stage_links(ns, where.verified_in)),
        ("Approved for", approved or "-"),
        ("Promoting to", promoting or "-"),
        ("Waiting for", _stage_links(ns, where.waiting)),
    ]
    artifacts = [
        f'<tr data-kind="{e(a.kind)}">'
        + td("Kind", e(a.kind))
        + td("Repository", f'<code class="name">{e(a.repo)}</code>')
        + td("Version", f'<code class="name">{e(a.ref)}</code>')
        + td("Detail", f'<div class="message">{e(a.detail)}</div>' if a.detail else "")
        + "</tr>"
        for a in view.artifacts
    ]
    return (
        f"<h1>{title}</h1>"
        + '<dl class="facts" id="freight-facts">'
        + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in facts)
        + "</dl>"
        + actions
        + "<h2>Artifacts</h2>"
        + table(ARTIFACT_HEADERS, artifacts, cls="artifacts")
        + '<section id="changes"><h2>What it would change</h2>'
        + (changes or '<p class="muted">Not shown yet.</p>')
        + "</section>"
        + "<h2>Promotions</h2>"
        + table(PROMOTION_HEADERS, _promotion_rows(ns, promotions), cls="promotions")
    )
