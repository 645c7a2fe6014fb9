"""Chat commands, decided purely: grammar, Freight resolution, authorization and status rows.

Both front ends (GitHub comments in ``handlers/``, Slack slash commands in ``slack/``) parse
with these functions and act through the :class:`PromotionService` port, so a command means the
same thing wherever it is typed. Arguments are data: text that looks like an expression
(``${{`` or ``${%``) is refused, never evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from promoter.model import GROUP, meta, name_of, namespace_of
from promoter.stages import available_to, freight_created

COMMANDS = ("promote", "abort", "status", "verify", "help")

USAGE = {
    "promote": "/promote [FREIGHT] to STAGE  (FREIGHT: name, alias, commit SHA prefix or `latest`)",
    "abort": "/abort [PROMOTION | STAGE]",
    "status": "/status [STAGE]",
    "verify": "/verify STAGE",
    "help": "/help",
}

_EXPRESSION = re.compile(r"\$\{[{%]")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,252}$")


class CommandError(ValueError):
    """A command of ours, malformed; the message includes its usage."""


@dataclass(frozen=True)
class Command:
    name: Literal["promote", "abort", "status", "verify", "help"]
    freight: str | None = None  # promote: None means "the Freight of this PR's merge commit"
    stage: str | None = None
    target: str | None = None  # abort: a Promotion or Stage name
    raw: str = ""


def _check_arg(value: str, command: str) -> str:
    if _EXPRESSION.search(value):
        raise CommandError(
            f"arguments are names, not expressions: {value!r} is refused. Usage: {USAGE[command]}"
        )
    if not _NAME.match(value):
        raise CommandError(f"{value!r} is not a valid name. Usage: {USAGE[command]}")
    return value


def parse_command(name: str, args: str) -> Command:
    """Parse one command's arguments (``name`` without the slash). Raises CommandError."""
    words = args.split()
    raw = f"/{name} {args}".strip()
    if name in USAGE and _EXPRESSION.search(args):
        raise CommandError(
            f"arguments are names, not expressions: {args!r} is refused. Usage: {USAGE[name]}"
        )
    if name == "promote":
        if "to" not in words:
            raise CommandError(f"missing `to STAGE`. Usage: {USAGE['promote']}")
        i = words.index("to")
        before, after = words[:i], words[i + 1 :]
        if len(after) != 1 or len(before) > 1:
            raise CommandError(f"expected one Freight and one Stage. Usage: {USAGE['promote']}")
        freight = _check_arg(before[0], name) if before else None
        return Command("promote", freight=freight, stage=_check_arg(after[0], name), raw=raw)
    if name == "abort":
        if len(words) > 1:
            raise CommandError(f"too many arguments. Usage: {USAGE['abort']}")
        return Command("abort", target=_check_arg(words[0], name) if words else None, raw=raw)
    if name == "status":
        if len(words) > 1:
            raise CommandError(f"too many arguments. Usage: {USAGE['status']}")
        return Command("status", stage=_check_arg(words[0], name) if words else None, raw=raw)
    if name == "verify":
        if len(words) != 1:
            raise CommandError(f"expected one Stage. Usage: {USAGE['verify']}")
        return Command("verify", stage=_check_arg(words[0], name), raw=raw)
    if name == "help":
        return Command("help", raw=raw)
    raise CommandError(f"unknown command /{name}")


@dataclass(frozen=True)
class ParsedLine:
    command: Command | None
    error: str | None = None
    line: str = ""


def parse_comment(body: str) -> list[ParsedLine]:
    """Commands in a PR comment, in order: lines starting with one of ours.

    Lines inside fenced code blocks and ``>`` quotes are ignored, and so are other slash words
    (``/cc``, ``/lgtm``): they are not ours. A malformed command of ours yields an error entry.
    """
    out: list[ParsedLine] = []
    fence: str | None = None
    for raw_line in body.splitlines():
        line = raw_line.strip()
        if fence is not None:
            if line.startswith(fence):
                fence = None
            continue
        if line.startswith("```") or line.startswith("~~~"):
            fence = line[:3]
            continue
        if not line.startswith("/"):
            continue
        word, _, rest = line[1:].partition(" ")
        word = word.strip()
        if word not in COMMANDS:
            continue
        try:
            out.append(ParsedLine(parse_command(word, rest.strip()), line=line))
        except CommandError as e:
            out.append(ParsedLine(None, str(e), line=line))
    return out


def help_text(prefix: str = "/") -> str:
    return "\n".join(f"- `{u.replace('/', prefix, 1)}`" for u in USAGE.values())


# ---- Freight ----------------------------------------------------------------------------------


