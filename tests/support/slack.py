"""A fake Slack, over real HTTP, for every Slack test (defined once, here).

``running_fake_slack()`` starts an aiohttp app on 127.0.0.1 that answers the Web API methods the
integration uses (``auth.test``, ``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``,
``conversations.history``, ``usergroups.users.list``) plus ``response_url``
endpoints, the way
Slack does: bearer-token checks, ``ok: false`` errors, Block Kit limits enforced
(``invalid_blocks``), 429 with ``Retry-After``, 5xx with a non-JSON body, message metadata kept
and shown by ``conversations.history`` only with ``include_all_metadata``, ``missing_scope`` when
a history scope is not granted, and answers lost after the work was done (:meth:`lose_answer`).
It records every call and keeps messages and thread replies so tests can look at what a channel
shows.

Also here: signing requests exactly as Slack signs them (``v0`` HMAC-SHA256 of
``v0:{timestamp}:{body}``), and slash-command and button payloads. The cluster port the Slack
front end talks to is :class:`tests.support.promotions.FakePromotions`, shared with GitHub's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from slack.settings import SlackSettings

TOKEN = "xoxb-test-token"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0TEAM"

# ---- the fake Web API -------------------------------------------------------------------------


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    at: float  # time.monotonic()
    status: int = 200


@dataclass
class SlackMessage:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    versions: list[dict[str, Any]] = field(default_factory=list)  # every text/blocks it had
    metadata: dict[str, Any] | None = None  # {"event_type": ..., "event_payload": {...}}

    @property
    def buttons(self) -> dict[str, dict[str, Any]]:
        """action_id -> button element."""
        out = {}
        for block in self.blocks:
            for element in block.get("elements") or ():
                if element.get("type") == "button":
                    out[element["action_id"]] = element
        return out


@dataclass
class Fault:
    method: str  # "*" for every method
    status: int
    remaining: int
    retry_after: float | None = None


@dataclass
class LostAnswer:
    """Slack does the work, then the answer never arrives: ``stall`` answers only after
    ``seconds`` (past the client's timeout), ``drop`` closes the connection unanswered."""

    method: str
    how: str  # "stall" | "drop"
    remaining: int
    seconds: float = 0.0


# The bot scopes this fake grants by default; conversations.history checks them (public
# channels, C..., need channels:history; private ones, G..., groups:history).
GRANTED_SCOPES = frozenset(
    {
        "chat:write",
        "commands",
        "usergroups:read",
        "channels:history",
        "groups:history",
    }
)


def block_kit_errors(blocks: Any) -> list[str]:
    """What Slack would reject in ``blocks`` (the limits the integration must respect)."""
    if blocks is None:
        return []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    errors = []
    if len(blocks) > 50:
        errors.append(f"{len(blocks)} blocks > 50")
    for i, block in enumerate(blocks):
        text = (block.get("text") or {}).get("text")
        if block.get("type") == "section" and (not text or len(text) > 3000):
            errors.append(f"block {i}: section text of {len(text or '')} characters")
        if block.get("type") == "actions":
            elements = block.get("elements") or []
            if len(elements) > 25:
                errors.append(f"block {i}: {len(elements)} elements > 25")
            ids = [e.get("action_id") for e in elements]
            if len(ids) != len(set(ids)):
                errors.append(f"block {i}: duplicate action_id")
            for e in elements:
                if len(e["text"]["text"]) > 75:
                    errors.append(f"block {i}: button text over 75")
                if len(e.get("action_id") or "") > 255:
                    errors.append(f"block {i}: action_id over 255")
                if len(e.get("value") or "") > 2000:
                    errors.append(f"block {i}: value over 2000")
        if block.get("type") == "context" and len(block.get("elements") or []) > 10:
            errors.append(f"block {i}: context with more than 10 elements")
    return errors


class FakeSlack:
    """The Web API's state and controls; ``url`` is its ``LONGSHOREMAN_SLACK_API_URL``."""

    def __init__(self, token: str = TOKEN, team: str = TEAM) -> None:
        self.token = token
        self.team = team
        self.url = ""
        self.base = ""
        self.calls: list[Call] = []
        self.messages: list[SlackMessage] = []
        self.ephemeral: list[dict[str, Any]] = []
        self.usergroups: dict[str, list[str]] = {}
        self.responses: dict[str, list[dict[str, Any]]] = {}
        self.faults: list[Fault] = []
        self.lost: list[LostAnswer] = []
        self.scopes: set[str] = set(GRANTED_SCOPES)
        self.delay = 0.0  # seconds every API answer takes
        self.changed = asyncio.Event()
        self._last_ts = 0  # microseconds
        self._closing = asyncio.Event()

    # ---- controls ---------------------------------------------------------------------------

    def fail(
        self,
        method: str = "*",
        status: int = 500,
        *,
        times: int = 1,
        retry_after: float | None = None,
    ) -> None:
        """The next ``times`` calls of ``method`` answer ``status`` (429: with Retry-After)."""
        self.faults.append(Fault(method, status, times, retry_after))

    def lose_answer(
        self, method: str = "chat.postMessage", how: str = "drop", *, seconds: float = 0.0
    ) -> None:
        """The next successful call of ``method`` is done (a message posted...), then its answer
        is lost: ``how="drop"`` closes the connection, ``how="stall"`` answers after
        ``seconds`` (make it longer than the client's timeout)."""
        assert how in ("stall", "drop"), how
        self.lost.append(LostAnswer(method, how, 1, seconds))

    def heal(self) -> None:
        self.faults.clear()
        self.lost.clear()

    def settings(self, namespace: str) -> SlackSettings:
        """The bot's settings against this fake: its token, the signing secret the tests sign
        with, and ``namespace`` as the project its commands act on."""
        return SlackSettings(
            bot_token=TOKEN, signing_secret=SIGNING_SECRET, api_url=self.url, namespace=namespace
        )

    def response_url(self, name: str = "r1") -> str:
        self.responses.setdefault(name, [])
        return f"{self.base}/respond/{name}"

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def channel(self, channel: str) -> list[SlackMessage]:
        """Top-level messages in a channel, oldest first."""
        return [m for m in self.messages if m.channel == channel and m.thread_ts is None]

    def replies(self, ts: str) -> list[SlackMessage]:
        return [m for m in self.messages if m.thread_ts == ts]

    async def wait_for(
        self, predicate: Callable[[], Any], within: float = 10.0, what: str = "condition"
    ) -> Any:
        deadline = time.monotonic() + within
        while True:
            result = predicate()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"fake Slack: {what} not met in {within}s; calls: "
                    f"{[c.method for c in self.calls][-20:]}"
                )
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.05)

    # ---- HTTP -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/respond/{name}", self._respond)
        return app

    def _fault_for(self, method: str) -> Fault | None:
        for fault in self.faults:
            if fault.remaining > 0 and fault.method in ("*", method):
                fault.remaining -= 1
                return fault
        return None

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                args.update(await request.json())
            else:
                args.update(dict(await request.post()))
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        call = Call(method, args, time.monotonic())
        self.calls.append(call)
        self.changed.set()
        if self.delay:
            await asyncio.sleep(self.delay)
        fault = self._fault_for(method)
        if fault is not None:
            call.status = fault.status
            if fault.status == 429:
                headers = {
                    "Retry-After": f"{fault.retry_after if fault.retry_after is not None else 1:g}"
                }
                return web.json_response(
                    {"ok": False, "error": "ratelimited"}, status=429, headers=headers
                )
            return web.Response(
                status=fault.status, text="upstream connect error", content_type="text/plain"
            )
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        body = handler(args)
        self.changed.set()
        lost = self._lost_for(method) if body.get("ok") else None
        if lost is not None and lost.how == "stall":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), lost.seconds)
        elif lost is not None:
            assert request.transport is not None
            request.transport.close()  # the client sees the connection drop, unanswered
        return web.json_response(body)

    def _lost_for(self, method: str) -> LostAnswer | None:
        for lost in self.lost:
            if lost.remaining > 0 and lost.method == method:
                lost.remaining -= 1
                return lost
        return None

    def _next_ts(self) -> str:
        # Like Slack's: the time of posting in microseconds, unique (conversations.history's
        # oldest/latest compare against it).
        self._last_ts = max(time.time_ns() // 1000, self._last_ts + 1)
        return f"{self._last_ts // 1_000_000}.{self._last_ts % 1_000_000:06d}"

    def _m_auth_test(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "user": "longshoreman",
            "user_id": "UBOT",
            "team": "Test",
            "team_id": self.team,
            "bot_id": "BBOT",
        }

    def _check_message(self, args: Mapping[str, Any]) -> dict[str, Any] | None:
        if not args.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if not args.get("text") and not args.get("blocks"):
            return {"ok": False, "error": "no_text"}
        errors = block_kit_errors(args.get("blocks"))
        if errors:
            return {"ok": False, "error": "invalid_blocks", "errors": errors}
        return None

    def _m_chat_postMessage(self, args: Mapping[str, Any]) -> dict[str, Any]:
        refused = self._check_message(args)
        if refused:
            return refused
        blocks = args.get("blocks") or []
        metadata = args.get("metadata")
        if isinstance(metadata, str):  # form-encoded calls send it as JSON text
            metadata = json.loads(metadata)
        if metadata is not None and (
            not isinstance(metadata, dict)
            or not isinstance(metadata.get("event_type"), str)
            or not isinstance(metadata.get("event_payload"), dict)
        ):
            return {"ok": False, "error": "invalid_metadata_format"}
        message = SlackMessage(
            str(args["channel"]),
            self._next_ts(),
            str(args.get("text") or ""),
            list(blocks),
            thread_ts=args.get("thread_ts") or None,
            metadata=metadata,
        )
        message.versions.append({"text": message.text, "blocks": message.blocks})
        self.messages.append(message)
        return {
            "ok": True,
            "channel": message.channel,
            "ts": message.ts,
            "message": {"text": message.text},
        }

    def _m_chat_update(self, args: Mapping[str, Any]) -> dict[str, Any]:
        refused = self._check_message(args)
        if refused:
            return refused
        for message in self.messages:
            if message.channel == args["channel"] and message.ts == args.get("ts"):
                message.text = str(args.get("text") or "")
                message.blocks = list(args.get("blocks") or [])
                message.versions.append({"text": message.text, "blocks": message.blocks})
                return {"ok": True, "channel": message.channel, "ts": message.ts}
        return {"ok": False, "error": "message_not_found"}

    def _m_chat_postEphemeral(self, args: Mapping[str, Any]) -> dict[str, Any]:
        refused = self._check_message(args)
        if refused:
            return refused
        if not args.get("user"):
            return {"ok": False, "error": "user_not_found"}
        self.ephemeral.append(dict(args))
        return {"ok": True, "message_ts": self._next_ts()}

    def _m_conversations_history(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Top-level messages, newest first, between ``oldest`` and ``latest`` (exclusive unless
        ``inclusive``), at most ``limit``; metadata only with ``include_all_metadata``."""
        channel = str(args.get("channel") or "")
        needed = "groups:history" if channel.startswith("G") else "channels:history"
        if needed not in self.scopes:
            provided = ",".join(sorted(self.scopes))
            return {"ok": False, "error": "missing_scope", "needed": needed, "provided": provided}
        if not channel:
            return {"ok": False, "error": "channel_not_found"}

        def flag(name: str) -> bool:
            return str(args.get(name) or "").lower() in ("1", "true")

        oldest = float(args.get("oldest") or 0)
        latest = float(args.get("latest") or "inf")
        inclusive = flag("inclusive")
        limit = min(int(args.get("limit") or 100), 999)

        def within(ts: float) -> bool:
            if inclusive:
                return oldest <= ts <= latest
            return oldest < ts < latest

        found = [m for m in reversed(self.channel(channel)) if within(float(m.ts))]
        out = []
        for m in found[:limit]:
            shown: dict[str, Any] = {
                "type": "message",
                "ts": m.ts,
                "user": "UBOT",
                "bot_id": "BBOT",
                "app_id": "A0APP",
                "text": m.text,
                "blocks": m.blocks,
            }
            if m.metadata is not None and flag("include_all_metadata"):
                shown["metadata"] = m.metadata
            out.append(shown)
        return {
            "ok": True,
            "messages": out,
            "has_more": len(found) > limit,
            "pin_count": 0,
            "response_metadata": {"next_cursor": "bmV4dA==" if len(found) > limit else ""},
        }

    def _m_usergroups_users_list(self, args: Mapping[str, Any]) -> dict[str, Any]:
        group = str(args.get("usergroup") or "")
        if group not in self.usergroups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(self.usergroups[group])}

    async def _respond(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.json()
        self.calls.append(Call("response_url", {"name": name, **body}, time.monotonic()))
        self.changed.set()
        fault = self._fault_for("response_url")
        if fault is not None:
            return web.Response(status=fault.status, text="error")
        if name not in self.responses:
            return web.Response(status=404, text="expired_url")
        errors = block_kit_errors(body.get("blocks"))
        if errors:
            return web.Response(status=400, text="invalid_blocks")
        self.responses[name].append(body)
        return web.Response(text="ok")


@contextlib.asynccontextmanager
async def running_fake_slack(**options: Any) -> AsyncIterator[FakeSlack]:
    fake = FakeSlack(**options)
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    try:
        fake.base = str(server.make_url("")).rstrip("/")
        fake.url = fake.base + "/api/"
        yield fake
    finally:
        fake._closing.set()  # stalled answers end now
        await server.close()


# ---- requests from Slack ----------------------------------------------------------------------


def signed_headers(
    body: str, secret: str = SIGNING_SECRET, timestamp: int | None = None
) -> dict[str, str]:
    """Headers Slack sends: https://api.slack.com/authentication/verifying-requests-from-slack"""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = f"v0:{ts}:{body}".encode()
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
        "Content-Type": "application/x-www-form-urlencoded",
    }


def slash_command(
    text: str,
    *,
    user: str = "U1",
    team: str = TEAM,
    channel: str = "C0CMD",
    response_url: str = "",
    command: str = "/promote",
) -> str:
    return urlencode(
        {
            "token": "deprecated-verification-token",
            "team_id": team,
            "team_domain": "test",
            "channel_id": channel,
            "channel_name": "deploys",
            "user_id": user,
            "user_name": user.lower(),
            "command": command,
            "text": text,
            "api_app_id": "A0APP",
            "response_url": response_url,
            "trigger_id": "123.456.abc",
        }
    )


async def slash(
    client: TestClient[Any, Any],
    slack: FakeSlack,
    text: str,
    *,
    user: str,
    answer: str,
    command: str = "/promote",
) -> str:
    """Post ``command text`` as ``user``, signed, to the Slack app behind ``client``; the first
    ephemeral answer it sends to ``response_url(answer)``."""
    body = slash_command(text, user=user, response_url=slack.response_url(answer), command=command)
    response = await client.post("/slack/events", data=body, headers=signed_headers(body))
    assert response.status == 200
    await slack.wait_for(lambda: slack.responses[answer], what=answer)
    said: str = slack.responses[answer][0]["text"]
    return said


def button_click(
    button: Mapping[str, Any],
    *,
    user: str = "U1",
    team: str = TEAM,
    channel: str = "C0CMD",
    response_url: str = "",
    message_ts: str | None = None,
) -> str:
    """A ``block_actions`` payload for clicking ``button`` (an element from our blocks)."""
    payload: dict[str, Any] = {
        "type": "block_actions",
        "team": {"id": team, "domain": "test"},
        "user": {"id": user, "username": user.lower(), "team_id": team},
        "api_app_id": "A0APP",
        "token": "deprecated-verification-token",
        "container": {"type": "message", "message_ts": message_ts or "1.0", "channel_id": channel},
        "trigger_id": "123.456.abc",
        "channel": {"id": channel, "name": "deploys"},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": button["action_id"],
                "block_id": "b1",
                "text": button["text"],
                "value": button.get("value", ""),
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})
