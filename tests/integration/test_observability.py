"""Observability as an operator sees it: what ``/metrics`` says after Promotions and deliveries,
and what the logs say (one JSON object per line, context fields, no secrets).

Metrics are read by scraping the real server's ``/metrics`` over HTTP and parsing the Prometheus
text format; logs by running ``python -m app serve`` or by logging through the handler the
server installs.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from app.controller import kube as k
from app.logs import REDACTOR, Redactor, handler_for
from app.metrics import Metrics
from app.server import SERVER, create_app, wait_started
from app.settings import Settings
from handlers.client import GitHubClient, RateLimited, RetryPolicy
from promoter.ports.telemetry import log_context
from promoter.rules.limits import Limits
from slack.api import RateLimited as SlackRateLimited
from slack.api import SlackApi
from slack.blocks import Message
from tests.support import objects
from tests.support.github import app_private_key, running_fake_github, webhook_request
from tests.support.processes import QUIET
from tests.support.projects import FREIGHT, project_prelude
from tests.support.slack import SIGNING_SECRET, running_fake_slack, signed_headers, slash_command
from tests.support.slack import TOKEN as SLACK_TOKEN

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK_SECRET = "obs-webhook-secret-123"
BOT_TOKEN = "xoxb-1111-2222-abcdefghijklmnop"

PROJECT = (
    project_prelude("obs")
    + """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {name: quick, namespace: obs}
spec:
  requestedFreight: [{origin: {kind: Warehouse, name: w}, sources: {direct: true}}]
  promotionTemplate:
    spec:
      steps:
      - uses: compose-output
        as: facts
        config: {answer: "42"}
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {name: waits, namespace: obs}
spec:
  requestedFreight: [{origin: {kind: Warehouse, name: w}, sources: {direct: true}}]
  promotionTemplate:
    spec:
      steps:
      - uses: http
        as: ready
        config:
          url: ${{ vars.url }}
          successExpression: response.body.ready
          pollInterval: 10s
