"""Acting from the status pages: Promote, Approve, Abort and Re-verify as plain HTML forms.

A form posts to ``/ui/act/{namespace}``; the words are parsed with the chat grammar
(:func:`promoter.chat.grammar.parse_command`) into the command a PR comment would carry, and
the front end that knows the signed-in person decides and carries it out
(:class:`promoter.chat.acting.Acting`; for GitHub sign-in, :mod:`handlers.acting`: the same
planner and rules as that person's comment). The answer is a page: what was done, the refusal
in the words a comment gets, or for a protected Stage a second form that confirms.

Only GitHub sign-in says who someone is on GitHub, so only it enables the forms; with sign-in
off (or a proxy's header) every action is refused with the setting that turns it on. Each form
carries a CSRF token: an HMAC of the session cookie under the session secret, so a page of
another site can neither read nor forge it; a post without the right one is refused (403).
Forms work without JavaScript.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from app.ui import html as h
from app.ui.auth import SESSION_COOKIE, Auth
from app.ui.settings import UiSettings
from app.ui.timeline import FreightTimeline
from promoter.chat.acting import Acted, Acting
from promoter.chat.grammar import CommandError, parse_command, reason_of
from promoter.chat.planner import no_verification
from promoter.chat.views import PromotionView
from promoter.resources.model import Phase, name_of
from promoter.resources.stages import approval_of, available_to, phase_of, requests_origin

ACT_PATH = "/ui/act/{namespace}"
CSRF_FIELD = "csrf"
ACTIONS = ("promote", "approve", "abort", "verify")
NEXT_LIMIT = 6  # the project page's "What next": the newest Freight's moves
SIGN_IN_OFF = (
    "Actions on these pages need GitHub sign-in, which is off: set LONGSHOREMAN_UI_AUTH=github "
    "with LONGSHOREMAN_UI_GITHUB_CLIENT_ID, LONGSHOREMAN_UI_GITHUB_CLIENT_SECRET, "
    "LONGSHOREMAN_UI_GITHUB_ORG and LONGSHOREMAN_UI_SESSION_SECRET (docs/status-pages.md). "
    "Until then, use the chat command shown beside each action."
)
NO_APP = (
    "Actions on these pages check your permission through the GitHub App, which is not "
    "configured: set LONGSHOREMAN_GITHUB_APP_ID, LONGSHOREMAN_GITHUB_PRIVATE_KEY and "
    "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET. Until then, use the chat command shown beside each action."
)
CSRF_REFUSED = (
    "This form was not sent by a page of this server (its CSRF token is missing or wrong). "
    "Nothing was changed: reload the page and try again."
)


_CODE = re.compile(r"`([^`]+)`")


def rich(text: str) -> str:
    """Chat's words as HTML: escaped, with the names between backticks in ``<code>``."""
    return _CODE.sub(r"<code>\1</code>", h.e(text))


def act_path(namespace: str) -> str:
    return f"/ui/act/{h.path(namespace)}"


