"""The status pages over HTTP: the server built by ``create_app`` on its embedded cluster (seeded
with examples/kargo-demo), Promotions created in that cluster, pages and event streams read
with an HTTP client. Access control modes: off (the default), a proxy's header, and GitHub
sign-in against the fake GitHub's OAuth endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import ServerState, create_app, wait_started
from app.settings import Settings, SettingsError
from app.ui.views import MASK, Masker
from handlers.checks import check_run_fields
from promoter.chat.views import promotion_view
from promoter.clock import SYSTEM, Clock
from promoter.resources.stages import phase_of
from slack.messages import render_promotion
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.controller import Gate, registry_with, wait_for_object
from tests.support.github import FakeGitHub, app_private_key, running_fake_github, sign_in
from tests.support.processes import QUIET

NS = "kargo-demo"
FREIGHT = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"
SLACK_TOKEN = "xoxb-pages-test-token-0123456789"
SESSION_SECRET = "s" * 40


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, gate: Gate | None = None, clock: Clock = SYSTEM, **env: str
) -> AsyncIterator[tuple[TestClient[Any, Any], ServerState]]:
    settings = Settings.from_env(
        {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
            # The pages' Promotions bring their steps (outputs, gates) instead of a template.
            "LONGSHOREMAN_ALLOW_PROMOTION_STEPS": "true",
            **env,
        }
    )
    app = create_app(settings, registry=registry_with(gate=gate or Gate()), clock=clock)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        state = await wait_started(client.app)
        assert state.controller is not None
        await asyncio.wait_for(state.controller.wait_synced(), 20)
        yield client, state


def promotion(name: str, steps: list[dict[str, Any]], stage: str = "test") -> dict[str, Any]:
    return objects.promotion(name, stage, namespace=NS, freight=FREIGHT, steps=steps)


def gate_step(name: str, alias: str = "wait") -> dict[str, Any]:
    return {"uses": "gate", "as": alias, "config": {"name": name}}


async def create(state: ServerState, obj: Mapping[str, Any]) -> None:
    assert state.kube is not None
    await state.kube.create(k.PROMOTIONS, dict(obj))


async def wait_phase(state: ServerState, name: str, phase: str) -> dict[str, Any]:
    assert state.kube is not None and state.controller is not None
    obj = await wait_for_object(
        state.kube,
        k.PROMOTIONS,
        NS,
        name,
        lambda o: phase_of(o).value == phase,
    )
    # The page reads the informer cache: wait until it has caught up too.
    async with asyncio.timeout(10):
        while True:
            cached = state.controller.promotions.get(NS, name)
            if cached is not None and phase_of(cached).value == phase:
                return obj
            await asyncio.sleep(0.02)


async def text_of(client: TestClient[Any, Any], path: str, status: int = 200, **kw: Any) -> str:
    response = await client.get(path, **kw)
    body = await response.text()
    assert response.status == status, body
    return body


def strip_tags(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# ---- settings and links --------------------------------------------------------------------------


def test_public_url_links_check_runs_and_slack_messages_to_the_promotion_page() -> None:
    env = {
        "LONGSHOREMAN_GITHUB_APP_ID": "4242",
        "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": "hook-secret",
        "LONGSHOREMAN_GITHUB_PRIVATE_KEY": app_private_key(),
        "LONGSHOREMAN_SLACK_BOT_TOKEN": SLACK_TOKEN,
        "LONGSHOREMAN_SLACK_SIGNING_SECRET": "signing-secret",
        "LONGSHOREMAN_PUBLIC_URL": "https://ship.example.com/",
    }
    settings = Settings.from_env(env)
    assert settings.github is not None and settings.slack is not None
    page = "https://ship.example.com/ui/promotions/kargo-demo/test.01abc"
    assert settings.github.link_for(NS, "test.01abc") == page
    assert settings.slack.link_for(NS, "test.01abc") == page
    obj = promotion("test.01abc", [gate_step("g")])
    fields = check_run_fields(promotion_view(obj, link=page))
    assert fields["details_url"] == page
    message = render_promotion(promotion_view(obj, link=settings.slack.link_for(NS, "test.01abc")))
    assert f"<{page}|Details>" in str(message)

    # An explicit LONGSHOREMAN_GITHUB_PROMOTION_URL (a Kargo UI, a dashboard) still wins for GitHub.
    explicit = Settings.from_env(
        {**env, "LONGSHOREMAN_GITHUB_PROMOTION_URL": "https://kargo/{promotion}"}
    )
    assert explicit.github is not None
    assert explicit.github.link_for(NS, "p") == "https://kargo/p"
    # Without a public URL nothing links to the pages.
    plain = Settings.from_env({k: v for k, v in env.items() if k != "LONGSHOREMAN_PUBLIC_URL"})
    assert plain.github is not None and plain.github.link_for(NS, "p") is None
    assert plain.slack is not None and plain.slack.link_for(NS, "p") is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LONGSHOREMAN_PUBLIC_URL": "ship.example.com"}, "LONGSHOREMAN_PUBLIC_URL="),
        ({"LONGSHOREMAN_PUBLIC_URL": "https://u:p@ship.example.com"}, "must not contain"),
        ({"LONGSHOREMAN_UI_AUTH": "basic"}, "LONGSHOREMAN_UI_AUTH='basic' must be none, header"),
        ({"LONGSHOREMAN_UI_AUTH": "header", "LONGSHOREMAN_UI_AUTH_HEADER": "X User"}, "header"),
        (
            {"LONGSHOREMAN_UI_AUTH": "github", "LONGSHOREMAN_UI_GITHUB_CLIENT_ID": "Iv1.x"},
            "LONGSHOREMAN_UI_AUTH=github needs LONGSHOREMAN_UI_GITHUB_CLIENT_SECRET, "
            "LONGSHOREMAN_UI_GITHUB_ORG, LONGSHOREMAN_UI_SESSION_SECRET",
        ),
        (
            {
                "LONGSHOREMAN_UI_AUTH": "github",
                "LONGSHOREMAN_UI_GITHUB_CLIENT_ID": "Iv1.x",
                "LONGSHOREMAN_UI_GITHUB_CLIENT_SECRET": "client-secret",
                "LONGSHOREMAN_UI_GITHUB_ORG": "example",
                "LONGSHOREMAN_UI_SESSION_SECRET": "too-short-secret",
            },
            "LONGSHOREMAN_UI_SESSION_SECRET must be at least 32 characters",
        ),
    ],
)
def test_bad_page_settings_name_the_variable_and_never_echo_secrets(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_env(env)
    assert message in str(err.value)
    assert "too-short-secret" not in str(err.value) and "client-secret" not in str(err.value)


@pytest.mark.parametrize(
    ("key", "masked"),
    [
        ("apiToken", True),
        ("db_password", True),
        ("ssh-key", True),
        ("privateKey", True),
        ("GITHUB_TOKEN", True),
        ("credentials", True),
        ("clientSecrets", True),
        ("key", True),
        ("monkey", False),
        ("keyboard", False),
        ("commitURL", False),
        ("branch", False),
    ],
)
def test_output_keys_that_look_secret_are_masked(key: str, masked: bool) -> None:
    shown = Masker(["configured-secret"]).output("", {key: "value with configured-secret"})
    assert shown[key] == (MASK if masked else f"value with {MASK}")


# ---- pages -------------------------------------------------------------------------------------


async def test_project_page_shows_stages_freight_health_and_the_queue(tmp_path: Path) -> None:
    gate = Gate()
    async with serving(tmp_path, gate) as (client, state):
        await create(state, promotion("test.aaa-first", [gate_step("one")]))
        await wait_phase(state, "test.aaa-first", "Running")
        await create(state, promotion("test.bbb-second", [gate_step("two")]))
        await wait_phase(state, "test.bbb-second", "Pending")

        index = await text_of(client, "/ui/")
        assert '<a href="/ui/projects/kargo-demo">kargo-demo</a>' in index
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in index
        assert "Access control is off" in index  # said in every page's footer

        page = await text_of(client, f"/ui/projects/{NS}")
        rows = dict(re.findall(r'<tr data-stage="([^"]+)">(.*?)</tr>', page))
        assert set(rows) == {"test", "uat"}
        test_row = strip_tags(rows["test"])
        assert "test.aaa-first Running" in test_row  # the running Promotion
        assert "test.bbb-second" in test_row  # queued behind it
        assert 'href="/ui/promotions/kargo-demo/test.bbb-second"' in rows["test"]
        assert 'data-label="Health"' in rows["test"]  # each cell labelled for phone cards
        assert "Unknown" in strip_tags(rows["test"])  # health not checked yet

        gate.open("one")
        await wait_phase(state, "test.aaa-first", "Succeeded")
        stage = await text_of(client, f"/ui/stages/{NS}/test")
        assert "Freight history" in stage
        assert "frozen-tauntaun" in strip_tags(stage)  # the Stage's Freight, by alias
        assert "test.aaa-first" in stage


async def test_a_frozen_stage_and_its_held_promotion_say_so_on_the_pages(tmp_path: Path) -> None:
    clock = FakeClock(datetime(2026, 1, 10, 12, tzinfo=UTC))  # a Saturday
    freeze = {
        "name": "weekend-freeze",
        "kind": "Deny",
        "stageSelector": {"name": "test"},
        "rrule": "FREQ=WEEKLY;BYDAY=FR",
        "dtstart": "TZID=Europe/Berlin:20260102T180000",
        "dtend": "TZID=Europe/Berlin:20260105T090000",
    }
    async with serving(tmp_path, clock=clock) as (client, state):
        assert state.kube is not None
        await state.kube.create(k.PROJECT_CONFIGS, objects.project_config(NS, windows=[freeze]))
        await create(state, promotion("test.held", [gate_step("one")]))
        await wait_for_object(
            state.kube,
            k.PROMOTIONS,
            NS,
            "test.held",
            lambda p: "weekend-freeze" in str((p.get("status") or {}).get("message")),
        )
        await wait_for_object(
            state.kube,
            k.STAGES,
            NS,
            "test",
            lambda s: bool((s.get("status") or {}).get("promotionWindowStatus")),
        )
        async with asyncio.timeout(10):  # the page reads the informer cache
            while True:
                cached = state.controller.stages.get(NS, "test") or {}
                if (cached.get("status") or {}).get("promotionWindowStatus"):
                    break
                await asyncio.sleep(0.02)
        page = await text_of(client, f"/ui/projects/{NS}")
        rows = dict(re.findall(r'<tr data-stage="([^"]+)">(.*?)</tr>', page))
        assert (
            "frozen until 2026-01-12 08:00 UTC: Deny window `weekend-freeze` is in effect"
            in strip_tags(rows["test"]).replace("&#x60;", "`")
        )
        assert "frozen" not in strip_tags(rows["uat"])
        held = strip_tags(await text_of(client, f"/ui/promotions/{NS}/test.held"))
        assert "waiting for promotion window" in held and "opens Mon 09:00 Europe/Berlin" in held


async def test_the_stage_page_shows_the_project_s_deep_links_and_why_one_is_missing(
    tmp_path: Path,
) -> None:
    links = [
        {"title": "Grafana", "url": "https://grafana/d/app?env={{ .stage.metadata.name }}"},
        {"title": "Only prod", "url": "https://x", "if": 'stage.metadata.name == "prod"'},
        {"title": "Broken", "url": "https://x/{{ .stage.metadata.name", "description": "d"},
    ]
    async with serving(tmp_path) as (client, state):
        assert state.kube is not None and state.controller is not None
        await state.kube.create(k.PROJECT_CONFIGS, objects.project_config(NS, stageLinks=links))
        async with asyncio.timeout(10):  # the page reads the informer cache
            while True:
                if state.controller.rules.project(NS) is not None:
                    break
                await asyncio.sleep(0.02)
        page = await text_of(client, f"/ui/stages/{NS}/test")
        section = page.split('<h2 id="links">', 1)[1].split("</ul>", 1)[0]
        assert '<a href="https://grafana/d/app?env=test" rel="noopener noreferrer">Grafana</a>' in (
            section
        )
        assert "Only prod" not in section
        assert "error evaluating URL template for link &#x27;Broken&#x27;" in section


async def test_promotion_page_shows_steps_outputs_links_masks_secrets_and_escapes_text(
    tmp_path: Path,
) -> None:
    hostile = "<script>alert('pwned')</script>"
    steps = [
        {
            "uses": "compose-output",
            "as": "publish",
            "config": {
                "pr": {"id": 7, "url": "https://github.com/example/gitops/pull/7"},
                "apiToken": "ghp_plain-token-value",
                "dbPassword": "hunter2-password",
                "note": f"the bot token is {SLACK_TOKEN}",
                "mirror": "https://deploy:s3cr3t-pw@git.example.com/repo.git",
                "html": hostile,
            },
        },
        gate_step(hostile),
    ]
    gate = Gate()
    env = {
        "LONGSHOREMAN_SLACK_BOT_TOKEN": SLACK_TOKEN,
        "LONGSHOREMAN_SLACK_SIGNING_SECRET": "signing-secret-value",
        "LONGSHOREMAN_SLACK_API_URL": "http://127.0.0.1:9/api/",
        "LONGSHOREMAN_ARGOCD_URL": "https://argocd.example.com",
    }
    async with serving(tmp_path, gate, **env) as (client, state):
        await create(state, promotion("test.outputs", steps))
        await wait_phase(state, "test.outputs", "Running")
        page = await text_of(client, f"/ui/promotions/{NS}/test.outputs")
        response = await client.get(f"/ui/promotions/{NS}/test.outputs")
        assert "script-src 'nonce-" in response.headers["Content-Security-Policy"]

        # Escaped: the hostile text is shown, never run.
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page
        # Steps with status, in order.
        steps_html = re.findall(r'<tr class="step" data-step="([^"]+)">(.*?)</tr>', page)
        assert [alias for alias, _ in steps_html] == ["publish", "wait"]
        assert 'data-status="Succeeded"' in steps_html[0][1]
        assert 'data-status="Running"' in steps_html[1][1]
        assert "gate &lt;script&gt;" in steps_html[1][1]  # the step's message, escaped
        assert 'id="phase" data-status="Running"' in page
        # Outputs, secrets masked by key and by value.
        text = strip_tags(page)
        assert "ghp_plain-token-value" not in page and "hunter2-password" not in page
        assert "apiToken ••••••" in text and "dbPassword ••••••" in text
        assert SLACK_TOKEN not in page and "the bot token is ••••••" in text
        assert "s3cr3t-pw" not in page and "https://deploy:••••••@git.example.com" in text
        assert "pr.id 7" in text
        # Links: the pull request.
        assert (
            '<a href="https://github.com/example/gitops/pull/7" rel="noopener noreferrer">'
            "Pull request #7</a>" in page
        )

        gate.open(hostile)
        await wait_phase(state, "test.outputs", "Succeeded")
        done = await text_of(client, f"/ui/promotions/{NS}/test.outputs")
        assert 'id="phase" data-status="Succeeded"' in done
        assert "2 of 2 steps done" in strip_tags(done)


async def test_a_token_as_a_urls_user_name_is_masked_too(tmp_path: Path) -> None:
    # https://<token>@host is how tokens usually ride in clone URLs (GitHub, GitLab).
    token = "ghp_1234567890abcdefABCDEF1234567890abcd"
    steps = [
        {
            "uses": "compose-output",
            "as": "publish",
            "config": {"cloneURL": f"https://{token}@github.com/example/gitops.git"},
        }
    ]
    async with serving(tmp_path) as (client, state):
        await create(state, promotion("test.urltoken", steps))
        await wait_phase(state, "test.urltoken", "Succeeded")
        page = await text_of(client, f"/ui/promotions/{NS}/test.urltoken")
    assert token not in page
    assert f"https://{MASK}@github.com/example/gitops.git" in strip_tags(page)


async def test_missing_projects_stages_and_promotions_are_404(tmp_path: Path) -> None:
    async with serving(tmp_path) as (client, _):
        assert "No project" in await text_of(client, "/ui/projects/nope", status=404)
        assert "No Stage" in await text_of(client, f"/ui/stages/{NS}/nope", status=404)
        assert "No Promotion" in await text_of(client, "/ui/promotions/other/x", status=404)
        body = await text_of(client, f"/ui/promotions/{NS}/%3Cb%3Enope%3C%2Fb%3E", status=404)
        assert "<b>nope" not in body and "&lt;b&gt;nope&lt;/b&gt;" in body
        response = await client.get(f"/ui/promotions/{NS}/nope/events")
        assert response.status == 404


async def read_event(stream: aiohttp.StreamReader) -> tuple[str, str]:
    """The next event (name, data) of a server-sent event stream."""
    name, data = "message", []
    while True:
        line = (await stream.readline()).decode()
        if line == "":
            raise AssertionError("the stream ended")
        line = line.rstrip("\n")
        if line == "":
            if data:
                return name, "\n".join(data)
            continue
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])


async def test_event_stream_sends_the_promotion_again_when_it_changes(tmp_path: Path) -> None:
    gate = Gate()
    async with serving(tmp_path, gate) as (client, state):
        await create(state, promotion("test.live", [gate_step("go")]))
        await wait_phase(state, "test.live", "Running")
        response = await client.get(f"/ui/promotions/{NS}/test.live/events")
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        async with asyncio.timeout(20):
            name, data = await read_event(response.content)
            assert name == "update" and 'id="phase" data-status="Running"' in data
            gate.open("go")
            while 'id="phase" data-status="Succeeded"' not in data:
                name, data = await read_event(response.content)
                assert name == "update"
        response.close()

        # The project's stream follows its Promotions too.
        project = await client.get(f"/ui/projects/{NS}/events")
        async with asyncio.timeout(20):
            _, data = await read_event(project.content)
            assert "test.live" in data
            await create(state, promotion("test.later", [gate_step("later")]))
            while "test.later" not in data:
                _, data = await read_event(project.content)
        project.close()


def parse_events(raw: str) -> list[tuple[str, str]]:
    """Server-sent events as a browser reads them: CR, LF and CRLF all end a line."""
    events, name, data = [], "message", []
    for line in re.split(r"\r\n|\r|\n", raw):
        if line == "":
            if data:
                events.append((name, "\n".join(data)))
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[len("event:") :].lstrip(" ")
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
    return events


async def test_carriage_returns_in_step_outputs_cannot_forge_events(tmp_path: Path) -> None:
    # A step output (an HTTP response, a commit message) with CRs: an EventSource would read
    # them as line ends, cutting the update short and dispatching the rest as the attacker's
    # own events ("gone" stops the live page).
    forged = "fine\r\revent: gone\rdata: x\r\revent: update\rdata: Deploy approved by ops\r\r"
    steps = [
        {"uses": "compose-output", "as": "out", "config": {"note": forged}},
        gate_step("hold"),
    ]
    gate = Gate()
    async with serving(tmp_path, gate) as (client, state):
        await create(state, promotion("test.crlf", steps))
        await wait_phase(state, "test.crlf", "Running")
        response = await client.get(f"/ui/promotions/{NS}/test.crlf/events")
        raw = b""
        async with asyncio.timeout(20):
            while raw.count(b"\n\n") < 2:  # "retry:" and the first update
                raw += await response.content.readany()
        response.close()
        gate.open("hold")
    events = [e for e in parse_events(raw.decode()) if e[0] != "message"]
    assert [name for name, _ in events] == ["update"]
    assert 'id="phase" data-status="Running"' in events[0][1]
    assert "Deploy approved by ops" in events[0][1]  # the text is still shown, as text


# ---- access control ----------------------------------------------------------------------------


async def test_header_mode_requires_the_proxy_header(tmp_path: Path) -> None:
    env = {"LONGSHOREMAN_UI_AUTH": "header", "LONGSHOREMAN_UI_AUTH_HEADER": "X-Auth-Request-User"}
    async with serving(tmp_path, **env) as (client, _):
        for path in ("/ui/", f"/ui/projects/{NS}", f"/ui/projects/{NS}/events"):
            response = await client.get(path)
            assert response.status == 401
            assert "X-Auth-Request-User" in await response.text()
        page = await text_of(client, "/ui/", headers={"X-Auth-Request-User": "<b>ann</b>"})
        assert "Signed in as <strong>&lt;b&gt;ann&lt;/b&gt;</strong>" in page
        assert "Access control is off" not in page
        # Other endpoints are not the pages' business.
        assert (await client.get("/healthz")).status == 200


def github_env(fake: FakeGitHub, **extra: str) -> dict[str, str]:
    return {
        "LONGSHOREMAN_UI_AUTH": "github",
        "LONGSHOREMAN_UI_GITHUB_CLIENT_ID": "Iv1.pages",
        "LONGSHOREMAN_UI_GITHUB_CLIENT_SECRET": "oauth-client-secret",
        "LONGSHOREMAN_UI_GITHUB_ORG": "example",
        "LONGSHOREMAN_UI_SESSION_SECRET": SESSION_SECRET,
        "LONGSHOREMAN_GITHUB_WEB_URL": fake.url,
        "LONGSHOREMAN_GITHUB_API_URL": fake.url,
        **extra,
    }


async def test_github_sign_in_lets_org_members_in(tmp_path: Path) -> None:
    async with running_fake_github() as fake:
        fake.add_oauth_app("Iv1.pages", "oauth-client-secret")
        fake.add_org_member("example", "octocat")
        fake.sign_in_as("octocat")
        async with serving(tmp_path, **github_env(fake)) as (client, _):
            # Not signed in: pages send you to sign in, streams answer 401.
            first = await client.get(f"/ui/projects/{NS}", allow_redirects=False)
            assert first.status == 302
            assert first.headers["Location"] == "/ui/login?next=%2Fui%2Fprojects%2Fkargo-demo"
            assert (await client.get(f"/ui/projects/{NS}/events")).status == 401

            login = await client.get("/ui/login", params={"next": "/ui/"}, allow_redirects=False)
            target = urlsplit(login.headers["Location"])
            query = parse_qs(target.query)
            assert f"{target.scheme}://{target.netloc}{target.path}" == (
                f"{fake.url}/login/oauth/authorize"
            )
            assert query["client_id"] == ["Iv1.pages"] and query["scope"] == ["read:org"]
            assert query["redirect_uri"][0].endswith("/ui/oauth/callback")

            done = await sign_in(client, f"/ui/projects/{NS}")
            assert done.status == 302 and done.headers["Location"] == f"/ui/projects/{NS}"
            cookie = done.cookies["longshoreman_session"]
            assert cookie["httponly"] and cookie["samesite"] == "Lax"
            assert not cookie["secure"]  # no https public URL here
            assert "oauth-client-secret" not in cookie.value and "gho_" not in cookie.value

            page = await text_of(client, f"/ui/projects/{NS}")
            assert "Signed in with GitHub as <strong>octocat</strong>" in page
            assert fake.requests("GET", "/user/memberships/orgs/example")[-1].status == 200

            # Sign out forgets the session.
            out = await client.post("/ui/logout", allow_redirects=False)
            assert out.status == 303
            again = await client.get(f"/ui/projects/{NS}", allow_redirects=False)
            assert again.status == 302


async def test_github_sign_in_refuses_non_members_and_forged_cookies(tmp_path: Path) -> None:
    async with running_fake_github() as fake:
        fake.add_oauth_app("Iv1.pages", "oauth-client-secret")
        fake.add_org_member("example", "pending-pat", state="pending")
        fake.add_org_member("other-org", "mallory")
        async with serving(tmp_path, **github_env(fake)) as (client, _):
            for user in ("mallory", "pending-pat"):
                fake.sign_in_as(user)
                refused = await sign_in(client, "/ui/")
                assert refused.status == 403
                body = await refused.text()
                assert f"@{user} is not an active member of the example organization" in body
                assert "Set-Cookie" not in refused.headers or (
                    "longshoreman_session" not in refused.headers["Set-Cookie"]
                )
                assert (await client.get("/ui/", allow_redirects=False)).status == 302

            # A callback without the state cookie this server set is refused (CSRF).
            client.session.cookie_jar.clear()
            stale = await client.get("/ui/oauth/callback?code=abc&state=xyz", allow_redirects=False)
            assert stale.status == 403
            assert "stale or was not started here" in await stale.text()

            # A session cookie not signed with our secret lets nobody in.
            from app.ui.auth import sign

            forged = sign("x" * 40, {"u": "mallory", "org": "example", "exp": 9e9})
            client.session.cookie_jar.update_cookies({"longshoreman_session": forged})
            assert (await client.get("/ui/", allow_redirects=False)).status == 302


async def test_an_event_stream_ends_when_its_session_expires(tmp_path: Path) -> None:
    from app.ui.auth import sign

    clock = FakeClock()
    async with (
        running_fake_github() as fake,
        serving(tmp_path, clock=clock, **github_env(fake)) as (client, state),
    ):
        expiry = clock.now().timestamp() + 2
        soon = sign(SESSION_SECRET, {"u": "octocat", "org": "example", "exp": expiry})
        client.session.cookie_jar.update_cookies({"longshoreman_session": soon})
        stream = await client.get(f"/ui/projects/{NS}/events")
        assert stream.status == 200
        async with asyncio.timeout(20):
            name, _ = await read_event(stream.content)
            assert name == "update"
            clock.advance(2.5)
            # A change wakes the stream: an expired session gets nothing more.
            await create(state, promotion("test.after-expiry", [gate_step("x")]))
            rest = b""
            while chunk := await stream.content.readany():
                rest += chunk
        assert b"test.after-expiry" not in rest
        stream.close()


async def test_oauth_state_must_be_a_state_cookie(tmp_path: Path) -> None:
    async with running_fake_github() as fake:
        fake.add_oauth_app("Iv1.pages", "oauth-client-secret")
        fake.add_org_member("example", "octocat")
        fake.sign_in_as("octocat")
        async with serving(tmp_path, **github_env(fake)) as (client, _):
            # A state that is not ASCII is refused, not a server error.
            await client.get("/ui/login", allow_redirects=False)
            odd = await client.get("/ui/oauth/callback?code=abc&state=%C3%A9")
            assert odd.status == 403, await odd.text()
            # A session cookie (no state in it) is not a sign-in in progress.
            done = await sign_in(client, "/ui/")
            session = done.cookies["longshoreman_session"].value
            client.session.cookie_jar.clear()
            replay = await client.get(
                "/ui/oauth/callback?code=abc&state=None",
                headers={"Cookie": f"longshoreman_oauth={session}"},
                allow_redirects=False,
            )
            assert replay.status == 403
            assert "stale or was not started here" in await replay.text()


async def test_https_public_url_makes_the_session_cookie_secure(tmp_path: Path) -> None:
    async with running_fake_github() as fake:
        fake.add_oauth_app("Iv1.pages", "oauth-client-secret")
        fake.add_org_member("example", "octocat")
        fake.sign_in_as("octocat")
        env = github_env(fake, LONGSHOREMAN_PUBLIC_URL="https://ship.example.com")
        async with serving(tmp_path, **env) as (client, _):
            login = await client.get("/ui/login", allow_redirects=False)
            query = parse_qs(urlsplit(login.headers["Location"]).query)
            assert query["redirect_uri"] == ["https://ship.example.com/ui/oauth/callback"]
            state_cookie = login.cookies["longshoreman_oauth"]
            assert state_cookie["secure"]
            # The browser comes back through the public URL; here the test carries the state
            # cookie by hand, as the secure cookie is not sent over plain http.
            async with aiohttp.ClientSession() as github:
                async with github.get(login.headers["Location"], allow_redirects=False) as r:
                    back = urlsplit(r.headers["Location"])
            done = await client.get(
                f"{back.path}?{back.query}",
                headers={"Cookie": f"longshoreman_oauth={state_cookie.value}"},
                allow_redirects=False,
            )
            assert done.status == 302
            session = done.cookies["longshoreman_session"]
            assert session["secure"] and session["httponly"] and session["samesite"] == "Lax"
