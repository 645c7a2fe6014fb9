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

import pytest
from PIL import Image

from tests.support.controller import Gate
from tests.test_pages import NS, create, gate_step, promotion, serving, wait_phase

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
