"""Acting from the status pages over HTTP: the server built by ``create_app`` on its embedded
cluster, with GitHub sign-in and the GitHub App against the fake GitHub. A signed-in member
promotes, approves, confirms a protected Stage, aborts and re-verifies with the pages' forms;
each shows in the cluster. A reader without write access gets the refusal a pull request
comment gets, word for word; a form without its CSRF token is refused; with sign-in off every
action says how to turn it on."""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from app.server import ServerState
from promoter.clock import SYSTEM, Clock
from promoter.resources import annotations as ann
from tests.integration.test_pages import NS, github_env, serving, sign_in, strip_tags
from tests.support import objects
from tests.support.controller import Gate, wait_for_object
from tests.support.github import FakeGitHub, running_fake_github, webhook_request
from tests.support.gitrepo import make_remote
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

REPO = "example/app"
FREIGHT = "f" * 40
HOOK_SECRET = "hook-secret"


def gate(name: str) -> list[dict[str, Any]]:
    return [{"uses": "gate", "as": "wait", "config": {"name": name}}]


async def seed_project(state: ServerState, sha: str = "0" * 40) -> None:
    """Two Stages of our own in the seeded project: web-test (direct) and web-prod (after
    web-test, protected, verified), and one Freight with a commit of the GitHub repository."""
    assert state.kube is not None and state.controller is not None
    kube = state.kube
    await kube.create(
        k.FREIGHT,
        objects.freight(
            FREIGHT,
            namespace=NS,
            alias="web-1",
            warehouse="kargo-demo",
            commits=[{"repoURL": f"https://github.com/{REPO}.git", "id": sha}],
        ),
    )
    await kube.create(
        k.STAGES,
        objects.stage("web-test", namespace=NS, warehouse="kargo-demo", steps=gate("hold")),
    )
    await kube.create(
        k.STAGES,
        objects.stage(
            "web-prod",
            namespace=NS,
            warehouse="kargo-demo",
            upstream=["web-test"],
            steps=gate("prod"),
            verification=["smoke"],
            annotations={ann.SLACK_CONFIRM: "true"},
        ),
    )
    controller = state.controller

    async def cached() -> bool | None:  # the pages read the informer caches
        return bool(controller.stages.get(NS, "web-prod") and controller.freight.get(NS, FREIGHT))

    await eventually(cached, "the Stages and Freight in the caches")


@contextlib.asynccontextmanager
async def acting_server(
    tmp_path: Path,
    login: str,
    permission: str = "write",
    clock: Clock = SYSTEM,
    gate: Gate | None = None,
) -> AsyncIterator[tuple[TestClient[Any, Any], ServerState, FakeGitHub]]:
    """The server with GitHub sign-in and the App on the fake GitHub, where ``login`` is an org
    member with ``permission`` on the repository and is signed in to GitHub (not yet here);
    ``gate`` the gates the Stages' steps wait at (all closed unless the caller opens one)."""
    async with running_fake_github() as fake:
        remote = make_remote(tmp_path, {"a": "1\n"}, name="app")
        fake.add_repo(REPO, remote)
        fake.set_permission(REPO, login, permission)
        fake.add_oauth_app("Iv1.pages", "oauth-client-secret")
        fake.add_org_member("example", login)
        fake.sign_in_as(login)
        env = github_env(
            fake,
            LONGSHOREMAN_GITHUB_APP_ID=str(fake.app_id),
            LONGSHOREMAN_GITHUB_PRIVATE_KEY=fake.private_key,
            LONGSHOREMAN_GITHUB_WEBHOOK_SECRET=HOOK_SECRET,
            LONGSHOREMAN_GITHUB_REPO_PROJECTS=f"{REPO}={NS}",
            # Every org member reads every project's pages, so a reader without write access
            # reaches the forms (and is refused there, as a comment would be).
            LONGSHOREMAN_UI_GITHUB_ACCESS="org",
        )
        async with serving(tmp_path, gate=gate or Gate(), clock=clock, **env) as (client, state):
            await seed_project(state, remote.git("rev-parse", "main"))
            yield client, state, fake


