"""Acting from the status pages in a real browser (Debian's chromium, headless, through Playwright),
signed in with GitHub against the fake GitHub's OAuth endpoints.

A member promotes Freight into web-test, aborts that Promotion from its page, approves the Freight
for web-prod, promotes it there through the confirmation a protected Stage asks for, and re-verifies
web-prod; each shows in the cluster and in the check runs on the Freight's commit (the approval, by
whom, on web-test's; the re-verification as a new ``verify: web-prod`` run). A frozen Stage's
Promote button is disabled and says why. A form without its CSRF token, or with a forged one, is
refused. A reader without write access reads, for the same command, the refusal a pull request
comment gets. The project, Stage, Freight and Promotion pages are screenshotted at 1,400 and 800 px
wide, and no table cell's word is broken across lines.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.controller import kube as k
from app.server import ServerState
from promoter.resources import annotations as ann
from tests.e2e.test_pages_browser import CHROMIUM, CHROMIUM_ARGS, _need_chromium
from tests.integration.test_pages import NS
from tests.integration.test_pages_actions import (
    FREIGHT,
    HOOK_SECRET,
    REPO,
    acting_server,
    approval_shown,
    gate,
    promotions_of,
)
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.controller import Gate, wait_for_object
from tests.support.github import FakeGitHub, webhook_request
from tests.support.waiting import eventually

if TYPE_CHECKING:
    from playwright.async_api import Page

WIDTHS = (1400, 800)
# A window that is closed at the fake clock's time (a Saturday), for web-hold only.
FREEZE = {
    "name": "weekend-freeze",
    "kind": "Deny",
    "stageSelector": {"name": "web-hold"},
    "rrule": "FREQ=WEEKLY;BYDAY=FR",
    "dtstart": "TZID=Europe/Berlin:20260102T180000",
    "dtend": "TZID=Europe/Berlin:20260105T090000",
}

# Every word of every table cell, as the browser laid it out: a word whose range has more than
# one line box was broken across lines ("git-clon" / "e").
BROKEN_WORDS_JS = """
() => {
  const broken = [];
  for (const cell of document.querySelectorAll("td")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent;
      const words = /\\S+/g;
      for (let m = words.exec(text); m; m = words.exec(text)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0)
          .map(r => Math.round(r.top)));
        if (lines.size > 1) { broken.push(m[0]); }
      }
    }
  }
  return broken;
}
"""

# The Promote form, its CSRF token replaced (or taken out: token null), submitted (a button
# press, as press() does).
FORGED_SUBMIT = """
([freight, token]) => {
  const form = document.querySelector('form.act[data-action="promote"]');
  const csrf = form.querySelector("input[name=csrf]");
  if (token === null) { csrf.remove(); } else { csrf.value = token; }
  const select = form.querySelector("select");
  if (select) { select.value = freight; }
  form.requestSubmit(form.querySelector("button"));
}
"""


@contextlib.asynccontextmanager
async def server(
    tmp_path: Path, login: str, permission: str = "write"
) -> AsyncIterator[tuple[str, ServerState, FakeGitHub]]:
    clock = FakeClock(datetime(2026, 1, 10, 12, tzinfo=UTC))  # a Saturday
    gate = Gate()
    gate.open("prod")  # web-prod's Promotion succeeds, so its Freight is verified there
    async with acting_server(tmp_path, login, permission, clock, gate) as (client, state, fake):
        yield str(client.make_url("/")).rstrip("/"), state, fake


@contextlib.asynccontextmanager
async def browser_page(base: str) -> AsyncIterator[Page]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={"width": WIDTHS[0], "height": 1000})
            page = await context.new_page()
            # Signing in: our /ui/login, the fake GitHub's authorize, our callback, the page.
            await page.goto(f"{base}/ui/login?next=/ui/projects/{NS}")
            assert page.url == f"{base}/ui/projects/{NS}"
            yield page
        finally:
            await browser.close()


async def press(page: Page, action: str, button: str, freight: str | None = None) -> str:
    """Press the button of the form for ``action`` named ``button``; the outcome's text."""
    form = page.locator(f'form.act[data-action="{action}"]', has_text=button).first
    if freight is not None and await form.locator("select").count():
        await form.locator("select").select_option(freight)
    await form.get_by_role("button", name=button).click()
    await page.wait_for_load_state()
    return await page.locator("#outcome").inner_text()


