"""A Warehouse's regular expression cannot stall the server (issue 34, finding 1).

The whole server runs on its embedded cluster with Warehouse discovery on, against Debian's
docker-registry holding a tag made to make a backtracking engine take exponential time:
``allowTagsRegexes: ["^(a+)+$"]`` against ``"a" * 30 + "-"`` once held the event loop for 52 s
(Python's ``re``). Warehouse filters are RE2 now (linear time); ``/healthz`` is asked all the
while discovery runs and must answer every time. It is asked, never timed: the ``asyncio.timeout``
is a safety net so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings
from tests.support import objects
from tests.support.registry import running_registry

NS = "regex"
EVIL_TAG = "a" * 30 + "-"
SAFETY_NET = 60.0


async def test_a_catastrophic_tag_regex_does_not_stall_the_server(tmp_path: Path) -> None:
    seed = tmp_path / "project.yaml"
    async with running_registry(tmp_path) as registry:
        for tag in ("1.0.0", EVIL_TAG, "a" * 12):
            await registry.push_image("acme/app", tag)
        subscription: dict[str, Any] = {
            "repoURL": registry.repo("acme/app"),
            "imageSelectionStrategy": "Lexical",
            "allowTagsRegexes": ["^(a+)+$"],
        }
        warehouse = objects.warehouse("evil", namespace=NS, subscriptions=[{"image": subscription}])
        # The server creates it (and its namespace) from its seed as it starts.
        seed.write_text(yaml.safe_dump(warehouse))
        settings = Settings.from_env({"LONGSHOREMAN_WORK_DIR": str(tmp_path / "work")})
        settings = replace(settings, embedded_seed=(seed,))
        async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
            state = await wait_started(client.app)
            assert state.kube is not None and state.controller is not None
            await asyncio.wait_for(state.controller.wait_synced(), 30)
            answers = 0
            async with asyncio.timeout(SAFETY_NET):
                while True:
                    health = await client.get("/healthz")
                    assert health.status == 200, await health.text()
                    answers += 1
                    got = await state.kube.get(k.WAREHOUSES, NS, "evil")
                    found = (got.get("status") or {}).get("discoveredArtifacts")
                    if found:
                        break
                    await asyncio.sleep(0.05)
    assert answers > 0
    (image,) = found["images"]
    # Only the tag the expression accepts; the one built to make it backtrack is not.
    assert [r["tag"] for r in image["references"]] == ["a" * 12]
