"""What Slack shows, decided purely: the live Promotion message, its thread replies, command
replies and the confirmation prompt. Each function takes plain objects and returns a
:class:`slack.blocks.Message`; nothing here sends anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promoter.chat import neutral
from promoter.chat.diff import FreightDiff, merged_pulls, rows
from promoter.chat.grammar import FREIGHT_HELP, usage_lines
from promoter.chat.shown import digest
from promoter.chat.views import (
    SHORT_NAME,
    EnvironmentLink,
    FreightLabel,
    PromotionView,
    StageView,
    StepLine,
    Verification,
    step_lines,
)
from promoter.resources import annotations as ann
from promoter.resources.model import meta
from promoter.resources.stages import phase_of
from promoter.urls import without_credentials
from slack import blocks as b
from slack.blocks import Message
from slack.commands import PendingPromotion

ABORT = "longshoreman.abort"
REVERIFY = "longshoreman.reverify"
PROMOTE_NEXT = "longshoreman.promote_next"  # + ".<n>": action_ids are unique per block
PROMOTE = "longshoreman.promote"  # the Promote button of a "new Freight" message
CONFIRM = "longshoreman.confirm"
CANCEL = "longshoreman.cancel"

PHASE_ICON = {
    "Pending": ":hourglass_flowing_sand:",
    "Running": ":arrows_counterclockwise:",
    "Succeeded": ":white_check_mark:",
    "Failed": ":x:",
    "Errored": ":warning:",
    "Aborted": ":no_entry_sign:",
}
STEP_ICON = {
    "Succeeded": ":white_check_mark:",
    "Skipped": ":heavy_minus_sign:",
    "Running": ":arrows_counterclockwise:",
    "Failed": ":x:",
    "Errored": ":warning:",
    "Aborted": ":no_entry_sign:",
}
PENDING_STEP_ICON = ":white_circle:"
ARGOCD_STEPS = ("argocd-update",)


def channel_of(stage: Mapping[str, Any] | None) -> str | None:
    """The channel a Stage's Promotions are announced in (its slack-channel annotation)."""
    value = str((meta(stage or {}).get("annotations") or {}).get(ann.SLACK_CHANNEL) or "").strip()
    return value or None


_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{1,20}$")


def actor_label(actor: str) -> str:
    """``slack:T1/U1`` as a Slack mention; anyone else as text."""
    # The annotation is anyone's who may create a Promotion: only a real user id becomes a
    # mention, anything else (``slack:T1/<!channel>``) is shown as text.
    if actor.startswith("slack:") and _SLACK_USER.match(actor.rsplit("/", 1)[-1]):
        return f"<@{actor.rsplit('/', 1)[1]}>"
    return b.escape(actor) if actor else "someone"


# ---- the record kept on the Promotion ---------------------------------------------------------


def message_digest(message: Message) -> str:
    """A short digest of a message's content (text and blocks), to tell "unchanged" apart."""
    return digest(message.text, list(message.blocks))


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """Where a Promotion's message is and what has been said in its thread.

    Stored as JSON in the ``longshoreman.dev/slack-message`` annotation, so after a restart (or
    on a new leader) updates continue in the same message and no reply is posted twice.
    """

    channel: str
    ts: str
    events: tuple[str, ...] = ()
    final: bool = False
    # A digest of what the message shows (promoter.chat.shown): a restarted replica or a new
    # leader that renders the same message sends no chat.update.
    shown: str = ""

    def to_annotation(self) -> str:
        data: dict[str, Any] = {
            "channel": self.channel,
            "ts": self.ts,
            "events": list(self.events),
            "final": self.final,
        }
        if self.shown:
            data["shown"] = self.shown
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def of(cls, promotion: Mapping[str, Any]) -> MessageRecord | None:
        raw = (meta(promotion).get("annotations") or {}).get(ann.SLACK_MESSAGE)
        if not raw:
            return None
        try:
            data = json.loads(raw)
            if not isinstance(data, Mapping) or not data.get("channel") or not data.get("ts"):
                return None
            return cls(
                str(data["channel"]),
                str(data["ts"]),
                tuple(str(e) for e in data.get("events") or ()),
                bool(data.get("final")),
                str(data.get("shown") or ""),
            )
        except (ValueError, TypeError):
            return None


