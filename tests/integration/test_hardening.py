"""Hardening rules (issue 7, section 4), one clearly named test or group per rule.

Rules covered elsewhere, where their natural home is, are listed here so the set is complete:

- git values never become options and no shell runs: here, and ``tests/unit/steps/test_git.py``
  (``test_ref_names``, ``test_repo_urls``, ``test_clone_rejects_bad_config_before_running_git``);
- file steps stay in the work directory (``..``, absolute paths, symlinks): here for a symlink
  committed into a cloned repository, and ``tests/unit/steps/test_file_steps.py``
  (``test_paths_cannot_leave_the_work_directory``);
- the http step's host policy: ``tests/unit/steps/test_http.py`` (the ``host policy`` section), and
  here for its settings;
- oversized request bodies: here (Slack, the app) and
  ``tests/integration/test_observability.py`` (GitHub, counted as ``too_large``);
- fuzzing: ``tests/integration/test_fuzz.py``.

Timeouts are checked against a fake that accepts connections and never answers, with small
configured timeouts; the ``asyncio.timeout`` around each is only a safety net so a regression
fails instead of hanging the suite, not a measurement.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings, SettingsError
from handlers.client import GitHubClient, GitHubUnreachable, RetryPolicy
from handlers.settings import GitHubSettings
from promoter.errors import StepError
from promoter.expressions import ExpressionError, evaluate_expression
from promoter.steps.base import GitSettings, HttpSettings, StepContext, StepStatus
from promoter.steps.registry import builtin_registry
from slack.api import SlackApi, SlackUnavailable
from slack.blocks import Message
from tests.support.github import app_private_key, webhook_request
from tests.support.gitrepo import git_env, make_remote
from tests.support.processes import QUIET
from tests.support.projects import FREIGHT, project_prelude
from tests.support.slack import SIGNING_SECRET, signed_headers, slash_command
from tests.support.steps import make_context

ROOT = Path(__file__).resolve().parents[2]
STEPS = builtin_registry()
REPO = "https://github.com/example/repo.git"
SAFETY_NET = 20.0


async def run_step(kind: str, ctx: StepContext, config: dict[str, Any]) -> Any:
    return await STEPS[kind].run(ctx, config)


async def clone_main(ctx: StepContext, path: str) -> Any:
    return await run_step(
        "git-clone", ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": path}]}
    )


# ---- git: values never become options, no shell ----------------------------------------------


@pytest.mark.parametrize(
    ("field", "checkout"),
    [
        ("branch", {"branch": "--upload-pack=touch MARKER", "path": "./out"}),
        ("branch", {"branch": "-c core.sshCommand=touch MARKER", "path": "./out"}),
        ("tag", {"tag": "--upload-pack=touch MARKER", "path": "./out"}),
        ("commit", {"commit": "--output=MARKER", "path": "./out"}),
        ("path", {"branch": "main", "path": "--output=MARKER"}),
        ("branch", {"branch": "main; touch MARKER", "path": "./out"}),
        ("branch", {"branch": "$(touch MARKER)", "path": "./out"}),
    ],
)
async def test_git_values_never_become_options_or_shell(
    tmp_path: Path, field: str, checkout: dict[str, str]
) -> None:
    marker = tmp_path / "pwned"
    remote = make_remote(tmp_path, {"README.md": "hi\n"})
    ctx = make_context(tmp_path, git_env=git_env(tmp_path, {remote.url: REPO}))
    config = {"repoURL": REPO, "checkout": [{k: v.replace("MARKER", str(marker))
                                             for k, v in checkout.items()}]}  # fmt: skip
    try:
        await run_step("git-clone", ctx, config)
    except StepError as caught:
        assert caught.terminal
    assert not marker.exists(), "a config value reached git as an option or a shell"
    # Whatever was checked out stayed inside the work directory, as a plain name.
    for path in ctx.work_dir.rglob("*"):
        assert path.resolve().is_relative_to(ctx.work_dir.resolve()), field


async def test_git_push_and_tag_values_never_become_options(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    remote = make_remote(tmp_path, {"README.md": "hi\n"})
    ctx = make_context(tmp_path, git_env=git_env(tmp_path, {remote.url: REPO}))
    await clone_main(ctx, "./out")
    for kind, config in [
        ("git-push", {"path": "./out", "targetBranch": f"--receive-pack=touch {marker}"}),
        ("git-tag", {"path": "./out", "tag": f"--upload-pack=touch {marker}"}),
    ]:
        with pytest.raises(StepError) as caught:
            await run_step(kind, ctx, config)
        assert caught.value.terminal, kind
    assert not marker.exists()


# ---- file steps stay inside the work directory ------------------------------------------------


def _commit_symlink(remote: Any, name: str, target: str) -> None:
    """Commit a symlink ``name`` -> ``target`` on main (mode 120000), as an attacker could."""
    index = remote.path / "index-symlink"
    env = {"GIT_INDEX_FILE": str(index)}
    remote.git("read-tree", remote.head("main"), env=env)
    blob = remote.git("hash-object", "-w", "--stdin", stdin=target)
    remote.git("update-index", "--index-info", stdin=f"120000 {blob}\t{name}\n", env=env)
    tree = remote.git("write-tree", env=env)
    index.unlink()
    sha = remote.git("commit-tree", tree, "-p", remote.head("main"), stdin="add a link\n")
    remote.git("update-ref", "refs/heads/main", sha)


@pytest.mark.parametrize(
    ("kind", "config"),
    [
        ("yaml-update", {"path": "./src/escape/a.yaml", "updates": [{"key": "a", "value": "2"}]}),
        ("file-write", {"path": "./src/escape/a.yaml", "contents": "owned", "overwrite": True}),
        ("copy", {"inPath": "./src/escape/a.yaml", "outPath": "./copied.yaml"}),
        ("copy", {"inPath": "./src/README.md", "outPath": "./src/escape/README.md"}),
        ("delete", {"path": "./src/escape/a.yaml"}),
        (
            "yaml-parse",
            {"path": "./src/escape/a.yaml", "outputs": [{"name": "a", "fromExpression": "a"}]},
        ),
    ],
)
async def test_file_steps_refuse_a_symlink_committed_into_the_cloned_repo(
    tmp_path: Path, kind: str, config: dict[str, Any]
) -> None:
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "a.yaml").write_text("a: 1\n")
    remote = make_remote(tmp_path, {"README.md": "hi\n"})
    _commit_symlink(remote, "escape", str(outside))
    ctx = make_context(tmp_path, git_env=git_env(tmp_path, {remote.url: REPO}))
    await clone_main(ctx, "./src")
    assert (ctx.work_dir / "src/escape").is_symlink()
    with pytest.raises(StepError) as caught:
        await run_step(kind, ctx, config)
    assert caught.value.terminal
    assert "outside the Promotion's work directory" in caught.value.message
    assert (outside / "a.yaml").read_text() == "a: 1\n"
    assert not (ctx.work_dir / "copied.yaml").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["a.yaml"]


# ---- the http step's host policy: its settings ------------------------------------------------


def test_http_host_rules_are_validated_at_start_naming_the_variable() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"LONGSHOREMAN_HTTP_ALLOW": "10.0.0.0/8, not a host"})
    assert "LONGSHOREMAN_HTTP_ALLOW" in str(caught.value) and "not a host" in str(caught.value)
    settings = Settings.from_env(
        {"LONGSHOREMAN_HTTP_ALLOW": "*.corp.example, 10.0.0.0/8", "LONGSHOREMAN_HTTP_DENY": "*"}
    )
    assert settings.http_allow == ("*.corp.example", "10.0.0.0/8")
    assert settings.http_deny == ("*",)
    assert Settings.from_env({}).http_allow == ()


@pytest.mark.parametrize("raw", ["lots", "0", "-5"])
def test_a_bad_download_limit_is_refused_at_start_naming_the_variable(raw: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"LONGSHOREMAN_HTTP_MAX_DOWNLOAD_BYTES": raw})
    assert "LONGSHOREMAN_HTTP_MAX_DOWNLOAD_BYTES" in str(caught.value)


def test_the_download_limit_defaults_to_kargos_and_can_be_set() -> None:
    assert Settings.from_env({}).http_max_download_bytes == 100 * 1024 * 1024
    limited = Settings.from_env({"LONGSHOREMAN_HTTP_MAX_DOWNLOAD_BYTES": "1048576"})
    assert limited.http_max_download_bytes == 1024 * 1024


DOWNLOAD_PROJECT = (
    project_prelude("dl")
    + """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {name: fetch, namespace: dl}