async def test_a_member_acts_from_the_pages_in_a_browser(tmp_path: Path) -> None:
    _need_chromium()
    from playwright.async_api import expect

    async with server(tmp_path, "octocat") as (base, state, fake), browser_page(base) as page:
        assert state.kube is not None
        kube = state.kube
        await kube.create(k.PROJECT_CONFIGS, objects.project_config(NS, windows=[FREEZE]))
        await kube.create(
            k.STAGES,
            objects.stage("web-hold", namespace=NS, warehouse="kargo-demo", steps=gate("never")),
        )

        # Promote into web-test from its Stage page.
        await page.goto(f"{base}/ui/stages/{NS}/web-test")
        said = await press(page, "promote", "Promote", FREIGHT)
        assert said.startswith("Promotion web-test.") and "web-1" in said, said
        name = said.split()[1]
        promotion = await wait_for_object(
            kube,
            k.PROMOTIONS,
            NS,
            name,
            lambda p: (p.get("status") or {}).get("phase") == "Running",
        )
        assert ann.created_by(promotion) == "github:octocat"

        async def check_run() -> bool | None:
            return any(r["name"] == "promote: web-test" for r in fake.check_runs(REPO)) or None

        await eventually(check_run, "the promote: web-test check run")

        # Abort it from its own page (followed from the outcome).
        await page.get_by_role("link", name="Follow the Promotion").click()
        await expect(page.locator("#phase")).to_have_attribute("data-status", "Running")
        said = await press(page, "abort", "Abort")
        assert said == f"abort requested for {name} (Stage web-test)"
        await wait_for_object(
            kube,
            k.PROMOTIONS,
            NS,
            name,
            lambda p: (p.get("status") or {}).get("phase") == "Aborted",
        )

        async def check_run_aborted() -> bool | None:
            runs = [r for r in fake.check_runs(REPO) if r["name"] == "promote: web-test"]
            return any(r.get("conclusion") in ("cancelled", "failure") for r in runs) or None

        await eventually(check_run_aborted, "the check run's conclusion")

        # Approve the Freight for web-prod, then promote it there: protected, so confirm.
        await page.goto(f"{base}/ui/freight/{NS}/web-1")
        said = await press(page, "approve", "Approve for web-prod")
        assert said.startswith("Freight web-1 approved for Stage web-prod")
        freight = await kube.get(k.FREIGHT, NS, FREIGHT)
        assert freight["status"]["approvedFor"]["web-prod"]["approvedBy"] == "github:octocat"
        shown = await approval_shown(fake, "promote: web-test", "web-prod", "octocat")
        assert shown == "Approved for `web-prod` by @\u200boctocat at 2026-01-10 12:00 UTC"
        await page.goto(f"{base}/ui/freight/{NS}/web-1")
        said = await press(page, "promote", "Promote to web-prod")
        assert "asks for a confirmation" in said
        assert not await promotions_of(state, "web-prod")
        said = await press(page, "promote", "Confirm")
        assert said.startswith("Promotion web-prod.")
        assert len(await promotions_of(state, "web-prod")) == 1
        await wait_for_object(
            kube,
            k.PROMOTIONS,
            NS,
            said.split()[1],
            lambda p: (p.get("status") or {}).get("phase") == "Succeeded",
        )

        def verify_runs() -> list[dict[str, Any]]:
            return [r for r in fake.check_runs(REPO) if r["name"] == "verify: web-prod"]

        async def verified() -> bool | None:
            return any(r.get("status") == "completed" for r in verify_runs()) or None

        await eventually(verified, "the verify: web-prod check run")

        # Re-verify web-prod from its page: a new verification, with a check run of its own.
        await page.goto(f"{base}/ui/stages/{NS}/web-prod")
        said = await press(page, "verify", "Re-verify")
        assert said == "verification of the current Freight in Stage web-prod requested"
        stage = await kube.get(k.STAGES, NS, "web-prod")
        assert set(ann.REVERIFY_ANNOTATIONS) & set(stage["metadata"]["annotations"])

        async def reverified() -> list[dict[str, Any]] | None:
            found = [
                r for r in verify_runs() if "Requested by @\u200boctocat" in r["output"]["summary"]
            ]
            return found or None

        assert len(await eventually(reverified, "the re-verification's check run")) == 1
        assert len(verify_runs()) == 2

        # A frozen Stage: its Promote button is disabled and says until when and why.
        async def frozen() -> str | None:
            await page.goto(f"{base}/ui/stages/{NS}/web-hold")
            button = page.locator('form.act[data-action="promote"] button')
            return await button.get_attribute("title") if await button.is_disabled() else None

        why = await eventually(frozen, "web-hold frozen on its page")
        assert why == (
            "Stage web-hold is frozen until 2026-01-12 08:00 UTC: Deny window `weekend-freeze` "
            "is in effect"
        )
        assert why in await page.locator(".why").first.inner_text()

        # A form without its CSRF token, or with one not this session's: refused, nothing
        # created.
        before = len(await promotions_of(state, "web-test"))
        for token in (None, "forged"):
            await page.goto(f"{base}/ui/stages/{NS}/web-test")
            # Changed and submitted in one go: the live page may redraw its forms in between.
            async with page.expect_navigation():
                await page.evaluate(FORGED_SUBMIT, [FREIGHT, token])
            said = await page.locator("#outcome").inner_text()
            assert "CSRF token is missing or wrong" in said, token
        assert len(await promotions_of(state, "web-test")) == before

        await check_layout(page, base, tmp_path, name)