# The event_type of the metadata on every live message (lower-case letters and underscores, as
# https://api.slack.com/metadata/using asks).
LIVE_EVENT = "longshoreman_promotion"


@dataclass(frozen=True, slots=True)
class LiveTag:
    """What a live message's metadata says: whose message it is and which post made it.

    chat.postMessage has no idempotency key, so a post whose answer was lost (a timeout, a
    dropped connection, a 5xx) may or may not have made a message. The tag lets the poster find
    it in the channel's history instead of posting again. ``nonce`` is random per post (kept
    across that post's retries): a message carries it only if this poster sent it, so another
    app's metadata of the same shape is never taken for ours.
    """

    namespace: str
    promotion: str
    nonce: str

    def metadata(self) -> dict[str, Any]:
        return {
            "event_type": LIVE_EVENT,
            "event_payload": {
                "namespace": self.namespace,
                "promotion": self.promotion,
                "nonce": self.nonce,
            },
        }

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> LiveTag | None:
        payload = metadata.get("event_payload")
        if metadata.get("event_type") != LIVE_EVENT or not isinstance(payload, Mapping):
            return None
        fields = [payload.get(k) for k in ("namespace", "promotion", "nonce")]
        if not all(isinstance(f, str) and f for f in fields):
            return None
        return cls(*(str(f) for f in fields))


def tagged(history: Sequence[tuple[str, Mapping[str, Any]]], tag: LiveTag) -> str | None:
    """The ts of the earliest message in ``history`` (``(ts, metadata)``, any order) that
    carries ``tag``, or None."""
    found = [ts for ts, metadata in history if LiveTag.of(metadata) == tag]
    return min(found, key=float) if found else None


# ---- verification ---------------------------------------------------------------------------


def message_final(promotion: Mapping[str, Any], verification: Verification | None) -> bool:
    """Nothing more will change in this message."""
    phase = phase_of(promotion)
    if not phase.terminal:
        return False
    return verification is None or verification.final


# ---- the live message -------------------------------------------------------------------------


def _progress(lines: Sequence[StepLine]) -> tuple[int, int]:
    done = sum(1 for s in lines if s.status in ("Succeeded", "Skipped"))
    return done, len(lines)


def _step_text(step: StepLine) -> str:
    icon = STEP_ICON.get(step.status, PENDING_STEP_ICON)
    text = f"{icon} `{b.escape(step.alias)}`"
    if step.kind and step.kind != step.alias:
        text += f" {b.escape(step.kind)}"
    if step.message and step.status in ("Running", "Failed", "Errored"):
        text += f" — {b.escape(b.clip(step.message, 300))}"
    return text


def _value(**data: str) -> str:
    return json.dumps(data, separators=(",", ":"))


def _duration(view: PromotionView) -> str:
    seconds = view.seconds
    if seconds is None:
        return ""
    return f"took {seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"took {seconds}s"


