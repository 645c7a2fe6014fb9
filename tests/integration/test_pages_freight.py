"""The Freight page over HTTP: its artifacts, where it is, what it is approved for, its
Promotions and what to do next; reached from the project's timeline and a Promotion's page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.controller import kube as k
from tests.integration.test_pages import NS, serving, strip_tags
from tests.integration.test_pages_actions import FREIGHT, seed_project
from tests.support import objects
from tests.support.controller import wait_for_object

pytestmark = pytest.mark.integration


async def test_the_freight_page_says_what_it_holds_where_it_is_and_what_to_do_next(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as (client, state):
        assert state.kube is not None
        await seed_project(state, "a" * 40)
        approval = {"approvedBy": "github:octocat", "approvedAt": "2026-01-10T12:00:00Z"}
        await state.kube.patch_status(
            k.FREIGHT, NS, FREIGHT, {"approvedFor": {"web-prod": approval}}, resource_version=None
        )
        await state.kube.create(
            k.PROMOTIONS,
            objects.promotion(
                "web-test.one",
                "web-test",
                namespace=NS,
                freight=FREIGHT,
                steps=[{"uses": "gate", "as": "wait", "config": {"name": "never"}}],
            ),
        )
        await wait_for_object(
            state.kube, k.PROMOTIONS, NS, "web-test.one", lambda p: bool(p.get("status"))
        )

        # Reached from the project's timeline and from the Promotion's page, by name.
        project = await (await client.get(f"/ui/projects/{NS}")).text()
        assert f'href="/ui/freight/{NS}/{FREIGHT}"' in project
        promotion = await (await client.get(f"/ui/promotions/{NS}/web-test.one")).text()
        assert f'id="freight-link" href="/ui/freight/{NS}/{FREIGHT}"' in promotion

        # By alias too.
        response = await client.get(f"/ui/freight/{NS}/web-1")
        assert response.status == 200
        page = await response.text()
        text = strip_tags(page)
        assert "Freight web-1" in text and FREIGHT in text
        assert "https://github.com/example/app.git" in text and "a" * 40 in text
        facts = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page))
        assert " ".join(strip_tags(facts["Approved for"]).split()) == (
            "web-prod by github:octocat at 2026-01-10 12:00 UTC"
        )
        assert "web-test (running)" in strip_tags(facts["Promoting to"])
        assert 'id="changes"' in page  # the slot the Freight diff fills
        assert "web-test.one" in text
        # Actions are off here (no sign-in), and say how to turn them on.
        promote = re.findall(r'<form class="act"[^>]*data-action="promote">(.*?)</form>', page)
        assert any('value="web-prod"' in f and "disabled" in f for f in promote)
        assert "/promote web-1 to web-prod" in page
        assert "LONGSHOREMAN_UI_AUTH=github" in text

        # The project page says what to do next: the Freight web-prod waits for.
        assert "What next" in project and "/promote web-1 to web-prod" in project
        # A Promotion that failed offers to run it again.
        await state.kube.create(
            k.PROMOTIONS,
            objects.promotion(
                "web-prod.bad",
                "web-prod",
                namespace=NS,
                freight=FREIGHT,
                steps=[{"uses": "fail", "as": "boom", "config": {"message": "no"}}],
            ),
        )
        await wait_for_object(
            state.kube,
            k.PROMOTIONS,
            NS,
            "web-prod.bad",
            lambda p: (p.get("status") or {}).get("phase") in ("Failed", "Errored"),
        )
        failed = await (await client.get(f"/ui/promotions/{NS}/web-prod.bad")).text()
        assert "Promote web-1 to web-prod again" in failed
        assert "/promote web-1 to web-prod" in failed

        missing = await client.get(f"/ui/freight/{NS}/nothing-like-it")
        assert missing.status == 404
