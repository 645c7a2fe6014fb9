"""The local runner's command-line contract: exit codes, output formats, input errors.

Runs ``promoter.local.cli.main`` in-process for speed, and the real ``python -m promoter run`` in a
subprocess where the process boundary matters (stdout purity, signals, waiting on Running steps).
Git is real: a local bare repository stands in for Kargo's example GitOps repo.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from promoter.local.cli import Progress, main
from promoter.local.runner import RunOptions, run_promotion
from promoter.resources.manifests import load
from promoter.resources.model import Phase
from promoter.steps.base import HttpSettings, StepServices
from tests.support import objects
from tests.support.clock import START, FakeClock
from tests.support.gitrepo import RemoteRepo, git_env, make_remote

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEMO_URL = "https://github.com/example/kargo-demo.git"


def seed_files() -> dict[str, str]:
    base = EXAMPLES / "gitops-repo"
    return {str(p.relative_to(base)): p.read_text() for p in base.rglob("*") if p.is_file()}


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.remote: RemoteRepo = make_remote(tmp_path, files=seed_files())
        git_env(tmp_path, {self.remote.url: DEMO_URL})
        self.gitconfig = tmp_path / "gitconfig-longshoreman-tests"
        self.documents: list[dict[str, Any]] = list(
            yaml.safe_load_all((EXAMPLES / "kargo-demo" / "project.yaml").read_text())
        )

    def write(
        self, documents: list[dict[str, Any]] | None = None, name: str = "manifests.yaml"
    ) -> Path:
        path = self.tmp / name
        path.write_text(yaml.safe_dump_all(documents if documents is not None else self.documents))
        return path

    def doc(self, kind: str, name: str | None = None) -> dict[str, Any]:
        return next(
            d
            for d in self.documents
            if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
        )

    def run(self, *args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["run", "--git-config", str(self.gitconfig), *args], stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    yield Setup(tmp_path)


def test_example_promotion_succeeds_and_pushes_the_new_image(setup: Setup) -> None:
    code, out, err = setup.run(
        "--manifests",
        str(EXAMPLES / "kargo-demo"),
        "--stage",
        "test",
        "--freight",
        "frozen-tauntaun",
    )
    assert code == 0, out + err
    assert "deploy::push (git-push): Succeeded" in out
    assert "Promotion kargo-demo/test." in out and ": Succeeded" in out
    kustomization = setup.remote.read_file("stage/test", "manifests/kustomization.yaml")
    assert kustomization is not None and "newTag: 1.27.0" in kustomization
    assert "# Base manifests for the demo app." in kustomization, "comments survive the edit"
    assert (
        setup.remote.read_file("main", "base/kustomization.yaml")
        == seed_files()["base/kustomization.yaml"]
    )


def test_the_installed_command_runs_a_promotion_and_exits_with_its_phase(setup: Setup) -> None:
    """``longshoreman run`` (the console script pip installs) as a process: the output is all
    there although the process ends with os._exit, and the exit code is the Promotion's."""
    command = Path(sys.executable).parent / "longshoreman"
    assert command.exists(), "make installs the longshoreman command into .venv/bin"
    args = [str(command), "run", "--git-config", str(setup.gitconfig)]
    args += ["--manifests", str(EXAMPLES / "kargo-demo"), "--stage", "test"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*args, "--freight", "frozen-tauntaun", "--output", "json"],
        capture_output=True, text=True, env=env, cwd=setup.tmp, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"]["phase"] == "Succeeded"
    assert "deploy::push (git-push): Succeeded" in done.stderr
    failed = subprocess.run(
        [*args, "--freight", "no-such-freight"],
        capture_output=True, text=True, env=env, cwd=setup.tmp, timeout=120, check=False,
    )  # fmt: skip
    assert failed.returncode == 2 and "no-such-freight" in failed.stderr


