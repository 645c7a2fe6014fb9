"""A Promotion continued in another work directory: rebuilt from its status, no effect repeated.

Each test runs a real Promotion through :func:`promoter.engine.engine.advance` (real git against
local
bare repositories, the built-in steps) in one work directory until it waits, then continues it
from nothing but its status in a fresh one, as a standby replica (or a restarted pod with a new
``emptyDir``) would. What is checked is what users see: the Promotion's status, the commits on the
remote, and what the steps were asked to do.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from promoter.engine import engine
from promoter.engine.replay import MAX_CALLS_BYTES
from promoter.resources.model import Phase, Promotion, parse_steps
from promoter.steps.base import (
    Effect,
    GitSettings,
    HttpSettings,
    StepContext,
    StepResult,
    StepServices,
    StepStatus,
    effect_of,
    uses_work_dir_of,
    verifier_of,
)
from promoter.steps.registry import builtin_registry
from tests.support import objects
from tests.support.controller import Gate, registry_with
from tests.support.gitrepo import RemoteRepo, git_env, make_remote

REPO = "https://github.com/example/gitops.git"
FREIGHT = objects.freight(
    "f00dfeed0123",
    namespace="demo",
    alias="frozen-tauntaun",
    images=[{"repoURL": "example/app", "tag": "1.2.3"}],
)
FILES = {"app/values.yaml": "image:\n  tag: 1.0.0\n", "README.md": "gitops\n"}


def clone(*checkouts: dict[str, Any]) -> dict[str, Any]:
    return {
        "uses": "git-clone",
        "as": "clone",
        "config": {"repoURL": REPO, "checkout": list(checkouts)},
    }


EDIT = {
    "uses": "yaml-update",
    "as": "edit",
    "config": {
        "path": "./out/app/values.yaml",
        "updates": [{"key": "image.tag", "value": "${{ imageFrom('example/app').Tag }}"}],
    },
}
COMMIT = {
    "uses": "git-commit",
    "as": "commit",
    "config": {"path": "./out", "message": "${{ outputs.edit.commitMessage }}"},
}
COMMIT_M = {"uses": "git-commit", "as": "commit", "config": {"path": "./out", "message": "m"}}
PUSH = {"uses": "git-push", "as": "push", "config": {"path": "./out"}}
WRITE_OWNER = {
    "uses": "file-write",
    "as": "w",
    "config": {"path": "./out/owner", "contents": "${{ stageMetadata('test').owner }}\n"},
}


def gate(name: str) -> dict[str, Any]:
    return {"uses": "gate", "as": name, "config": {"name": name}}


@dataclass
class World:
    tmp_path: Path
    remote: RemoteRepo
    gate: Gate = field(default_factory=Gate)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    lives: int = 0

    def runtime(self, work_dir: Path | None = None) -> engine.Runtime:
        """A replica: the same registry and settings, a work directory of its own."""
        self.lives += 1
        return engine.Runtime(
            registry=registry_with(gate=self.gate),
            services=StepServices(
                git=GitSettings(env=git_env(self.tmp_path, {self.remote.url: REPO}))
            ),
            work_dir=work_dir or self.tmp_path / f"replica-{self.lives}",
            freight=FREIGHT,
            extra_functions=self.functions,
        )


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path, make_remote(tmp_path, files=FILES, name="gitops"))


def promotion(*steps: dict[str, Any], name: str = "p1") -> Promotion:
    return Promotion(
        name=name,
        namespace="demo",
        stage="test",
        freight=str(FREIGHT["metadata"]["name"]),
        steps=parse_steps(list(steps), "steps"),
    )


async def advance_until(
    p: Promotion, runtime: engine.Runtime, waiting_at: str | None = None
) -> Promotion:
    """Advance as a controller does (one step per call) until terminal, or waiting at a gate."""
    force = False
    for _ in range(100):
        outcome = await engine.advance(p, runtime, force=force, max_steps=1)
        p = outcome.promotion
        status = p.status
        if status.phase.terminal:
            return p
        current = (
            status.steps[status.current_step] if status.current_step < len(status.steps) else None
        )
        if waiting_at is not None and current is not None and current.alias == waiting_at:
            if current.status == StepStatus.RUNNING.value and current.next_attempt_at is not None:
                return p
        force = outcome.requeue_after != 0.0
    raise AssertionError(f"no end in sight: {p.status}")


def statuses(p: Promotion) -> list[str | None]:
    return [s.status for s in p.status.steps]


def tree(remote: RemoteRepo, ref: str) -> str:
    return remote.git("rev-parse", f"{ref}^{{tree}}")


# ---- kinds ------------------------------------------------------------------------------------


def test_every_built_in_step_says_whether_a_replay_runs_it_again_or_only_checks_it() -> None:
    """LOCAL steps that use the work directory are run again, EXTERNAL ones with a verify hook
    are checked; the rest keep their recorded outputs."""
    registry = builtin_registry()
    local = {kind for kind, step in registry.items() if effect_of(step) is Effect.LOCAL}
    external = set(registry) - local
    assert local == {
        "git-clone", "git-clear", "git-commit", "git-tag", "yaml-update", "json-update",
        "yaml-parse", "json-parse", "kustomize-set-image", "helm-update-chart", "helm-template",
        "copy", "delete",
        "file-write", "compose-output", "fail", "http-download", "untar", "tar", "yaml-merge",
        "toml-parse", "toml-update", "kustomize-build", "oci-download",
    }  # fmt: skip
    assert external == {
        "git-push", "github-push", "git-open-pr", "git-wait-for-pr", "git-merge-pr",
        "argocd-update", "argocd-wait", "http", "set-metadata", "set-freight-alias", "oci-push",
    }  # fmt: skip
    outside = {kind for kind, step in registry.items() if not uses_work_dir_of(step)}
    assert outside == {
        "compose-output", "fail", "http", "set-metadata", "git-open-pr", "git-wait-for-pr",
        "git-merge-pr", "argocd-update", "argocd-wait", "set-freight-alias", "oci-push",
    }  # fmt: skip
    checked = {kind for kind, step in registry.items() if verifier_of(step) is not None}
    assert checked == {
        "git-push",
        "github-push",
        "git-open-pr",
        "git-wait-for-pr",
        "git-merge-pr",
        "argocd-update",
    }


def test_a_step_that_does_not_say_is_external() -> None:
    assert effect_of(Gate()) is Effect.EXTERNAL and verifier_of(Gate()) is None
    assert effect_of(None) is Effect.EXTERNAL


# ---- continuing elsewhere ---------------------------------------------------------------------


async def test_a_promotion_taken_over_while_waiting_pushes_the_commit_the_first_replica_made(
    world: World,
) -> None:
    p = promotion(clone({"branch": "main", "path": "./out"}), EDIT, COMMIT, gate("wait"), PUSH)
    first = world.runtime()
    p = await advance_until(p, first, waiting_at="wait")
    made = p.status.state["commit"]["commit"]
    assert world.remote.head("main") != made, "pushed before the wait"

    world.gate.open("wait")
    done = await advance_until(p, world.runtime())  # a replica that never saw it

    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert statuses(done) == ["Succeeded"] * 5
    # The very commit the first replica made (same ID: same tree, parent and recorded dates).
    assert done.status.state["commit"] == {"commit": made}
    assert done.status.state["push"]["commit"] == made == world.remote.head("main")
    assert [subject for _, subject in world.remote.log("main")][1:] == ["initial"]
    assert world.remote.read_file("main", "app/values.yaml") == "image:\n  tag: 1.2.3\n"
    # Outputs, as expressions see them, are the ones recorded before the takeover.
    assert done.status.state["clone"] == p.status.state["clone"]
    assert done.status.state["edit"] == p.status.state["edit"]


async def test_the_rebuilt_work_directory_is_the_one_an_uninterrupted_run_has(
    world: World,
) -> None:
    steps = (
        clone({"branch": "main", "path": "./out"}),
        EDIT,
        COMMIT,
        PUSH,
        gate("wait"),
        {"uses": "file-write", "as": "note",
         "config": {"path": "./out/NOTE", "contents": "pushed to ${{ outputs.push.branch }}\n"}},
        {"uses": "git-commit", "as": "commit2", "config": {"path": "./out", "message": "note"}},
        {"uses": "git-tag", "as": "tag", "config": {"path": "./out", "tag": "v1"}},
        {"uses": "git-push", "as": "push2", "config": {"path": "./out"}},
        {"uses": "git-push", "as": "push-tag", "config": {"path": "./out", "tag": "v1"}},
        gate("end"),
        {"uses": "file-write", "as": "last", "config": {"path": "./out/LAST", "contents": "x"}},
    )  # fmt: skip
    world.gate.open("wait")
    world.gate.open("end")
    reference_remote = make_remote(world.tmp_path, files=FILES, name="reference")
    reference = World(world.tmp_path / "ref", reference_remote, world.gate)
    (world.tmp_path / "ref").mkdir()
    uninterrupted = await advance_until(promotion(*steps), reference.runtime())
    assert uninterrupted.status.phase is Phase.SUCCEEDED, uninterrupted.status.message

    # Taken over twice: before the first push has been built on, and after everything was
    # pushed (the tag included: checked on the remote, not pushed again).
    world.gate.opened.clear()
    p = await advance_until(promotion(*steps), world.runtime(), waiting_at="wait")
    world.gate.open("wait")
    p = await advance_until(p, world.runtime(), waiting_at="end")
    tagged = world.remote.tags()
    world.gate.open("end")
    done = await advance_until(p, world.runtime())

    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert tree(world.remote, "main") == tree(reference_remote, "main")
    assert len(world.remote.log("main")) == 3  # initial, the edit, the note: each pushed once
    assert world.remote.tags() == tagged == {"v1": world.remote.head("main")}
    assert done.status.state["push"]["commit"] == world.remote.log("main")[1][0]


async def test_a_push_that_rebased_onto_others_work_is_continued_from_the_pushed_commit(
    world: World,
) -> None:
    steps = (
        clone({"branch": "main", "path": "./out"}),
        EDIT,
        COMMIT,
        gate("before-push"),
        PUSH,
        gate("after-push"),
        {"uses": "file-write", "as": "note", "config": {"path": "./out/NOTE", "contents": "x\n"}},
        {"uses": "git-commit", "as": "commit2", "config": {"path": "./out", "message": "note"}},
        {"uses": "git-push", "as": "push2", "config": {"path": "./out"}},
    )  # fmt: skip
    p = await advance_until(promotion(*steps), world.runtime(), waiting_at="before-push")
    # Someone else pushes meanwhile: our push rebases onto it.
    world.remote.commit_files("main", {"OTHER": "theirs\n"}, "someone else")
    world.gate.open("before-push")
    p = await advance_until(p, world.runtime(), waiting_at="after-push")
    pushed = p.status.state["push"]["commit"]
    assert pushed != p.status.state["commit"]["commit"], "the push did not rebase"

    world.gate.open("after-push")
    done = await advance_until(p, world.runtime())

    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    subjects = [s for _, s in world.remote.log("main")]
    assert subjects == ["note", done.status.state["edit"]["commitMessage"].splitlines()[0],
                        "someone else", "initial"]  # fmt: skip
    assert world.remote.git("rev-parse", "main~1") == pushed
    assert world.remote.read_file("main", "OTHER") == "theirs\n"


async def test_a_deleted_work_directory_is_rebuilt_in_place(world: World) -> None:
    import shutil

    p = promotion(clone({"branch": "main", "path": "./out"}), EDIT, COMMIT, gate("wait"), PUSH)
    runtime = world.runtime()
    p = await advance_until(p, runtime, waiting_at="wait")
    shutil.rmtree(runtime.work_dir)  # a pod restart with a fresh emptyDir
    world.gate.open("wait")
    done = await advance_until(p, runtime)
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert world.remote.head("main") == done.status.state["commit"]["commit"]


async def test_the_replica_that_built_the_work_directory_does_not_rebuild_it(world: World) -> None:
    counted = Counting()
    steps = ({"uses": "counted", "as": "c"}, gate("wait"), {"uses": "counted", "as": "d"})
    world.gate.open("wait")

    def replica(name: str) -> engine.Runtime:
        return engine.Runtime(
            registry=registry_with(gate=world.gate, counted=counted),
            services=StepServices(),
            work_dir=world.tmp_path / name,
            freight=FREIGHT,
        )

    done = await advance_until(promotion(*steps), replica("one"))
    assert done.status.phase is Phase.SUCCEEDED
    assert (counted.runs, counted.replays) == (2, 0)
    # Another Promotion, taken over at the gate: its first step is replayed once, not again.
    counted.runs = 0
    world.gate.opened.clear()
    p = await advance_until(promotion(*steps, name="p2"), replica("one"), waiting_at="wait")
    world.gate.open("wait")
    done = await advance_until(p, replica("two"))
    assert done.status.phase is Phase.SUCCEEDED
    assert (counted.runs, counted.replays) == (2, 1)


class Counting:
    """A local step that counts its runs and its replays."""

    effect = Effect.LOCAL

    def __init__(self) -> None:
        self.runs = 0
        self.replays = 0

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        if ctx.replay is not None:
            self.replays += 1
        else:
            self.runs += 1
        return StepResult(StepStatus.SUCCEEDED, output={"n": 1})


# ---- what is recorded ------------------------------------------------------------------------


async def test_the_status_records_digests_function_answers_and_git_dates_but_no_config(
    world: World,
) -> None:
    world.functions["stageMetadata"] = lambda name: {"owner": "team-a"}
    secret = "s3cr3t-t0ken-value"
    write = {
        "uses": "file-write",
        "as": "w",
        "vars": [{"name": "token", "value": secret}],
        "config": {
            "path": "./out/owner",
            "contents": "${{ stageMetadata('test').owner }} ${{ vars.token }}",
        },
    }
    steps = (clone({"branch": "main", "path": "./out"}), write, COMMIT_M, gate("wait"))
    p = await advance_until(promotion(*steps), world.runtime(), waiting_at="wait")
    replay = p.status.to_dict()["replay"]
    assert replay["workDir"]
    records = replay["steps"]
    assert set(records) == {"clone", "w", "commit"}  # not the gate: external, nothing to check
    assert records["w"]["calls"] == [
        {"call": 'stageMetadata("test")', "result": '{"owner":"team-a"}'}
    ]
    assert set(records["commit"]["data"]) == {"tree", "authorDate", "committerDate"}
    assert all(r["input"].startswith("sha256:") for r in records.values())
    assert secret not in json.dumps(replay)


# ---- what a replay refuses -------------------------------------------------------------------


async def test_a_changed_answer_is_replayed_as_recorded(world: World) -> None:
    owner = {"owner": "team-a"}
    world.functions["stageMetadata"] = lambda name: dict(owner)
    p = promotion(
        clone({"branch": "main", "path": "./out"}), WRITE_OWNER, COMMIT_M, gate("wait"), PUSH
    )
    p = await advance_until(p, world.runtime(), waiting_at="wait")
    owner["owner"] = "team-b"  # changed after the file was written
    world.gate.open("wait")
    done = await advance_until(p, world.runtime())
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert world.remote.read_file("main", "owner") == "team-a\n"


async def test_a_file_write_from_an_input_that_changed_and_was_too_big_to_record_is_refused(
    world: World,
) -> None:
    big = {"owner": "team-a", "padding": "x" * (MAX_CALLS_BYTES + 1)}
    world.functions["stageMetadata"] = lambda name: dict(big)
    p = promotion(clone({"branch": "main", "path": "./out"}), WRITE_OWNER, gate("wait"), PUSH)
    p = await advance_until(p, world.runtime(), waiting_at="wait")
    assert "calls" not in p.status.replay_steps["w"]
    big["owner"] = "team-b"
    world.gate.open("wait")
    done = await advance_until(p, world.runtime())
    assert done.status.phase is Phase.ERRORED
    message = done.status.message
    # Refused before the next step runs (the waiting one, which the new replica enters again).
    assert message.startswith("step 'wait' (gate) errored: the work directory is not the one")
    assert "step 'w' (file-write): its config renders differently than when it ran" in message
    assert world.remote.log("main")[0][1] == "initial", "pushed something else"


async def test_a_checkout_whose_commit_was_rewritten_away_is_refused(world: World) -> None:
    p = promotion(clone({"branch": "main", "path": "./out"}), EDIT, COMMIT, gate("wait"), PUSH)
    p = await advance_until(p, world.runtime(), waiting_at="wait")
    cloned = p.status.state["clone"]["commits"]["./out"]
    # Someone force-pushes main to a new root and the old history is garbage-collected.
    world.remote.commit_files("rewritten", {"README.md": "new\n"}, "new root", orphan=True)
    world.remote.git("update-ref", "refs/heads/main", world.remote.head("rewritten") or "")
    world.remote.git("branch", "-D", "rewritten")
    world.remote.git("reflog", "expire", "--expire=now", "--all")
    world.remote.git("gc", "-q", "--prune=now")
    world.gate.open("wait")
    done = await advance_until(p, world.runtime())
    assert done.status.phase is Phase.ERRORED
    assert f"replaying step 'clone' (git-clone): git-clone: commit {cloned}" in done.status.message
    assert "is no longer in" in done.status.message
    assert world.remote.log("main")[0][1] == "new root", "pushed something"


async def test_a_push_whose_commit_is_gone_from_the_branch_is_not_pushed_again(
    world: World,
) -> None:
    steps = (clone({"branch": "main", "path": "./out"}), EDIT, COMMIT, PUSH, gate("wait"),
             {"uses": "compose-output", "as": "after", "config": {"x": 1}})  # fmt: skip
    p = await advance_until(promotion(*steps), world.runtime(), waiting_at="wait")
    pushed = p.status.state["push"]["commit"]
    world.remote.git("update-ref", "refs/heads/main", world.remote.git("rev-parse", "main~1"))
    world.gate.open("wait")
    done = await advance_until(p, world.runtime())
    assert done.status.phase is Phase.ERRORED
    assert f"branch 'main' of {REPO} no longer contains {pushed[:12]}" in done.status.message
    assert "not pushing again" in done.status.message
    assert world.remote.log("main")[0][1] == "initial"


def test_git_accepts_the_dates_git_commit_records() -> None:
    # GIT_AUTHOR_DATE in git's internal format ("<seconds> <zone>") is what --date=raw prints.
    out = subprocess.run(
        ["git", "var", "GIT_AUTHOR_IDENT"],
        env={
            "GIT_AUTHOR_NAME": "a",
            "GIT_AUTHOR_EMAIL": "a@b",
            "GIT_AUTHOR_DATE": "1700000000 +0130",
            "PATH": "/usr/bin:/bin",
            "HOME": "/nonexistent",
        },
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip().endswith("1700000000 +0130")


class Nondeterministic:
    """A local step that writes something new each time it runs (a timestamp, say)."""

    effect = Effect.LOCAL

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        self.runs += 1
        (ctx.work_dir / "out" / "stamp").write_text(f"run {self.runs}\n")
        return StepResult(StepStatus.SUCCEEDED)


async def test_a_replayed_commit_with_another_tree_is_refused_even_if_never_pushed(
    world: World,
) -> None:
    stamp = Nondeterministic()
    steps = (clone({"branch": "main", "path": "./out"}), {"uses": "stamp", "as": "stamp"},
             COMMIT_M, gate("wait"), PUSH)  # fmt: skip

    def replica(name: str) -> engine.Runtime:
        return replace(world.runtime(world.tmp_path / name), registry=registry_with(
            gate=world.gate, stamp=stamp))  # fmt: skip

    p = await advance_until(promotion(*steps), replica("one"), waiting_at="wait")
    world.gate.open("wait")
    done = await advance_until(p, replica("two"))
    assert done.status.phase is Phase.ERRORED
    assert "replaying step 'commit' (git-commit): git-commit: the rebuilt working tree" in (
        done.status.message
    )
    assert world.remote.log("main")[0][1] == "initial", "pushed something else"


def without_commit_dates(p: Promotion) -> Promotion:
    """The status as git-commit left it before it recorded its dates and tree."""
    records = dict(p.status.replay_steps)
    records["commit"] = {k: v for k, v in records["commit"].items() if k != "data"}
    return p.with_status(replace(p.status, replay_steps=records))


def as_committer(runtime: engine.Runtime, name: str) -> engine.Runtime:
    git = replace(runtime.services.git, author_name=name)
    return replace(runtime, services=replace(runtime.services, git=git))


async def test_a_commit_that_cannot_be_made_again_byte_for_byte_is_replaced_if_never_pushed(
    world: World,
) -> None:
    p = promotion(clone({"branch": "main", "path": "./out"}), EDIT, COMMIT, gate("wait"), PUSH)
    p = without_commit_dates(await advance_until(p, world.runtime(), waiting_at="wait"))
    recorded = p.status.state["commit"]["commit"]
    world.gate.open("wait")
    # Another committer identity: the same tree, another commit ID.
    done = await advance_until(p, as_committer(world.runtime(), "Other Replica"))
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    again = done.status.state["commit"]["commit"]
    assert again != recorded
    assert again == done.status.state["push"]["commit"] == world.remote.head("main")
    assert world.remote.git("rev-parse", f"{again}^{{tree}}") == world.remote.git(
        "rev-parse", "main^{tree}"
    )


async def test_a_pushed_commit_is_continued_from_even_if_it_cannot_be_made_again_byte_for_byte(
    world: World,
) -> None:
    note = {"uses": "file-write", "as": "note", "config": {"path": "./out/NOTE", "contents": "x"}}
    steps = (clone({"branch": "main", "path": "./out"}), EDIT, COMMIT, PUSH, gate("wait"), note,
             {"uses": "git-commit", "as": "commit2", "config": {"path": "./out", "message": "n"}},
             {"uses": "git-push", "as": "push2", "config": {"path": "./out"}})  # fmt: skip
    p = without_commit_dates(await advance_until(promotion(*steps), world.runtime(), "wait"))
    pushed = p.status.state["push"]["commit"]
    world.gate.open("wait")
    done = await advance_until(p, as_committer(world.runtime(), "Other Replica"))
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert done.status.state["commit"]["commit"] == pushed  # the recorded one, same tree
    assert world.remote.git("rev-parse", "main~1") == pushed
    assert len(world.remote.log("main")) == 3


async def test_a_download_whose_content_changed_since_is_refused_and_one_that_did_not_is_kept(
    world: World, aiohttp_server: Callable[[web.Application], Awaitable[TestServer]]
) -> None:
    content = {"body": b"chart v1\n"}

    async def chart(request: web.Request) -> web.Response:
        return web.Response(body=content["body"])

    app = web.Application()
    app.router.add_get("/chart.tgz", chart)
    server = await aiohttp_server(app)
    download = {
        "uses": "http-download",
        "as": "download",
        "config": {"url": str(server.make_url("/chart.tgz")), "outPath": "./chart.tgz"},
    }
    copy = {"uses": "copy", "as": "copy", "config": {"inPath": "./chart.tgz", "outPath": "./c"}}

    def replica(name: str) -> engine.Runtime:
        runtime = world.runtime(world.tmp_path / name)
        http = HttpSettings(allow_hosts=("127.0.0.1",))
        return replace(runtime, services=replace(runtime.services, http=http))

    same = await advance_until(promotion(download, gate("wait"), copy), replica("a"), "wait")
    assert set(same.status.replay_steps["download"]["data"]) == {"sha256"}
    changed = await advance_until(
        promotion(download, gate("wait"), copy, name="p2"), replica("b"), "wait"
    )
    world.gate.open("wait")
    done = await advance_until(same, replica("c"))
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert (world.tmp_path / "c" / "c").read_bytes() == b"chart v1\n"

    content["body"] = b"chart v2\n"
    done = await advance_until(changed, replica("d"))
    assert done.status.phase is Phase.ERRORED
    assert "replaying step 'download' (http-download): http-download: GET" in done.status.message
    assert "now serves other content than when this step first ran" in done.status.message