def resolve_freight(
    ref: str,
    freights: Sequence[Mapping[str, Any]],
    stage: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Mapping[str, Any]:
    """A Freight by name, alias, commit SHA prefix (7+ hex) or ``latest`` (newest available to
    ``stage``). Raises LookupError with a message a user can act on."""
    if ref == "latest":
        if stage is None:
            raise LookupError("`latest` needs a Stage")
        candidates = [f for f in freights if available_to(stage, f, now)]
        if not candidates:
            raise LookupError(f"no Freight is available to Stage {name_of(stage)!r} yet")
        return max(candidates, key=lambda f: (freight_created(f), name_of(f)))
    for f in freights:
        if name_of(f) == ref:
            return f
    for f in freights:
        if f.get("alias") == ref:
            return f
    if re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
        matches = [
            f
            for f in freights
            if any(str(c.get("id", "")).startswith(ref.lower()) for c in f.get("commits") or ())
        ]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(sorted(name_of(f)[:12] for f in matches))
            raise LookupError(f"commit {ref} is in several Freight ({names}); use a name or alias")
    raise LookupError(f"no Freight named, aliased or with a commit starting {ref!r}")


def freight_for_commit(sha: str, freights: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for f in freights:
        if any(c.get("id") == sha for c in f.get("commits") or ()):
            return f
    return None


# ---- authorization ----------------------------------------------------------------------------

GITHUB_PROMOTERS = f"{GROUP}/github-promoters"
SLACK_PROMOTERS = f"{GROUP}/slack-promoters"
SLACK_CONFIRM = f"{GROUP}/slack-confirm"
SLACK_CHANNEL = f"{GROUP}/slack-channel"


def listed(annotation: str | None) -> list[str]:
    if not annotation:
        return []
    return [p.strip() for p in re.split(r"[,\s]+", annotation) if p.strip()]


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


def github_may_act(
    stage: Mapping[str, Any], user: str, permission: str, user_teams: Iterable[str] = ()
) -> Decision:
    """A GitHub user may act on a Stage with write/maintain/admin on the repo, and — when the
    Stage lists promoters in its annotation — only if named there (user or ``org/team``)."""
    if permission not in ("write", "maintain", "admin"):
        return Decision(
            False, f"@{user} needs write access to this repository (has {permission or 'none'})"
        )
    allowed = listed((meta(stage).get("annotations") or {}).get(GITHUB_PROMOTERS))
    if not allowed:
        return Decision(True, "repository writer")
    teams = {t.lower() for t in user_teams}
    for entry in allowed:
        if entry.lower() == user.lower() or entry.lower() in teams:
            return Decision(True, f"listed in {GITHUB_PROMOTERS}")
    return Decision(
        False, f"@{user} is not listed in Stage {name_of(stage)}'s {GITHUB_PROMOTERS} annotation"
    )


def slack_may_act(
    stage: Mapping[str, Any],
    user_id: str,
    user_groups: Iterable[str] = (),
    default_promoters: Sequence[str] = (),
) -> Decision:
    """A Slack user may act when listed (user ID or user-group ID) in the Stage's annotation,
    else in the server-wide default list; an empty default allows everyone."""
    allowed = listed((meta(stage).get("annotations") or {}).get(SLACK_PROMOTERS)) or list(
        default_promoters
    )
    if not allowed:
        return Decision(True, "no promoter list configured")
    groups = set(user_groups)
    for entry in allowed:
        if entry == user_id or entry in groups:
            return Decision(True, "listed as a promoter")
    return Decision(False, f"<@{user_id}> may not act on Stage {name_of(stage)}")


# ---- status -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StageRow:
    stage: str
    freight: str
    running: str
    queued: int
    health: str
    verification: str


def stage_rows(
    stages: Iterable[Mapping[str, Any]], promotions: Iterable[Mapping[str, Any]]
) -> list[StageRow]:
    by_stage: dict[tuple[str | None, str], list[Mapping[str, Any]]] = {}
    for p in promotions:
        by_stage.setdefault((namespace_of(p), (p.get("spec") or {}).get("stage", "")), []).append(p)
    rows = []
    for stage in sorted(stages, key=name_of):
        status = stage.get("status") or {}
        history = status.get("freightHistory") or []
        current = ""
        if history:
            items = history[0].get("items") or {}
            current = ", ".join(
                str(v.get("alias") or v.get("name", ""))[:20] for v in items.values()
            )
        conditions = {c.get("type"): c for c in status.get("conditions") or ()}
        mine = by_stage.get((namespace_of(stage), name_of(stage)), [])
        running = [name_of(p) for p in mine if (p.get("status") or {}).get("phase") == "Running"]
        queued = [p for p in mine if (p.get("status") or {}).get("phase", "Pending") == "Pending"]
        rows.append(
            StageRow(
                stage=name_of(stage),
                freight=current or "-",
                running=running[0] if running else "-",
                queued=len(queued),
                health=str((conditions.get("Healthy") or {}).get("status", "Unknown")),
                verification=str((conditions.get("Verified") or {}).get("reason", "-")),
            )
        )
    return rows


def markdown_table(rows: Sequence[StageRow]) -> str:
    lines = [
        "| Stage | Freight | Running | Queued | Healthy | Verification |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = (r.stage, r.freight, r.running, str(r.queued), r.health, r.verification)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- the port ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromotionRef:
    namespace: str
    name: str
    stage: str
    freight: str
    phase: str = "Pending"
    message: str = ""


@dataclass
class Snapshot:
    """What a command needs to decide: the project's objects, read from the cluster caches."""

    namespace: str
    stages: list[Mapping[str, Any]] = field(default_factory=list)
    freight: list[Mapping[str, Any]] = field(default_factory=list)
    promotions: list[Mapping[str, Any]] = field(default_factory=list)

    def stage(self, name: str) -> Mapping[str, Any] | None:
        return next((s for s in self.stages if name_of(s) == name), None)


class PromotionService(Protocol):
    """What chat front ends may do to the cluster. The app layer implements it over Kubernetes."""

    async def snapshot(self, namespace: str) -> Snapshot: ...

    async def promote(
        self, namespace: str, stage: str, freight: str, *, actor: str
    ) -> PromotionRef: ...

    async def abort(self, namespace: str, promotion: str, *, actor: str) -> PromotionRef: ...

    async def reverify(self, namespace: str, stage: str, *, actor: str) -> None: ...

    async def annotate(self, namespace: str, promotion: str, key: str, value: str) -> None:
        """Record front-end state on a Promotion (a check-run id, a Slack message's ts), so any
        replica continues it after a restart."""
        ...

    def is_leader(self) -> bool:
        """Only the leader posts and updates messages, so no replica posts a duplicate."""
        ...

    def wake_pr(self, url: str) -> int:
        """Wake the Promotions waiting on this pull request; returns how many."""
        ...