@pytest.mark.parametrize("api_version", ["kargo.akuity.io/v1alpha1", "longshoreman.dev/v1alpha1"])
def test_json_output_is_the_promotion_object_alone_with_either_api_version(
    setup: Setup, api_version: str
) -> None:
    for d in setup.documents:
        d["apiVersion"] = api_version
    code, out, err = setup.run(
        "--manifests",
        str(setup.write()),
        "--stage",
        "test",
        "--freight",
        "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b",
        "--output",
        "json",
    )
    assert code == 0, err
    promotion = json.loads(out)
    assert promotion["kind"] == "Promotion"
    assert promotion["spec"]["stage"] == "test"
    assert promotion["metadata"]["name"].startswith("test.") and promotion["metadata"][
        "name"
    ].endswith(".7c9e6b1")
    status = promotion["status"]
    assert status["phase"] == "Succeeded"
    assert [s["status"] for s in status["stepExecutionMetadata"]] == ["Succeeded"] * 8
    head = setup.remote.head("stage/test")
    assert status["state"]["deploy"]["commit"] == head
    assert (
        status["state"]["summary"]["message"]
        == f"frozen-tauntaun (nginx 1.27.0) is on stage/test at {head}"
    )
    assert "deploy::push (git-push): Succeeded" in err, "progress goes to stderr"


def test_promotion_vars_from_the_command_line_win(setup: Setup) -> None:
    setup.doc("Stage", "test")["spec"]["promotionTemplate"]["spec"]["steps"][1]["config"][
        "message"
    ] = "${{ vars.note }}"
    setup.doc("Stage", "test")["spec"]["vars"].append({"name": "note", "value": "from-stage"})
    code, out, err = setup.run(
        "--manifests",
        str(setup.write()),
        "--stage",
        "test",
        "--freight",
        "frozen-tauntaun",
        "--output",
        "json",
        "--var",
        "note=from-cli",
    )
    assert code == 0, err
    assert json.loads(out)["status"]["state"]["summary"]["message"] == "from-cli"


def test_failed_promotion_exits_1_naming_the_step(setup: Setup) -> None:
    steps = setup.doc("Stage", "test")["spec"]["promotionTemplate"]["spec"]["steps"]
    steps.insert(
        0,
        {
            "uses": "fail",
            "as": "gate",
            "if": "${{ ctx.targetFreight.alias == 'frozen-tauntaun' }}",
            "config": {"message": "frozen Freight may not move"},
        },
    )
    code, out, _ = setup.run(
        "--manifests", str(setup.write()), "--stage", "test", "--freight", "frozen-tauntaun"
    )
    assert code == 1
    assert "Failed - step 'gate' (fail) failed: frozen Freight may not move" in out
    assert setup.remote.branches() == ["main"], "later steps were skipped: nothing pushed"


def test_errored_promotion_exits_1(setup: Setup) -> None:
    setup.doc("Stage", "test")["spec"]["vars"][0]["value"] = (
        "https://github.com/example/not-mapped.git"
    )
    code, out, _ = setup.run(
        "--manifests", str(setup.write()), "--stage", "test", "--freight", "frozen-tauntaun"
    )
    assert code == 1
    assert "Errored - step 'deploy::step-1' (git-clone) errored" in out


def _bad_yaml(s: Setup) -> Path:
    path = s.tmp / "broken.yaml"
    path.write_text("kind: Stage\nmetadata: {name: test\n")
    return path


def _unknown_kind(s: Setup) -> Path:
    return s.write(
        [
            *s.documents,
            {"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stagee", "metadata": {"name": "x"}},
        ]
    )


def _missing_var(s: Setup) -> Path:
    s.doc("Stage", "test")["spec"]["promotionTemplate"]["spec"]["steps"][0]["vars"].pop(0)
    return s.write()


def _bad_expression(s: Setup) -> Path:
    s.doc("PromotionTask")["spec"]["steps"][4]["config"]["message"] = (
        "${{ task.outputs['update-image'].commitMessage + }}"
    )
    return s.write()


