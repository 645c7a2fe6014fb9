"""The status pages in a real browser: Debian's chromium, headless, driven by Playwright, at a
phone's viewport. A Promotion's status changes in the cluster and the open page shows it
without a reload (server-sent events); the Promotion page's screenshot is checked.

Playwright never downloads a browser here: it launches /usr/bin/chromium. Without chromium the
test is skipped locally, but fails in CI (``CI`` set), where .ci/run installs it.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from PIL import Image

from tests.integration.test_pages import NS, create, gate_step, promotion, serving, wait_phase
from tests.support import objects
from tests.support.controller import Gate

if TYPE_CHECKING:
    from playwright.async_api import FloatRect, ViewportSize

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE = {"width": 390, "height": 844}
SCALE = 2
SUCCEEDED_GREEN = (0x1A, 0x7F, 0x37)  # app.ui.html.GREEN


def _need_chromium() -> None:
    if Path(CHROMIUM).exists() or shutil.which("chromium"):
        return
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing in CI: .ci/run must install Debian's chromium")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium); CI runs this test")


def _colours(image: Image.Image) -> Counter[tuple[int, int, int]]:
    data = image.convert("RGB").tobytes()
    return Counter(zip(data[0::3], data[1::3], data[2::3], strict=True))


def _close(colour: tuple[int, ...], expected: tuple[int, int, int], tolerance: int = 12) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(colour[:3], expected, strict=True))


async def test_phone_sees_a_promotion_finish_live_and_the_page_looks_right(
    tmp_path: Path,
) -> None:
    _need_chromium()
    from playwright.async_api import async_playwright, expect

    gate = Gate()
    steps = [
        {
            "uses": "compose-output",
            "as": "publish",
            "config": {"pr": {"id": 12, "url": "https://github.com/example/gitops/pull/12"}},
        },
        gate_step("browser", alias="wait-for-approval"),
    ]
    async with serving(tmp_path, gate) as (client, state):
        await create(state, promotion("test.phone", steps))
        await wait_phase(state, "test.phone", "Running")
        base = str(client.make_url("/")).rstrip("/")

        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = await browser.new_context(
                    viewport=PHONE, device_scale_factor=SCALE, is_mobile=True, has_touch=True
                )
                page = await context.new_page()
                errors: list[str] = []
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

                # The project page: Stages as cards, nothing wider than the phone.
                await page.goto(f"{base}/ui/projects/{NS}")
                card = page.locator('tr[data-stage="test"]')
                assert await card.evaluate("e => getComputedStyle(e).display") == "block"
                assert "test.phone" in await card.inner_text()
                assert await page.locator("thead").first.is_hidden()
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= PHONE["width"]

                # The Promotion page, connected to its event stream.
                await page.goto(f"{base}/ui/promotions/{NS}/test.phone")
                # (Locator assertions, not wait_for_function: the page's CSP forbids eval.)
                await expect(page.locator("#live-state")).to_have_text("live")
                assert await page.locator("#phase").inner_text() == "Running"
                await page.evaluate("window.notReloaded = true")

                gate.open("browser")
                phase = page.locator("#phase")
                await expect(phase).to_have_attribute("data-status", "Succeeded", timeout=20_000)
                assert await page.evaluate("window.notReloaded === true")  # no reload
                row = page.locator('tr.step[data-step="wait-for-approval"]')
                assert "Succeeded" in await row.inner_text()
                assert await page.get_by_role("link", name="Pull request #12").count() == 1
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= PHONE["width"]

                shot = tmp_path / "promotion-phone.png"
                await page.screenshot(path=str(shot))
                box = await page.locator("#phase").bounding_box()
                assert box is not None
                assert not errors, errors  # e.g. a Content-Security-Policy violation
            finally:
                await browser.close()

    image = Image.open(shot).convert("RGB")
    assert image.size == (PHONE["width"] * SCALE, PHONE["height"] * SCALE)
    colours = _colours(image)
    _, share = colours.most_common(1)[0]
    assert share < 0.95 * image.width * image.height, "the page is (nearly) blank"
    assert len(colours) > 50  # text, badges, borders: not a flat page
    # The phase badge is Succeeded's green: its most common colour (text is white on it).
    left, top = int(box["x"] * SCALE), int(box["y"] * SCALE)
    right, bottom = int((box["x"] + box["width"]) * SCALE), int((box["y"] + box["height"]) * SCALE)
    badge = _colours(image.crop((left, top, right, bottom)))
    assert _close(badge.most_common(1)[0][0], SUCCEEDED_GREEN), badge.most_common(3)
    # And the header bar is the dark one, so the stylesheet applied.
    assert _close(image.getpixel((4, 4)), (0x24, 0x29, 0x2F))


# ---- the pipeline graph and the Freight timeline ---------------------------------------------

DESKTOP: ViewportSize = {"width": 1280, "height": 1000}
WAREHOUSE = "kargo-demo"  # examples/kargo-demo: its Warehouse feeds test, uat takes from test
ALIAS = "frozen-tauntaun"


def _stage(name: str, upstream: str) -> dict[str, object]:
    return objects.stage(
        name,
        namespace=NS,
        warehouse=WAREHOUSE,
        upstream=[upstream],
        steps=[{"uses": "compose-output", "config": {}}],
    )


async def test_the_pipeline_graph_and_freight_timeline_update_live_in_both_themes(
    tmp_path: Path,
) -> None:
    """The Warehouse feeds test; test -> uat -> prod is a line and test also fans out to perf.
    A Promotion into test runs, then finishes: the open page redraws the graph (badge, Freight,
    edge) and the timeline without a reload."""
    _need_chromium()
    from playwright.async_api import async_playwright, expect

    from app.controller import kube as k
    from tests.support.waiting import eventually

    gate = Gate()
    async with serving(tmp_path, gate) as (client, state):
        assert state.kube is not None and state.controller is not None
        for name, upstream in (("prod", "uat"), ("perf", "test")):
            await state.kube.create(k.STAGES, _stage(name, upstream))

        async def all_cached() -> bool | None:
            assert state.controller is not None
            return len(state.controller.stages.items(NS)) == 4 or None

        await eventually(all_cached, "the page's Stage cache to hold all four Stages")
        await create(state, promotion("test.graph", [gate_step("graph", alias="approve")]))
        await wait_phase(state, "test.graph", "Running")
        base = str(client.make_url("/")).rstrip("/")

        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = await browser.new_context(viewport=DESKTOP, color_scheme="light")
                page = await context.new_page()
                errors: list[str] = []
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                await page.goto(f"{base}/ui/projects/{NS}")
                await expect(page.locator("#live-state")).to_have_text("live")
                await page.evaluate("window.notReloaded = true")

                svg = page.locator("svg.pipeline")
                assert await svg.get_attribute("role") == "img"
                assert f"Pipeline of project {NS}" in (await svg.get_attribute("aria-label") or "")
                nodes = await page.locator("svg.pipeline g.node").evaluate_all(
                    "gs => gs.map(g => g.dataset.node)"
                )
                assert sorted(nodes) == [
                    "stage:perf",
                    "stage:prod",
                    "stage:test",
                    "stage:uat",
                    f"warehouse:{WAREHOUSE}",
                ]
                edges = await page.locator("svg.pipeline path.edge").evaluate_all(
                    "ps => ps.map(p => [p.dataset.from, p.dataset.to])"
                )
                assert sorted(map(tuple, edges)) == [
                    ("stage:test", "stage:perf"),
                    ("stage:test", "stage:uat"),
                    ("stage:uat", "stage:prod"),
                    (f"warehouse:{WAREHOUSE}", "stage:test"),
                ]
                # Laid out left to right: each edge's source is left of its target.
                for source, target in edges:
                    src = await page.locator(f'g.node[data-node="{source}"] .box').bounding_box()
                    dst = await page.locator(f'g.node[data-node="{target}"] .box').bounding_box()
                    assert src is not None and dst is not None
                    assert src["x"] + src["width"] < dst["x"]

                test_node = page.locator('svg.pipeline g.node[data-node="stage:test"]')
                assert await test_node.get_attribute("data-running") == "test.graph"
                assert "running" in (await test_node.get_attribute("class") or "")
                assert await test_node.locator(".running-badge").count() == 1
                assert await page.locator('path.edge.active[data-to="stage:test"]').count() == 1
                link = test_node.locator("a")
                assert await link.get_attribute("href") == f"/ui/stages/{NS}/test"
                freight = page.locator(f'li.freight[data-alias="{ALIAS}"]')
                await expect(freight.locator(".fr-promoting")).to_contain_text("test (running)")
                await page.screenshot(path=str(tmp_path / "pipeline-running.png"), full_page=True)

                gate.open("graph")
                # The stream redraws: the badge goes, the Freight arrives, by alias.
                await expect(test_node).to_have_attribute("data-running", "", timeout=20_000)
                await expect(test_node).to_have_attribute("data-freight", ALIAS, timeout=20_000)
                await expect(test_node.locator("text.freight")).to_have_text(ALIAS)
                assert await test_node.locator(".running-badge").count() == 0
                assert await page.locator("path.edge.active").count() == 0
                health = await test_node.get_attribute("data-health")
                assert health in ("Healthy", "Progressing", "Unhealthy", "Unknown"), health
                assert await test_node.locator("text.state").first.text_content() == health
                await expect(freight.locator(".fr-here")).to_contain_text("Now in test")
                await expect(freight.locator(".fr-verified")).to_contain_text(
                    "Verified in test", timeout=20_000
                )
                await expect(freight.locator(".fr-waiting")).to_contain_text("uat")
                await expect(freight.locator(".fr-waiting")).to_contain_text("perf")
                assert await page.evaluate("window.notReloaded === true")  # no reload
                # The text equivalent says the same, with links.
                listing = page.locator("ul.pipeline-list")
                assert "Takes Freight from test (Stage). Passes it to prod." in (
                    await listing.locator('li[data-node="stage:uat"]').inner_text()
                )

                light = tmp_path / "pipeline-light.png"
                await page.screenshot(path=str(light), full_page=True)
                graph_box = await svg.bounding_box()
                node_box = await test_node.locator(".box").bounding_box()
                assert graph_box is not None and node_box is not None
                assert not errors, errors

                # Dark: the same page in the dark theme, the node boxes dark, the text light.
                dark_context = await browser.new_context(viewport=DESKTOP, color_scheme="dark")
                dark_page = await dark_context.new_page()
                await dark_page.goto(f"{base}/ui/projects/{NS}")
                dark = tmp_path / "pipeline-dark.png"
                await dark_page.screenshot(path=str(dark), full_page=True)
                fill = await dark_page.locator('g.node[data-node="stage:test"] .box').evaluate(
                    "r => getComputedStyle(r).fill"
                )
                text = await dark_page.locator('g.node[data-node="stage:test"] text.name').evaluate(
                    "t => getComputedStyle(t).fill"
                )
                assert fill == "rgb(22, 27, 34)", fill
                assert text == "rgb(230, 237, 243)", text
            finally:
                await browser.close()

    image = Image.open(light).convert("RGB")

    def crop(box: FloatRect) -> Image.Image:
        x, y = int(box["x"]), int(box["y"])
        return image.crop((x, y, x + int(box["width"]), y + int(box["height"])))

    assert len(_colours(crop(graph_box))) > 50  # nodes, text, marks, edges: not an empty frame
    if health == "Healthy":  # the test Stage's stripe and tick are the theme's green
        node = _colours(crop(node_box))
        assert any(_close(c, SUCCEEDED_GREEN, 20) for c, _ in node.most_common(40)), node
    dark_image = Image.open(dark).convert("RGB")
    right_edge = dark_image.getpixel((DESKTOP["width"] - 5, DESKTOP["height"] // 2))
    assert isinstance(right_edge, tuple) and sum(right_edge) < 120  # a dark page