def csrf_token(secret: str, session: str) -> str:
    """The token forms carry for the session ``session`` (its cookie's value)."""
    return hmac.new(secret.encode(), b"csrf\0" + session.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class FormContext:
    """What every form on a page needs: the token, or why actions are off (shown instead)."""

    csrf: str = ""
    off: str = ""


# ---- rendering ----------------------------------------------------------------------------------


def _hidden(name: str, value: str) -> str:
    return f'<input type="hidden" name="{h.e(name)}" value="{h.e(value)}">'


def _form(
    ns: str,
    action: str,
    fields: Mapping[str, str],
    button: str,
    ctx: FormContext,
    *,
    disabled: str = "",
    select: str = "",
    confirmed: bool = False,
) -> str:
    """One form: the hidden fields, an optional ``<select>``, and its button. ``disabled``
    says why it cannot be pressed, beside it and as its title."""
    why = disabled or ctx.off
    hidden = _hidden("action", action) + "".join(_hidden(k, v) for k, v in fields.items())
    hidden += _hidden(CSRF_FIELD, ctx.csrf) + (_hidden("confirmed", "1") if confirmed else "")
    state = f' disabled title="{h.e(why)}"' if why else ""
    note = f' <span class="muted why">{h.e(disabled)}</span>' if disabled else ""
    return (
        f'<form class="act" method="post" action="{act_path(ns)}" data-action="{h.e(action)}">'
        f'{hidden}{select}<button type="submit"{state}>{h.e(button)}</button>{note}</form>'
    )


def _action(form: str, command: str) -> str:
    """One action: its form, and the chat command that does the same."""
    return (
        f'<div class="action">{form}<span class="muted">or comment '
        f'<code class="cmd">{h.e(command)}</code></span></div>'
    )


def _freight_select(options: Sequence[Mapping[str, Any]], name: str = "freight") -> str:
    items = "".join(
        f'<option value="{h.e(name_of(f))}">{h.e(f.get("alias") or name_of(f)[:12])}</option>'
        for f in options
    )
    return f'<select name="{name}" aria-label="Freight">{items}</select>'


def _newest_first(freights: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(
        freights,
        key=lambda f: str((f.get("metadata") or {}).get("creationTimestamp") or ""),
        reverse=True,
    )


def stage_actions(
    ns: str,
    stage: Mapping[str, Any],
    freights: Sequence[Mapping[str, Any]],
    ctx: FormContext,
    *,
    frozen: str,
    now: Any = None,
) -> str:
    """The Stage page's actions: Promote a Freight available to it, Approve one for it, and
    Re-verify; each with the chat command that does the same."""
    name = name_of(stage)
    available = [f for f in _newest_first(freights) if available_to(stage, f, now)]
    approvable = [
        f
        for f in _newest_first(freights)
        if requests_origin(stage, f) and approval_of(f, name) is None and f not in available
    ]
    parts = ['<h2 id="actions">Actions</h2>']
    if ctx.off:
        parts.append(f'<p class="muted" id="actions-off">{h.e(ctx.off)}</p>')
    if available:
        first = available[0].get("alias") or name_of(available[0])
        why = f"Stage {name} is {frozen}" if frozen else ""
        parts.append(
            _action(
                _form(
                    ns,
                    "promote",
                    {"stage": name},
                    "Promote",
                    ctx,
                    disabled=why,
                    select=_freight_select(available),
                ),
                f"/promote {first} to {name}",
            )
        )
    else:
        parts.append(
            '<p class="muted">No Freight is available to this Stage yet: it must be verified '
            "upstream, or approved for it.</p>"
        )
    if approvable:
        first = approvable[0].get("alias") or name_of(approvable[0])
        parts.append(
            _action(
                _form(
                    ns,
                    "approve",
                    {"stage": name},
                    "Approve",
                    ctx,
                    select=_freight_select(approvable),
                ),
                f"/approve {first} for {name}",
            )
        )
    if no_verification(stage) is None:
        parts.append(
            _action(
                _form(ns, "verify", {"stage": name}, "Re-verify", ctx),
                f"/verify {name}",
            )
        )
    return "".join(parts)


def freight_actions(
    ns: str,
    freight: Mapping[str, Any],
    promotable: Sequence[tuple[str, str]],
    approvable: Sequence[str],
    ctx: FormContext,
) -> str:
    """The Freight page's actions: Promote to each Stage it is available to (disabled, saying
    why, while the Stage is frozen), Approve for each that requests it but may not take it."""
    name = name_of(freight)
    label = str(freight.get("alias") or name)
    parts = ['<h2 id="actions">Actions</h2>']
    if ctx.off:
        parts.append(f'<p class="muted" id="actions-off">{h.e(ctx.off)}</p>')
    for stage, frozen in promotable:
        why = f"Stage {stage} is {frozen}" if frozen else ""
        fields = {"stage": stage, "freight": name}
        parts.append(
            _action(
                _form(ns, "promote", fields, f"Promote to {stage}", ctx, disabled=why),
                f"/promote {label} to {stage}",
            )
        )
    for stage in approvable:
        fields = {"stage": stage, "freight": name}
        parts.append(
            _action(
                _form(ns, "approve", fields, f"Approve for {stage}", ctx),
                f"/approve {label} for {stage}",
            )
        )
    if not promotable and not approvable:
        parts.append('<p class="muted">No Stage can take this Freight now.</p>')
    return "".join(parts)


def promotion_actions(
    ns: str, promotion: Mapping[str, Any], ctx: FormContext, view: PromotionView | None = None
) -> str:
    """The Promotion page's next moves: Abort while it is pending or running; once it is over,
    Promote to the Stages after it (verified here) or Approve for them, or promote again
    (after a failure)."""
    name = name_of(promotion)
    off = f'<p class="muted" id="actions-off">{h.e(ctx.off)}</p>' if ctx.off else ""
    if phase_of(promotion) in (Phase.PENDING, Phase.RUNNING):
        abort = _form(ns, "abort", {"promotion": name}, "Abort", ctx)
        return f'<h2 id="actions">Actions</h2>{off}' + _action(abort, f"/abort {name}")
    if view is None:
        return ""
    label = view.label.short
    parts = []
    for stage in view.next_stages:
        fields = {"stage": stage, "freight": view.freight}
        parts.append(
            _action(
                _form(ns, "promote", fields, f"Promote to {stage}", ctx),
                f"/promote {label} to {stage}",
            )
        )
    for stage in view.approve_stages:
        fields = {"stage": stage, "freight": view.freight}
        parts.append(
            _action(
                _form(ns, "approve", fields, f"Approve for {stage}", ctx),
                f"/approve {label} for {stage}",
            )
        )
    if view.phase in ("Failed", "Errored", "Aborted"):
        fields = {"stage": view.stage, "freight": view.freight}
        parts.append(
            _action(
                _form(ns, "promote", fields, f"Promote {label} to {view.stage} again", ctx),
                f"/promote {label} to {view.stage}",
            )
        )
    if not parts:
        return ""
    return f'<h2 id="actions">What next</h2>{off}' + "".join(parts)


def project_actions(ns: str, timeline: FreightTimeline | None, ctx: FormContext) -> str:
    """The project page's next moves: each Freight some Stage waits for, promoted there."""
    waiting = [(e, s) for e in (timeline.entries if timeline else ()) for s in e.waiting]
    if not waiting:
        return ""
    off = f'<p class="muted" id="actions-off">{h.e(ctx.off)}</p>' if ctx.off else ""
    parts = []
    for entry, stage in waiting[:NEXT_LIMIT]:
        fields = {"stage": stage, "freight": entry.name}
        parts.append(
            _action(
                _form(ns, "promote", fields, f"Promote {entry.label} to {stage}", ctx),
                f"/promote {entry.alias or entry.name} to {stage}",
            )
        )
    return f'<h2 id="actions">What next</h2>{off}' + "".join(parts)


# ---- the endpoint ----------------------------------------------------------------------------


class PageActions:
    """``POST /ui/act/{namespace}``: one form's command, carried out for the signed-in person."""

    def __init__(
        self,
        ui: UiSettings,
        auth: Auth,
        page: Callable[[str, str, int], web.Response],
    ) -> None:
        self.ui = ui
        self.auth = auth
        self._page = page  # (title, body html, status) -> the page around it
        # Set by the wiring when a front end that knows signed-in people is configured.
        self.acting: Acting | None = None

    def context(self, request: web.Request) -> FormContext:
        """The forms' token for this request's session, or why actions are off."""
        off = self.off()
        if off:
            return FormContext(off=off)
        assert self.ui.session_secret is not None
        return FormContext(
            csrf=csrf_token(self.ui.session_secret, request.cookies.get(SESSION_COOKIE, ""))
        )

    def off(self) -> str:
        if self.ui.auth != "github":
            return SIGN_IN_OFF
        if self.acting is None:
            return NO_APP
        return ""

    def _csrf_ok(self, request: web.Request, sent: str) -> bool:
        session = request.cookies.get(SESSION_COOKIE, "")
        if not session or not sent or self.ui.session_secret is None:
            return False
        expected = csrf_token(self.ui.session_secret, session)
        return hmac.compare_digest(expected.encode(), sent.encode())

    async def handle(self, request: web.Request) -> web.StreamResponse:
        ns = request.match_info["namespace"]
        off = self.off()
        if off:
            return self._page("Actions are off", f'<p id="outcome">{h.e(off)}</p>', 403)
        login = self.auth.user(request)
        if not login:
            return self.auth.unauthenticated(request, page=False)
        form = await request.post()
        fields = {k: str(v) for k, v in form.items() if isinstance(v, str)}
        if not self._csrf_ok(request, fields.get(CSRF_FIELD, "")):
            return self._page("Refused", f'<p id="outcome">{h.e(CSRF_REFUSED)}</p>', 403)
        action = fields.get("action", "")
        words = {
            "promote": f"{fields.get('freight', '')} to {fields.get('stage', '')}",
            "approve": f"{fields.get('freight', '')} for {fields.get('stage', '')}",
            "abort": fields.get("promotion", ""),
            "verify": fields.get("stage", ""),
        }
        if action not in words:
            return self._page("Refused", '<p id="outcome">Unknown action.</p>', 400)
        try:
            command = parse_command(action, words[action])
        except CommandError as e:
            text = f"refused: {reason_of(e)}. Nothing was changed."
            return self._page("Refused", f'<p id="outcome">{h.e(text)}</p>', 400)
        if fields.get("confirmed") == "1":
            command = replace(command, confirmed=True)
        assert self.acting is not None
        acted = await self.acting.act(ns, login, command)
        return self._answer(ns, fields, acted, self.context(request))

    def _answer(
        self, ns: str, fields: Mapping[str, str], acted: Acted, ctx: FormContext
    ) -> web.Response:
        back = h.stage_path(ns, fields["stage"]) if fields.get("stage") else h.project_path(ns)
        if acted.outcome == "confirm":
            keep = {k: fields[k] for k in ("stage", "freight") if fields.get(k)}
            body = (
                f'<p id="outcome">{rich(acted.text)}</p>'
                + _form(ns, fields["action"], keep, "Confirm", ctx, confirmed=True)
                + f'<a class="cancel" href="{back}">Cancel</a>'
            )
            return self._page("Confirm", body, 200)
        links = []
        if acted.promotion is not None:
            path = h.promotion_path(acted.promotion.namespace, acted.promotion.name)
            links.append(f'<a id="promotion-link" href="{path}">Follow the Promotion</a>')
        links.append(f'<a href="{back}">Back</a>')
        title = "Done" if acted.outcome == "done" else "Refused"
        status = 200 if acted.outcome == "done" else 403
        body = f'<p id="outcome">{rich(acted.text)}</p><p>{" · ".join(links)}</p>'
        return self._page(title, body, status)
