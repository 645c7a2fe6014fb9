"""Comment commands end to end over HTTP: signed ``issue_comment`` deliveries in, replies,
reactions and service calls out. The service is the in-memory fake; GitHub is the fake server
with a real merged pull request behind it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promoter.control.projects import Project
from promoter.resources import annotations as ann
from tests.support import objects
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.gitrepo import RemoteRepo, make_remote
from tests.support.promotions import DEFAULT_STEPS, FakePromotions

NS = "kargo-demo"
REPO = "example/app"
APP_URL = "https://github.com/example/app.git"


def stage(
    name: str,
    *,
    upstream: str | None = None,
    promoters: str | None = None,
    verified: bool = False,
) -> dict[str, Any]:
    return objects.stage(
        name,
        namespace=NS,
        warehouse="app",
        upstream=[upstream] if upstream else (),
        steps=DEFAULT_STEPS,
        verification=["smoke"] if verified else (),
        annotations=(
            {"longshoreman.dev/github-promoters": promoters} if promoters is not None else None
        ),
    )


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    service = FakePromotions(
        NS,
        stages=[
            stage("staging", verified=True),
            stage("prod", upstream="staging", promoters="carol, example/release-team"),
        ],
    )
    async with running_github_env(
        tmp_path,
        service=service,
        bot_settings={"LONGSHOREMAN_GITHUB_PROJECT": NS},
    ) as env:
        for user, permission in [("alice", "write"), ("bob", "read"), ("carol", "admin")]:
            env.fake.set_permission(REPO, user, permission)
        env.fake.add_team_member("example", "release-team", "dave")
        env.fake.set_permission(REPO, "dave", "maintain")
        # env.pr, what comments go to: merged; "wip" is still open.
        merged = await env.open_pull(
            "feature",
            {"main.go": "package main // v2\n"},
            message="Feature",
            title="Feature",
            merge=True,
        )
        await env.open_pull("wip", {"wip.txt": "x"}, message="WIP")
        commit = {"repoURL": APP_URL, "id": merged["merge_commit_sha"]}
        service.freight.append(
            objects.freight(
                "f" * 40, namespace=NS, alias="frozen-tauntaun", warehouse="app", commits=[commit]
            )
        )
        yield env


async def test_promote_on_a_merged_pr_promotes_the_freight_of_its_merge_commit(
    env: GitHubEnv,
) -> None:
    replies = await env.comment("Looks good.\n/promote to staging")
    assert env.service.asked("promote") == [(NS, "staging", "f" * 40, "github:alice")]
    assert env.last["_reactions"] == ["eyes"]
    assert len(replies) == 1
    body = replies[0]["body"]
    assert body.startswith("@alice: `/promote to staging`")
    assert "staging.0001" in body and "frozen-tauntaun" in body
    reply = json.loads(env.service.annotation("staging.0001", ann.GITHUB_REPLY) or "null")
    assert reply == {
        "repo": REPO,
        "comment": replies[0]["id"],
        "user": "alice",
        "command": "/promote to staging",
    }


async def test_a_comment_acts_in_the_project_whose_namespace_names_the_repository(
    env: GitHubEnv,
) -> None:
    """The namespace's github-repositories annotation wins over LONGSHOREMAN_GITHUB_PROJECT."""
    env.service.project_list = [Project("team-b", {}, github_repositories=(REPO,))]
    env.service.stages.append(
        objects.stage("staging", namespace="team-b", warehouse="app", steps=DEFAULT_STEPS)
    )
    [ours] = [f for f in env.service.freight if f["metadata"]["namespace"] == NS]
    env.service.freight.append({**ours, "metadata": {**ours["metadata"], "namespace": "team-b"}})
    replies = await env.comment("/promote frozen-tauntaun to staging")
    assert env.service.asked("promote") == [("team-b", "staging", "f" * 40, "github:alice")]
    assert "staging.0001" in replies[0]["body"]


async def test_promote_takes_an_image_reference_or_a_commit_sha(env: GitHubEnv) -> None:
    env.service.freight.append(
        objects.freight(
            "a" * 40,
            namespace=NS,
            alias="brave-bird",
            warehouse="app",
            images=[
                {"repoURL": "ghcr.io/acme/app", "tag": "1.4.2", "digest": "sha256:" + "a" * 64}
            ],
        )
    )
    replies = await env.comment("/promote ghcr.io/acme/app:1.4.2 to staging")
    assert "brave-bird" in replies[0]["body"]
    replies = await env.comment(f"/promote {env.head('main')[:10]} to staging")
    assert "frozen-tauntaun" in replies[0]["body"]
    assert [p[2] for p in env.service.asked("promote")] == ["a" * 40, "f" * 40]
    replies = await env.comment("/promote ghcr.io/acme/app:9.9.9 to staging")
    assert "no Freight holds the image `ghcr.io/acme/app:9.9.9`" in replies[0]["body"]


