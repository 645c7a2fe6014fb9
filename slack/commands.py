"""``/promote`` decided purely: the slash-command grammar and what a command should do.

One slash command carries every chat command as its text (``/promote abort test``); the words
mean exactly what they mean in a GitHub comment because both parse with
:func:`promoter.chatops.parse_command`. :func:`plan` takes the project's snapshot, the user and
their user groups and returns a plain decision; :mod:`slack.app` carries it out.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from promoter.chatops import (
    SLACK_CONFIRM,
    SLACK_PROMOTERS,
    Command,
    CommandError,
    Snapshot,
    StageRow,
    listed,
    parse_command,
    resolve_freight,
    slack_may_act,
    stage_rows,
)
from promoter.model import describe_freight, meta, name_of, namespace_of
from promoter.stages import phase_of

SLASH = "/promote"
SUBCOMMANDS = ("abort", "status", "verify", "help")
USAGE = (
    "`/promote FREIGHT to STAGE` (FREIGHT: a name, alias, commit SHA prefix or `latest`)",
    "`/promote abort PROMOTION|STAGE`",
    "`/promote status [STAGE]`",
    "`/promote verify STAGE`",
    "`/promote help`",
)

_EXPRESSION = re.compile(r"\$\{[{%]")


def parse_slash(text: str) -> Command:
    """The command in ``/promote``'s text. Raises CommandError (never anything else).

    The first word picks a subcommand unless the text reads ``X to STAGE``: a Freight aliased
    ``status`` can still be promoted.
    """
    if _EXPRESSION.search(text):
        raise CommandError("arguments are names, not expressions: `${{` and `${%` are refused")
    words = text.split()
    if not words:
        raise CommandError("tell me what to do")
    first = words[0].lower()
    if first in SUBCOMMANDS and not (len(words) > 1 and words[1] == "to"):
        command = parse_command(first, " ".join(words[1:]))
        if command.name == "abort" and command.target is None:
            raise CommandError("which Promotion or Stage should I abort?")
        return command
    return parse_command("promote", " ".join(words))


def reason_of(error: CommandError) -> str:
    """The error without the comment-flavoured usage (``/abort ...``) that chatops appends."""
    return str(error).split(" Usage: ")[0]


# ---- confirmations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingPromotion:
    """A promotion waiting for its requester's Confirm; travels in the button's value, so any
    replica can carry it out and nothing is stored until it is confirmed."""

    namespace: str
    stage: str
    freight: str
    user: str
    expires_at: float
    nonce: str

    @classmethod
    def new(
        cls, namespace: str, stage: str, freight: str, user: str, now: float, ttl: float
    ) -> PendingPromotion:
        return cls(namespace, stage, freight, user, now + ttl, secrets.token_hex(8))

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def to_value(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_value(cls, value: str) -> PendingPromotion:
        """Raises ValueError on anything that is not one of our values."""
        data = json.loads(value)
        if not isinstance(data, Mapping):
            raise ValueError("not an object")
        try:
            return cls(
                namespace=str(data["namespace"]),
                stage=str(data["stage"]),
                freight=str(data["freight"]),
                user=str(data["user"]),
                expires_at=float(data["expires_at"]),
                nonce=str(data["nonce"]),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"missing {e}") from None


# ---- decisions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refuse:
    reason: str


@dataclass(frozen=True)
class AskConfirm:
    stage: str
    freight: str
    freight_label: str


@dataclass(frozen=True)
class DoPromote:
    stage: str
    freight: str
    freight_label: str


@dataclass(frozen=True)
class DoAbort:
    promotion: str
    stage: str


@dataclass(frozen=True)
class DoReverify:
    stage: str


@dataclass(frozen=True)
class ShowStatus:
    rows: tuple[StageRow, ...]


@dataclass(frozen=True)
class ShowHelp:
    pass


Plan = Refuse | AskConfirm | DoPromote | DoAbort | DoReverify | ShowStatus | ShowHelp


def promoters_of(stage: Mapping[str, Any] | None, defaults: Sequence[str]) -> list[str]:
    return listed((meta(stage or {}).get("annotations") or {}).get(SLACK_PROMOTERS)) or list(
        defaults
    )


def groups_to_resolve(stage: Mapping[str, Any] | None, defaults: Sequence[str]) -> list[str]:
    """The user groups whose members must be looked up to decide for this Stage."""
    return [p for p in promoters_of(stage, defaults) if p.startswith("S")]


def needs_confirmation(stage: Mapping[str, Any]) -> bool:
    return str((meta(stage).get("annotations") or {}).get(SLACK_CONFIRM, "")).lower() == "true"


def stage_of_target(command: Command, snapshot: Snapshot) -> str | None:
    """The Stage whose promoters decide on ``command`` (before any user-group lookups)."""
    if command.name in ("promote", "verify"):
        return command.stage
    if command.name == "abort" and command.target:
        for p in snapshot.promotions:
            if name_of(p) == command.target:
                return str((p.get("spec") or {}).get("stage") or "")
        return command.target
    return None


def authorize(
    stage: Mapping[str, Any] | None,
    stage_name: str,
    user: str,
    user_groups: Sequence[str],
    defaults: Sequence[str],
) -> Refuse | None:
    target = stage if stage is not None else {"metadata": {"name": stage_name}}
    decision = slack_may_act(target, user, user_groups, defaults)
    return None if decision.allowed else Refuse(decision.reason)


def plan(
    command: Command,
    snapshot: Snapshot,
    user: str,
    user_groups: Sequence[str] = (),
    defaults: Sequence[str] = (),
    now: datetime | None = None,
) -> Plan:
    """What ``command`` from ``user`` should do, given the project as it is at ``now`` (which
    decides whether a soaking Freight is available yet for ``latest``)."""
    ns = snapshot.namespace
    if command.name == "help":
        return ShowHelp()
    if command.name == "status":
        stages = snapshot.stages
        if command.stage:
            stages = [s for s in stages if name_of(s) == command.stage]
            if not stages:
                return Refuse(f"no Stage named `{command.stage}` in project `{ns}`")
        return ShowStatus(tuple(stage_rows(stages, snapshot.promotions)))
    if command.name in ("promote", "verify"):
        stage_name = command.stage or ""
        stage = snapshot.stage(stage_name)
        if stage is None:
            return Refuse(f"no Stage named `{stage_name}` in project `{ns}`")
        refused = authorize(stage, stage_name, user, user_groups, defaults)
        if refused:
            return refused
        if command.name == "verify":
            return DoReverify(stage_name)
        try:
            freight = resolve_freight(command.freight or "latest", snapshot.freight, stage, now)
        except LookupError as e:
            return Refuse(str(e))
        label = describe_freight(freight)
        if needs_confirmation(stage):
            return AskConfirm(stage_name, name_of(freight), label)
        return DoPromote(stage_name, name_of(freight), label)
    if command.name == "abort":
        return _plan_abort(command.target or "", snapshot, user, user_groups, defaults)
    return Refuse(f"`{command.name}` is not a Slack command")


def _plan_abort(
    target: str, snapshot: Snapshot, user: str, user_groups: Sequence[str], defaults: Sequence[str]
) -> Plan:
    ns = snapshot.namespace
    promotion = next((p for p in snapshot.promotions if name_of(p) == target), None)
    if promotion is None:
        stage = snapshot.stage(target)
        if stage is None:
            return Refuse(f"no Promotion or Stage named `{target}` in project `{ns}`")
        mine = [
            p
            for p in snapshot.promotions
            if (p.get("spec") or {}).get("stage") == target
            and (namespace_of(p) or ns) == ns
            and not phase_of(p).terminal
        ]
        if not mine:
            return Refuse(f"nothing to abort: no Promotion is running or queued for `{target}`")
        # The running one first; else the oldest queued one.
        mine.sort(key=lambda p: (phase_of(p).value != "Running", _created(p), name_of(p)))
        promotion = mine[0]
    stage_name = str((promotion.get("spec") or {}).get("stage") or "")
    refused = authorize(snapshot.stage(stage_name), stage_name, user, user_groups, defaults)
    if refused:
        return refused
    phase = phase_of(promotion)
    if phase.terminal:
        return Refuse(f"Promotion `{name_of(promotion)}` already finished ({phase.value})")
    return DoAbort(name_of(promotion), stage_name)


def _created(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("creationTimestamp") or "")