async def check_layout(page: Page, base: str, tmp_path: Path, promotion: str) -> None:
    """Each page at each width: screenshotted, and no word in a table cell broken."""
    pages = {
        "project": f"/ui/projects/{NS}",
        "stage": f"/ui/stages/{NS}/web-test",
        # Verified (its verification errored, then was asked again), with a Freight in it.
        "stage-prod": f"/ui/stages/{NS}/web-prod",
        "freight": f"/ui/freight/{NS}/web-1",
        "promotion": f"/ui/promotions/{NS}/{promotion}",
    }
    broken: dict[str, Any] = {}
    for width in WIDTHS:
        await page.set_viewport_size({"width": width, "height": 1000})
        for label, path in pages.items():
            await page.goto(base + path)
            assert await page.locator("td").count(), f"{label}: no table to check"
            await page.screenshot(path=str(tmp_path / f"{label}-{width}.png"), full_page=True)
            found = await page.evaluate(BROKEN_WORDS_JS)
            if found:
                broken[f"{label} at {width}px"] = found
            overflow = await page.evaluate("document.documentElement.scrollWidth")
            assert overflow <= width, f"{label} at {width}px is {overflow}px wide"
    assert not broken, broken


async def test_a_reader_reads_the_refusal_a_pull_request_comment_gets(tmp_path: Path) -> None:
    _need_chromium()
    async with (
        server(tmp_path, "mallory", "read") as (base, state, fake),
        browser_page(base) as page,
    ):
        await page.goto(f"{base}/ui/stages/{NS}/web-test")
        said = await press(page, "promote", "Promote", FREIGHT)
        assert not await promotions_of(state, "web-test")

        number = fake.add_issue(REPO)
        comment = fake.add_comment(REPO, number, "/promote web-1 to web-test", user="mallory")
        headers, body = webhook_request(
            "issue_comment", fake.comment_payload(REPO, comment), HOOK_SECRET
        )
        response = await page.request.post(f"{base}/github/webhook", data=body, headers=headers)
        assert response.status == 202

        async def reply() -> str | None:
            found = [c for c in fake.comments(REPO, number) if "refused" in str(c.get("body"))]
            return str(found[0]["body"]) if found else None

        replied = await eventually(reply, "the reply to the comment")
        assert replied.replace("\u200b", "") == f"@mallory: {said}"
        assert "@mallory needs write access to this repository (has read)" in said