def _no_api_version(s: Setup) -> Path:
    del s.doc("Freight")["apiVersion"]
    return s.write()


def _duplicate_alias(s: Setup) -> Path:
    s.doc("Stage", "test")["spec"]["promotionTemplate"]["spec"]["steps"][1]["as"] = "deploy"
    return s.write()


def _reserved_alias(s: Setup) -> Path:
    s.doc("PromotionTask")["spec"]["steps"][0]["as"] = "step-7"
    return s.write()


def _nested_task(s: Setup) -> Path:
    s.doc("PromotionTask")["spec"]["steps"].append({"task": {"name": "update-image-and-push"}})
    return s.write()


def _unknown_task(s: Setup) -> Path:
    s.doc("Stage", "test")["spec"]["promotionTemplate"]["spec"]["steps"][0]["task"]["name"] = "x"
    return s.write()


@pytest.mark.parametrize(
    ("make", "args", "expected"),
    [
        (_bad_yaml, (), ["broken.yaml: not valid YAML at line 3"]),
        (_unknown_kind, (), ["manifests.yaml#6", "kind: unknown kind 'Stagee'"]),
        (_no_api_version, (), ["manifests.yaml#2", "apiVersion: missing apiVersion"]),
        (_duplicate_alias, (), ["duplicate alias 'deploy'"]),
        (_reserved_alias, (), ["alias 'step-7' is reserved"]),
        (_nested_task, (), ["tasks cannot reference other tasks"]),
        (_unknown_task, (), ["PromotionTask 'x' not found in namespace 'kargo-demo'"]),
        (
            lambda s: s.write(),
            ("--stage", "nope"),
            ["--stage: Stage 'nope' not found (Stages in the manifests: test, uat)"],
        ),
        (
            lambda s: s.write(),
            ("--freight", "nope"),
            ["--freight: Freight 'nope' not found by name or alias", "frozen-tauntaun"],
        ),
        (_missing_var, (), ["requires var 'repoURL'", "PromotionTask 'update-image-and-push'"]),
        (_bad_expression, (), ["deploy::commit", "config", "commitMessage +"]),
        (
            lambda s: s.write(),
            ("--var", "novalue"),
            ["--var: 'novalue' is not of the form NAME=VALUE"],
        ),
        (
            lambda s: s.tmp / "missing-dir",
            (),
            ["missing-dir: --manifests: no such file or directory"],
        ),
    ],
)
def test_invalid_input_exits_2_naming_the_problem_and_pushes_nothing(
    setup: Setup, make: Any, args: tuple[str, ...], expected: list[str]
) -> None:
    path = make(setup)
    argv = {"--manifests": str(path), "--stage": "test", "--freight": "frozen-tauntaun"}
    extra: list[str] = []
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag == "--var":
            extra += [flag, value]
        else:
            argv[flag] = value
    flat = [item for pair in argv.items() for item in pair] + extra
    code, out, err = setup.run(*flat)
    assert code == 2, out + err
    for text in expected:
        assert text in err
    assert err.startswith("error: ")
    assert out == ""
    assert setup.remote.branches() == ["main"]
    assert setup.remote.log("main") == [(setup.remote.head("main"), "initial")]


def test_runaway_expression_is_refused_before_anything_is_pushed(setup: Setup) -> None:
    commit = setup.doc("PromotionTask")["spec"]["steps"][4]
    commit["config"]["message"] = "${{ repeat('x', 100000000) }}"
    code, out, _ = setup.run(
        "--manifests", str(setup.write()), "--stage", "test", "--freight", "frozen-tauntaun"
    )
    assert code == 1
    assert "Errored - step 'deploy::commit' (git-commit) errored" in out
    assert "repeat" in out
    # git-clone's `create: true` pushed the new branch's empty first commit, as Kargo does;
    # nothing of the Promotion's content reached the remote.
    assert setup.remote.files("stage/test") == []


