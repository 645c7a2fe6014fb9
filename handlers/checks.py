"""What the GitHub front end shows for a Promotion, decided purely.

Check runs (``promote: STAGE`` on each of the Freight's commits) and the reply to a chat command
are built here from the Promotion object alone, as plain dicts and strings, within GitHub's
limits for check runs (https://docs.github.com/en/rest/checks/runs): ``output.summary`` and
``output.text`` at most 65,535 characters, at most 3 ``actions``, each with a label and an
identifier of at most 20 characters and a description of at most 40. ``handlers/progress.py``
sends them.

The checks are informational: nothing here marks them required. A team that wants a Stage's
promotion to gate merging can make ``promote: STAGE`` a required status check in the branch
protection rules (or a ruleset) of the repository whose commits the Freight carries.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promoter.model import name_of, namespace_of

CHECK_PREFIX = "promote: "
MAX_OUTPUT = 65_535
MAX_ACTIONS = 3
LABEL_LIMIT = 20
IDENTIFIER_LIMIT = 20
DESCRIPTION_LIMIT = 40
ABORT = "abort"
REVERIFY = "reverify"
NEXT_PREFIX = "next:"
_CELL_LIMIT = 300

_STATUS = {
    "Pending": ("queued", None),
    "Running": ("in_progress", None),
    "Succeeded": ("completed", "success"),
    "Failed": ("completed", "failure"),
    "Errored": ("completed", "failure"),
    "Aborted": ("completed", "cancelled"),
}


@dataclass(frozen=True)
class StepLine:
    index: int
    alias: str
    uses: str
    status: str
    message: str


def phase(promotion: Mapping[str, Any]) -> str:
    return str((promotion.get("status") or {}).get("phase") or "Pending")


def stage_of(promotion: Mapping[str, Any]) -> str:
    return str((promotion.get("spec") or {}).get("stage") or "")


def freight_of(promotion: Mapping[str, Any]) -> str:
    return str((promotion.get("spec") or {}).get("freight") or "")


def external_id(promotion: Mapping[str, Any]) -> str:
    return f"{namespace_of(promotion) or 'default'}/{name_of(promotion)}"


def parse_external_id(value: str) -> tuple[str, str] | None:
    namespace, sep, name = value.partition("/")
    return (namespace, name) if sep and namespace and name and "/" not in name else None


def step_lines(promotion: Mapping[str, Any]) -> list[StepLine]:
    steps = (promotion.get("spec") or {}).get("steps") or []
    status = promotion.get("status") or {}
    executions = status.get("stepExecutionMetadata") or []
    out = []
    for i, step in enumerate(steps):
        execution = (
            executions[i] if i < len(executions) and isinstance(executions[i], Mapping) else {}
        )
        step = step if isinstance(step, Mapping) else {}
        alias = str(execution.get("alias") or step.get("as") or f"step-{i + 1}")
        uses = str(step.get("uses") or ("task" if step.get("task") else ""))
        out.append(
            StepLine(
                i + 1,
                alias,
                uses,
                str(execution.get("status") or "Pending"),
                str(execution.get("message") or ""),
            )
        )
    return out


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = "\n… (truncated)"
    return text[: max(0, limit - len(marker))] + marker


_MENTION = re.compile(r"@(?=[A-Za-z0-9])")


def quiet(text: str) -> str:
    """User text echoed in a reply must not @-mention (notify) anyone: break the mentions."""
    return _MENTION.sub("@\u200b", text)


def _cell(text: str) -> str:
    flat = " ".join(text.split()).replace("|", "\\|").replace("`", "'")
    return clip(flat, _CELL_LIMIT)


def progress_line(promotion: Mapping[str, Any]) -> str:
    """One line: the phase and, while running, where it is."""
    current = phase(promotion)
    lines = step_lines(promotion)
    status = promotion.get("status") or {}
    if current == "Running" and lines:
        index = min(int(status.get("currentStep") or 0), len(lines) - 1)
        step = lines[index]
        return f"**{current}**: step {step.index} of {len(lines)}, `{step.alias}` ({step.uses})"
    return f"**{current}**"


def summary(promotion: Mapping[str, Any], *, freight_label: str, link: str | None) -> str:
    status = promotion.get("status") or {}
    parts = [
        f"Promotion `{name_of(promotion)}` of Freight `{freight_label}` to Stage "
        f"`{stage_of(promotion)}`: {progress_line(promotion)}"
    ]
    if status.get("message"):
        parts.append("> " + _cell(str(status["message"])))
    lines = step_lines(promotion)
    if lines:
        parts.append("")
        parts.append("| # | Step | Kind | Status | Message |")
        parts.append("| --- | --- | --- | --- | --- |")
        for line in lines:
            parts.append(
                f"| {line.index} | `{_cell(line.alias)}` | {_cell(line.uses)} | {line.status} | "
                f"{_cell(line.message)} |"
            )
    if link:
        parts.append("")
        parts.append(f"[Details]({link})")
    return clip("\n".join(parts), MAX_OUTPUT)


def text(promotion: Mapping[str, Any]) -> str | None:
    """Full step messages (the summary's table cuts them short)."""
    lines = [line for line in step_lines(promotion) if line.message]
    if not lines:
        return None
    body = "\n\n".join(
        f"**{line.alias}** ({line.status}):\n```\n{_unfence(line.message)}\n```" for line in lines
    )
    return clip(body, MAX_OUTPUT)


def _unfence(message: str) -> str:
    # A fence inside the message would end ours early.
    return message.replace("```", "'''")


def action(label: str, description: str, identifier: str) -> dict[str, str]:
    return {
        "label": clip_plain(label, LABEL_LIMIT),
        "description": clip_plain(description, DESCRIPTION_LIMIT),
        "identifier": identifier[:IDENTIFIER_LIMIT],
    }


def clip_plain(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def next_identifier(stage: str) -> str:
    # A Stage name can be 253 characters; an identifier only 20. A digest of the name survives a
    # reordering of Stages between render and click, where an index would not.
    return NEXT_PREFIX + hashlib.sha256(stage.encode()).hexdigest()[:12]


def downstream_stages(stage: str, stages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Stages that request Freight from ``stage`` (``sources.stages``)."""
    out = []
    for candidate in stages:
        for request in (candidate.get("spec") or {}).get("requestedFreight") or ():
            upstream = ((request or {}).get("sources") or {}).get("stages") or ()
            if stage in upstream:
                out.append(name_of(candidate))
                break
    return sorted(set(out))


def actions(promotion: Mapping[str, Any], downstream: Sequence[str]) -> list[dict[str, str]]:
    """Buttons: Abort while it may still run; after success Re-verify and Promote to NEXT."""
    current = phase(promotion)
    if current in ("Pending", "Running"):
        return [action("Abort", "Stop this Promotion", ABORT)]
    if current != "Succeeded":
        return []
    out = [action("Re-verify", f"Verify {stage_of(promotion)} again", REVERIFY)]
    for stage in downstream[: MAX_ACTIONS - 1]:
        out.append(
            action(
                f"Promote to {stage}", f"Promote this Freight to {stage}", next_identifier(stage)
            )
        )
    return out


def check_run_fields(
    promotion: Mapping[str, Any],
    *,
    freight_label: str,
    link: str | None,
    downstream: Sequence[str] = (),
) -> dict[str, Any]:
    """The body of a create/update check run request (without ``head_sha``)."""
    status, conclusion = _STATUS.get(phase(promotion), ("queued", None))
    fields: dict[str, Any] = {
        "name": CHECK_PREFIX + stage_of(promotion),
        "external_id": external_id(promotion),
        "status": status,
        "output": {
            "title": clip_plain(
                f"{phase(promotion)}: {freight_label} to {stage_of(promotion)}", 200
            ),
            "summary": summary(promotion, freight_label=freight_label, link=link),
        },
        "actions": actions(promotion, downstream),
    }
    body = text(promotion)
    if body:
        fields["output"]["text"] = body
    if conclusion:
        fields["conclusion"] = conclusion
    if link:
        fields["details_url"] = link
    return fields


def reply_body(
    user: str, command: str, promotion: Mapping[str, Any], *, freight_label: str, link: str | None
) -> str:
    """The one reply to a command, edited in place as the Promotion moves on."""
    status = promotion.get("status") or {}
    parts = [
        f"@{user}: `{_cell(command)}`: Promotion `{name_of(promotion)}` of Freight "
        f"`{freight_label}` to Stage `{stage_of(promotion)}`: {progress_line(promotion)}"
    ]
    done = [line for line in step_lines(promotion) if line.status not in ("Pending",)]
    if done:
        parts.append("")
        for line in done:
            parts.append(f"- `{_cell(line.alias)}` ({line.uses}): {line.status}")
    if status.get("message") and phase(promotion) not in ("Pending", "Running", "Succeeded"):
        parts.append("")
        parts.append("> " + _cell(str(status["message"])))
    if link:
        parts.append("")
        parts.append(f"[Details]({link})")
    return clip("\n".join(parts), MAX_OUTPUT)


def progress_key(promotion: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What the front end shows changes only when this does."""
    if promotion is None:
        return ()
    status = promotion.get("status") or {}
    steps = tuple(
        (s.get("alias"), s.get("status"), s.get("message"))
        for s in status.get("stepExecutionMetadata") or ()
        if isinstance(s, Mapping)
    )
    return (status.get("phase"), status.get("currentStep"), status.get("message"), steps)
