"""Issue 34, the front ends: who may act on which project, and text from others on every surface.

Each test drives the bot as GitHub or Slack would (signed webhooks and slash commands against the
fakes in :mod:`tests.support`) and reads what a user sees: the fake's comments, check runs and
Slack messages, and what the cluster port was asked to do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from handlers import checks
from tests.support import objects
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.promotions import FakePromotions

NS = "kargo-demo"
REPO = "example/app"
STEPS = [{"uses": "git-clone", "as": "clone"}]
PROD = "prod"


def succeeded() -> dict[str, Any]:
    return objects.promotion(
        "staging.0001",
        "staging",
        namespace=NS,
        freight="f" * 40,
        steps=STEPS,
        annotations={},
        phase="Succeeded",
        status={"stepExecutionMetadata": [{"alias": "clone", "status": "Succeeded"}]},
    )


def project(**extra: Any) -> FakePromotions:
    return FakePromotions(
        NS,
        stages=[
            objects.stage("staging", namespace=NS, warehouse="app", steps=STEPS),
            objects.stage(PROD, namespace=NS, warehouse="app", upstream=["staging"], steps=STEPS),
        ],
        **extra,
    )


@pytest.fixture
async def elsewhere(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    """A repository whose commits are in NS's Freight, mapped to another project."""
    async with running_github_env(
        tmp_path,
        service=project(),
        bot_settings={
            "LONGSHOREMAN_GITHUB_PROJECT": NS,
            "LONGSHOREMAN_GITHUB_REPO_PROJECTS": f"{REPO}=other-project",
        },
    ) as env:
        env.fake.set_permission(REPO, "mallory", "admin")
        await env.open_pull("feature", {"x": "1"}, message="x")
        env.service.freight.append(
            objects.freight(
                "f" * 40,
                namespace=NS,
                alias="frozen-tauntaun",
                warehouse="app",
                commits=[{"repoURL": f"https://github.com/{REPO}.git", "id": env.sha}],
                status={"verifiedIn": {"staging": {}}},
            )
        )
        yield env


# ---- finding 4: a check run acts on the project its repository is mapped to ------------------


async def test_a_check_run_in_a_repository_of_another_project_cannot_promote(
    elsewhere: GitHubEnv,
) -> None:
    env = elsewhere
    await env.change(succeeded(), None)
    [run] = env.fake.check_runs(REPO, env.sha)
    next_stage = checks.next_identifier(PROD)
    assert next_stage in [a["identifier"] for a in run["actions"]]
    await env.deliver(
        "check_run",
        env.fake.check_run_payload(
            REPO,
            run["id"],
            "requested_action",
            sender="mallory",
            identifier=next_stage,
            pull_number=env.pr,
        ),
    )
    assert env.service.actions == []
    said = env.fake.comments(REPO, env.pr)[-1]["body"]
    assert said.startswith("@mallory: refused:") and "acts on project `other-project`" in said
    # A comment in the same repository acts on its own project, where there is no such Stage.
    [reply] = await env.comment(f"/promote frozen-tauntaun to {PROD}", user="mallory")
    assert "no Stage `prod` in project `other-project`" in reply["body"]
    assert env.service.actions == []
