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
from typing import Any, Literal, Protocol, runtime_checkable

from promoter.chat.views import EnvironmentLink, StageView
from promoter.control.policies import ClusterConfig, ProjectConfig
from promoter.control.windows import Schedule
from promoter.errors import InvalidInput
from promoter.resources import annotations as ann
from promoter.resources.model import Phase, describe_freight, meta, name_of, namespace_of
from promoter.resources.stages import (
    Approval,
    approval_of,
    available_to,
    freight_created,
    has_verification,
    phase_of,
    queue_key,
    requests_origin,
)
from promoter.warehouses.freight import normalize_image_url, requested_artifact_freight

COMMANDS = ("promote", "approve", "abort", "status", "verify", "help")
FREIGHT_HELP = (
    "FREIGHT: an alias, a name or a unique prefix of it, a commit SHA prefix (7+ hex), an image "
    "it holds (`ghcr.io/acme/app:1.4.2`, `...@sha256:...`), or `latest` (the newest available "
    "to the Stage)"
)

USAGE = {
    "promote": "/promote [FREIGHT] to STAGE",
    "approve": "/approve FREIGHT for STAGE",
    "abort": "/abort [PROMOTION | STAGE [all]]",
    "status": "/status [STAGE]",
    "verify": "/verify STAGE",
    "help": "/help",
}

_EXPRESSION = re.compile(r"\$\{[{%]")
# Names, aliases, SHAs and image references (``ghcr.io/acme/app:1.4.2``, ``...@sha256:...``).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,252}$")


class CommandError(ValueError):
    """A command of ours, malformed; the message includes its usage."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command, typed or pressed (buttons map to the same commands, see promoter.chat.commands).

    ``cancel`` and the two fields after ``raw`` come only from buttons, never from text.
    """

    name: Literal["promote", "approve", "abort", "status", "verify", "help", "cancel"]
    # promote: None means this PR's merge commit's Freight on GitHub, `latest` elsewhere;
    # approve: always named
    freight: str | None = None
    stage: str | None = None
    target: str | None = None  # abort: a Promotion or Stage name
    queued: bool = False  # abort STAGE all: the queued Promotions too
    raw: str = ""
    confirmed: bool = False  # promote: the requester already pressed Confirm
    after: str | None = None  # promote: a "Promote to NEXT" button's Stage, which it must follow


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
    if name == "approve":
        if "for" not in words:
            raise CommandError(f"missing `for STAGE`. Usage: {USAGE['approve']}")
        i = words.index("for")
        before, after = words[:i], words[i + 1 :]
        if len(after) != 1 or len(before) != 1:
            raise CommandError(f"expected one Freight and one Stage. Usage: {USAGE['approve']}")
        return Command(
            "approve",
            freight=_check_arg(before[0], name),
            stage=_check_arg(after[0], name),
            raw=raw,
        )
    if name == "abort":
        queued = len(words) == 2 and words[1].lower() == "all"
        if len(words) > 2 or (len(words) == 2 and not queued):
            raise CommandError(f"too many arguments. Usage: {USAGE['abort']}")
        target = _check_arg(words[0], name) if words else None
        return Command("abort", target=target, queued=queued, raw=raw)
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


@dataclass(frozen=True, slots=True)
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


# ---- the slash form (Slack) ------------------------------------------------------------------
#
# One slash command, ``/promote``, carries every command as its text (``/promote abort test``):
# the same words as a comment, parsed by :func:`parse_command`, so only the prefix differs.

SLASH = "/promote"
# Approving has a slash command of its own too, so the words read as on GitHub: `/approve X for
# prod` (`/promote approve X for prod` is the same).
APPROVE_SLASH = "/approve"
SUBCOMMANDS = ("approve", "abort", "status", "verify", "help")


def usage_lines(form: Literal["comment", "slash"] = "comment") -> list[str]:
    """The usage of every command, as typed in a comment or after the ``/promote`` slash."""
    if form == "comment":
        return list(USAGE.values())
    lines = []
    for name, usage in USAGE.items():
        if name == "abort":
            # A slash command has no pull request to take the Freight from: the name is needed.
            usage = "/abort PROMOTION | STAGE [all]"
        if name in ("promote", "approve"):
            lines.append(usage)
        else:
            lines.append(f"{SLASH} {usage[1:]}")
    return lines


def help_text(form: Literal["comment", "slash"] = "comment") -> str:
    return "\n".join([*(f"- `{u}`" for u in usage_lines(form)), FREIGHT_HELP])


