"""The server process: settings validation, ``python -m app serve`` on the embedded cluster, the
HTTP endpoints, and the scripted demo that the README's main-job command runs."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from datetime import timedelta
from pathlib import Path

import aiohttp
import pytest

from app.controller import kube as k
from app.settings import Settings, SettingsError
from promoter.control.garbage import Retention
from promoter.control.shards import Shard
from tests.support.processes import QUIET

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LONGSHOREMAN_PORT": "eighty"}, "LONGSHOREMAN_PORT='eighty' is not a whole number"),
        (
            {"LONGSHOREMAN_LEADER_ELECTION": "maybe"},
            "LONGSHOREMAN_LEADER_ELECTION='maybe' is not a boolean",
        ),
        (
            {"KUBECONFIG": "/nonexistent/kubeconfig"},
            "KUBECONFIG='/nonexistent/kubeconfig': no such file",
        ),
        (
            {"LONGSHOREMAN_LOG_LEVEL": "chatty"},
            "LONGSHOREMAN_LOG_LEVEL='CHATTY' must be DEBUG, INFO, WARNING or ERROR",
        ),
        (
            {"LONGSHOREMAN_MAX_CONCURRENT_RECONCILES": "0"},
            "LONGSHOREMAN_MAX_CONCURRENT_RECONCILES='0' must be at least 1",
        ),
        (
            {"LONGSHOREMAN_LEASE_DURATION": "5", "LONGSHOREMAN_RENEW_DEADLINE": "10"},
            "LONGSHOREMAN_RETRY_PERIOD < LONGSHOREMAN_RENEW_DEADLINE < LONGSHOREMAN_LEASE_DURATION",
        ),
        (
            {"LONGSHOREMAN_IN_CLUSTER": "true", "KUBECONFIG": __file__},
            "KUBECONFIG and LONGSHOREMAN_IN_CLUSTER=true are both set",
        ),
        (
            {"LONGSHOREMAN_GIT_PUSH_INTEGRATION_POLICY": "Rebase"},
            "LONGSHOREMAN_GIT_PUSH_INTEGRATION_POLICY='Rebase' must be one of AlwaysRebase, "
            "RebaseOrMerge, RebaseOrFail, AlwaysMerge",
        ),
        (
            {"LONGSHOREMAN_GITHUB_PUSH_MAX_REVISIONS": "0"},
            "LONGSHOREMAN_GITHUB_PUSH_MAX_REVISIONS='0' must be at least 1",
        ),
        (
            {"LONGSHOREMAN_MIN_PROMOTION_DELETION_AGE": "2 weeks"},
            "LONGSHOREMAN_MIN_PROMOTION_DELETION_AGE='2 weeks' is not a duration",
        ),
        (
            {"LONGSHOREMAN_GC_INTERVAL": "0s"},
            "LONGSHOREMAN_GC_INTERVAL='0s' must be more than 0",
        ),
        (
            {"LONGSHOREMAN_MAX_RETAINED_FREIGHT": "-1"},
            "LONGSHOREMAN_MAX_RETAINED_FREIGHT='-1' must be at least 0",
        ),
        (
            {"LONGSHOREMAN_SHARD_NAME": "shard a"},
            "LONGSHOREMAN_SHARD_NAME='shard a' is not a label value",
        ),
        (
            {"LONGSHOREMAN_SUBSCRIBERS": "s3=ftp://example.com"},
            "LONGSHOREMAN_SUBSCRIBERS: 's3=ftp://example.com' is not <subscription type>=<http(s)",
        ),
        (
            {"LONGSHOREMAN_SUBSCRIBERS": "image=http://a"},
            "LONGSHOREMAN_SUBSCRIBERS: 'image' is not a generic subscription type",
        ),
        (
            {"LONGSHOREMAN_SUBSCRIBERS": "s3=http://a,s3=http://b"},
            "LONGSHOREMAN_SUBSCRIBERS: 's3' is given twice",
        ),
        (
            {"LONGSHOREMAN_API_GROUP": "kargo.akuity.io/v1alpha1"},
            "LONGSHOREMAN_API_GROUP='kargo.akuity.io/v1alpha1' must be longshoreman.dev or "
            "kargo.akuity.io",
        ),
    ],
)
def test_settings_errors_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_env(env)
    assert message in str(err.value)


def test_subscriber_services_are_read_by_type_and_their_token_kept_secret() -> None:
    settings = Settings.from_env(
        {
            "LONGSHOREMAN_SUBSCRIBERS": " s3=http://s3.tools:8080/discover , gcs=https://g/x",
            "LONGSHOREMAN_SUBSCRIBER_TOKEN": "subscriber-secret",
        }
    )
    assert dict(settings.subscribers) == {
        "s3": "http://s3.tools:8080/discover",
        "gcs": "https://g/x",
    }
    assert "subscriber-secret" in settings.secrets()
    assert "subscriber-secret" not in repr(settings)


def test_the_collector_and_shard_settings_take_kargos_names_and_defaults() -> None:
    defaults = Settings.from_env({})
    assert defaults.gc_enabled and defaults.gc_interval == 3600
    assert defaults.retention == Retention()  # 20 and 336h of each, Kargo's
    assert defaults.shard == Shard()
    settings = Settings.from_env(
        {
            "LONGSHOREMAN_GC_ENABLED": "false",
            "LONGSHOREMAN_GC_INTERVAL": "90m",
            "LONGSHOREMAN_MAX_RETAINED_PROMOTIONS": "10",
            "LONGSHOREMAN_MIN_PROMOTION_DELETION_AGE": "0s",
            "LONGSHOREMAN_MAX_RETAINED_FREIGHT": "5",
            "LONGSHOREMAN_MIN_FREIGHT_DELETION_AGE": "1h30m",
            "LONGSHOREMAN_SHARD_NAME": "eu-1",
            "LONGSHOREMAN_IS_DEFAULT_CONTROLLER": "true",
        }
    )
    assert not settings.gc_enabled and settings.gc_interval == 5400
    assert settings.retention == Retention(10, timedelta(0), 5, timedelta(minutes=90))
    assert settings.shard == Shard("eu-1", is_default=True)


def test_settings_defaults_run_embedded_on_localhost() -> None:
    settings = Settings.from_env({})
    assert settings.embedded and settings.host == "127.0.0.1" and settings.port == 8080
    assert not Settings.from_env({"KUBECONFIG": __file__}).embedded


async def _start(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app", "serve", *args,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **QUIET, "PYTHONPATH": str(ROOT), **(env or {})},
    )  # fmt: skip


async def _read_until(
    stream: asyncio.StreamReader, pattern: str, within: float = 30
) -> tuple[list[str], re.Match[str]]:
    lines: list[str] = []
    async with asyncio.timeout(within):
        while True:
            line = (await stream.readline()).decode()
            if not line:
                raise AssertionError("process ended: " + "".join(lines))
            lines.append(line)
            match = re.search(pattern, line)
            if match:
                return lines, match


async def test_serve_starts_the_embedded_cluster_and_says_so_first(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = await _start(
        "--port",
        "0",
        "--embedded-kubeconfig",
        str(kubeconfig),
        env={"LONGSHOREMAN_WORK_DIR": str(tmp_path / "work")},
    )
    try:
        assert proc.stderr is not None
        lines, match = await _read_until(proc.stderr, r"serving .* on (http://\S+)")
        assert "embedded API server" in lines[0] and str(kubeconfig) in lines[0]
        base = match.group(1)
        # kubectl-style access with the kubeconfig it wrote: the examples are there.
        kube = await k.load_kube(str(kubeconfig))
        try:
            stages, _ = await kube.list(k.STAGES, "kargo-demo")
            assert sorted(s["metadata"]["name"] for s in stages) == ["test", "uat"]
        finally:
            await kube.close()
        async with aiohttp.ClientSession() as http:
            async with asyncio.timeout(20):
                while True:
                    async with http.get(f"{base}/readyz") as response:
                        if response.status == 200:
                            break
                    await asyncio.sleep(0.05)
            async with http.get(f"{base}/healthz") as response:
                assert response.status == 200
            async with http.get(f"{base}/metrics") as response:
                text = await response.text()
                assert "longshoreman_kubernetes_requests_total" in text
                assert "longshoreman_work_queue_depth" in text
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_serve_refuses_bad_settings_naming_the_variable() -> None:
    proc = await _start("--port", "0", env={"LONGSHOREMAN_MAX_CONCURRENT_RECONCILES": "none"})
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert b"LONGSHOREMAN_MAX_CONCURRENT_RECONCILES='none' is not a whole number" in err


def test_an_old_setting_name_still_works_and_the_new_one_wins() -> None:
    old = Settings.from_env({"PORT": "9000", "GITHUB_WEB_URL": "https://ghe.example.com"})
    assert old.port == 9000 and old.ui.github_web_url == "https://ghe.example.com"
    assert old.renamed == (
        ("PORT", "LONGSHOREMAN_PORT"),
        ("GITHUB_WEB_URL", "LONGSHOREMAN_GITHUB_WEB_URL"),
    )
    both = Settings.from_env({"PORT": "9000", "LONGSHOREMAN_PORT": "9001"})
    assert both.port == 9001 and both.renamed == ()


async def test_serve_reads_an_old_setting_name_and_logs_its_new_one(tmp_path: Path) -> None:
    env = {"LOG_FORMAT": "json", "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work")}
    proc = await _start("--port", "0", env=env)
    try:
        assert proc.stderr is not None
        lines, _ = await _read_until(proc.stderr, r"serving .* on http://")
        # Read: the log is JSON, one object per line, as LOG_FORMAT asked.
        records = [json.loads(line) for line in lines]
        warnings = [r for r in records if "LONGSHOREMAN_LOG_FORMAT" in json.dumps(r)]
        assert len(warnings) == 1, lines
        assert warnings[0]["level"] == "WARNING" and "LOG_FORMAT is deprecated" in json.dumps(
            warnings[0]
        )
    finally:
        proc.kill()
        await proc.wait()


async def test_demo_creates_a_promotion_and_shows_it_complete(tmp_path: Path) -> None:
    # Discovery asked for: the demo still asks no registry (its Warehouse's image is public).
    env = {
        "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
        "LONGSHOREMAN_WAREHOUSE_DISCOVERY": "true",
    }
    proc = await _start("--demo", "--port", "0", env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert "Warehouse discovery is off" in err.decode()
    assert "discovery failed" not in err.decode()
    text = out.decode()
    assert "Created Promotion kargo-demo/test." in text
    assert re.search(r"Promotion test\.\S+: Succeeded", text)
    assert "deploy::push: Succeeded" in text
    assert "Stage test now holds Freight 7c9e6b1f3a4d" in text


async def test_github_and_slack_are_mounted_when_configured_and_refuse_unsigned_requests(
    tmp_path: Path,
) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from app.server import create_app, wait_started
    from tests.support.github import app_private_key

    settings = Settings.from_env(
        {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_GITHUB_APP_ID": "4242",
            "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": "s3cret",
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY": app_private_key(),
            "LONGSHOREMAN_GITHUB_API_URL": "http://127.0.0.1:9/",
            "LONGSHOREMAN_SLACK_BOT_TOKEN": "xoxb-test",
            "LONGSHOREMAN_SLACK_SIGNING_SECRET": "signing",
            "LONGSHOREMAN_SLACK_API_URL": "http://127.0.0.1:9/api/",
        }
    )
    assert settings.github is not None and settings.slack is not None
    assert "s3cret" not in repr(settings) and "xoxb-test" not in repr(settings)
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        await wait_started(client.app)
        response = await client.post(
            "/github/webhook", data=b"{}", headers={"X-GitHub-Event": "ping"}
        )
        assert response.status == 401
        response = await client.post(
            "/slack/events",
            data=b"command=%2Fpromote&text=help",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert response.status == 401
