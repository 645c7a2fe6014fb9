"""GitHub Markdown for chat replies: ``/status`` as a table, a Stage's environment as links,
a Freight diff as a list.

Pure: the rows are :class:`promoter.chat.views.StageView`, the read model ``/status`` shows
everywhere; Slack formats the same rows as blocks (:mod:`slack.messages`). A diff is
:class:`promoter.chat.diff.FreightDiff`; commit messages and pull-request titles are other
people's text, so they go through :mod:`promoter.chat.neutral` and authors are named without
an ``@``.
"""

from __future__ import annotations

from collections.abc import Sequence

from promoter.chat import neutral
from promoter.chat.diff import Commit, FreightDiff, merged_pulls, rows
from promoter.chat.views import EnvironmentLink, FreightLabel, StageView

# Commits listed per range in a comment; the rest are counted (the compare link has them all).
DIFF_COMMITS = 20
SHORT_SHA = 7


def environment_markdown(link: EnvironmentLink | None) -> str:
    """A Stage's GitHub environment as Markdown: its Deployments page(s), and its URL."""
    if link is None:
        return "-"
    name = neutral.cell(link.name)
    parts = [f"[{name}]({url})" for _, url in link.pages[:1]] or [name]
    url = neutral.link_url(link.url or "")
    if url:
        parts.append(f"([open]({url}))")
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
        # Aliases, health and verification messages came from others: promoter.chat.neutral.
        cells = [
            neutral.cell(c) for c in (r.stage, r.freight, r.running, str(r.queued), r.health)
        ] + [neutral.cell(verification)]
        if environments:
            cells.append(environment_markdown(r.environment))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _link(text: str, url: str) -> str:
    safe = neutral.link_url(url)
    return f"[{text}]({safe})" if safe else text


def _commit_line(commit: Commit) -> str:
    pulls = ", ".join(_link(f"#{p.number}", p.url) for p in commit.pulls)
    by = f" by {neutral.cell(commit.author)}" if commit.author else ""
    sha = _link(f"`{commit.sha[:SHORT_SHA]}`", commit.url)
    return f"  - {sha} {neutral.cell(commit.summary)}{by}" + (f" ({pulls})" if pulls else "")


def diff_markdown(diff: FreightDiff, label: FreightLabel) -> str:
    """What promoting the Freight into the Stage changes, as a Markdown list (text from others
    through :mod:`promoter.chat.neutral`)."""
    direction = (
        " (a rollback: it goes backwards and removes what is listed)" if diff.backwards else ""
    )
    lines = [
        f"Freight `{neutral.code(label.short)}` into Stage `{neutral.code(diff.stage)}`{direction}:"
    ]
    if diff.unchanged:
        return lines[0] + " nothing changes: the Stage runs it already."
    for row in rows(diff, DIFF_COMMITS):
        old, new = (f"`{neutral.code(v)}`" if v else "(none)" for v in (row.old, row.new))
        count = f", {row.count} ({_link('compare', row.compare_url)})" if row.count else ""
        lines.append(f"- {row.kind} `{neutral.code(row.name)}`: {old} -> {new}{count}")
        lines += [_commit_line(c) for c in row.commits]
        if row.more:
            lines.append(f"  - ... and {row.more} more")
    pulls = merged_pulls(diff)
    if pulls:
        listed = ", ".join(
            f"{_link(f'#{p.number}', p.url)} {neutral.cell(p.title)}"
            + (f" by {neutral.cell(p.author)}" if p.author else "")
            for p in pulls[:DIFF_COMMITS]
        )
        more = f" and {len(pulls) - DIFF_COMMITS} more" if len(pulls) > DIFF_COMMITS else ""
        lines.append(f"\nPull requests: {listed}{more}")
    return "\n".join(lines)
