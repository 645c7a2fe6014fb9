"""The words of chat commands: what a PR comment or a Slack slash command says, parsed.

Both front ends (GitHub comments in ``handlers/``, Slack slash commands in ``slack/``) parse with
these functions, so a command means the same thing wherever it is typed; what it then does is
decided by :func:`promoter.chat.planner.plan`. Arguments are data: text that looks like an
expression (``${{`` or ``${%``) is refused, never evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from promoter.control.freezes import MAX_REASON, FreezeError, parse_duration

COMMANDS = ("promote", "approve", "abort", "status", "verify", "diff", "freeze", "unfreeze", "help")
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
    "diff": "/diff FREIGHT [to] STAGE",
    "freeze": '/freeze STAGE|PROJECT [for DURATION | until TIME] ["reason"]',
    "unfreeze": "/unfreeze STAGE|PROJECT",
    "help": "/help",
}

_EXPRESSION = re.compile(r"\$\{[{%]")
# Names, aliases, SHAs and image references (``ghcr.io/acme/app:1.4.2``, ``...@sha256:...``).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,252}$")


class CommandError(ValueError):
    """A command of ours, malformed; the message includes its usage."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command, typed or pressed (buttons map to the same commands, see promoter.chat.planner).

    ``cancel`` and the two fields after ``raw`` come only from buttons, never from text.
    """

    name: Literal[
        "promote",
        "approve",
        "abort",
        "status",
        "verify",
        "diff",
        "freeze",
        "unfreeze",
        "help",
        "cancel",
    ]
    # promote: None means this PR's merge commit's Freight on GitHub, `latest` elsewhere;
    # approve: always named
    freight: str | None = None
    stage: str | None = None
    target: str | None = None  # abort: a Promotion or Stage name; (un)freeze: a Stage or project
    queued: bool = False  # abort STAGE all: the queued Promotions too
    raw: str = ""
    confirmed: bool = False  # promote: the requester already pressed Confirm
    after: str | None = None  # promote: a "Promote to NEXT" button's Stage, which it must follow
    # freeze: for how long, or until when (as typed: the planner reads it against the clock),
    # and why; neither length nor end: until someone unfreezes.
    duration: timedelta | None = None
    until: str | None = None
    reason: str = ""


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
    if name == "diff":
        if "to" in words:
            words.remove("to")
        if len(words) != 2:
            raise CommandError(f"expected one Freight and one Stage. Usage: {USAGE['diff']}")
        return Command(
            "diff", freight=_check_arg(words[0], name), stage=_check_arg(words[1], name), raw=raw
        )
    if name == "freeze":
        return _freeze(args, raw)
    if name == "unfreeze":
        if len(words) != 1:
            raise CommandError(f"expected one Stage or project. Usage: {USAGE['unfreeze']}")
        return Command("unfreeze", target=_check_arg(words[0], name), raw=raw)
    if name == "help":
        return Command("help", raw=raw)
    raise CommandError(f"unknown command /{name}")


# Slack's clients turn straight quotes into curly ones as people type.
_MARKUP = re.compile(r"[<>`@|\\]")
_QUOTES = "\"'\u201c\u201d\u2018\u2019"


def _freeze(args: str, raw: str) -> Command:
    """``/freeze STAGE|PROJECT [for DURATION | until TIME] [reason]``: the reason is the rest
    of the line, quoted or not."""
    words = args.split()
    if not words:
        raise CommandError(f"which Stage or project? Usage: {USAGE['freeze']}")
    target = _check_arg(words[0], "freeze")
    rest = words[1:]
    duration: timedelta | None = None
    until: str | None = None
    if rest and rest[0].lower() in ("for", "until"):
        if len(rest) < 2:
            raise CommandError(f"`{rest[0]}` needs a value. Usage: {USAGE['freeze']}")
        if rest[0].lower() == "for":
            try:
                duration = parse_duration(rest[1])
            except FreezeError as e:
                raise CommandError(f"{e}. Usage: {USAGE['freeze']}") from None
        else:
            until = rest[1]
        rest = rest[2:]
    reason = " ".join(rest).strip().strip(_QUOTES).strip()
    if _MARKUP.search(reason):
        # Shown in every chat and page: a reason is words, never a mention, link or markup.
        raise CommandError("the reason may not contain < > ` @ | or \\")
    if len(reason) > MAX_REASON:
        raise CommandError(f"the reason is longer than {MAX_REASON} characters")
    return Command("freeze", target=target, duration=duration, until=until, reason=reason, raw=raw)


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
SUBCOMMANDS = ("approve", "abort", "status", "verify", "diff", "freeze", "unfreeze", "help")
# Freezing has slash commands of their own, so an incident channel types `/freeze prod for 2h`.
FREEZE_SLASH = "/freeze"
UNFREEZE_SLASH = "/unfreeze"


def usage_lines(form: Literal["comment", "slash"] = "comment") -> list[str]:
    """The usage of every command, as typed in a comment or after the ``/promote`` slash."""
    if form == "comment":
        return list(USAGE.values())
    lines = []
    for name, usage in USAGE.items():
        if name == "abort":
            # A slash command has no pull request to take the Freight from: the name is needed.
            usage = "/abort PROMOTION | STAGE [all]"
        if name in ("promote", "approve", "freeze", "unfreeze"):  # slash commands of their own
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
