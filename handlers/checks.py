"""What the GitHub front end shows for a Promotion and a verification, decided purely.

Check runs (``promote: STAGE`` on each of the Freight's commits) and the reply to a chat command are
built here from the Promotion's read model (which carries its Freight's approvals: the runs on a
Freight's commits are where a GitHub user looks for it), and ``verify: STAGE`` check runs from a
Stage's verification entry (``status.freightHistory[0].verificationHistory[0]``) and its Argo
Rollouts AnalysisRun, as plain dicts and strings, within GitHub's limits for check runs
(https://docs.github.com/en/rest/checks/runs): ``output.summary`` and ``output.text`` at most 65,535
characters, at most 3 ``actions``, each with a label and an identifier of at most 20 characters and
a description of at most 40. ``handlers/progress.py`` sends them.

The checks are informational: nothing here marks them required. A team that wants a Stage's
promotion to gate merging can make ``promote: STAGE`` a required status check in the branch
protection rules (or a ruleset) of the repository whose commits the Freight carries.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from promoter.chat import neutral
from promoter.chat.planner import AlreadyApproved, DoApprove
from promoter.chat.views import PromotionView, StepLine
from promoter.resources.model import name_of, namespace_of
from promoter.resources.stages import Approval

CHECK_PREFIX = "promote: "
VERIFY_PREFIX = "verify: "
MAX_OUTPUT = 65_535
MAX_ACTIONS = 3
LABEL_LIMIT = 20
IDENTIFIER_LIMIT = 20
DESCRIPTION_LIMIT = 40
ABORT = "abort"
REVERIFY = "reverify"
NEXT_PREFIX = "next:"
APPROVE_PREFIX = "approve:"
_CELL_LIMIT = 300

_STATUS = {
    "Pending": ("queued", None),
    "Running": ("in_progress", None),
    "Succeeded": ("completed", "success"),
    "Failed": ("completed", "failure"),
    "Errored": ("completed", "failure"),
    "Aborted": ("completed", "cancelled"),
}


def phase(promotion: Mapping[str, Any]) -> str:
    return str((promotion.get("status") or {}).get("phase") or "Pending")


def stage_of(promotion: Mapping[str, Any]) -> str:
    return str((promotion.get("spec") or {}).get("stage") or "")


def freight_of(promotion: Mapping[str, Any]) -> str:
    return str((promotion.get("spec") or {}).get("freight") or "")


def external_id(promotion: Mapping[str, Any]) -> str:
    return f"{namespace_of(promotion) or 'default'}/{name_of(promotion)}"


def parse_external_id(value: str) -> tuple[str, str] | None:
    """``(namespace, promotion)`` of a ``promote:`` run's or a ``verify:`` run's external id."""
    namespace, sep, name = value.partition("/")
    name = name.partition("#")[0]  # verify runs: "<namespace>/<promotion>#<verification id>"
    return (namespace, name) if sep and namespace and name and "/" not in name else None


def _kind(line: StepLine) -> str:
    return line.uses or ("task" if line.task else "")


def _status(line: StepLine) -> str:
    return line.status or "Pending"


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = "\n… (truncated)"
    return text[: max(0, limit - len(marker))] + marker


def _cell(text: str) -> str:
    # Text from others (messages, aliases, actors) in a cell or a quote: promoter.chat.neutral.
    return clip(neutral.cell(text), _CELL_LIMIT)


def _links(view: PromotionView) -> str:
    """The project's deep links (ProjectConfig freightLinks / stageLinks), those that are
    http(s) URLs, each shown by its title."""
    shown = []
    for link in view.links:
        url = neutral.link_url(link.url)
        if url is not None:
            shown.append(f"[{_cell(link.title)}]({url})")
    return " · ".join(shown)


def who(actor: str) -> str:
    """An actor as people read it: ``github:alice`` is ``@alice`` (the mention broken by
    :func:`_cell`, so nobody is notified), anything else (``slack:T1/U1``) as recorded."""
    login = actor.removeprefix("github:")
    return _cell("@" + login if login != actor and login else actor)


def approval_lines(approvals: Sequence[Approval]) -> list[str]:
    """One line per approval of the Freight: where the Freight is reported on GitHub (its
    commits' check runs), an approval given from a page, a comment, Slack or the command line
    shows, with who gave it and when."""
    lines = []
    for approval in approvals:
        by = f" by {who(approval.approved_by)}" if approval.approved_by else ""
        at = approval.approved_at
        when = f" at {at.strftime('%Y-%m-%d %H:%M UTC')}" if at else ""
        lines.append(f"Approved for `{neutral.code(approval.stage)}`{by}{when}")
    return lines


def progress_line(view: PromotionView) -> str:
    """One line: the phase and, while running, where it is."""
    step = view.running_step
    if step is not None:
        where = f"step {step.index} of {view.total}, `{step.alias}` ({_kind(step)})"
        return f"**{view.phase}**: {where}"
    return f"**{view.phase}**"


def summary(view: PromotionView, changes: str = "") -> str:
    label = neutral.code(view.label.short)
    parts = [
        f"Rollback `{view.name}` of Stage `{view.stage}` to Freight `{label}`: "
        f"{progress_line(view)}"
        if view.rollback
        else f"Promotion `{view.name}` of Freight `{label}` to Stage "
        f"`{view.stage}`: {progress_line(view)}"
    ]
    if view.message:
        parts.append("> " + _cell(view.message))
    if view.approvals:
        parts += ["", *approval_lines(view.approvals)]
    if view.steps:
        parts.append("")
        parts.append("| # | Step | Kind | Status | Message |")
        parts.append("| --- | --- | --- | --- | --- |")
        for line in view.steps:
            parts.append(
                f"| {line.index} | `{neutral.code(line.alias)}` | {_cell(_kind(line))} | "
                f"{_status(line)} | {_cell(line.message)} |"
            )
    if view.link:
        parts.append("")
        parts.append(f"[Details]({view.link})")
    links = _links(view)
    if links:
        parts.append("")
        parts.append(links)
    if changes:
        # What the Freight changes (handlers.markdown.diff_markdown): last, so a long list is
        # what the clip cuts.
        parts += ["", changes]
    return clip("\n".join(parts), MAX_OUTPUT)


def text(view: PromotionView) -> str | None:
    """Full step messages (the summary's table cuts them short)."""
    lines = [line for line in view.steps if line.message]
    if not lines:
        return None
    body = "\n\n".join(
        f"**{_cell(line.alias)}** ({_status(line)}):\n```\n{neutral.fenced(line.message)}\n```"
        for line in lines
    )
    return clip(body, MAX_OUTPUT)


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


def approve_identifier(stage: str) -> str:
    # As next_identifier: a digest of the Stage's name, in a different namespace of identifiers.
    return APPROVE_PREFIX + hashlib.sha256(stage.encode()).hexdigest()[:12]


def approve_action(stage: str) -> dict[str, str]:
    return action(
        f"Approve for {stage}", f"Let this Freight into {stage}", approve_identifier(stage)
    )


def actions(view: PromotionView) -> list[dict[str, str]]:
    """Buttons: Abort while it may still run; after success Re-verify (when the Stage has
    verification: otherwise the button could only refuse) and Promote to NEXT once the Freight
    is verified here, Approve for NEXT before that (``/approve``)."""
    if view.active:
        return [action("Abort", "Stop this Promotion", ABORT)]
    if view.phase != "Succeeded":
        return []
    out = []
    if view.verifiable:
        out.append(action("Re-verify", f"Verify {view.stage} again", REVERIFY))
    for stage in view.next_stages[: MAX_ACTIONS - len(out)]:
        out.append(
            action(
                f"Promote to {stage}", f"Promote this Freight to {stage}", next_identifier(stage)
            )
        )
    for stage in view.approve_stages[: MAX_ACTIONS - len(out)]:
        out.append(approve_action(stage))
    return out


def approved_line(decision: DoApprove) -> str:
    """The reply to an approval that was just recorded."""
    label, stage = neutral.code(decision.label.short), neutral.code(decision.stage)
    return (
        f"Freight `{label}` approved for Stage `{stage}`: it may be promoted "
        f"there now, whatever upstream verification says (`/promote {label} to {stage}`)"
    )


def already_approved_line(decision: AlreadyApproved) -> str:
    """The reply when the approval was there already; nothing changed."""
    approval = decision.approval
    by = f" by {_cell(approval.approved_by)}" if approval.approved_by else ""
    when = (
        f" at {approval.approved_at.strftime('%Y-%m-%d %H:%M UTC')}" if approval.approved_at else ""
    )
    return (
        f"Freight `{neutral.code(decision.label.short)}` was already approved for Stage "
        f"`{neutral.code(decision.stage)}`{by}{when}. Nothing was changed."
    )


def check_run_fields(view: PromotionView, changes: str = "") -> dict[str, Any]:
    """The body of a create/update check run request (without ``head_sha``); ``changes`` is
    the Freight diff's Markdown, shown under the steps."""
    status, conclusion = _STATUS.get(view.phase, ("queued", None))
    return _fields(
        name=CHECK_PREFIX + view.stage,
        external=f"{view.namespace}/{view.name}",
        status=status,
        conclusion=conclusion,
        title=f"{view.phase}: {view.label.short} to {view.stage}",
        summary_md=summary(view, changes),
        body=text(view),
        buttons=actions(view),
        link=view.link,
    )


def _fields(
    *,
    name: str,
    external: str,
    status: str,
    conclusion: str | None,
    title: str,
    summary_md: str,
    body: str | None,
    buttons: list[dict[str, str]],
    link: str | None,
) -> dict[str, Any]:
    """A check run's create/update body, for ``promote:`` and ``verify:`` runs alike."""
    fields: dict[str, Any] = {
        "name": name,
        "external_id": external,
        "status": status,
        "output": {"title": clip_plain(title, 200), "summary": summary_md},
        "actions": buttons,
    }
    if body:
        fields["output"]["text"] = body
    if conclusion:
        fields["conclusion"] = conclusion
    if link:
        fields["details_url"] = link
    return fields


def reply_body(user: str, command: str, view: PromotionView, changes: str = "") -> str:
    """The one reply to a command, edited in place as the Promotion moves on; ``changes``
    (the Freight diff's Markdown) goes under it."""
    parts = [
        f"@{user}: `{neutral.code(command)}`: Promotion `{view.name}` of Freight "
        f"`{neutral.code(view.label.short)}` to Stage `{view.stage}`: {progress_line(view)}"
    ]
    done = [line for line in view.steps if _status(line) != "Pending"]
    if done:
        parts.append("")
        for line in done:
            parts.append(f"- `{neutral.code(line.alias)}` ({_kind(line)}): {_status(line)}")
    if view.message and view.phase not in ("Pending", "Running", "Succeeded"):
        parts.append("")
        parts.append("> " + _cell(view.message))
    if view.link:
        parts.append("")
        parts.append(f"[Details]({view.link})")
    if changes:
        parts += ["", changes]
    return clip("\n".join(parts), MAX_OUTPUT)


def approvals_key(freight: Mapping[str, Any]) -> str:
    """What the runs show of a Freight's approvals changes only when this does."""
    approved = (freight.get("status") or {}).get("approvedFor") or {}
    return json.dumps(approved, sort_keys=True, default=str)


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


# ---- verify: STAGE ------------------------------------------------------------------------------

# Argo Rollouts' AnalysisRun phases -> (check run status, conclusion).
_VERIFY_STATUS = {
    "Pending": ("queued", None),
    "Running": ("in_progress", None),
    "Successful": ("completed", "success"),
    "Failed": ("completed", "failure"),
    "Error": ("completed", "failure"),
    "Inconclusive": ("completed", "neutral"),
}
_MEASUREMENTS_SHOWN = 5


def latest_verification(stage: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Stage's newest verification entry of its current Freight, if it has started one.

    Entries without an id are requests the verifier has not acted on yet (``Requested``).
    """
    history = (stage.get("status") or {}).get("freightHistory") or []
    first = history[0] if history and isinstance(history[0], Mapping) else {}
    entries = first.get("verificationHistory") or []
    entry = entries[0] if entries and isinstance(entries[0], Mapping) else None
    return entry if entry is not None and entry.get("id") else None


def verification_promotion(stage: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    """The Promotion whose success the verification follows (the Stage's last, for old entries)."""
    last = (stage.get("status") or {}).get("lastPromotion") or {}
    return str(entry.get("promotion") or last.get("name") or "")


def verification_external_id(namespace: str, promotion: str, entry: Mapping[str, Any]) -> str:
    """One check run per verification: a re-verify gets a new run, the old one keeps its result.

    The Promotion in front lets the buttons (:mod:`handlers.check_run`) find Stage and Freight
    the same way as on ``promote:`` runs.
    """
    return f"{namespace}/{promotion}#{entry.get('id')}"


def verification_aborted(entry: Mapping[str, Any], run: Mapping[str, Any] | None) -> bool:
    # Kargo records an aborted verification as Failed ("aborted by ..."), because Argo Rollouts
    # ends a terminated run Successful; the run's spec.terminate tells the two apart.
    return bool(((run or {}).get("spec") or {}).get("terminate")) or str(
        entry.get("message") or ""
    ).startswith("aborted by")


def verification_status(
    entry: Mapping[str, Any], run: Mapping[str, Any] | None
) -> tuple[str, str | None]:
    phase_ = str(entry.get("phase") or "Pending")
    status, conclusion = _VERIFY_STATUS.get(phase_, ("queued", None))
    if status == "completed" and verification_aborted(entry, run):
        return "completed", "cancelled"
    return status, conclusion


def _metric_results(run: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    status = (run or {}).get("status") or {}
    results = status.get("metricResults") if isinstance(status, Mapping) else None
    return [r for r in results or () if isinstance(r, Mapping)]


def _last_measurement(result: Mapping[str, Any]) -> Mapping[str, Any]:
    measurements = result.get("measurements") or []
    last = measurements[-1] if measurements else {}
    return last if isinstance(last, Mapping) else {}


def metrics_table(run: Mapping[str, Any] | None) -> str:
    """The AnalysisRun's metrics as a Markdown table (empty when it has none yet)."""
    results = _metric_results(run)
    if not results:
        return ""
    rows = [
        "| Metric | Phase | Measurements | Successful | Failed | Inconclusive | Error | Last |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for result in results:
        last = _last_measurement(result)
        shown = last.get("value") or result.get("message") or last.get("message") or ""
        name = neutral.code(str(result.get("name") or "?")) + (
            " (dry run)" if result.get("dryRun") else ""
        )
        counts = [
            str(int(result.get(key) or 0))
            for key in ("count", "successful", "failed", "inconclusive", "error")
        ]
        rows.append(
            f"| `{name}` | {_cell(str(result.get('phase') or ''))} | {' | '.join(counts)} | "
            f"{_cell(str(shown))} |"
        )
    return "\n".join(rows)


def verification_summary(
    stage: str,
    entry: Mapping[str, Any],
    run: Mapping[str, Any] | None,
    *,
    freight_label: str,
    link: str | None,
    approvals: Sequence[Approval] = (),
) -> str:
    current = str(entry.get("phase") or "Pending")
    shown = "Aborted" if verification_status(entry, run)[1] == "cancelled" else current
    parts = [
        f"Verification of Freight `{neutral.code(freight_label)}` in Stage `{stage}`: **{shown}**"
    ]
    ref = entry.get("analysisRun") or {}
    if ref.get("name"):
        parts.append(f"AnalysisRun `{neutral.code(str(ref['name']))}`")
    if entry.get("actor"):
        parts.append(f"Requested by {who(str(entry['actor']))}")
    if entry.get("message"):
        parts.append("> " + _cell(str(entry["message"])))
    if approvals:
        parts += ["", *approval_lines(approvals)]
    table = metrics_table(run)
    if table:
        parts += ["", table]
    if link:
        parts += ["", f"[Details]({link})"]
    return clip("\n".join(parts), MAX_OUTPUT)


def verification_text(run: Mapping[str, Any] | None) -> str | None:
    """Each metric's last few measurements, in full (the table shows only the last, cut short)."""
    sections = []
    for result in _metric_results(run):
        measurements = [m for m in result.get("measurements") or () if isinstance(m, Mapping)]
        if not measurements and not result.get("message"):
            continue
        lines = [f"**{result.get('name')}** ({result.get('phase') or ''})"]
        if result.get("message"):
            lines.append(f"```\n{neutral.fenced(str(result['message']))}\n```")
        for m in measurements[-_MEASUREMENTS_SHOWN:]:
            detail = " ".join(
                str(v) for v in (m.get("value"), m.get("message")) if v not in (None, "")
            )
            when = m.get("finishedAt") or m.get("startedAt") or ""
            lines.append(f"- {m.get('phase') or '?'} {when} {_cell(detail)}".rstrip())
        sections.append("\n".join(lines))
    return clip("\n\n".join(sections), MAX_OUTPUT) if sections else None


def verification_actions(
    stage: str,
    entry: Mapping[str, Any],
    run: Mapping[str, Any] | None,
    downstream: Sequence[str],
    approvable: Sequence[str] = (),
) -> list[dict[str, str]]:
    """Re-verify once it ended; Promote to NEXT as well when the Freight was verified, Approve
    for NEXT (the ``approvable`` ones: not approved there yet) when it was not."""
    status, conclusion = verification_status(entry, run)
    if status != "completed":
        return []
    out = [action("Re-verify", f"Verify {stage} again", REVERIFY)]
    if conclusion == "success":
        for next_stage in downstream[: MAX_ACTIONS - 1]:
            out.append(
                action(
                    f"Promote to {next_stage}",
                    f"Promote this Freight to {next_stage}",
                    next_identifier(next_stage),
                )
            )
    else:
        out.extend(approve_action(s) for s in approvable[: MAX_ACTIONS - 1])
    return out


def verification_check_fields(
    stage: str,
    entry: Mapping[str, Any],
    run: Mapping[str, Any] | None,
    *,
    external: str,
    freight_label: str,
    link: str | None = None,
    downstream: Sequence[str] = (),
    approvable: Sequence[str] = (),
    approvals: Sequence[Approval] = (),
) -> dict[str, Any]:
    """The body of a create/update ``verify: STAGE`` check run request (without ``head_sha``)."""
    status, conclusion = verification_status(entry, run)
    shown = "Aborted" if conclusion == "cancelled" else str(entry.get("phase") or "Pending")
    return _fields(
        name=VERIFY_PREFIX + stage,
        external=external,
        status=status,
        conclusion=conclusion,
        title=f"{shown}: verification of {freight_label} in {stage}",
        summary_md=verification_summary(
            stage, entry, run, freight_label=freight_label, link=link, approvals=approvals
        ),
        body=verification_text(run),
        buttons=verification_actions(stage, entry, run, downstream, approvable),
        link=link,
    )


def verification_key(stage: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a ``verify:`` run shows changes only when this does."""
    entry = latest_verification(stage)
    if entry is None:
        return ()
    ref = entry.get("analysisRun") or {}
    return (entry.get("id"), entry.get("phase"), entry.get("message"), ref.get("phase"))