def render_promotion(view: PromotionView, diff: FreightDiff | None = None) -> Message:
    """The one message that follows a Promotion from creation to verification; the view's
    ``link`` (the Promotion's status page) goes in its facts line, what it changes (``diff``)
    under its steps, always whole: steps are cut first when Block Kit's 50 blocks run out."""
    name, namespace, stage_name, phase = view.name, view.namespace, view.stage, view.phase
    label = b.clip(view.label.full, 120)
    lines = view.steps
    done, total = view.done, view.total
    verification = view.verification

    head = f"{PHASE_ICON.get(phase, '')} *{b.escape(label)}* to *{b.escape(stage_name)}*: *{phase}*"
    if view.rollback:
        # An automatic rollback says so first: people read it as an incident, not a release.
        head = (
            f"{PHASE_ICON.get(phase, '')} :rewind: Rollback of *{b.escape(stage_name)}* to "
            f"*{b.escape(label)}*: *{phase}*"
        )
    if phase == "Running" and total:
        current = next((s for s in lines if s.status == "Running"), None)
        head += f" — step {min(done + 1, total)} of {total}"
        if current:
            head += f" (`{b.escape(current.alias)}`)"
    blocks: list[b.Block] = [b.section(head)]
    facts = [f"Promotion `{b.escape(name)}`", f"by {actor_label(view.actor)}"]
    if _duration(view):
        facts.append(_duration(view))
    if view.link:
        facts.append(f"<{b.escape(view.link)}|Details>")
    # The project's deep links (ProjectConfig freightLinks / stageLinks).
    facts.extend(shown for x in view.links if (shown := b.link(x.url, x.title)) is not None)
    blocks.append(b.context(" · ".join(facts)))
    if lines:
        blocks.extend(b.chunked_sections(_step_text(s) for s in lines))
    if view.message and phase in ("Failed", "Errored", "Aborted"):
        blocks.append(b.section(f"> {b.escape(b.clip(view.message, 2500))}"))
    if verification is not None and verification.state in ("pending", "running"):
        blocks.append(
            b.context(
                f":mag: Verification {verification.state}"
                + (f": {b.escape(verification.message)}" if verification.message else "")
            )
        )
    elif verification is not None and verification.state in ("passed", "failed"):
        icon = ":white_check_mark:" if verification.state == "passed" else ":x:"
        text = f"{icon} Verification {verification.state}"
        if verification.message:
            text += f": {b.escape(verification.message)}"
        blocks.append(b.section(text))

    buttons: list[b.Block] = []
    if view.active:
        buttons.append(
            b.button(
                "Abort",
                ABORT,
                _value(ns=namespace, promotion=name),
                style="danger",
                confirm=b.confirm_dialog(
                    "Abort this Promotion?",
                    f"Abort `{b.escape(name)}` of *{b.escape(label)}* to *{b.escape(stage_name)}*?",
                    "Abort",
                ),
            )
        )
    if verification is not None and verification.state in ("passed", "failed"):
        buttons.append(
            b.button("Re-verify", REVERIFY, _value(ns=namespace, stage=stage_name, promotion=name))
        )
    for i, nxt in enumerate(view.next_stages[:5]):
        buttons.append(
            b.button(
                f"Promote to {nxt}",
                f"{PROMOTE_NEXT}.{i}",
                _value(
                    ns=namespace, stage=nxt, freight=view.freight, promotion=name, after=stage_name
                ),
                style="primary",
            )
        )
    changes = diff_blocks(diff, view.label) if diff is not None and not diff.unchanged else []
    reserve = (1 if buttons else 0) + len(changes)
    blocks = b.fit(blocks, reserve, overflow="… more steps than fit in one message")
    blocks.extend(changes)
    if buttons:
        blocks.append(b.actions(buttons, block_id=f"promotion/{name}"[:255]))

    text = (
        f"{PHASE_ICON.get(phase, '')} Promotion {b.escape(name)}: {b.escape(label)} to "
        f"{b.escape(stage_name)} — {phase}"
    )
    if view.rollback:
        text = (
            f"{PHASE_ICON.get(phase, '')} Rollback {b.escape(name)}: {b.escape(stage_name)} back "
            f"to {b.escape(label)} — {phase}"
        )
    if total:
        text += f" ({done}/{total} steps)"
    if verification is not None and verification.state not in ("none", "superseded"):
        text += f"; verification {verification.state}"
    return b.message(text, blocks)


