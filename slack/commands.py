"""``/promote`` decided purely: what a Slack command should do.

One slash command carries every chat command as its text (``/promote abort test``), parsed by
:func:`promoter.chatops.parse_slash` with the same grammar as a GitHub comment; the rules both
front ends share (Freight lookup, availability, the abort rule) are the core's. :func:`plan`
takes the project's snapshot, the user and their user groups and returns a plain decision;
:mod:`slack.app` carries it out.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from promoter.chatops import (
    SLACK_CONFIRM,
    SLACK_PROMOTERS,
    Command,
    Refusal,
    Snapshot,
    StageRow,
    abort_targets,
    freight_label,
    listed,
    no_verification,
    not_available,
    resolve_freight,
    slack_may_act,
    stage_rows,
)
from promoter.model import meta, name_of

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
    label: str = ""  # how the Freight is shown (its alias), for a hint that works when pasted

    @classmethod
    def new(
        cls,
        namespace: str,
        stage: str,
        freight: str,
        user: str,
        now: float,
        ttl: float,
        label: str = "",
    ) -> PendingPromotion:
        return cls(namespace, stage, freight, user, now + ttl, secrets.token_hex(8), label)

    def retry_command(self) -> str:
        """The command that asks again: the alias or the full name, both found by lookups."""
        return f"/promote {self.label or self.freight} to {self.stage}"

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
                label=str(data.get("label") or ""),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"missing {e}") from None


# ---- decisions --------------------------------------------------------------------------------


Refuse = Refusal


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
    promotions: tuple[str, ...]
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
        return ShowStatus(tuple(stage_rows(stages, snapshot.promotions, snapshot.freight)))
    if command.name in ("promote", "verify"):
        stage_name = command.stage or ""
        stage = snapshot.stage(stage_name)
        if stage is None:
            return Refuse(f"no Stage named `{stage_name}` in project `{ns}`")
        refused = authorize(stage, stage_name, user, user_groups, defaults)
        if refused:
            return refused
        if command.name == "verify":
            unverifiable = no_verification(stage)
            return Refuse(unverifiable) if unverifiable else DoReverify(stage_name)
        try:
            freight = resolve_freight(command.freight or "latest", snapshot.freight, stage, now)
        except LookupError as e:
            return Refuse(str(e.args[0] if e.args else e))
        # Refused before any Confirm is offered: a click must never be asked for in vain.
        unavailable = not_available(stage, freight, now)
        if unavailable:
            return Refuse(unavailable)
        label = freight_label(freight)
        if needs_confirmation(stage):
            return AskConfirm(stage_name, name_of(freight), label)
        return DoPromote(stage_name, name_of(freight), label)
    if command.name == "abort":
        return _plan_abort(command, snapshot, user, user_groups, defaults)
    return Refuse(f"`{command.name}` is not a Slack command")


def _plan_abort(
    command: Command,
    snapshot: Snapshot,
    user: str,
    user_groups: Sequence[str],
    defaults: Sequence[str],
) -> Plan:
    targets = abort_targets(snapshot, command.target or "", queued=command.queued)
    if isinstance(targets, Refusal):
        return targets
    stage_name = str((targets[0].get("spec") or {}).get("stage") or "")
    refused = authorize(snapshot.stage(stage_name), stage_name, user, user_groups, defaults)
    if refused:
        return refused
    return DoAbort(tuple(name_of(p) for p in targets), stage_name)