@contextlib.asynccontextmanager
async def signed_in(
    tmp_path: Path, login: str, permission: str = "write"
) -> AsyncIterator[tuple[TestClient[Any, Any], ServerState, FakeGitHub]]:
    async with acting_server(tmp_path, login, permission) as (client, state, fake):
        done = await sign_in(client, f"/ui/projects/{NS}")
        assert done.status == 302
        yield client, state, fake


async def approval_shown(fake: FakeGitHub, run: str, stage: str, login: str) -> str:
    """The line of the ``run`` check run on the Freight's commit saying it was approved for
    ``stage`` by ``login``, once it shows (the mention broken, so nobody is notified)."""
    start = f"Approved for `{stage}` by @\u200b{login} at "

    async def shown() -> str | None:
        for found in fake.check_runs(REPO):
            if found["name"] == run:
                lines = str((found.get("output") or {}).get("summary") or "").splitlines()
                return next((line for line in lines if line.startswith(start)), None)
        return None

    return await eventually(shown, f"the approval for {stage} on the {run} check run")


def forms_of(page: str) -> dict[str, dict[str, str]]:
    """Each form on the page by its action name: its hidden fields and the Freight chosen."""
    out: dict[str, dict[str, str]] = {}
    for attrs, body in re.findall(r'<form class="act"([^>]*)>(.*?)</form>', page, re.S):
        action = re.search(r'data-action="([^"]+)"', attrs)
        assert action is not None
        assert f'action="/ui/act/{NS}"' in attrs  # absolute: posted from any page
        fields = {
            html.unescape(n): html.unescape(v)
            for n, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', body)
        }
        options = [html.unescape(o) for o in re.findall(r'<option value="([^"]+)"', body)]
        if options:  # ours, when offered, else the first
            fields["freight"] = FREIGHT if FREIGHT in options else options[0]
        fields["_disabled"] = "disabled" if '<button type="submit" disabled' in body else ""
        out[action.group(1)] = fields
    return out


async def post_form(client: TestClient[Any, Any], fields: dict[str, str], status: int = 200) -> str:
    data = {k: v for k, v in fields.items() if not k.startswith("_")}
    response = await client.post(f"/ui/act/{NS}", data=data)
    text = await response.text()
    assert response.status == status, text
    found = re.search(r'<p id="outcome">(.*?)</p>', text, re.S)
    assert found is not None, text
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))  # as a browser reads it


async def promotions_of(state: ServerState, stage: str) -> list[dict[str, Any]]:
    assert state.kube is not None
    items, _ = await state.kube.list(k.PROMOTIONS, NS)
    return [p for p in items if p["spec"]["stage"] == stage]


async def stage_forms(client: TestClient[Any, Any], stage: str) -> dict[str, dict[str, str]]:
    response = await client.get(f"/ui/stages/{NS}/{stage}")
    assert response.status == 200
    return forms_of(await response.text())


