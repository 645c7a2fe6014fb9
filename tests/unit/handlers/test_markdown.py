"""``/status`` as GitHub Markdown, from the rows every front end shows."""

from __future__ import annotations

from handlers.markdown import markdown_table
from promoter.chat.views import stage_views
from tests.support import objects


def test_status_rows_and_table() -> None:
    stage = objects.stage(
        "test",
        status={
            "freightHistory": [{"items": {"Warehouse/w": {"name": "f1", "alias": "old-one"}}}],
            "conditions": [{"type": "Healthy", "status": "True"}],
        },
    )
    promos = [objects.promotion("a", "test", phase="Running"), objects.promotion("b", "test")]
    rows = stage_views([stage], promos)
    assert rows[0].freight == "old-one" and rows[0].running == "a" and rows[0].queued == 1
    # Health in Kargo's words, never the condition's "True".
    assert "| test | old-one | a | 1 | Healthy | - |" in markdown_table(rows)
    stage["status"]["health"] = {"status": "Progressing"}
    assert stage_views([stage], promos)[0].health == "Progressing"