"""
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse_metrics(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


async def scrape(client: TestClient[Any, Any]) -> Samples:
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    return parse_metrics(await response.text())


def promotion(name: str, stage: str, **spec: Any) -> dict[str, Any]:
    return objects.promotion(name, stage, namespace="obs", freight=FREIGHT, **spec)


@pytest.fixture
async def not_ready_service() -> AsyncIterator[str]:
    """An HTTP service on 127.0.0.1 that is never ready: its http step stays Running."""

    async def status(request: web.Request) -> web.Response:
        return web.json_response({"ready": False})

    app = web.Application()
    app.router.add_get("/status", status)
    async with TestServer(app, host="127.0.0.1") as server:
        yield f"http://127.0.0.1:{server.port}/status"


async def wait_for(predicate: Any, within: float = 30) -> Any:
    async with asyncio.timeout(within):
        while True:
            got = predicate()
            if got:
                return got
            await asyncio.sleep(0.05)


async def test_metrics_after_promotions(tmp_path: Path, not_ready_service: str) -> None:
    seed = tmp_path / "project.yaml"
    seed.write_text(PROJECT)
    settings = Settings(
        work_dir=tmp_path / "work",
        embedded_seed=(seed,),
        warehouse_discovery=False,
        # The never-ready service is on loopback, which the http step refuses unless allowed.
        http_allow=("127.0.0.1",),
        # Its Promotions name the service in vars of their own.
        limits=Limits(allow_own_steps=True),
    )
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        state = await wait_started(client.app)
        controller, kube = state.controller, state.kube
        assert controller is not None and kube is not None
        await asyncio.wait_for(controller.wait_synced(), 30)
        await kube.create(k.PROMOTIONS, promotion("quick-1", "quick"))
        vars_ = [{"name": "url", "value": not_ready_service}]
        await kube.create(k.PROMOTIONS, promotion("waits-1", "waits", vars=vars_))
        await kube.create(k.PROMOTIONS, promotion("waits-2", "waits", vars=vars_))

        def phases() -> dict[str, str]:
            return {
                p["metadata"]["name"]: (p.get("status") or {}).get("phase", "")
                for p in controller.promotions.items("obs")
            }

        await wait_for(lambda: phases().get("quick-1") == "Succeeded")
        await wait_for(lambda: phases().get("waits-1") == "Running")
        samples = await scrape(client)

        # State, from the informer cache at scrape time.
        assert value(samples, "longshoreman_promotions", namespace="obs", stage="quick",
                     phase="Succeeded") == 1  # fmt: skip
        assert value(samples, "longshoreman_promotions", namespace="obs", stage="waits",
                     phase="Running") == 1  # fmt: skip
        assert value(samples, "longshoreman_promotions", namespace="obs", stage="waits",
                     phase="Pending") == 1  # fmt: skip
        assert value(samples, "longshoreman_stage_queue_depth", namespace="obs", stage="waits") == 1
        assert value(samples, "longshoreman_stage_queue_depth", namespace="obs", stage="quick") == 0
        # Events: the finished Promotion's durations, by Stage/phase and by step kind.
        labels = {"namespace": "obs", "stage": "quick", "phase": "Succeeded"}
        assert value(samples, "longshoreman_promotion_duration_seconds_count", **labels) == 1
        assert value(samples, "longshoreman_promotions_finished_total", **labels) == 1
        step = {"uses": "compose-output", "status": "Succeeded"}
        assert value(samples, "longshoreman_step_duration_seconds_count", **step) == 1
        assert (value(samples, "longshoreman_step_duration_seconds_sum", **step) or 0) >= 0
        # Nothing about the running Promotion's durations yet.
        assert not any(
            name == "longshoreman_promotion_duration_seconds_count" and ("stage", "waits") in lbl
            for name, lbl in samples
        )
        assert (value(samples, "longshoreman_reconcile_duration_seconds_count") or 0) >= 2
        assert (
            value(samples, "longshoreman_kubernetes_requests_total", method="PATCH",
                  resource="promotions", code="200") or 0
        ) >= 1  # fmt: skip
        assert value(samples, "longshoreman_api_errors_total", api="kubernetes") is not None
        assert value(samples, "longshoreman_work_queue_depth") is not None

        # Every replica computes the state series from its own cache: a second server (a
        # standby that never reconciled anything) would report the same. Here: a Promotion
        # deleted from the cluster disappears from the series at the next scrape.
        await kube.delete(k.PROMOTIONS, "obs", "waits-2")
        await wait_for(lambda: "waits-2" not in phases())
        samples = await scrape(client)
        assert value(samples, "longshoreman_stage_queue_depth", namespace="obs", stage="waits") == 0
        assert value(samples, "longshoreman_promotions", namespace="obs", stage="waits",
                     phase="Pending") is None  # fmt: skip
        assert client.app[SERVER].metrics is state.metrics


async def test_metrics_count_webhook_deliveries_by_event_and_outcome(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_GITHUB_APP_ID": "4242",
            "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY": app_private_key(),
            "LONGSHOREMAN_GITHUB_API_URL": "http://127.0.0.1:9/",
            "LONGSHOREMAN_SLACK_BOT_TOKEN": BOT_TOKEN,
            "LONGSHOREMAN_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "LONGSHOREMAN_SLACK_API_URL": "http://127.0.0.1:9/api/",
        }
    )
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        await wait_started(client.app)

        async def github(event: str, payload: Any, secret: str | None, delivery: str) -> int:
            headers, body = webhook_request(event, payload, secret, delivery=delivery)
            response = await client.post("/github/webhook", data=body, headers=headers)
            return response.status

        assert await github("ping", {"zen": "hi"}, WEBHOOK_SECRET, "d-1") == 200
        push = {"ref": "refs/heads/main", "repository": {"full_name": "o/r"}, "commits": []}
        assert await github("push", push, WEBHOOK_SECRET, "d-2") == 202
        assert await github("push", push, WEBHOOK_SECRET, "d-2") == 200  # a redelivery
        assert await github("push", push, "wrong-secret", "d-3") == 401
        assert await github("made-up-event-name", {}, None, "d-4") == 401
        big = b"x" * (26 * 1024 * 1024)
        # Signed as far as a header can say: the body is still too large to read.
        signed = {"X-GitHub-Event": "x", "X-Hub-Signature-256": "sha256=" + "0" * 64}
        response = await client.post("/github/webhook", data=big, headers=signed)
        assert response.status == 413

        body = slash_command("help")
        response = await client.post("/slack/events", data=body, headers=signed_headers(body))
        assert response.status == 200
        response = await client.post(
            "/slack/events", data=body, headers=signed_headers(body, "not-the-secret")
        )
        assert response.status == 401
        samples = await scrape(client)

    def deliveries(source: str, event: str, outcome: str) -> float | None:
        return value(
            samples,
            "longshoreman_webhook_deliveries_total",
            source=source,
            event=event,
            outcome=outcome,
        )

    assert deliveries("github", "ping", "ping") == 1
    assert deliveries("github", "push", "accepted") == 1
    assert deliveries("github", "push", "duplicate") == 1
    # Before the signature is checked the event name is a stranger's text: never a label.
    assert deliveries("github", "unverified", "invalid_signature") == 2
    assert deliveries("github", "unverified", "too_large") == 1
    assert not any("made-up-event-name" in str(key) for key in samples)
    assert deliveries("slack", "command", "accepted") == 1
    assert deliveries("slack", "unverified", "invalid_signature") == 1


async def test_github_calls_errors_and_rate_limit_waits_are_counted() -> None:
    metrics = Metrics()
    async with running_fake_github() as fake:
        client = GitHubClient(
            fake.settings(),
            policy=RetryPolicy(backoff=0.01, max_wait=0.5, attempts=3),
            telemetry=metrics,
        )
        await client.start()
        try:
            # Secondary rate limit with a short Retry-After: waited in place, then retried.
            fake.faults.add(429, path="/installation", retry_after=0.01)
            fake.add_repo("o/r", None)  # type: ignore[arg-type]
            await client.installation_for("o/r")
            # A long one is handed back to the caller as RateLimited, and counted too.
            fake.faults.add(429, path="/installation", retry_after=120)
            with pytest.raises(RateLimited):
                await client.installation_for("o/other")
        finally:
            await client.close()
    samples = parse_metrics(metrics.render()[0].decode())
    assert value(samples, "longshoreman_github_requests_total", method="GET", code="429") == 2
    assert value(samples, "longshoreman_github_requests_total", method="GET", code="200") == 1
    assert value(samples, "longshoreman_api_errors_total", api="github") == 2
    assert value(samples, "longshoreman_rate_limit_wait_seconds_count", api="github") == 2
    assert (value(samples, "longshoreman_rate_limit_wait_seconds_sum", api="github") or 0) >= 120


async def test_slack_calls_errors_and_retry_after_are_counted() -> None:
    metrics = Metrics()
    async with running_fake_slack() as fake:
        api = SlackApi.create(SLACK_TOKEN, fake.url, telemetry=metrics)
        try:
            await api.post("C1", Message(text="hello"))
            fake.fail("chat.postMessage", 429, retry_after=7)
            with pytest.raises(SlackRateLimited):
                await api.post("C1", Message(text="again"))
        finally:
            await api.close()
    samples = parse_metrics(metrics.render()[0].decode())
    name = "longshoreman_slack_requests_total"
    assert value(samples, name, method="chat.postMessage", outcome="ok") == 1
    assert value(samples, name, method="chat.postMessage", outcome="rate_limited") == 1
    assert value(samples, "longshoreman_api_errors_total", api="slack") == 1
    assert value(samples, "longshoreman_rate_limit_wait_seconds_count", api="slack") == 1
    assert value(samples, "longshoreman_rate_limit_wait_seconds_sum", api="slack") == 7


# ---- logs ---------------------------------------------------------------------------------------

PEM = app_private_key()
SECRETS = {
    "webhook secret": WEBHOOK_SECRET,
    "bot token": BOT_TOKEN,
    "signing secret": SIGNING_SECRET,
    "installation token": "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
    "personal token": "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "fine-grained token": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "user token": "xoxp-123-456-789-abcdef",
    "app token": "xapp-1-A0-123-abcdef",
    "bearer": "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiI0MiJ9.c2lnbmF0dXJl",
    "url password": "hunter2-url-password",
    "registered token": "ghs_registeredAtRuntime0000000000000000",
}


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger whose lines go through the server's JSON handler into a buffer."""
    redactor = Redactor()
    redactor.add_static([WEBHOOK_SECRET, BOT_TOKEN, SIGNING_SECRET, PEM])
    redactor.add(SECRETS["registered token"])  # as GitHubClient(on_token=...) does
    buffer = io.StringIO()
    handler = handler_for("json", redactor)
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(buffer)
    logger = logging.getLogger("tests.observability.capture")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        yield logger, buffer
    finally:
        logger.handlers.clear()