def notable_events(
    promotion: Mapping[str, Any], verification: Verification | None
) -> list[tuple[str, Message]]:
    """Thread replies this Promotion has earned so far, each under a stable key (the record
    lists the keys already posted, so a restart posts none twice)."""
    out: list[tuple[str, Message]] = []
    for step in step_lines(promotion):
        if step.kind in ARGOCD_STEPS and step.status in ("Succeeded", "Failed", "Errored"):
            ok = step.status == "Succeeded"
            icon = ":white_check_mark:" if ok else ":x:"
            text = f"{icon} Argo CD sync {'done' if ok else step.status.lower()}"
            text += f" (`{b.escape(step.alias)}`)"
            if step.message:
                text += f": {b.escape(step.message)}"
            out.append((f"argocd/{step.alias}/{step.status}", b.message(text, [b.section(text)])))
        elif step.status in ("Failed", "Errored"):
            text = (
                f":x: Step `{b.escape(step.alias)}` ({b.escape(step.kind)}) {step.status.lower()}"
            )
            if step.message:
                text += f": {b.escape(step.message)}"
            out.append((f"step/{step.alias}/{step.status}", b.message(text, [b.section(text)])))
    if verification is not None and verification.state in ("passed", "failed"):
        passed = verification.state == "passed"
        text = f"{':white_check_mark:' if passed else ':x:'} Verification {verification.state}"
        if verification.message:
            text += f": {b.escape(verification.message)}"
        key = f"verify/{verification.state}/{verification.since}"
        out.append((key, b.message(text, [b.section(text)])))
    return out


# ---- command replies --------------------------------------------------------------------------


def usage(
    reason: str | None = None,
    *,
    allowed: Sequence[str] = (),
    refused: Sequence[str] = (),
    approvable: Sequence[str] = (),
) -> Message:
    """The usage text; for ``/promote help``, also where the asker may promote and approve
    Freight for (the planner's answer, the same as on GitHub)."""
    lines = [*(f"• `{u}`" for u in usage_lines("slash")), FREIGHT_HELP]
    intro = f":warning: {b.escape(reason)}\n" if reason else ""
    text = intro + "Usage:\n" + "\n".join(lines)
    if allowed:
        text += "\nYou may promote to: " + ", ".join(f"`{b.escape(s)}`" for s in allowed) + "."
    if refused:
        text += (
            "\nNot to: "
            + ", ".join(f"`{b.escape(s)}`" for s in refused)
            + " (a Stage's promoters, or the server's defaults, must name you or a group of yours)."
        )
    if approvable:
        text += (
            "\nYou may approve Freight for: "
            + ", ".join(f"`{b.escape(s)}`" for s in approvable)
            + "."
        )
    return b.message(text, [b.section(text)])


def approved(freight: str, stage: str) -> Message:
    """An approval just recorded: the Freight may now be promoted to the Stage."""
    f, s = b.escape(freight), b.escape(stage)
    return say(
        f":white_check_mark: *{f}* is approved for *{s}*: it may be promoted there now, "
        f"whatever upstream verification says (`/promote {f} to {s}`)."
    )


def already_approved(freight: str, stage: str, by: str) -> Message:
    who = f" by {b.escape(by)}" if by else ""
    return say(
        f"*{b.escape(freight)}* was already approved for *{b.escape(stage)}*{who}. "
        "Nothing was changed."
    )


def say(text: str) -> Message:
    return b.message(text, [b.section(text)])


def refused(reason: str) -> Message:
    """A refusal in mrkdwn (the planner's reasons mention the requester: ``<@U2> may not``).

    Refusals are ephemeral, seen by the requester alone, so a mention in them notifies no one;
    what the cluster said in one is escaped by the caller."""
    return say(f":no_entry: {reason}. Nothing was changed.")


def unmapped_channel(channel: str | None, projects: Sequence[str]) -> Message:
    """A command typed in a channel no project names (and no default project is set)."""
    where = f"`{b.escape(channel)}`" if channel else "this conversation"
    listed = ", ".join(f"`{b.escape(p)}`" for p in projects) or "none yet"
    example = projects[0] if projects else "PROJECT"
    return say(
        f":compass: No project is mapped to this channel. Projects: {listed}. To map it, "
        f"annotate the project's namespace: `kubectl annotate namespace {b.escape(example)} "
        f"longshoreman.dev/slack-channels={where.strip('`')}`. Nothing was changed."
    )


def several_projects(projects: Sequence[str]) -> Message:
    """A command typed in a channel that several projects name."""
    listed = ", ".join(f"`{b.escape(p)}`" for p in projects)
    return say(
        f":compass: This channel belongs to several projects ({listed}); name the Stage with "
        f"its project, as in `/promote latest to {b.escape(projects[0])}/STAGE`. "
        "Nothing was changed."
    )


