"""Slack's side of a command: the facts it gathers and the Confirm that travels in a button.

One slash command carries every chat command as its text (``/promote abort test``), parsed by
:func:`promoter.chat.grammar.parse_slash` with the same grammar as a GitHub comment; what it does is
decided by :func:`promoter.chat.planner.plan`, the planner every front end shares. This module only
says how Slack answers "may this user act on this Stage" (user IDs and user groups, with the
server's default promoters) and whether a Stage wants a Confirm first, and carries a pending
Confirm in the button's value; :mod:`slack.app` gathers the facts and carries out the decision.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from promoter.chat.planner import Decision, deciding_list, listed, stage_annotation
from promoter.resources import annotations as ann
from promoter.resources.model import meta, name_of, namespace_of

# ---- confirmations ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
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


# ---- facts -----------------------------------------------------------------------------------


def slack_may_act(
    stage: Mapping[str, Any],
    user_id: str,
    user_groups: Iterable[str] = (),
    default_promoters: Sequence[str] = (),
    *,
    approve: bool = False,
) -> Decision:
    """A Slack user may act when listed (user ID or user-group ID) in the Stage's annotation,
    else in the server-wide default list; an empty default allows everyone. With ``approve``,
    the Stage's ``slack-approvers`` list decides when it has one."""
    key = deciding_list(
        stage, promoters=ann.SLACK_PROMOTERS, approvers=ann.SLACK_APPROVERS, approve=approve
    )
    allowed = listed(stage_annotation(stage, key))
    if key == ann.SLACK_APPROVERS:
        what = "approve Freight for"
    else:
        allowed = allowed or list(default_promoters)
        what = "act on"
    if not allowed:
        return Decision(True, "no promoter list configured")
    groups = set(user_groups)
    for entry in allowed:
        if entry == user_id or entry in groups:
            return Decision(True, "listed as an approver" if approve else "listed as a promoter")
    project = namespace_of(stage)
    where = f" in project {project}" if project else ""
    return Decision(False, f"<@{user_id}> may not {what} Stage {name_of(stage)}{where}")


def promoters_of(stage: Mapping[str, Any] | None, defaults: Sequence[str]) -> list[str]:
    return listed((meta(stage or {}).get("annotations") or {}).get(ann.SLACK_PROMOTERS)) or list(
        defaults
    )


def approvers_of(stage: Mapping[str, Any] | None) -> list[str]:
    return listed((meta(stage or {}).get("annotations") or {}).get(ann.SLACK_APPROVERS))


def groups_to_resolve(stages: Sequence[Mapping[str, Any]], defaults: Sequence[str]) -> list[str]:
    """The user groups whose members must be looked up to decide for these Stages (with none,
    the defaults: an abort of a Stage that is gone is still decided by them)."""
    wanted: dict[str, None] = {}
    consulted: list[Mapping[str, Any] | None] = [*stages] if stages else [None]
    for stage in consulted:
        entries = [*promoters_of(stage, defaults), *approvers_of(stage)]
        wanted.update((p, None) for p in entries if p.startswith("S"))
    return list(wanted)


def authored_on_slack(freight: Mapping[str, Any]) -> bool | None:
    """Slack's answer to "did this user author a change the Freight carries": no change, no;
    otherwise it cannot tell (None), and the planner refuses. A Slack account is no GitHub
    account, and a commit's ``Author:`` line is whatever its committer typed, so neither the
    profile's e-mail nor the commits' lines may decide it (handlers/authors.py asks GitHub)."""
    return None if freight.get("commits") else False


def needs_confirmation(stage: Mapping[str, Any]) -> bool:
    return str((meta(stage).get("annotations") or {}).get(ann.SLACK_CONFIRM, "")).lower() == "true"


def authorizer(
    user: str, user_groups: Sequence[str], defaults: Sequence[str], *, approve: bool = False
) -> Callable[[Mapping[str, Any] | None], Decision]:
    """Slack's answer to "may ``user`` act on this Stage" (``None``: read the project, which
    anyone in the workspace may: ``/promote status``); with ``approve``, "may they approve
    Freight for it"."""

    def may_act(stage: Mapping[str, Any] | None) -> Decision:
        if stage is None:
            return Decision(True, "reading is open to the workspace")
        return slack_may_act(stage, user, user_groups, defaults, approve=approve)

    return may_act
