"""Block Kit building blocks that stay within Slack's limits (pure; no I/O).

Slack rejects a whole message (``invalid_blocks``) when one element is over a limit, so every
builder here truncates rather than trusting its input. Limits:
https://api.slack.com/reference/block-kit/blocks and .../block-elements#button
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from promoter.chat import neutral

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_CONTEXT_TEXT = 3000
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_ACTION_ID = 255
MAX_BUTTON_VALUE = 2000
MAX_CONFIRM_TITLE = 100
MAX_CONFIRM_TEXT = 300
MAX_CONFIRM_BUTTON = 30
# The top-level `text` is the notification and screen-reader fallback; Slack truncates
# very long text and recommends staying under 4000 characters.
MAX_FALLBACK_TEXT = 4000

Block = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    """A message to send: plain-text fallback plus (optional) blocks."""

    text: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"


def escape(text: str) -> str:
    """Text from others in mrkdwn: the one neutraliser's Slack form (promoter.chat.neutral)."""
    return neutral.mrkdwn(text)


def link(url: str, title: str) -> str | None:
    """``<url|title>`` for a URL from others; None when it is not an http(s) URL."""
    safe = neutral.link_url(url)
    return f"<{escape(safe)}|{escape(title)}>" if safe is not None else None


def section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, MAX_SECTION_TEXT)}}


def context(*texts: str) -> Block:
    return {
        "type": "context",
        "elements": [
            {"type": "mrkdwn", "text": clip(t, MAX_CONTEXT_TEXT)}
            for t in texts[:MAX_CONTEXT_ELEMENTS]
            if t
        ],
    }


def confirm_dialog(title: str, text: str, confirm: str, deny: str = "Cancel") -> dict[str, Any]:
    return {
        "title": {"type": "plain_text", "text": clip(title, MAX_CONFIRM_TITLE)},
        "text": {"type": "mrkdwn", "text": clip(text, MAX_CONFIRM_TEXT)},
        "confirm": {"type": "plain_text", "text": clip(confirm, MAX_CONFIRM_BUTTON)},
        "deny": {"type": "plain_text", "text": clip(deny, MAX_CONFIRM_BUTTON)},
        # The dialog's confirm button is red: these buttons change environments.
        "style": "danger",
    }


def button(
    text: str,
    action_id: str,
    value: str,
    *,
    style: Literal["primary", "danger"] | None = None,
    confirm: dict[str, Any] | None = None,
) -> Block:
    if len(value) > MAX_BUTTON_VALUE:
        # Values are ours (JSON we build); truncating would corrupt them, so refuse loudly.
        raise ValueError(f"button value of {len(value)} characters is over {MAX_BUTTON_VALUE}")
    out: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": clip(text, MAX_BUTTON_TEXT), "emoji": True},
        "action_id": action_id[:MAX_ACTION_ID],
        "value": value,
    }
    if style:
        out["style"] = style
    if confirm:
        out["confirm"] = confirm
    return out


def actions(elements: Sequence[Block], block_id: str | None = None) -> Block:
    out: Block = {"type": "actions", "elements": list(elements[:MAX_ACTIONS_ELEMENTS])}
    if block_id:
        out["block_id"] = block_id[:255]
    return out


def chunked_sections(lines: Iterable[str], limit: int = MAX_SECTION_TEXT) -> list[Block]:
    """Lines packed into as few sections as fit ``limit`` characters each."""
    out: list[Block] = []
    current: list[str] = []
    size = 0
    for line in lines:
        line = clip(line, limit)
        if current and size + 1 + len(line) > limit:
            out.append(section("\n".join(current)))
            current, size = [], 0
        current.append(line)
        size += len(line) + (1 if size else 0)
    if current:
        out.append(section("\n".join(current)))
    return out


def fit(blocks: Sequence[Block], reserve: int = 0, *, overflow: str = "…") -> list[Block]:
    """At most ``MAX_BLOCKS - reserve`` blocks; when cut, the last one says so."""
    room = MAX_BLOCKS - reserve
    if len(blocks) <= room:
        return list(blocks)
    return [*blocks[: room - 1], context(overflow)]


def message(text: str, blocks: Sequence[Block] = ()) -> Message:
    return Message(clip(text, MAX_FALLBACK_TEXT), tuple(fit(blocks)))
