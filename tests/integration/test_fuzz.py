"""Fuzz and property tests of what strangers can reach: the webhook and Slack entry points, the
chat command parsers and the expression evaluator.

Properties:

- ``POST /github/webhook`` and ``POST /slack/events`` answer every request, signed or not, with
  anything but a 5xx (a 5xx makes GitHub and Slack retry, and means we crashed on input);
- the command parsers never raise anything but their documented error type;
- the expression evaluator never raises anything but :class:`ExpressionError`, and finishes
  within the profile's deadline whatever the text.

The budget is the hypothesis profile in ``tests/conftest.py`` (``ci``: 100 derandomized examples
per property, 2 s deadline per example); the whole file runs in well under 30 s.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import example, given
from hypothesis import strategies as st

from handlers.client import RetryPolicy
from handlers.settings import GitHubSettings
from handlers.webhook import WEBHOOK_PATH, setup_github
from promoter.chat.grammar import COMMANDS, CommandError, parse_command, parse_comment, parse_slash
from promoter.expressions import ExpressionError, Scope, evaluate_expression, render_string
from slack.app import EVENTS_PATH, setup_slack
from slack.commands import PendingPromotion
from slack.settings import SlackSettings
from tests.support.github import app_private_key, sign
from tests.support.promotions import FakePromotions
from tests.support.slack import SIGNING_SECRET, signed_headers

SECRET = "fuzz-webhook-secret"

# Printable ASCII: what an HTTP client can put in a header value at all.
header_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
# Payloads shaped like GitHub's, with the fields handlers read, filled with anything.
github_like = st.fixed_dictionaries(
    {},
    optional={
        "action": st.sampled_from(
            ["created", "closed", "opened", "rerequested", "requested_action"]
        )
        | st.text(max_size=10),
        "comment": st.fixed_dictionaries({}, optional={"body": st.text(max_size=80)}) | json_values,
        "issue": json_values,
        "pull_request": json_values,
        "repository": st.fixed_dictionaries(
            {}, optional={"full_name": st.text(max_size=30), "id": st.integers()}
        )
        | json_values,
        "installation": st.fixed_dictionaries({}, optional={"id": st.integers()}) | json_values,
        "sender": json_values,
        "check_run": json_values,
        "requested_action": json_values,
        "ref": st.text(max_size=30),
        "commits": json_values,
    },
)
bodies = st.one_of(
    st.binary(max_size=500),
    json_values.map(lambda v: json.dumps(v).encode()),
    github_like.map(lambda v: json.dumps(v).encode()),
)
events = (
    st.sampled_from(
        [
            "ping",
            "push",
            "issue_comment",
            "pull_request",
            "check_run",
            "check_suite",
            "installation",
        ]
    )
    | header_text
)
content_types = (
    st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain", ""])
    | header_text
)


class Served:
    """An aiohttp app on 127.0.0.1 driven from synchronous hypothesis tests through its loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, client: TestClient[Any, Any]) -> None:
        self.loop = loop
        self.client = client

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        async def send() -> int:
            response = await self.client.post(path, data=body, headers=headers)
            await response.read()
            return response.status

        return self.loop.run_until_complete(send())


def _serve(app: web.Application) -> Iterator[Served]:
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(app, host="127.0.0.1"), loop=loop)
    loop.run_until_complete(client.start_server())
    try:
        yield Served(loop, client)
    finally:
        loop.run_until_complete(client.close())
        loop.close()


@pytest.fixture(scope="module")
def github() -> Iterator[Served]:
    settings = GitHubSettings(
        app_id="4242",
        private_key=app_private_key(),
        webhook_secret=SECRET,
        # Nothing listens on port 9: handlers that call GitHub fail fast and are logged.
        api_url="http://127.0.0.1:9",
    )
    app = web.Application()
    setup_github(app, settings, FakePromotions(), policy=RetryPolicy(attempts=1))
    yield from _serve(app)


@pytest.fixture(scope="module")
def slack() -> Iterator[Served]:
    settings = SlackSettings(
        bot_token="xoxb-fuzz", signing_secret=SIGNING_SECRET, api_url="http://127.0.0.1:9/api/"
    )
    app = web.Application()
    setup_slack(app, settings, FakePromotions())
    yield from _serve(app)