async def test_a_member_promotes_approves_confirms_aborts_and_reverifies_from_the_pages(
    tmp_path: Path,
) -> None:
    async with signed_in(tmp_path, "octocat") as (client, state, fake):
        assert state.kube is not None
        forms = await stage_forms(client, "web-test")
        assert set(forms) == {"promote"}  # nothing to approve, no verification
        assert forms["promote"]["freight"] == FREIGHT

        said = await post_form(client, forms["promote"])
        assert said.startswith("Promotion web-test.") and " web-1 " in said
        name = said.split()[1]
        promotion = await wait_for_object(
            state.kube, k.PROMOTIONS, NS, name, lambda p: bool(p.get("status"))
        )
        assert promotion["spec"] == {**promotion["spec"], "stage": "web-test", "freight": FREIGHT}
        assert "github:octocat" in str(promotion["metadata"].get("annotations"))

        # The check run on the Freight's commit follows it, as for a comment's Promotion.
        async def check_run() -> bool | None:
            return any(r["name"] == "promote: web-test" for r in fake.check_runs(REPO)) or None

        await eventually(check_run, "the promote: web-test check run")

        # Abort it from its own page.
        page = await (await client.get(f"/ui/promotions/{NS}/{name}")).text()
        abort = forms_of(page)["abort"]
        assert await post_form(client, abort) == f"abort requested for {name} (Stage web-test)"
        await wait_for_object(
            state.kube,
            k.PROMOTIONS,
            NS,
            name,
            lambda p: (p.get("status") or {}).get("phase") == "Aborted",
        )

        # Not verified in web-test: approve it for web-prod, then promote (protected: confirm).
        forms = await stage_forms(client, "web-prod")
        assert set(forms) == {"approve", "verify"}
        said = await post_form(client, forms["approve"])
        assert said.startswith("Freight web-1 approved for Stage web-prod")
        freight = await wait_for_object(
            state.kube,
            k.FREIGHT,
            NS,
            FREIGHT,
            lambda f: "web-prod" in ((f.get("status") or {}).get("approvedFor") or {}),
        )
        assert "github:octocat" in str(freight["status"]["approvedFor"]["web-prod"])
        # The check run that reports the Freight on its commit says so, and who approved.
        await approval_shown(fake, "promote: web-test", "web-prod", "octocat")

        async def promotable() -> dict[str, dict[str, str]] | None:
            forms = await stage_forms(client, "web-prod")
            return forms if "promote" in forms else None

        forms = await eventually(promotable, "a Promote form on web-prod")

        response = await client.post(
            f"/ui/act/{NS}", data={k: v for k, v in forms["promote"].items() if k[0] != "_"}
        )
        confirm_page = await response.text()
        assert "asks for a confirmation" in confirm_page
        assert not await promotions_of(state, "web-prod")
        confirm = forms_of(confirm_page)["promote"]
        assert confirm["confirmed"] == "1"
        said = await post_form(client, confirm)
        assert said.startswith("Promotion web-prod.")

        said = await post_form(client, forms["verify"])
        assert said == "verification of the current Freight in Stage web-prod requested"
        await wait_for_object(
            state.kube,
            k.STAGES,
            NS,
            "web-prod",
            lambda s: "github:octocat" in str(s["metadata"].get("annotations")),
        )


async def test_a_reader_gets_the_refusal_a_pull_request_comment_gets(tmp_path: Path) -> None:
    async with signed_in(tmp_path, "mallory", permission="read") as (client, state, fake):
        forms = await stage_forms(client, "web-test")
        said = await post_form(client, forms["promote"], status=403)
        assert state.kube is not None
        assert not await promotions_of(state, "web-test")
        # The same command as a comment on an issue of the repository, by the same person.
        number = fake.add_issue(REPO)
        comment = fake.add_comment(REPO, number, "/promote web-1 to web-test", user="mallory")
        headers, body = webhook_request(
            "issue_comment", fake.comment_payload(REPO, comment), HOOK_SECRET
        )
        assert (await client.post("/github/webhook", data=body, headers=headers)).status == 202

        async def refusal() -> list[dict[str, Any]] | None:
            found = [c for c in fake.comments(REPO, number) if "refused" in str(c.get("body"))]
            return found or None

        replies = await eventually(refusal, "the reply to the comment")
        # The comment keeps GitHub from notifying @mallory (a zero-width space after the @).
        assert replies[0]["body"].replace("\u200b", "") == f"@mallory: {said}"
        assert said == (
            "refused: @mallory needs write access to this repository (has read). "
            "Nothing was changed."
        )


async def test_a_form_without_its_csrf_token_is_refused(tmp_path: Path) -> None:
    async with signed_in(tmp_path, "octocat") as (client, state, _):
        forms = await stage_forms(client, "web-test")
        for token in ("", "0" * 64):
            said = await post_form(client, {**forms["promote"], "csrf": token}, status=403)
            assert "CSRF token is missing or wrong" in said
        assert state.kube is not None
        assert not await promotions_of(state, "web-test")


async def test_with_sign_in_off_actions_say_how_to_turn_it_on(tmp_path: Path) -> None:
    async with serving(tmp_path) as (client, state):
        await seed_project(state)
        page = await (await client.get(f"/ui/stages/{NS}/web-test")).text()
        assert "LONGSHOREMAN_UI_AUTH=github" in strip_tags(page)
        promote = forms_of(page)["promote"]
        assert promote["_disabled"] and re.search(r"/promote \S+ to web-test", page)
        said = await post_form(client, promote, status=403)
        assert said.startswith("Actions on these pages need GitHub sign-in, which is off")
