"""Check runs and command replies following a Promotion, and the check run's buttons.

The Promotion's changes come in as the controller's listener calls would; GitHub is the fake
server, which validates check runs against GitHub's documented limits."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from handlers import checks
from promoter.chat.views import FreightLabel, promotion_view
from promoter.resources import annotations as ann
from tests.support import objects
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.promotions import FakePromotions

NS = "kargo-demo"
REPO = "example/app"


STEPS = [
    {"uses": "git-clone", "as": "clone"},
    {"uses": "git-open-pr", "as": "open-pr"},
    {"uses": "git-wait-for-pr", "as": "wait-for-pr"},
]


def promotion(phase: str = "Pending", step: int = 0, message: str = "") -> dict[str, Any]:
    executions = []
    for i, spec in enumerate(STEPS):
        if i < step or phase == "Succeeded":
            executions.append({"alias": spec["as"], "status": "Succeeded"})
        elif i == step and phase in ("Running", "Failed", "Aborted"):
            status = {"Running": "Running", "Failed": "Failed", "Aborted": "Aborted"}[phase]
            executions.append({"alias": spec["as"], "status": status, "message": message})
    return objects.promotion(
        "staging.0001",
        "staging",
        namespace=NS,
        freight="f" * 40,
        steps=STEPS,
        annotations={},
        phase=phase,
        status={"currentStep": step, "message": message, "stepExecutionMetadata": executions},
    )


def freight(sha: str) -> dict[str, Any]:
    return objects.freight(
        "f" * 40,
        namespace=NS,
        alias="frozen-tauntaun",
        warehouse="app",
        commits=[
            {"repoURL": "https://github.com/example/app.git", "id": sha},
            {"repoURL": "https://github.com/elsewhere/not-installed.git", "id": sha},
        ],
    )


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    service = FakePromotions(
        NS,
        stages=[
            objects.stage(
                "staging", namespace=NS, warehouse="app", steps=STEPS, verification=["smoke"]
            ),
            objects.stage(
                "production-eu-west-1-primary",
                namespace=NS,
                warehouse="app",
                upstream=["staging"],
                steps=STEPS,
            ),
        ],
    )
    async with running_github_env(
        tmp_path,
        service=service,
        bot_settings={"LONGSHOREMAN_GITHUB_PROJECT": NS},
    ) as env:
        env.fake.set_permission(REPO, "alice", "write")
        await env.open_pull("feature", {"x": "1"}, message="x")
        service.freight.append(freight(env.sha))
        yield env


async def test_a_check_run_follows_the_promotion_from_queued_to_success(env: GitHubEnv) -> None:
    states = [
        promotion(),
        promotion("Running", 0),
        promotion("Running", 1),
        promotion("Running", 2, "waiting for pull request #1 to be merged"),
        promotion("Succeeded"),
    ]
    old = None
    for state in states:
        await env.change(copy.deepcopy(state), old)
        old = state
    runs = env.fake.check_runs(REPO, env.sha)
    assert len(runs) == 1
    run = runs[0]
    assert run["name"] == "promote: staging" and run["external_id"] == f"{NS}/staging.0001"
    assert [h[0] for h in run["_history"]] == [
        "queued",
        "in_progress",
        "in_progress",
        "in_progress",
        "completed",
    ]
    assert run["conclusion"] == "success"
    assert "| 3 | `wait-for-pr` | git-wait-for-pr | Succeeded |" in run["output"]["summary"]
    # Not verified in staging yet: no "Promote to NEXT" (it could only be refused), but a
    # person may approve it for the next Stage.
    assert [(a["label"], a["identifier"]) for a in run["actions"]] == [
        ("Re-verify", "reverify"),
        ("Approve for product…", checks.approve_identifier("production-eu-west-1-primary")),
    ]
    # The id is kept on the Promotion, so a new leader updates this run instead of adding one.
    ids = json.loads(env.service.annotation("staging.0001", ann.GITHUB_CHECKS) or "null")
    assert ids == {f"{REPO}@{env.sha}": run["id"]}


async def test_a_restarted_leader_updates_the_same_run(env: GitHubEnv) -> None:
    await env.change(promotion(), None)
    run_id = env.fake.check_runs(REPO)[0]["id"]
    stored = dict(env.service.promotions[0]["metadata"]["annotations"])
    async with env.restarted() as restarted:
        running = promotion("Running", 1)
        running["metadata"]["annotations"] = stored
        restarted.on_promotion(running, None)
        await env.settle(restarted)
    runs = env.fake.check_runs(REPO)
    assert [r["id"] for r in runs] == [run_id] and runs[0]["status"] == "in_progress"


async def test_a_restart_writes_nothing_to_github_for_finished_promotions(env: GitHubEnv) -> None:
    finished = []
    for i in range(5):
        reply = env.fake.add_comment(
            REPO, env.pr, "@alice: ...", user="longshoreman[bot]", bot=True
        )
        done = promotion("Succeeded")
        done["metadata"]["name"] = f"staging.000{i}"
        done["metadata"]["annotations"][ann.GITHUB_REPLY] = json.dumps(
            {
                "repo": REPO,
                "comment": reply["id"],
                "user": "alice",
                "command": "/promote to staging",
            }
        )
        finished.append(done)
    env.service.promotions[:] = finished
    for done in finished:
        env.integration.on_promotion(done, None)
    await env.settle()
    assert len(env.fake.requests("PATCH", "/issues/comments/")) == 5
    before = len(env.fake.log)

    async with env.restarted() as restarted:
        for done in env.service.promotions:  # the informer's initial list, annotations and all
            restarted.on_promotion(copy.deepcopy(done), None)
        await env.settle(restarted)
    writes = [r for r in env.fake.log[before:] if r.method in ("POST", "PATCH", "PUT", "DELETE")]
    assert writes == []


async def test_an_upgrade_writes_nothing_for_what_an_older_release_recorded(
    env: GitHubEnv,
) -> None:
    await env.change(promotion("Succeeded"))
    # The release before recorded one digest (sha256, hex) of these inputs, finished ones only.
    done = env.service.promotions[0]
    snapshot = await env.service.snapshot(NS)
    view = promotion_view(
        done,
        stage=snapshot.stage("staging"),
        stages=snapshot.stages,
        freights=snapshot.freight,
        link=env.integration.progress.page(done),
    )
    inputs = [
        checks.progress_key(done),
        view.label.short,
        view.next_stages,
        view.approve_stages,
        view.verifiable,
        ann.read_json(done, ann.GITHUB_REPLY),
        view.link,
    ]
    text = json.dumps(inputs, sort_keys=True, default=str)
    done["metadata"]["annotations"][ann.GITHUB_SHOWN] = hashlib.sha256(text.encode()).hexdigest()
    before = len(env.fake.log)
    async with env.restarted() as upgraded:
        upgraded.on_promotion(copy.deepcopy(done), None)
        await env.settle(upgraded)
    assert [r for r in env.fake.log[before:] if r.method != "GET"] == []


async def test_without_a_promotion_page_the_check_run_has_no_details_link(env: GitHubEnv) -> None:
    await env.change(promotion("Running", 1), None)
    [run] = env.fake.check_runs(REPO, env.sha)
    assert "details_url" not in run or run["details_url"] in (None, "")
    assert "/runs/" not in run["output"]["summary"]


async def test_failure_and_abort_conclusions_and_the_abort_button(env: GitHubEnv) -> None:
    await env.change(promotion("Running", 1), None)
    run = env.fake.check_runs(REPO)[0]
    assert [a["identifier"] for a in run["actions"]] == ["abort"]
    await env.change(promotion("Failed", 1, "boom"), promotion("Running", 1))
    assert run["conclusion"] == "failure" and run["actions"] == []
    assert "boom" in run["output"]["text"]


async def test_standbys_post_nothing_and_unchanged_progress_is_not_resent(env: GitHubEnv) -> None:
    env.service.leader = False
    await env.change(promotion(), None)
    assert env.fake.check_runs(REPO) == []
    env.service.leader = True
    await env.change(promotion("Running", 1), None)
    before = len(env.fake.log)
    same = promotion("Running", 1)
    same["status"]["stepExecutionMetadata"][0]["nextAttemptAt"] = "2030-01-01T00:00:00Z"
    await env.change(same, promotion("Running", 1))
    assert len(env.fake.log) == before


async def test_the_command_reply_is_edited_in_place(env: GitHubEnv) -> None:
    reply = env.fake.add_comment(REPO, env.pr, "@alice: ...", user="longshoreman[bot]", bot=True)
    annotated = promotion("Running", 1)
    annotated["metadata"]["annotations"][ann.GITHUB_REPLY] = json.dumps(
        {"repo": REPO, "comment": reply["id"], "user": "alice", "command": "/promote to staging"}
    )
    await env.change(annotated, None)
    assert "**Running**: step 2 of 3, `open-pr`" in reply["body"]
    done = copy.deepcopy(annotated)
    done["status"] = promotion("Succeeded")["status"]
    await env.change(done, annotated)
    assert "**Succeeded**" in reply["body"] and reply["_edits"] == 2
    assert "[Details](https://github.com/example/app/runs/" in reply["body"]


async def test_buttons_run_the_same_authorization(env: GitHubEnv) -> None:
    await env.change(promotion("Running", 1), None)
    run = env.fake.check_runs(REPO)[0]
    await env.deliver(
        "check_run",
        env.fake.check_run_payload(
            REPO,
            run["id"],
            "requested_action",
            sender="mallory",
            identifier="abort",
            pull_number=env.pr,
        ),
    )
    assert env.service.asked("abort") == []
    refusal = env.fake.comments(REPO, env.pr)[-1]["body"]
    assert refusal.startswith("@mallory: refused") and "write access" in refusal
    await env.deliver(
        "check_run",
        env.fake.check_run_payload(REPO, run["id"], "requested_action", identifier="abort"),
    )
    assert env.service.asked("abort") == [(NS, "staging.0001", "github:alice")]


async def test_a_stage_without_verification_gets_no_reverify_button(env: GitHubEnv) -> None:
    # The button could only be refused ("no verification configured"): it is not offered.
    done = promotion("Succeeded")
    done["metadata"]["name"] = "production-eu-west-1-primary.0001"
    done["spec"]["stage"] = "production-eu-west-1-primary"
    await env.change(done, None)
    [run] = env.fake.check_runs(REPO, env.sha)
    assert run["name"] == "promote: production-eu-west-1-primary"
    assert run["conclusion"] == "success"
    assert [a["identifier"] for a in run["actions"]] == []


async def test_promote_to_next_and_reverify_buttons(env: GitHubEnv) -> None:
    await env.change(promotion("Succeeded"), None)
    run = env.fake.check_runs(REPO)[0]
    approve = checks.approve_identifier("production-eu-west-1-primary")
    assert [a["identifier"] for a in run["actions"]] == ["reverify", approve]
    next_stage = checks.next_identifier("production-eu-west-1-primary")

    async def press(identifier: str) -> None:
        await env.deliver(
            "check_run",
            env.fake.check_run_payload(
                REPO,
                run["id"],
                "requested_action",
                identifier=identifier,
                pull_number=env.pr,
            ),
        )

    # A button from elsewhere (an older render) before the Freight is verified in staging: the
    # next Stage may not take it, and the planner says why.
    await press(next_stage)
    assert env.service.asked("promote") == []
    assert "not available" in env.fake.comments(REPO, env.pr)[-1]["body"]
    # Verified: the run offers the next Stage, and both buttons act.
    env.service.freight[0]["status"] = {"verifiedIn": {"staging": {}}}
    await env.change(promotion("Succeeded", message="verified"), promotion("Succeeded"))
    run = env.fake.check_runs(REPO)[0]
    assert [a["identifier"] for a in run["actions"]] == ["reverify", next_stage]
    for identifier in ("reverify", next_stage):
        await press(identifier)
    assert env.service.asked("reverify") == [(NS, "staging", "github:alice")]
    assert env.service.asked("promote") == [
        (NS, "production-eu-west-1-primary", "f" * 40, "github:alice")
    ]


async def test_approve_for_next_lets_unverified_freight_into_the_next_stage(
    env: GitHubEnv,
) -> None:
    prod = "production-eu-west-1-primary"
    await env.change(promotion("Succeeded"), None)
    run = env.fake.check_runs(REPO)[0]

    async def press(identifier: str, user: str = "alice") -> str:
        payload = env.fake.check_run_payload(
            REPO,
            run["id"],
            "requested_action",
            identifier=identifier,
            pull_number=env.pr,
            sender=user,
        )
        await env.deliver("check_run", payload)
        body: str = env.fake.comments(REPO, env.pr)[-1]["body"]
        return body

    env.integration.on_freight(copy.deepcopy(env.service.freight[0]), None)  # as first seen
    # Someone without write access is refused, and nothing is approved.
    env.fake.set_permission(REPO, "bob", "read")
    assert "needs write access" in await press(checks.approve_identifier(prod), "bob")
    assert env.service.asked("approve") == []
    said = await press(checks.approve_identifier(prod))
    assert said.startswith("@alice: Freight `frozen-tauntaun` approved for Stage")
    assert env.service.asked("approve") == [(NS, prod, "f" * 40, "github:alice")]
    approval = env.service.freight[0]["status"]["approvedFor"][prod]
    assert approval["approvedBy"] == "github:alice"
    # The Freight changed (the controller's Freight listener), so the run is drawn again: it
    # says who approved it for prod, and as the next Stage takes the Freight now no Approve is
    # offered, nor Promote to NEXT until it is verified here (the approval is for prod).
    env.integration.on_freight(copy.deepcopy(env.service.freight[0]), None)
    await env.settle()
    run = env.fake.check_runs(REPO)[0]
    assert [a["identifier"] for a in run["actions"]] == ["reverify"]
    assert f"Approved for `{prod}` by @\u200balice at " in run["output"]["summary"]
    # An older render's button answers that it is approved already, and by whom.
    said = await press(checks.approve_identifier(prod))
    assert "was already approved" in said and "github:alice" in said
    assert len(env.service.asked("approve")) == 1
    # The approval is what lets it in: /promote to prod now works though it is not verified.
    replies = await env.comment(f"/promote frozen-tauntaun to {prod}")
    assert "Promotion `" in replies[0]["body"]
    assert env.service.asked("promote") == [(NS, prod, "f" * 40, "github:alice")]


async def test_rerequesting_a_failed_run_starts_a_new_promotion(env: GitHubEnv) -> None:
    await env.change(promotion("Succeeded"), None)
    run = env.fake.check_runs(REPO)[0]
    await env.deliver("check_run", env.fake.check_run_payload(REPO, run["id"], "rerequested"))
    assert env.service.asked("promote") == []  # a successful run is not repeated
    await env.change(promotion("Failed", 1, "boom"), promotion("Succeeded"))
    await env.deliver("check_run", env.fake.check_run_payload(REPO, run["id"], "rerequested"))
    assert env.service.asked("promote") == [(NS, "staging", "f" * 40, "github:alice")]


def test_check_run_fields_stay_within_githubs_limits() -> None:
    long = promotion("Running", 1, "x" * 200_000)
    long["spec"]["stage"] = "s" * 253
    long["status"]["stepExecutionMetadata"][1]["message"] = "y" * 100_000
    wide = {"downstream": ("n" * 253,) * 5, "verifiable": True, "verified_here": True}
    fields = checks.check_run_fields(
        replace(promotion_view(long), label=FreightLabel("f", "frozen-tauntaun"), **wide)
    )
    assert len(fields["output"]["summary"]) <= 65535
    assert len(fields["output"]["text"]) <= 65535
    done = copy.deepcopy(long)
    done["status"]["phase"] = "Succeeded"
    for f in (
        fields,
        checks.check_run_fields(replace(promotion_view(done), **wide)),
    ):
        assert len(f["actions"]) <= 3
        for a in f["actions"]:
            assert len(a["label"]) <= 20 and len(a["identifier"]) <= 20
            assert len(a["description"]) <= 40