def test_namespace_defaults_to_default_when_the_stage_has_none(setup: Setup) -> None:
    for d in setup.documents:
        d["metadata"].pop("namespace", None)
    code, out, err = setup.run(
        "--manifests",
        str(setup.write()),
        "--stage",
        "test",
        "--freight",
        "frozen-tauntaun",
        "--output",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)["metadata"]["namespace"] == "default"


# ---- the real process: Running steps, Ctrl-C ----------------------------------------------


def one_step_stage(step: dict[str, Any]) -> list[dict[str, Any]]:
    """Freight f1 and Stage s of project p whose template is ``step`` alone."""
    return [objects.freight(), objects.stage("s", steps=[step])]


def http_stage(url: str) -> list[dict[str, Any]]:
    return one_step_stage(
        {
            "uses": "http",
            "as": "wait-ready",
            "config": {
                "url": url,
                "pollInterval": "10s",
                "successExpression": "response.body.status == 'ready'",
                "failureExpression": "response.body.status == 'broken'",
                "outputs": [{"name": "version", "fromExpression": "response.body.version"}],
            },
        }
    )


async def _run_cli(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "promoter",
        "run",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.looptime  # the step's 10 s poll interval passes on virtual time
async def test_runner_waits_out_running_steps(tmp_path: Path) -> None:
    """In process, as the CLI runs it: the wait is the event loop's, so it costs no wall time
    (``test_ctrl_c_aborts_the_promotion`` drives the CLI process through a wait)."""
    calls = []

    async def status(request: web.Request) -> web.Response:
        calls.append(request)
        # The http step polls no faster than every 10 s (Kargo's floor): ready on the 2nd call.
        ready = len(calls) >= 2
        return web.json_response({"status": "ready" if ready else "pending", "version": "2.0"})

    app = web.Application()
    app.router.add_get("/status", status)
    async with TestServer(app, host="127.0.0.1") as server:
        path = tmp_path / "m.yaml"
        path.write_text(yaml.safe_dump_all(http_stage(str(server.make_url("/status")))))
        progress = io.StringIO()
        printer = Progress(progress)
        loop = asyncio.get_running_loop()
        started = loop.time()
        promotion = await run_promotion(
            load(path),
            RunOptions(
                stage="s",
                freight="f1",
                work_dir=tmp_path / "work",
                services=StepServices(http=HttpSettings(allow_hosts=("127.0.0.1",))),
            ),
            observer=printer.step,
            on_wait=printer.wait,
        )
        waited = loop.time() - started
    assert promotion.status.phase is Phase.SUCCEEDED, promotion.status.message
    assert promotion.status.state["wait-ready"] == {"version": "2.0"}
    assert len(calls) == 2
    assert waited >= 10, "no faster than the step's poll interval"
    assert "wait-ready (http): Running" in progress.getvalue()
    assert "waiting 10.0s before checking again" in progress.getvalue()


async def test_ctrl_c_aborts_the_promotion(tmp_path: Path) -> None:
    asked = asyncio.Event()

    async def status(request: web.Request) -> web.Response:
        asked.set()
        return web.json_response({"status": "pending"})

    app = web.Application()
    app.router.add_get("/status", status)
    async with TestServer(app, host="127.0.0.1") as server:
        path = tmp_path / "m.yaml"
        path.write_text(yaml.safe_dump_all(http_stage(str(server.make_url("/status")))))
        proc = await _run_cli("--manifests", str(path), "--stage", "s", "--freight", "f1")
        await asyncio.wait_for(asked.wait(), 30)
        # Interrupted while it waits for the step to be checked again (it says so first).
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            while b"before checking again" not in await proc.stdout.readline():
                pass
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1, err.decode()
    assert b"Aborted - Aborted by local:" in out


def git_stage(repo_url: str) -> list[dict[str, Any]]:
    return one_step_stage(
        {
            "uses": "git-clone",
            "config": {"repoURL": repo_url, "checkout": [{"branch": "main", "path": "./out"}]},
        }
    )


async def test_ctrl_c_aborts_a_git_promotion_during_its_clone(tmp_path: Path) -> None:
    """Ctrl-C during a clone aborts the Promotion, and takes the git process it was waiting on
    down with it."""
    connected, closed = asyncio.Event(), asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A git server that takes the request and never answers: the clone waits.
        connected.set()
        while await reader.read(65536):
            pass
        closed.set()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        path = tmp_path / "m.yaml"
        path.write_text(yaml.safe_dump_all(git_stage(f"http://127.0.0.1:{port}/repo.git")))
        proc = await _run_cli("--manifests", str(path), "--stage", "s", "--freight", "f1")
        await asyncio.wait_for(connected.wait(), 30)
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 1, err.decode()
        assert b"Aborted - Aborted by local:" in out
        # The connection is closed: the clone's git (in a session of its own, so the signal
        # never reached it) was killed, not left behind.
        await asyncio.wait_for(closed.wait(), 30)
    finally:
        server.close()
        await server.wait_closed()


def test_a_command_line_argparse_refuses_still_exits_2_with_its_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--manifests", "m.yaml", "--stage", "test"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: longshoreman run")
    assert "the following arguments are required: --freight" in err


