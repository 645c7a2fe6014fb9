"""GitHub Markdown for chat replies: ``/status`` as a table, a Stage's environment as links.

Pure: the rows are :class:`promoter.chat.views.StageView`, the read model ``/status`` shows
everywhere; Slack formats the same rows as blocks (:mod:`slack.messages`).
"""

from __future__ import annotations

from collections.abc import Sequence

from promoter.chat import neutral
from promoter.chat.views import EnvironmentLink, StageView


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
