"""The marks the pipeline graph, its legend and the Freight timeline share: a shape per meaning,
so colour is never the only signal (WCAG 1.4.1), and the theme's colours as CSS variables.

Each mark is a tiny SVG drawn on a 16 x 16 grid in ``currentColor``; its class (``m-ok``...)
picks the colour from the theme, and the word beside it says the same thing in text:

======== ==================================== ==========================================
kind     shape                                used for
======== ==================================== ==========================================
ok       filled circle with a tick            Healthy, Verified, "verified in"
run      ring with a filled half              Progressing, Verifying
bad      filled triangle with a bar and dot   Unhealthy / Degraded, verification failed
wait     ring with clock hands                verification waiting, "waiting for"
unknown  dashed ring with a dot               Unknown health
none     ring with a dash                     not verified, nothing to verify yet
here     filled square                        "now in" (the Freight a Stage holds)
play     filled triangle pointing right       a running Promotion
======== ==================================== ==========================================

The palette is GitHub Primer's, as ``app.ui.html`` uses; :data:`THEME_CSS` adds the dark
variants behind ``prefers-color-scheme: dark`` and darkens the existing page rules with them.
"""

from __future__ import annotations

from typing import Literal

MarkKind = Literal["ok", "run", "bad", "wait", "unknown", "none", "here", "play"]

_SHAPES: dict[str, str] = {
    "ok": (
        '<circle cx="8" cy="8" r="7.5" fill="currentColor"/>'
        '<path d="M4.4 8.3l2.4 2.4 4.8-5" class="mk-s" fill="none" stroke-width="2"'
        ' stroke-linecap="round" stroke-linejoin="round"/>'
    ),
    "run": (
        '<circle cx="8" cy="8" r="6.5" fill="none" stroke="currentColor" stroke-width="2"/>'
        '<path d="M8 1.5a6.5 6.5 0 0 1 0 13z" fill="currentColor"/>'
    ),
    "bad": (
        '<path d="M8 .8l7.4 13.6H.6z" fill="currentColor"/>'
        '<path d="M8 5.2v4.6" class="mk-s" stroke-width="1.8" stroke-linecap="round"/>'
        '<circle cx="8" cy="12.1" r="1" class="mk-f"/>'
    ),
    "wait": (
        '<circle cx="8" cy="8" r="6.5" fill="none" stroke="currentColor" stroke-width="2"/>'
        '<path d="M8 4.3V8l2.6 1.6" fill="none" stroke="currentColor" stroke-width="1.8"'
        ' stroke-linecap="round"/>'
    ),
    "unknown": (
        '<circle cx="8" cy="8" r="6.5" fill="none" stroke="currentColor" stroke-width="2"'
        ' stroke-dasharray="3 2.2"/>'
        '<circle cx="8" cy="8" r="1.6" fill="currentColor"/>'
    ),
    "none": (
        '<circle cx="8" cy="8" r="6.5" fill="none" stroke="currentColor" stroke-width="1.6"/>'
        '<path d="M5 8h6" stroke="currentColor" stroke-width="1.8" stroke-linecap="round"/>'
    ),
    "here": '<rect x="2" y="2" width="12" height="12" rx="2.5" fill="currentColor"/>',
    "play": '<path d="M3.5 1.8l10 6.2-10 6.2z" fill="currentColor"/>',
}

# Stage health in Kargo's words (promoter.chat.views.health_word), plus Argo CD's Degraded should a
# Stage's status.health.status ever carry it.
HEALTH_KINDS: dict[str, MarkKind] = {
    "Healthy": "ok",
    "Progressing": "run",
    "Unhealthy": "bad",
    "Degraded": "bad",
    "Unknown": "unknown",
}

# The Verified condition's reasons (app.controller.verification), as words and marks.
VERIFICATION_WORDS: dict[str, tuple[str, MarkKind]] = {
    "Verified": ("Verified", "ok"),
    "Verifying": ("Verifying", "run"),
    "VerificationFailed": ("Verification failed", "bad"),
    "VerificationErrored": ("Verification errored", "bad"),
    "Pending": ("Verification pending", "wait"),
    "WaitingForHealth": ("Waiting for health", "wait"),
    "NoFreight": ("Not verified", "none"),
    "-": ("Not verified", "none"),
    "": ("Not verified", "none"),
}


def health_kind(word: str) -> MarkKind:
    return HEALTH_KINDS.get(word, "unknown")


def verification_word(reason: str) -> tuple[str, MarkKind]:
    return VERIFICATION_WORDS.get(reason, (reason, "unknown"))


def shape(kind: MarkKind) -> str:
    """The mark's drawing on the 16 x 16 grid (to be wrapped in an ``<svg>`` or ``<g>``)."""
    return _SHAPES[kind]


def mark(kind: MarkKind, *, size: int = 14) -> str:
    """The mark as an inline ``<svg>`` for HTML text; decorative, as a word always follows."""
    return (
        f'<svg class="mark m-{kind}" width="{size}" height="{size}" viewBox="0 0 16 16" '
        f'aria-hidden="true" focusable="false">{_SHAPES[kind]}</svg>'
    )


# Variables for the graph, the timeline and the marks; dark values behind prefers-color-scheme.
# The page's own rules (app.ui.html.CSS) use fixed light colours: the dark block overrides them.
THEME_CSS = """
:root{color-scheme:light dark;--fg:#1f2328;--muted:#57606a;--page:#f6f8fa;--panel:#fff;
--border:#d0d7de;--edge:#8c959f;--wh:#eef1f4;--ok:#1a7f37;--run:#0969da;--bad:#cf222e;
--wait:#9a6700;--none:#6e7781;--unknown:#6e7781;--here:#8250df;--on-mark:#fff;--link:#0969da}
@media (prefers-color-scheme:dark){
:root{--fg:#e6edf3;--muted:#9198a1;--page:#0d1117;--panel:#161b22;--border:#3d444d;
--edge:#768390;--wh:#1c2129;--ok:#3fb950;--run:#4493f8;--bad:#f85149;--wait:#d29922;
--none:#9198a1;--unknown:#9198a1;--here:#ab7df8;--on-mark:#0d1117;--link:#4493f8}
body{color:var(--fg);background:var(--page)}
a{color:var(--link)}
.card,table,tr,th{background:var(--panel)}
.card,table,th,td,tr{border-color:var(--border)}
.muted,dl.facts dt,footer{color:var(--muted)}
td[data-label]::before{color:var(--muted)}
}
.mark{vertical-align:-2px;flex:none}
.m-ok{color:var(--ok)} .m-run,.m-play{color:var(--run)} .m-bad{color:var(--bad)}
.m-wait{color:var(--wait)} .m-none{color:var(--none)} .m-unknown{color:var(--unknown)}
.m-here{color:var(--here)}
.mk-s{stroke:var(--on-mark)} .mk-f{fill:var(--on-mark)}
.sr-only{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;
clip:rect(0,0,0,0);white-space:nowrap;border:0}
"""