def _environment(link: EnvironmentLink | None) -> str:
    """`` · environment <page|name>`` for a Stage that is a GitHub environment."""
    if link is None:
        return ""
    name = b.escape(link.name)
    shown = f"<{link.pages[0][1]}|{name}>" if link.pages else name
    opened = b.link(link.url, "open") if link.url else None
    return f" · environment {shown}" + (f" ({opened})" if opened else "")


def status_table(rows: Sequence[StageView], namespace: str) -> Message:
    if not rows:
        return say(f"No Stages in project `{b.escape(namespace)}`.")
    header = f"*Stages in `{b.escape(namespace)}`*"
    lines = [
        f"*{b.escape(r.stage)}* · Freight `{b.escape(r.freight)}` · running `{b.escape(r.running)}`"
        f" · {r.queued} queued · {b.escape(r.health)} · verification "
        f"{b.escape(r.verification)}{_environment(r.environment)}"
        + (f" · :snowflake: {b.escape(r.window)}" if r.window else "")
        for r in rows
    ]
    text = header + "\n" + "\n".join(lines)
    return b.message(text, [b.section(header), *b.chunked_sections(lines)])


# Commits listed per range in a Slack message; the rest are counted (the compare link has them).
DIFF_COMMITS = 10


def _link(url: str, text: str) -> str:
    safe = neutral.link_url(url)
    return f"<{safe}|{neutral.mrkdwn(text)}>" if safe else neutral.mrkdwn(text)


def freight_diff_lines(diff: FreightDiff, label: FreightLabel) -> list[str]:
    """A Freight diff as mrkdwn lines: a header, each changed artifact old -> new, the newest
    commits of each range (the rest counted) and the merged pull requests."""
    back = " (a rollback: it goes backwards and removes what is listed)" if diff.backwards else ""
    header = f"*Freight `{b.escape(label.short)}` into Stage `{b.escape(diff.stage)}`*{back}"
    if diff.unchanged:
        return [header, "Nothing changes: the Stage runs it already."]
    lines = [header]
    for row in rows(diff, DIFF_COMMITS):
        old, new = (f"`{b.escape(v)}`" if v else "(none)" for v in (row.old, row.new))
        count = f", {_link(row.compare_url, row.count)}" if row.count else ""
        lines.append(f"• {row.kind} `{b.escape(row.name)}`: {old} → {new}{count}")
        for commit in row.commits:
            refs = " ".join(_link(p.url, f"#{p.number}") for p in commit.pulls)
            by = f" · {b.escape(commit.author)}" if commit.author else ""
            lines.append(
                f"    {_link(commit.url, commit.sha[:7])} {b.escape(commit.summary)}{by}"
                + (f" {refs}" if refs else "")
            )
        if row.more:
            lines.append(f"    … and {row.more} more")
    merged = merged_pulls(diff)
    if merged:
        listed = [
            f"{_link(p.url, f'#{p.number}')} {b.escape(p.title)}" for p in merged[:DIFF_COMMITS]
        ]
        more = f" and {len(merged) - DIFF_COMMITS} more" if len(merged) > DIFF_COMMITS else ""
        lines.append("Pull requests: " + ", ".join(listed) + more)
    return lines


def freight_diff_message(diff: FreightDiff, label: FreightLabel) -> Message:
    """``/diff``'s answer: :func:`freight_diff_lines` within Block Kit's limits."""
    lines = freight_diff_lines(diff, label)
    return b.message("\n".join(lines), b.chunked_sections(lines))


# Sections a diff may take inside another message (a confirmation, an announcement), so its
# own blocks and buttons always fit beside it.
DIFF_BLOCKS = 10


def diff_blocks(diff: FreightDiff | None, label: FreightLabel) -> list[b.Block]:
    """A diff's sections for a message that shows it beside its own blocks."""
    if diff is None:
        return []
    sections = b.chunked_sections(freight_diff_lines(diff, label))
    if len(sections) > DIFF_BLOCKS:
        sections = [*sections[: DIFF_BLOCKS - 1], b.context("… (see `/promote diff`)")]
    return sections