spec:
  requestedFreight: [{origin: {kind: Warehouse, name: w}, sources: {direct: true}}]
  promotionTemplate:
    spec:
      steps:
      - uses: http-download
        config: {url: "${{ vars.url }}", outPath: big.bin}
"""
)


async def test_the_server_applies_its_download_limit_to_promotions(tmp_path: Path) -> None:
    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 5000)

    files = web.Application()
    files.router.add_get("/big.bin", big)
    seed = tmp_path / "project.yaml"
    seed.write_text(DOWNLOAD_PROJECT)
    settings = Settings.from_env(
        {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_HTTP_ALLOW": "127.0.0.1",
            "LONGSHOREMAN_HTTP_MAX_DOWNLOAD_BYTES": "1000",
            # The Promotion names the URL in vars of its own.
            "LONGSHOREMAN_ALLOW_PROMOTION_STEPS": "true",
        }
    )
    settings = replace(settings, embedded_seed=(seed,))
    async with (
        TestServer(files, host="127.0.0.1") as file_server,
        TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client,
    ):
        state = await wait_started(client.app)
        assert state.kube is not None and state.controller is not None
        await asyncio.wait_for(state.controller.wait_synced(), 30)
        url = f"http://127.0.0.1:{file_server.port}/big.bin"
        await state.kube.create(
            k.PROMOTIONS,
            {
                "metadata": {"name": "dl-1", "namespace": "dl"},
                "spec": {
                    "stage": "fetch",
                    "freight": FREIGHT,
                    "vars": [{"name": "url", "value": url}],
                },
            },
        )
        async with asyncio.timeout(30):
            while True:
                got = state.controller.promotions.get("dl", "dl-1") or {}
                status = got.get("status") or {}
                if status.get("phase") in ("Errored", "Failed", "Succeeded"):
                    break
                await asyncio.sleep(0.05)
    assert status["phase"] == "Errored", status
    assert "1000" in status["message"], status["message"]


# ---- request bodies are size-limited ----------------------------------------------------------


@pytest.fixture
async def slack_and_github(tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    settings = Settings.from_env(
        {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_GITHUB_APP_ID": "4242",
            "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": "secret",
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY": app_private_key(),
            "LONGSHOREMAN_GITHUB_API_URL": "http://127.0.0.1:9/",
            "LONGSHOREMAN_SLACK_BOT_TOKEN": "xoxb-test",
            "LONGSHOREMAN_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "LONGSHOREMAN_SLACK_API_URL": "http://127.0.0.1:9/api/",
        }
    )
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        await wait_started(client.app)
        yield client


async def test_oversized_bodies_are_refused_with_413(
    slack_and_github: TestClient[Any, Any],
) -> None:
    client = slack_and_github
    # Slack sends kilobytes: a signed megabyte-plus body is refused before it is read.
    body = slash_command("help") + "&padding=" + "x" * (1024 * 1024)
    response = await client.post("/slack/events", data=body, headers=signed_headers(body))
    assert response.status == 413
    # GitHub caps webhooks at 25 MB; beyond that, 413 whatever the signature says (without
    # one, 401 before the body is read: tests/integration/test_hardening_front.py).
    big = b"{" + b" " * (25 * 1024 * 1024) + b"}"
    signed = {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + "0" * 64}
    response = await client.post("/github/webhook", data=big, headers=signed)
    assert response.status == 413
    # Every other endpoint has aiohttp's limit of the app (client_max_size).
    assert client.app._client_max_size <= 30 * 1024 * 1024


async def test_big_bodies_within_the_limits_are_read_whole(
    slack_and_github: TestClient[Any, Any],
) -> None:
    client = slack_and_github
    # A signed push-sized GitHub delivery (megabytes arrive in many TCP chunks): the signature
    # must be checked over the whole body, not its first chunk.
    headers, body = webhook_request("ping", {"zen": "x" * (3 * 1024 * 1024)}, "secret")
    response = await client.post("/github/webhook", data=body, headers=headers)
    assert response.status == 200, await response.text()
    # The same for a Slack request just under its limit.
    text = slash_command("help") + "&padding=" + "x" * (900 * 1024)
    response = await client.post("/slack/events", data=text, headers=signed_headers(text))
    assert response.status == 200, await response.text()


async def test_chunked_bodies_cannot_slip_past_the_limits(
    slack_and_github: TestClient[Any, Any],
) -> None:
    # Without a Content-Length the limit must hold while reading.
    async def chunks(total: int) -> AsyncIterator[bytes]:
        for _ in range(total // (256 * 1024) + 1):
            yield b"x" * (256 * 1024)

    client = slack_and_github
    response = await client.post("/slack/events", data=chunks(2 * 1024 * 1024))
    assert response.status == 413
    signed = {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + "0" * 64}
    response = await client.post("/github/webhook", data=chunks(26 * 1024 * 1024), headers=signed)
    assert response.status == 413


# ---- every outbound call has a timeout --------------------------------------------------------


@pytest.fixture
async def stalled() -> AsyncIterator[str]:
    """A server on 127.0.0.1 that accepts requests and never answers them."""
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await never.wait()
        return web.Response()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    async with TestServer(app, host="127.0.0.1") as server:
        yield f"http://127.0.0.1:{server.port}"
        never.set()


async def test_github_client_gives_up_on_a_stalled_api(stalled: str) -> None:
    settings = GitHubSettings(
        app_id="1", private_key=app_private_key(), webhook_secret="s", api_url=stalled
    )
    client = GitHubClient(settings, policy=RetryPolicy(attempts=1), timeout=0.3)
    await client.start()
    try:
        async with asyncio.timeout(SAFETY_NET):
            with pytest.raises(GitHubUnreachable):
                await client.installation_for("o/r")
    finally:
        await client.close()


async def test_slack_client_gives_up_on_a_stalled_api(stalled: str) -> None:
    api = SlackApi.create("xoxb-test", f"{stalled}/api/", timeout=0.3)
    try:
        async with asyncio.timeout(SAFETY_NET):
            with pytest.raises(SlackUnavailable):
                await api.post("C1", Message(text="hello"))
            with pytest.raises(SlackUnavailable):
                await api.respond(f"{stalled}/response", Message(text="hello"))
    finally:
        await api.close()


def kubeconfig_for(server: str, tmp_path: Path) -> str:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    return str(kubeconfig)


async def test_kube_client_gives_up_on_a_stalled_api_server(stalled: str, tmp_path: Path) -> None:
    kube = await k.load_kube(kubeconfig_for(stalled, tmp_path), request_timeout=0.3)
    try:
        async with asyncio.timeout(SAFETY_NET):
            with pytest.raises(k.TemporaryError):
                await kube.get(k.STAGES, "default", "test")
    finally:
        await kube.close()


@pytest.mark.looptime  # the cancel and the request's timeout land on the same virtual instant
async def test_a_kube_request_cancelled_as_it_times_out_is_cancelled(
    stalled: str, tmp_path: Path
) -> None:
    """The caller's cancel wins over the timeout that fires in the same loop pass: a stopping
    task (the leader elector on shutdown) ends instead of seeing a timeout and carrying on."""
    kube = await k.load_kube(kubeconfig_for(stalled, tmp_path), request_timeout=0.3)
    loop = asyncio.get_running_loop()
    try:
        request = asyncio.create_task(kube.get(k.STAGES, "default", "test"))
        loop.call_at(loop.time() + 0.3, request.cancel)
        with pytest.raises(asyncio.CancelledError):
            await request
        assert request.cancelled()
    finally:
        await kube.close()


async def test_http_step_gives_up_on_a_stalled_service(stalled: str, tmp_path: Path) -> None:
    ctx = make_context(tmp_path)
    http = HttpSettings(default_timeout_seconds=0.3, allow_hosts=("127.0.0.1",))
    ctx = replace(ctx, services=replace(ctx.services, http=http))
    async with asyncio.timeout(SAFETY_NET):
        with pytest.raises(StepError) as caught:
            await run_step("http", ctx, {"url": f"{stalled}/status"})
    assert "timed out after 0.3s" in caught.value.message
    assert not caught.value.terminal, "a timeout is worth retrying"


async def test_git_gives_up_on_a_stalled_remote(stalled: str, tmp_path: Path) -> None:
    ctx = make_context(tmp_path)
    ctx = replace(ctx, services=replace(ctx.services, git=GitSettings(timeout_seconds=1.0)))
    config = {"repoURL": f"{stalled}/o/r.git", "checkout": [{"branch": "main", "path": "./o"}]}
    async with asyncio.timeout(SAFETY_NET):
        with pytest.raises(StepError) as caught:
            await run_step("git-clone", ctx, config)
    assert "did not finish within 1s" in caught.value.message


# ---- YAML is loaded safely ------------------------------------------------------------------

EVIL_YAML = """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata:
  name: !!python/object/apply:subprocess.check_output [["touch", "{marker}"]]
  namespace: demo