async def test_several_commands_run_in_order_with_one_reply_each(env: GitHubEnv) -> None:
    replies = await env.comment("/promote frozen-tauntaun to staging\n/verify staging\n/status")
    assert [r["body"].split(":")[0] for r in replies] == ["@alice"] * 3
    assert "Promotion `staging.0001`" in replies[0]["body"]
    assert "verification" in replies[1]["body"]
    assert "| Stage | Freight |" in replies[2]["body"] and "| prod |" in replies[2]["body"]
    assert env.service.asked("reverify") == [(NS, "staging", "github:alice")]


async def test_unauthorized_commenters_are_refused_and_nothing_changes(env: GitHubEnv) -> None:
    replies = await env.comment("/promote to staging", user="bob")
    assert "refused" in replies[0]["body"] and "write access" in replies[0]["body"]
    replies = await env.comment("/promote frozen-tauntaun to prod", user="alice")
    assert "refused" in replies[0]["body"] and "github-promoters" in replies[0]["body"]
    replies = await env.comment("/abort staging", user="bob")
    assert "refused" in replies[0]["body"] or "nothing" in replies[0]["body"]
    replies = await env.comment("/verify staging", user="bob")
    assert "refused" in replies[0]["body"]
    assert env.service.asked("promote") == [] and env.service.asked("reverify") == []


async def test_stage_promoters_may_name_users_and_teams(env: GitHubEnv) -> None:
    # prod needs the Freight verified in staging first.
    env.service.freight[0]["status"] = {"verifiedIn": {"staging": {}}}
    await env.comment("/promote frozen-tauntaun to prod", user="carol")
    await env.comment("/promote frozen-tauntaun to prod", user="dave")  # via example/release-team
    assert [p[3] for p in env.service.asked("promote")] == ["github:carol", "github:dave"]


async def test_freight_not_available_to_the_stage_is_refused(env: GitHubEnv) -> None:
    replies = await env.comment("/promote frozen-tauntaun to prod", user="carol")
    assert "not available" in replies[0]["body"]
    assert env.service.asked("promote") == []


async def test_promote_without_freight_needs_a_merged_pr(env: GitHubEnv) -> None:
    replies = await env.comment("/promote to staging", on=env.pulls["wip"])
    assert "not merged yet" in replies[0]["body"]
    issue = env.fake.add_issue(REPO)
    replies = await env.comment("/promote to staging", on=issue)
    assert "not a pull request" in replies[0]["body"]
    assert env.service.asked("promote") == []


async def test_abort_on_a_pr_aborts_the_running_promotion_of_its_freight(env: GitHubEnv) -> None:
    await env.comment("/promote to staging")
    env.service.promotions[0]["status"]["phase"] = "Running"
    replies = await env.comment("/abort")
    assert env.service.asked("abort") == [(NS, "staging.0001", "github:alice")]
    assert "abort requested for `staging.0001`" in replies[0]["body"]
    replies = await env.comment("/abort staging.0001", user="bob")
    assert "refused" in replies[0]["body"]
    assert len(env.service.asked("abort")) == 1


async def test_help_lists_usage_and_the_callers_permissions(env: GitHubEnv) -> None:
    replies = await env.comment("/help", user="alice")
    body = replies[0]["body"]
    assert "/promote [FREIGHT] to STAGE" in body and "**write**" in body
    assert "You may promote to: `staging`" in body and "`prod`" in body


async def test_abort_of_a_stage_aborts_its_running_promotion_and_the_queue_only_when_asked(
    env: GitHubEnv,
) -> None:
    for _ in range(3):
        await env.comment("/promote frozen-tauntaun to staging")
    env.service.promotions[0]["status"]["phase"] = "Running"
    replies = await env.comment("/abort staging")
    assert env.service.asked("abort") == [(NS, "staging.0001", "github:alice")]
    assert "abort requested for `staging.0001` (Stage `staging`)" in replies[0]["body"]
    await env.comment("/abort staging all")
    assert [a[1] for a in env.service.asked("abort")[1:]] == [
        "staging.0001",
        "staging.0002",
        "staging.0003",
    ]


async def test_abort_of_a_finished_promotion_is_refused_saying_it_finished(env: GitHubEnv) -> None:
    await env.comment("/promote frozen-tauntaun to staging")
    env.service.promotions[0]["status"]["phase"] = "Succeeded"
    replies = await env.comment("/abort staging.0001")
    assert "Promotion `staging.0001` already finished (Succeeded)" in replies[0]["body"]
    assert "Nothing was changed" in replies[0]["body"] and env.service.asked("abort") == []


async def test_verify_of_a_stage_without_verification_says_so(env: GitHubEnv) -> None:
    replies = await env.comment("/verify prod", user="carol")
    assert "Stage `prod` has no verification configured" in replies[0]["body"]
    assert env.service.asked("reverify") == []


async def test_help_counts_team_membership(env: GitHubEnv) -> None:
    replies = await env.comment("/help", user="dave")  # prod lists example/release-team
    body = replies[0]["body"]
    assert "You may promote to: `prod`, `staging`." in body and "Not to" not in body


async def test_status_shows_the_freights_alias(env: GitHubEnv) -> None:
    env.service.stages[0]["status"] = {
        "freightHistory": [{"items": {"Warehouse/app": {"name": "f" * 40}}}]
    }
    replies = await env.comment("/status staging")
    assert "| staging | frozen-tauntaun |" in replies[0]["body"]
    assert "f" * 20 not in replies[0]["body"]