def parse_slash(text: str) -> Command:
    """The command in ``/promote``'s text. Raises CommandError (never anything else).

    The first word picks a subcommand unless the text reads ``X to STAGE``: a Freight aliased
    ``status`` can still be promoted.
    """
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
    """The error without the comment-form usage that :func:`parse_command` appends."""
    return str(error).split(" Usage: ")[0]


# ---- Freight ----------------------------------------------------------------------------------


def freight_of_name(name: str, freights: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((f for f in freights if name_of(f) == name), None)


# A name prefix shorter than this would match too much to be meant (git's own minimum is 4).
MIN_PREFIX = 4
_HEX = re.compile(r"[0-9a-fA-F]{7,40}")


def image_reference(ref: str) -> tuple[str, str, str] | None:
    """``(repository, tag, digest)`` of ``repo:tag``, ``repo@digest`` or ``repo:tag@digest``;
    None when ``ref`` does not read as an image reference (neither a tag nor a digest; no
    Freight name or alias holds ``:`` or ``@``, so nothing else reads this way)."""
    repo, _, digest = ref.partition("@")
    tag = ""
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = repo.rsplit(":", 1)
    if not repo or not (tag or digest) or (digest and not digest.startswith("sha256:")):
        return None
    return repo, tag, digest


def freight_holding_image(
    ref: str,
    freights: Sequence[Mapping[str, Any]],
    stage: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Mapping[str, Any] | None:
    """The Freight that holds the image ``ref`` names, None when none does (or ``ref`` is no
    image reference). Several (the image with different commits or charts): the newest one
    available to ``stage``, else the newest."""
    parsed = image_reference(ref)
    if parsed is None:
        return None
    repo, tag, digest = parsed
    wanted = normalize_image_url(repo)
    holding = [
        f
        for f in freights
        if any(
            normalize_image_url(str(image.get("repoURL") or "")) == wanted
            and (not tag or image.get("tag") == tag)
            and (not digest or image.get("digest") == digest)
            for image in f.get("images") or ()
        )
    ]
    if stage is not None:
        holding = [f for f in holding if available_to(stage, f, now)] or holding
    return max(holding, key=lambda f: (freight_created(f), name_of(f)), default=None)


def resolve_freight(
    ref: str,
    freights: Sequence[Mapping[str, Any]],
    stage: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Mapping[str, Any]:
    """A Freight by full name, alias, an image it holds (:func:`freight_holding_image`), commit
    SHA prefix (7+ hex), a unique prefix of its name (like a git short hash) or ``latest``
    (newest available to ``stage``). Raises LookupError with a message a user can act on; an
    ambiguous prefix lists the candidates."""
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
    if image_reference(ref) is not None:
        holding = freight_holding_image(ref, freights, stage, now)
        if holding is None:
            raise LookupError(f"no Freight holds the image `{ref}`")
        return holding
    matches: list[Mapping[str, Any]] = []
    if _HEX.fullmatch(ref):
        sha = ref.lower()
        matches += [
            f
            for f in freights
            if any(str(c.get("id", "")).startswith(sha) for c in f.get("commits") or ())
        ]
    if len(ref) >= MIN_PREFIX:
        matches += [f for f in freights if name_of(f).startswith(ref) and f not in matches]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(sorted(f"`{describe_freight(f)}`" for f in matches))
        raise LookupError(
            f"`{ref}` is ambiguous: it could be {names}; use an alias or a longer prefix"
        )
    raise LookupError(f"no Freight named, aliased or with a name or commit starting {ref!r}")


def _current_freight_names(stage: Mapping[str, Any]) -> set[str]:
    history = (stage.get("status") or {}).get("freightHistory") or []
    items = (history[0].get("items") or {}) if history and isinstance(history[0], Mapping) else {}
    return {str(ref.get("name")) for ref in items.values() if isinstance(ref, Mapping)}


def stages_to_announce(
    freight: Mapping[str, Any],
    stages: Iterable[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
    now: datetime | None,
) -> list[Mapping[str, Any]]:
    """The Stages whose Slack channel should hear "New Freight X is available to STAGE".

    Those with a channel (``longshoreman.dev/slack-channel``) that do not auto-promote (an
    auto-promoting Stage just takes it, and its Promotion has its own message), to which the
    Freight is available now, that do not hold it already, and that were not told before
    (the Freight's ``longshoreman.dev/slack-announced`` names them, so a restart or a new
    leader tells nobody twice). Only the newest Freight available to a Stage is news: older
    Freight seen again (a restart lists every Freight) is not, and neither is Freight older
    than what the Stage holds.
    """
    told = ann.announced_to(freight)
    newness = (freight_created(freight), name_of(freight))
    out = []
    for stage in stages:
        name = name_of(stage)
        if not ann.annotations_of(stage).get(ann.SLACK_CHANNEL) or ann.auto_promotes(stage):
            continue
        if name in told or name_of(freight) in _current_freight_names(stage):
            continue
        if not available_to(stage, freight, now):
            continue
        current = _current_freight_names(stage)
        if any(
            (freight_created(f), name_of(f)) > newness
            and (name_of(f) in current or available_to(stage, f, now))
            for f in freights
        ):
            continue
        out.append(stage)
    return out


def requested_freight(
    ref: str,
    stage: Mapping[str, Any],
    warehouses: Sequence[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
) -> dict[str, Any] | None:
    """Freight to create on request (``freightCreationPolicy: Manual``): ``ref`` names an
    image (``repo:tag``, ``repo@digest``) or a commit SHA (7+ hex) that a Manual Warehouse the
    Stage takes Freight from directly has discovered. None when no such Warehouse did."""
    image = image_reference(ref)
    if image is None and not _HEX.fullmatch(ref):
        return None
    direct = {
        str((entry.get("origin") or {}).get("name") or "")
        for entry in (stage.get("spec") or {}).get("requestedFreight") or ()
        if isinstance(entry, Mapping) and (entry.get("sources") or {}).get("direct")
    }
    taken = [str(f.get("alias") or "") for f in freights]
    for warehouse in warehouses:
        spec = warehouse.get("spec") or {}
        if name_of(warehouse) not in direct or spec.get("freightCreationPolicy") != "Manual":
            continue
        if image is not None:
            repo, tag, digest = image
            made = requested_artifact_freight(
                warehouse, repo, tag=tag, digest=digest, alias_taken=taken
            )
        else:
            made = requested_artifact_freight(warehouse, "", commit=ref, alias_taken=taken)
        if made is not None:
            return made
    return None


def not_available(
    stage: Mapping[str, Any], freight: Mapping[str, Any], now: datetime | None
) -> str | None:
    """Why ``freight`` may not be promoted to ``stage`` now, or None when it may.

    Every front end asks this before it asks anything else (a Confirm button included), and the
    cluster port asks again when it creates the Promotion, since time may have passed.
    """
    if available_to(stage, freight, now):
        return None
    label = freight.get("alias") or name_of(freight)
    return (
        f"Freight `{label}` is not available to Stage `{name_of(stage)}` yet "
        "(it must come from a Warehouse the Stage requests directly, be verified in its "
        "upstream Stages and soaked there, if required, or be approved for the Stage: "
        f"`/approve {label} for {name_of(stage)}`)"
    )


def not_approvable(stage: Mapping[str, Any], freight: Mapping[str, Any]) -> str | None:
    """Why ``freight`` cannot be approved for ``stage`` (Kargo's API refuses the same: an
    approval for a Stage that does not request the Freight's origin could never be acted on)."""
    if requests_origin(stage, freight):
        return None
    origin = freight.get("origin") or {}
    return (
        f"Stage `{name_of(stage)}` does not request Freight from origin "
        f"`{origin.get('kind') or 'Warehouse'}/{origin.get('name') or ''}`"
    )


def approval_for(freight: Mapping[str, Any], stage: str) -> Approval | None:
    """The Freight's approval for ``stage``, None when it has none."""
    return approval_of(freight, stage)


def no_verification(stage: Mapping[str, Any]) -> str | None:
    """Why re-verifying ``stage`` would do nothing, or None when it has verification."""
    if has_verification(stage):
        return None
    return (
        f"Stage `{name_of(stage)}` has no verification configured (spec.verification): its "
        "Freight counts as verified once a Promotion succeeds and the Stage is healthy"
    )


def freight_for_commit(sha: str, freights: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for f in freights:
        if any(c.get("id") == sha for c in f.get("commits") or ()):
            return f
    return None


# ---- abort ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """A command refused before anything changed; ``reason`` is told to the user."""

    reason: str


def _active_first(promotions: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pending and Running ones; the running one first, then the queue in its order."""
    active = [p for p in promotions if not phase_of(p).terminal]
    return sorted(active, key=lambda p: (phase_of(p) is not Phase.RUNNING, queue_key(p)))


def abort_targets(
    snapshot: Snapshot,
    target: str | None,
    *,
    queued: bool = False,
    freight: str | None = None,
) -> list[Mapping[str, Any]] | Refusal:
    """What ``/abort`` aborts, the one rule of every front end.

    - a Promotion named: that one; a finished one is refused, saying it already finished;
    - a Stage named: its running Promotion (else its oldest queued one); with ``all`` (``queued``)
      every queued one too;
    - no name (GitHub, on a merged pull request): the active Promotions of that PR's ``freight``.

    Authorizing the caller for each target's Stage is the front end's (its lookups are I/O).
    """
    ns = snapshot.namespace
    if target is None:
        mine = _active_first(p for p in snapshot.promotions if _spec(p, "freight") == freight)
        if not mine:
            return Refusal("no Promotion of this pull request's Freight is running or queued")
        return mine
    named = next((p for p in snapshot.promotions if name_of(p) == target), None)
    if named is not None:
        if phase_of(named).terminal:
            return Refusal(
                f"Promotion `{target}` already finished ({phase_of(named).value}); "
                "there is nothing to abort"
            )
        return [named]
    if snapshot.stage(target) is None:
        return Refusal(f"no Promotion or Stage named `{target}` in project `{ns}`")
    mine = _active_first(p for p in snapshot.promotions if _spec(p, "stage") == target)
    if not mine:
        return Refusal(f"nothing to abort: no Promotion is running or queued in Stage `{target}`")
    return mine if queued else mine[:1]


def _spec(promotion: Mapping[str, Any], key: str) -> str:
    return str((promotion.get("spec") or {}).get(key) or "")


# ---- authorization ----------------------------------------------------------------------------


def listed(annotation: str | None) -> list[str]:
    if not annotation:
        return []
    return [p.strip() for p in re.split(r"[,\s]+", annotation) if p.strip()]


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str


def _annotation(stage: Mapping[str, Any], key: str) -> str | None:
    value = (meta(stage).get("annotations") or {}).get(key)
    return str(value) if value else None


def github_policy(stage: Mapping[str, Any] | None, *, approve: bool = False) -> str:
    """The annotation that says who may act on (or, with ``approve``, approve Freight for) the
    Stage on GitHub: ``github-approvers`` when the Stage has it, else ``github-promoters``."""
    if approve and stage is not None and _annotation(stage, ann.GITHUB_APPROVERS):
        return ann.GITHUB_APPROVERS
    return ann.GITHUB_PROMOTERS


def slack_policy(stage: Mapping[str, Any] | None, *, approve: bool = False) -> str:
    """As :func:`github_policy`, for Slack (``slack-approvers``, else ``slack-promoters``)."""
    if approve and stage is not None and _annotation(stage, ann.SLACK_APPROVERS):
        return ann.SLACK_APPROVERS
    return ann.SLACK_PROMOTERS


def github_may_act(
    stage: Mapping[str, Any],
    user: str,
    permission: str,
    user_teams: Iterable[str] = (),
    *,
    approve: bool = False,
) -> Decision:
    """A GitHub user may act on a Stage with write/maintain/admin on the repo, and — when the
    Stage lists promoters in its annotation — only if named there (user or ``org/team``).

    With ``approve`` (``/approve``), the Stage's approvers decide the same way when it lists
    them, else its promoters: whoever may promote to the Stage may approve for it, as in Kargo.
    """
    if permission not in ("write", "maintain", "admin"):
        return Decision(
            False, f"@{user} needs write access to this repository (has {permission or 'none'})"
        )
    key = github_policy(stage, approve=approve)
    allowed = listed(_annotation(stage, key))
    if not allowed:
        return Decision(True, "repository writer")
    teams = {t.lower() for t in user_teams}
    for entry in allowed:
        if entry.lower() == user.lower() or entry.lower() in teams:
            return Decision(True, f"listed in {key}")
    return Decision(False, f"@{user} is not listed in Stage {name_of(stage)}'s {key} annotation")


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
    key = slack_policy(stage, approve=approve)
    allowed = listed(_annotation(stage, key))
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
    return Decision(False, f"<@{user_id}> may not {what} Stage {name_of(stage)}")


# ---- status -----------------------------------------------------------------------------------


def environment_markdown(link: EnvironmentLink | None) -> str:
    """A Stage's GitHub environment as Markdown: its Deployments page(s), and its URL."""
    if link is None:
        return "-"
    name = link.name.replace("|", "\\|").replace("]", "")
    parts = [f"[{name}]({url})" for _, url in link.pages[:1]] or [name]
    if link.url:
        parts.append(f"([open]({link.url}))")
    return " ".join(parts)


def markdown_table(rows: Sequence[StageView]) -> str:
    # The Environment column only where some Stage is a GitHub environment.
    environments = any(r.environment is not None for r in rows)
    lines = [
        "| Stage | Freight | Running | Queued | Health | Verification |"
        + (" Environment |" if environments else ""),
        "| --- | --- | --- | --- | --- | --- |" + (" --- |" if environments else ""),
    ]
    for r in rows:
        verification = r.verification + (f" · {r.window}" if r.window else "")
        cells = [r.stage, r.freight, r.running, str(r.queued), r.health, verification]
        if environments:
            cells.append(environment_markdown(r.environment))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- the port ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromotionRef:
    namespace: str
    name: str
    stage: str
    freight: str
    phase: str = "Pending"
    message: str = ""

    @classmethod
    def of(cls, promotion: Mapping[str, Any]) -> PromotionRef:
        """The reference to a Promotion object, its phase and message as its status says."""
        spec = promotion.get("spec") or {}
        status = promotion.get("status") or {}
        return cls(
            namespace_of(promotion) or "",
            name_of(promotion),
            str(spec.get("stage", "")),
            str(spec.get("freight", "")),
            str(status.get("phase", "Pending")),
            str(status.get("message", "")),
        )


@dataclass
class Snapshot:
    """What a command needs to decide: the project's objects, read from the cluster caches."""

    namespace: str
    stages: list[Mapping[str, Any]] = field(default_factory=list)
    freight: list[Mapping[str, Any]] = field(default_factory=list)
    promotions: list[Mapping[str, Any]] = field(default_factory=list)
    # The project's Warehouses (with their discovered artifacts), where the port has them:
    # a Manual Warehouse's Freight is made on request from these.
    warehouses: list[Mapping[str, Any]] = field(default_factory=list)
    # Each Stage's promotion windows (its ProjectConfig's and the ClusterConfig's), by name:
    # a Stage without any is always open.
    schedules: Mapping[str, Schedule] = field(default_factory=dict)
    # The project's ProjectConfig and the cluster's ClusterConfig (deep links), where known.
    project_config: ProjectConfig | None = None
    cluster_config: ClusterConfig | None = None

    def stage(self, name: str) -> Mapping[str, Any] | None:
        return next((s for s in self.stages if name_of(s) == name), None)


class PromotionService(Protocol):
    """What chat front ends may do to the cluster. The app layer implements it over Kubernetes.

    Its methods fail with :mod:`promoter.errors`' kinds only: ``NotFound`` (no such Stage,
    Freight or Promotion), ``Refused`` (not available, or the cluster said no),
    ``TemporaryError`` (still starting, the cluster did not answer: try again).
    """

    async def snapshot(self, namespace: str) -> Snapshot: ...

    async def promote(
        self, namespace: str, stage: str, freight: str, *, actor: str
    ) -> PromotionRef: ...

    async def abort(self, namespace: str, promotion: str, *, actor: str) -> PromotionRef: ...

    async def reverify(self, namespace: str, stage: str, *, actor: str) -> None: ...

    async def approve(self, namespace: str, stage: str, freight: str, *, actor: str) -> Approval:
        """Approve the Freight for the Stage (``status.approvedFor``, recording ``actor``); an
        existing approval stands and is returned as it is."""
        ...

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


@runtime_checkable
class FreightAnnotator(Protocol):
    """What a PromotionService may also offer: record front-end state on a Freight (which
    Stages' channels were told it is available), so no replica tells anyone twice."""

    async def annotate_freight(
        self, namespace: str, freight: str, annotations: Mapping[str, str]
    ) -> None: ...


@runtime_checkable
class FreightCreator(Protocol):
    """What a PromotionService may also offer: create Freight (a Manual Warehouse's, on
    request from chat)."""

    async def create_freight(self, namespace: str, freight: Mapping[str, Any]) -> bool:
        """Create it unless a Freight of that name exists; True when created."""
        ...


async def promote_decided(
    service: PromotionService,
    namespace: str,
    stage: str,
    freight: str,
    create: Mapping[str, Any] | None,
    *,
    actor: str,
) -> PromotionRef:
    """Carry out a decided promotion: first create the Freight it was decided to make on
    request (the same name whatever replica or retry does it), then promote it."""
    if create is not None:
        if not isinstance(service, FreightCreator):
            raise InvalidInput("this Longshoreman cannot create Freight on request")
        await service.create_freight(namespace, create)
    return await service.promote(namespace, stage, freight, actor=actor)