def test_demo_runs_on_embedded_defaults() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["demo"], stdout=out, stderr=err)
    assert code == 0, out.getvalue() + err.getvalue()
    text = out.getvalue()
    assert ": Succeeded" in text
    assert "newTag: 1.27.0" in text
    assert "frozen-tauntaun (nginx 1.27.0) is on stage/test at " in text


async def test_the_runners_clock_names_stamps_and_answers_now(tmp_path: Path) -> None:
    """The local runner reads the time from the clock it is given: the Promotion's name (its
    ULID), the steps' timestamps and ``${{ now() }}`` all carry the pinned time."""
    manifests = http_stage("http://127.0.0.1:1/unused")
    steps = manifests[1]["spec"]["promotionTemplate"]["spec"]["steps"]
    steps[:] = [
        {
            "uses": "compose-output",
            "as": "stamp",
            "config": {"at": "${{ now().Format('2006-01-02T15:04:05Z07:00') }}"},
        }
    ]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    promotion = await run_promotion(
        load(path),
        RunOptions(stage="s", freight="f1", work_dir=tmp_path / "work"),
        clock=FakeClock(START),
    )
    assert promotion.status.phase is Phase.SUCCEEDED, promotion.status.message
    assert promotion.status.state["stamp"] == {"at": "2026-01-01T12:00:00Z"}
    assert promotion.status.steps[0].started_at == START
    assert promotion.status.finished_at == START
    ulid = promotion.name.split(".")[1]
    crockford = "0123456789abcdefghjkmnpqrstvwxyz"
    millis = 0
    for char in ulid[:10]:  # a ULID's first 10 characters are its milliseconds
        millis = millis * 32 + crockford.index(char)
    assert millis == int(START.timestamp() * 1000)


def test_ui_base_url_comes_from_the_command_line(setup: Setup) -> None:
    step = {"uses": "compose-output", "as": "links", "config": {"ui": "${{ ctx.uiBaseUrl }}"}}
    manifests = setup.write(one_step_stage(step), name="ui.yaml")
    base = ["--manifests", str(manifests), "--stage", "s", "--freight", "f1", "--output", "json"]
    code, out, err = setup.run(*base, "--ui-base-url", "https://longshoreman.example.com")
    assert code == 0, err
    links = json.loads(out)["status"]["state"]["links"]
    assert links == {"ui": "https://longshoreman.example.com"}
    # Unset, it is empty, as on a server without LONGSHOREMAN_PUBLIC_URL.
    code, out, err = setup.run(*base)
    assert code == 0, err
    assert json.loads(out)["status"]["state"]["links"] == {"ui": ""}
