"""The ``/status`` rows every front end shows (promoter.chat.views.stage_views)."""

from __future__ import annotations

from promoter.chat.views import stage_views
from tests.support import objects


def test_status_shows_the_freights_alias_though_the_history_names_only_the_freight() -> None:
    # Stage history entries (Kargo's FreightReference) carry no alias; the row looks it up.
    stage = objects.stage(
        "test", status={"freightHistory": [{"items": {"Warehouse/w": {"name": "a" * 40}}}]}
    )
    freight = objects.freight("a" * 40, alias="frozen-tauntaun")
    assert stage_views([stage], [], [freight])[0].freight == "frozen-tauntaun"
    assert stage_views([stage], [])[0].freight == "a" * 40  # never a cut of the name