@given(
    body=bodies,
    event=events,
    delivery=header_text,
    content_type=content_types,
    signing=st.sampled_from(["signed", "unsigned", "garbage"]),
    garbage=header_text,
    form=st.booleans(),
)
# Found by this test once (a flaky 500 it could not replay): "repository" not an object.
@example(
    body=b'{"action": "created", "repository": 871, "issue": null, "comment": null}',
    event="issue_comment",
    delivery="repository-is-a-number",
    content_type="application/json",
    signing="signed",
    garbage="",
    form=False,
)
def test_github_webhook_never_answers_5xx(
    github: Served,
    body: bytes,
    event: str,
    delivery: str,
    content_type: str,
    signing: str,
    garbage: str,
    form: bool,
) -> None:
    if form:
        # GitHub's other content type: the JSON in a form field called payload.
        body = urlencode({"payload": body.decode("utf-8", "replace")}).encode()
    headers = {"x-github-event": event, "x-github-delivery": delivery}
    if content_type:
        headers["content-type"] = content_type
    if signing == "signed":
        headers["x-hub-signature-256"] = sign(body, SECRET)
    elif signing == "garbage":
        headers["x-hub-signature-256"] = garbage
    status = github.post(WEBHOOK_PATH, body, headers)
    assert status < 500
    if signing != "signed":
        assert status in (400, 401, 415), "nothing unsigned gets past the signature check"


slack_forms = st.one_of(
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace")),
    st.dictionaries(
        st.sampled_from(["command", "text", "team_id", "user_id", "channel_id", "response_url"]),
        st.text(max_size=40),
    ).map(lambda d: urlencode({"command": "/promote", **d})),
    json_values.map(lambda v: urlencode({"payload": json.dumps(v)})),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["block_actions", "view_submission", "shortcut"])},
        optional={"actions": json_values, "user": json_values, "team": json_values},
    ).map(lambda v: urlencode({"payload": json.dumps(v)})),
)


@given(body=slack_forms, signed=st.booleans(), stale=st.booleans())
def test_slack_events_never_answer_5xx(slack: Served, body: str, signed: bool, stale: bool) -> None:
    timestamp = int(time.time()) - (3600 if stale else 0)
    headers = signed_headers(body, SIGNING_SECRET if signed else "wrong", timestamp)
    status = slack.post(EVENTS_PATH, body.encode(), headers)
    assert status < 500
    if not signed or stale:
        assert status in (400, 401), "nothing unsigned gets past the signature check"


# ---- the command parsers -------------------------------------------------------------------

command_words = st.sampled_from(
    ["/promote", "/abort", "/status", "/verify", "/help", "to", "```", "> ", "${{", "}}", "\n"]
)
command_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(command_words, st.text(max_size=12)), max_size=20).map(" ".join),
)


@given(command_text)
def test_github_comment_parser_never_raises(body: str) -> None:
    for line in parse_comment(body):
        assert (line.command is None) != (line.error is None)


@given(st.sampled_from(sorted(COMMANDS)), command_text)
def test_github_commands_raise_only_command_errors(name: str, args: str) -> None:
    try:
        parse_command(name, args)
    except CommandError:
        pass


@given(command_text)
def test_slack_command_parser_raises_only_command_errors(text: str) -> None:
    try:
        parse_slash(text)
    except CommandError:
        pass


@given(st.one_of(st.text(max_size=200), json_values.map(json.dumps)))
def test_slack_confirmation_values_raise_only_value_errors(value: str) -> None:
    try:
        PendingPromotion.from_value(value)
    except ValueError:
        pass


# ---- the expression evaluator --------------------------------------------------------------

# Fragments that reach the expensive parts: big ranges, repetition, JSON round trips, regexes.
HEAVY = [
    "repeat('ab', 99999)", "1..99999", "toJSON(1..99999)", "fromJSON(toJSON(1..9999))",
    "join(1..99999, ',')", "sort(1..99999)", "split(repeat('a,', 99999), ',')",
    "matches(repeat('a', 9999), '(a+)+$')", "upper(repeat('x', 99999))", "[", "]", "(", ")",
    ",", "+", "..", "len", "toJSON", "repeat", "vars.big", "vars.deep", " ", "'a'", "99999",
]  # fmt: skip
heavy_soup = st.lists(st.sampled_from(HEAVY), max_size=30).map("".join)
SCOPE_VARIABLES: dict[str, Any] = {
    "vars": {"big": list(range(1000)), "deep": json.loads("[" * 50 + "]" * 50), "s": "x"},
    "ctx": {"stage": "dev", "project": "p"},
}


@given(st.one_of(heavy_soup, st.text(max_size=200)))
def test_expressions_raise_only_expression_errors_and_finish(source: str) -> None:
    try:
        evaluate_expression(source, SCOPE_VARIABLES)
    except ExpressionError:
        pass


@given(st.lists(st.one_of(st.text(max_size=40), heavy_soup.map("${{ {} }}".format)), max_size=4))
def test_templates_raise_only_expression_errors_and_finish(parts: list[str]) -> None:
    try:
        render_string("".join(parts), Scope(SCOPE_VARIABLES), where="fuzz")
    except ExpressionError:
        pass