def duration_text(seconds: float) -> str:
    """``30 seconds``, ``5 minutes``, ``1 minute 30 seconds``: the real time, not a rounding."""
    total = max(1, round(seconds))

    def unit(n: int, name: str) -> str:
        return f"{n} {name}{'s' if n != 1 else ''}"

    minutes, rest = divmod(total, 60)
    if not minutes:
        return unit(rest, "second")
    return unit(minutes, "minute") + (f" {unit(rest, 'second')}" if rest else "")


def _artifacts(freight: Mapping[str, Any]) -> list[str]:
    """What the Freight holds, its URLs without credentials (Freight written with kubectl may
    carry them)."""

    def url(artifact: Mapping[str, Any]) -> str:
        return without_credentials(str(artifact.get("repoURL") or ""))

    out = [
        f"`{url(image)}:{image.get('tag', '')}`"
        for image in freight.get("images") or ()
        if isinstance(image, Mapping)
    ]
    out += [
        f"`{url(chart)}{'/' + str(chart['name']) if chart.get('name') else ''}"
        f":{chart.get('version', '')}`"
        for chart in freight.get("charts") or ()
        if isinstance(chart, Mapping)
    ]
    out += [
        f"`{url(commit)}` @ `{str(commit.get('tag') or commit.get('id', ''))[:12]}`"
        for commit in freight.get("commits") or ()
        if isinstance(commit, Mapping)
    ]
    out += [
        f"`{artifact.get('subscriptionName', '')}` `{artifact.get('version', '')}`"
        for artifact in freight.get("artifacts") or ()  # generic subscriptions'
        if isinstance(artifact, Mapping)
    ]
    return out


def freight_available(
    namespace: str, stage: str, freight: Mapping[str, Any], diff: FreightDiff | None = None
) -> Message:
    """ "New Freight X is available to STAGE", what it holds, what it changes there (``diff``),
    and a Promote button (which goes through the usual authorization and confirmation, as
    ``/promote X to STAGE`` would)."""
    name = str(meta(freight).get("name") or "")
    label = str(freight.get("alias") or "") or name[:SHORT_NAME]
    text = f"New Freight {b.escape(label)} is available to {b.escape(stage)}"
    blocks: list[b.Block] = [
        b.section(f":package: New Freight *{b.escape(label)}* is available to *{b.escape(stage)}*")
    ]
    artifacts = _artifacts(freight)
    facts = [f"Freight `{b.escape(name)}`", *(b.escape(a) for a in artifacts[:10])]
    blocks.append(b.context(b.clip(" · ".join(facts), 2900)))
    blocks += diff_blocks(diff, FreightLabel(name, str(freight.get("alias") or "")))
    blocks.append(
        b.actions(
            [
                b.button(
                    f"Promote to {stage}",
                    PROMOTE,
                    _value(ns=namespace, stage=stage, freight=name),
                    style="primary",
                )
            ],
            block_id=f"freight/{name}/{stage}"[:255],
        )
    )
    return b.message(text, blocks)


def confirm_prompt(
    pending: PendingPromotion,
    freight_label: str,
    ttl: float,
    diff: FreightDiff | None = None,
) -> Message:
    text = (
        f"Promote *{b.escape(freight_label)}* to *{b.escape(pending.stage)}*? Stage "
        f"`{b.escape(pending.stage)}` asks for confirmation. This prompt expires in "
        f"{duration_text(ttl)}."
    )
    value = pending.to_value()
    return b.message(
        text,
        [
            b.section(text),
            *diff_blocks(diff, FreightLabel(pending.freight, freight_label)),
            b.actions(
                [
                    b.button(
                        "Confirm",
                        CONFIRM,
                        value,
                        style="primary",
                        confirm=b.confirm_dialog(
                            f"Promote to {pending.stage}?",
                            f"*{b.escape(freight_label)}* will be promoted to "
                            f"*{b.escape(pending.stage)}*.",
                            "Promote",
                        ),
                    ),
                    b.button("Cancel", CANCEL, value),
                ]
            ),
        ],
    )