"""


def test_manifests_with_python_tags_are_refused_by_the_runner_cli(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    manifest = tmp_path / "evil.yaml"
    manifest.write_text(EVIL_YAML.format(marker=marker))
    result = subprocess.run(
        [sys.executable, "-m", "promoter", "run", "--manifests", str(manifest),
         "--stage", "x", "--freight", "y"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "not valid YAML" in result.stderr and "python/object/apply" in result.stderr
    assert not marker.exists()


async def test_files_with_python_tags_are_refused_by_yaml_steps(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    ctx = make_context(tmp_path)
    (ctx.work_dir / "values.yaml").write_text(
        f"image: !!python/object/apply:os.system ['touch {marker}']\n"
    )
    config = {"path": "./values.yaml", "outputs": [{"name": "i", "fromExpression": "image"}]}
    with pytest.raises(StepError) as caught:
        await run_step("yaml-parse", ctx, config)
    assert "python/object/apply" in caught.value.message
    updated = await run_step(
        "yaml-update", ctx, {"path": "./values.yaml", "updates": [{"key": "tag", "value": "1"}]}
    )
    # yaml-update edits text round-trip and never constructs the tagged object.
    assert updated.status is StepStatus.SUCCEEDED
    assert not marker.exists()


async def test_the_embedded_api_server_refuses_python_tags_in_yaml_bodies(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "pwned"
    settings = Settings(work_dir=tmp_path / "work", warehouse_discovery=False)
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        state = await wait_started(client.app)
        assert state.cluster is not None
        async with TestClient(TestServer(web.Application())) as http:
            response = await http.session.post(
                f"{state.cluster.url}/apis/longshoreman.dev/v1alpha1/namespaces/demo/stages",
                data=EVIL_YAML.format(marker=marker),
                headers={"Content-Type": "application/yaml"},
            )
            assert 400 <= response.status < 500
    assert not marker.exists()


# ---- expression evaluation is bounded in time and memory --------------------------------------


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("repeat('ab', 1000000000)", "string result longer than"),
        ("repeat(repeat('x', 100000), 100000)", "string result longer than"),
        ("1..2000000000", "list result longer than"),
        ("len(sort(1..1000000000))", "list result longer than"),
        ("2 ** 100000000", "numeric overflow"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ("(" * 5000 + "1" + ")" * 5000, "nested too deeply"),
        ("-" * 5000 + "1", "nested too deeply"),
        (" + ".join(["1"] * 1000), "nested too deeply"),
        # "Loops" are what the language can spell: functions over big ranges, many times over.
        ("[" + ", ".join(["toJSON(1..99999)"] * 400) + "]", "too much work"),
        ("[" + ", ".join(["len(repeat('ab', 500000))"] * 400) + "]", "too much work"),
        ("x" * 200_000, "longer than 100000 characters"),
    ],
)
def test_expressions_are_bounded_in_time_and_memory(source: str, reason: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        evaluate_expression(source, {})
    assert reason in str(caught.value)


def test_bounded_expressions_still_do_real_work() -> None:
    assert len(evaluate_expression("toJSON(1..99999)", {})) > 500_000
    assert evaluate_expression("len(repeat('ab', 500000))", {}) == 1_000_000
    assert evaluate_expression("len([" + ", ".join(["1..1000"] * 100) + "])", {}) == 100