def lines_of(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def assert_no_secrets(text: str) -> None:
    for what, secret in SECRETS.items():
        assert secret not in text, f"the {what} leaked"
    assert "PRIVATE KEY" not in text.replace("[REDACTED PRIVATE KEY]", "")
    for line in PEM.splitlines()[1:-1]:
        assert line not in text, "a line of the private key leaked"


def test_secrets_are_redacted_from_messages_arguments_and_tracebacks(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    log, buffer = captured
    log.info("configured secret %s and token %s", WEBHOOK_SECRET, SECRETS["installation token"])
    log.warning("headers: %s", {"Authorization": f"token {SECRETS['personal token']}"})
    log.warning("Authorization: Bearer %s", SECRETS["bearer"])
    log.info("cloning https://x-access-token:%s@github.com/o/r.git", SECRETS["url password"])
    log.info("slack said %r / %r / %r", BOT_TOKEN, SECRETS["user token"], SECRETS["app token"])
    log.info("pat %s and runtime token %s", SECRETS["fine-grained token"],
             SECRETS["registered token"])  # fmt: skip
    log.info("the signing secret is %s", SIGNING_SECRET, extra={"payload": SIGNING_SECRET})
    log.error("key as text:\n%s", PEM)
    log.error("key as repr: %r", PEM)
    log.error("a truncated key: %s", PEM[: len(PEM) // 2])

    def handler_with(secret_local: str) -> None:
        raise RuntimeError(f"GitHub refused token {secret_local} for {WEBHOOK_SECRET}")

    try:
        handler_with(SECRETS["installation token"])
    except RuntimeError:
        log.exception("delivery failed (%s)", BOT_TOKEN)
    log.info("where am I", stack_info=True, extra={"note": f"Bearer {SECRETS['bearer']}"})

    text = buffer.getvalue()
    assert_no_secrets(text)
    records = lines_of(buffer)
    assert len(records) == 12
    assert records[0]["message"] == "configured secret *** and token ***"
    assert records[2]["message"] == "Authorization: ***"
    assert "https://***@github.com/o/r.git" in records[3]["message"]
    assert records[7]["message"].startswith("key as text:")
    assert "BEGIN" not in records[7]["message"] and "BEGIN" not in records[8]["message"]
    # Cut off before its end marker, a key is still recognised as one.
    assert records[9]["message"] == "a truncated key: [REDACTED PRIVATE KEY]"
    failed = records[10]
    assert (
        failed["level"] == "ERROR"
        and "RuntimeError: GitHub refused token ***" in failed["exception"]
    )
    assert "handler_with" in failed["exception"], "the traceback itself is kept"
    assert "stack" in records[11]


def test_json_lines_carry_time_level_logger_message_and_context(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    log, buffer = captured
    log.info("outside any context")
    with log_context(namespace="kargo-demo", stage="test"):
        log.info("reconciling")
        with log_context(promotion="test.01abc"):
            log.warning("step failed")
        log.info("explicit wins", extra={"stage": "other"})
    with log_context(delivery_id="72d3162e-cc78-11e3-81ab-4c9367dc0958"):
        log.info("handled")
    first, reconciling, failed, explicit, handled = lines_of(buffer)
    assert set(first) == {"time", "level", "logger", "message"}
    assert first["logger"] == "tests.observability.capture" and first["level"] == "INFO"
    assert first["time"].endswith("+00:00") and "T" in first["time"]
    assert reconciling["namespace"] == "kargo-demo" and reconciling["stage"] == "test"
    assert "promotion" not in reconciling
    assert failed["promotion"] == "test.01abc" and failed["level"] == "WARNING"
    assert explicit["stage"] == "other"
    assert handled["delivery_id"] == "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert "stage" not in handled


async def test_server_logs_are_json_lines_without_secrets(tmp_path: Path) -> None:
    env = {
        **os.environ,
        **QUIET,
        "PYTHONPATH": str(ROOT),
        "LONGSHOREMAN_LOG_FORMAT": "json",
        "LONGSHOREMAN_LOG_LEVEL": "DEBUG",
        "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
        "LONGSHOREMAN_GITHUB_APP_ID": "4242",
        "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "LONGSHOREMAN_GITHUB_PRIVATE_KEY": PEM,
        "LONGSHOREMAN_GITHUB_API_URL": "http://127.0.0.1:9/",
        "LONGSHOREMAN_SLACK_BOT_TOKEN": BOT_TOKEN,
        "LONGSHOREMAN_SLACK_SIGNING_SECRET": SIGNING_SECRET,
        # Nothing listens there: the start-up token check fails and is logged.
        "LONGSHOREMAN_SLACK_API_URL": "http://127.0.0.1:9/api/",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app", "serve", "--port", "0",
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        async with asyncio.timeout(60):
            while not any("auth.test failed" in line for line in lines) or not any(
                "serving /healthz" in line for line in lines
            ):
                line = (await proc.stderr.readline()).decode()
                if not line:
                    break
                lines.append(line)
        proc.terminate()
        _, rest = await asyncio.wait_for(proc.communicate(), 30)
        lines += rest.decode().splitlines(keepends=True)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert lines, "the server logged nothing"
    records = [json.loads(line) for line in lines if line.strip()]
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record), record
    messages = " ".join(r["message"] for r in records)
    assert "embedded API server" in messages and "serving /healthz" in messages
    assert any(r["logger"] == "slack.app" and "auth.test failed" in r["message"] for r in records)
    assert_no_secrets("".join(lines))


def test_the_server_registers_its_configured_secrets(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path),
            "LONGSHOREMAN_SLACK_BOT_TOKEN": "xoxb-registered-when-the-app-is-built",
            "LONGSHOREMAN_SLACK_SIGNING_SECRET": "signing-secret-registered-too",
        }
    )
    create_app(settings)
    for secret in settings.secrets():
        assert secret not in REDACTOR.redact(f"value={secret} at {time.time()}")