async def test_freight_is_found_by_a_unique_name_prefix_and_an_ambiguous_one_is_refused(
    env: GitHubEnv,
) -> None:
    await env.comment("/promote ffff to staging")
    assert env.service.asked("promote") == [(NS, "staging", "f" * 40, "github:alice")]
    env.service.freight.append(
        objects.freight("f" * 39 + "0", namespace=NS, alias="wily-yak", warehouse="app")
    )
    replies = await env.comment("/promote ffff to staging")
    body = replies[0]["body"]
    assert "`ffff` is ambiguous" in body
    assert (
        "frozen-tauntaun" in body and "wily-yak" in body and len(env.service.asked("promote")) == 1
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/promote ${{ vars.x }} to staging", "arguments are names, not expressions"),
        ("/promote to ${% raw %}", "arguments are names, not expressions"),
        ("/promote staging", "Usage: /promote"),
        ("/verify", "Usage: /verify"),
        ("/promote nope to staging", "no Freight named"),
        ("/promote to nowhere", "no Stage `nowhere`"),
    ],
)
async def test_bad_arguments_get_a_reply_and_change_nothing(
    env: GitHubEnv, body: str, expected: str
) -> None:
    replies = await env.comment(body)
    assert len(replies) == 1 and expected in replies[0]["body"], replies[0]["body"]
    # Nothing asked of the cluster, and no Promotion a reply could be recorded on.
    assert env.service.actions == [] and env.service.promotions == []


@pytest.mark.parametrize(
    ("body", "kwargs"),
    [
        ("/promote to staging", {"action": "edited"}),  # edits never run commands
        ("```\n/promote to staging\n```", {}),  # fenced code
        ("> /promote to staging", {}),  # a quote
        ("/cc @someone /lgtm", {}),  # not ours
        ("thanks!", {}),
    ],
)
async def test_ignored_comments_get_no_reaction_and_no_reply(
    env: GitHubEnv, body: str, kwargs: dict[str, Any]
) -> None:
    replies = await env.comment(body, **kwargs)
    assert replies == [] and env.last["_reactions"] == []
    assert env.service.asked("promote") == []


async def test_the_bots_own_comments_are_ignored(env: GitHubEnv) -> None:
    comment = env.fake.add_comment(REPO, env.pr, "/promote to staging", user="x", bot=True)
    payload = env.fake.comment_payload(REPO, comment)
    await env.deliver("issue_comment", payload)
    assert comment["_reactions"] == [] and env.service.asked("promote") == []


async def test_a_comment_without_installation_finds_it_by_repository(env: GitHubEnv) -> None:
    comment = env.fake.add_comment(REPO, env.pr, "/promote to staging")
    payload = env.fake.comment_payload(REPO, comment, installation=False)
    await env.deliver("issue_comment", payload)
    assert env.service.asked("promote") and env.fake.requests("GET", "/installation")


# ---- property: the command handler never raises on arbitrary comment text ---------------------

_COMMANDISH = st.builds(
    lambda prefix, rest: f"{prefix}{rest}",
    st.sampled_from(["/promote ", "/abort ", "/status ", "/verify ", "/help", "/", "> /", "```\n"]),
    st.text(max_size=60),
)


_REPOS: dict[str, RemoteRepo] = {}


def _property_repo(factory: pytest.TempPathFactory) -> RemoteRepo:
    # One repository for every example: only comments change, and git init is the slow part.
    if "repo" not in _REPOS:
        _REPOS["repo"] = make_remote(factory.mktemp("prop"), {"a": "1"}, name="app")
    return _REPOS["repo"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bodies=st.lists(st.one_of(st.text(max_size=200), _COMMANDISH), min_size=1, max_size=4))
def test_the_command_handler_never_fails_on_arbitrary_text(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[str]
) -> None:
    git = _property_repo(tmp_path_factory)

    async def run() -> None:
        service = FakePromotions(NS, stages=[stage("staging")])
        tmp = tmp_path_factory.getbasetemp()
        async with running_github_env(
            tmp,
            repo=REPO,
            git=git,
            service=service,
            bot_settings={"LONGSHOREMAN_GITHUB_PROJECT": NS},
        ) as env:
            env.fake.set_permission(REPO, "alice", "admin")
            number = env.fake.add_issue(REPO)
            comment = env.fake.add_comment(REPO, number, "\n".join(bodies))
            await env.deliver("issue_comment", env.fake.comment_payload(REPO, comment))
            assert env.telemetry.failed() == 0
            # Every reply is addressed to the commenter and within GitHub's size limit.
            for reply in env.fake.comments(REPO, number)[1:]:
                assert reply["body"].startswith("@alice") and len(reply["body"]) <= 65536

    asyncio.run(run())


async def test_echoed_arguments_never_mention_anyone(env: GitHubEnv) -> None:
    replies = await env.comment("/promote @octocat to staging")
    assert len(replies) == 1
    assert "@octocat" not in replies[0]["body"] and "@\u200boctocat" in replies[0]["body"]
    assert env.service.asked("promote") == []
