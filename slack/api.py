"""The one module that talks to Slack's Web API (and to ``response_url``s).

Library exceptions become three kinds the rest of slack/ decides on: :class:`RateLimited`
(wait ``retry_after`` seconds), :class:`SlackUnavailable` (5xx, timeouts, connection errors:
try again later; Slack may have done the work all the same) and :class:`SlackRefused`
(``ok: false``: retrying the same call will not help, and Slack did nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from promoter.ports.telemetry import NO_TELEMETRY, Telemetry
from slack.blocks import Message

log = logging.getLogger(__name__)


class SlackError(Exception):
    """A Slack call did not do what we asked."""


class RateLimited(SlackError):
    def __init__(self, method: str, retry_after: float) -> None:
        super().__init__(f"{method}: rate limited, retry after {retry_after:g}s")
        self.retry_after = retry_after


class SlackUnavailable(SlackError):
    """Slack answered 5xx or not at all; the same call may work later. Whether Slack did the
    work is unknown: a timeout or a dropped connection can come after the message was posted."""


class SlackRefused(SlackError):
    def __init__(self, method: str, error: str) -> None:
        super().__init__(f"{method}: {error}")
        self.error = error


@dataclass(frozen=True, slots=True)
class Posted:
    channel: str
    ts: str


@dataclass(frozen=True, slots=True)
class Seen:
    """A channel message as ``conversations.history`` shows it: its ts and its metadata
    (``{"event_type": ..., "event_payload": {...}}``; empty when it has none)."""

    ts: str
    metadata: Mapping[str, Any]


def retry_after_of(headers: Mapping[str, str] | None, default: float = 1.0) -> float:
    """Slack's ``Retry-After`` is whole seconds; tolerate fractions and junk."""
    raw = (headers or {}).get("Retry-After") or (headers or {}).get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else default
    except ValueError:
        return default


class SlackApi:
    """Thin, typed calls over one :class:`AsyncWebClient` with a shared HTTP session."""

    def __init__(
        self,
        client: AsyncWebClient,
        session: aiohttp.ClientSession,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.client = client
        self.session = session
        self.telemetry = telemetry

    @classmethod
    def create(
        cls,
        token: str,
        api_url: str,
        *,
        timeout: float = 10,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> SlackApi:
        # One session for every call: without it slack_sdk opens a new connection per request.
        # The timeout covers each whole call, so a stalled Slack cannot hold a worker.
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))
        client = AsyncWebClient(
            token=token, base_url=api_url, timeout=int(max(1, timeout)), session=session
        )
        # Retries are ours (RateLimited / SlackUnavailable): the default handler would retry a
        # connection error inside a call we are timing and coalescing.
        client.retry_handlers = []
        return cls(client, session, telemetry)

    def _outcome(self, method: str, error: SlackError | None) -> None:
        outcomes: dict[type[SlackError] | None, str] = {
            None: "ok",
            RateLimited: "rate_limited",
            SlackUnavailable: "unavailable",
            SlackRefused: "refused",
        }
        outcome = outcomes.get(type(error) if error is not None else None, "error")
        self.telemetry.api_call("slack", method, outcome)
        if isinstance(error, RateLimited):
            self.telemetry.rate_limited("slack", error.retry_after)

    async def close(self) -> None:
        await self.session.close()

    async def _call(self, method: str, **kwargs: Any) -> Mapping[str, Any]:
        # The client's own method per call: it knows which Web API methods take GET + query
        # arguments (usergroups.users.list) and which take a JSON body (chat.*).
        call = getattr(self.client, method.replace(".", "_"))
        try:
            response = await self._counted(method, call(**kwargs))
        except SlackApiError as e:
            status = getattr(e.response, "status_code", 0)
            headers = getattr(e.response, "headers", None)
            if status == 429:
                raise RateLimited(method, retry_after_of(headers)) from None
            if status >= 500 or status == 0:
                raise SlackUnavailable(f"{method}: HTTP {status}") from None
            data = getattr(e.response, "data", None)
            error = data.get("error") if isinstance(data, Mapping) else None
            raise SlackRefused(method, str(error or f"HTTP {status}")) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise SlackUnavailable(f"{method}: {type(e).__name__}: {e}") from None
        data = response.data
        return data if isinstance(data, Mapping) else {}

    async def _counted(self, method: str, call: Any) -> Any:
        """Await one Web API call, reporting its outcome (errors as _call classifies them)."""
        try:
            response = await call
        except SlackApiError as e:
            status = getattr(e.response, "status_code", 0)
            if status == 429:
                headers = getattr(e.response, "headers", None)
                error: SlackError = RateLimited(method, retry_after_of(headers))
            elif status >= 500 or status == 0:
                error = SlackUnavailable(method)
            else:
                error = SlackRefused(method, "")
            self._outcome(method, error)
            raise
        except (aiohttp.ClientError, TimeoutError, OSError):
            self._outcome(method, SlackUnavailable(method))
            raise
        self._outcome(method, None)
        return response

    async def auth_test(self) -> Mapping[str, Any]:
        return await self._call("auth.test")

    async def post(
        self,
        channel: str,
        message: Message,
        *,
        thread_ts: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Posted:
        """``metadata``: https://api.slack.com/metadata/using (``chat:write`` is enough)."""
        args: dict[str, Any] = {"channel": channel, "text": message.text}
        if message.blocks:
            args["blocks"] = list(message.blocks)
        if thread_ts:
            args["thread_ts"] = thread_ts
        if metadata is not None:
            args["metadata"] = dict(metadata)
        data = await self._call("chat.postMessage", **args)
        return Posted(str(data.get("channel") or channel), str(data.get("ts") or ""))

    async def update(self, channel: str, ts: str, message: Message) -> None:
        await self._call(
            "chat.update", channel=channel, ts=ts, text=message.text, blocks=list(message.blocks)
        )

    async def history(
        self, channel: str, *, oldest: str, latest: str | None = None, limit: int = 20
    ) -> list[Seen]:
        """One page of top-level messages between ``oldest`` and ``latest`` (inclusive), newest
        first, with their metadata. Needs ``channels:history`` (``groups:history`` in private
        channels): without it, :class:`SlackRefused` with ``missing_scope``."""
        data = await self._call(
            "conversations.history",
            channel=channel,
            oldest=oldest,
            latest=latest,
            inclusive=True,
            limit=limit,
            # Without it the messages come without their metadata.
            include_all_metadata=True,
        )
        seen = []
        for raw in data.get("messages") or ():
            if not isinstance(raw, Mapping) or not raw.get("ts"):
                continue
            metadata = raw.get("metadata")
            seen.append(Seen(str(raw["ts"]), metadata if isinstance(metadata, Mapping) else {}))
        return seen

    async def post_ephemeral(self, channel: str, user: str, message: Message) -> None:
        args: dict[str, Any] = {"channel": channel, "user": user, "text": message.text}
        if message.blocks:
            args["blocks"] = list(message.blocks)
        await self._call("chat.postEphemeral", **args)

    async def usergroup_members(self, group: str) -> Sequence[str]:
        data = await self._call("usergroups.users.list", usergroup=group)
        return [str(u) for u in data.get("users") or ()]

    async def respond(
        self, response_url: str, message: Message, *, replace_original: bool = False
    ) -> None:
        """Answer through a command's or a click's ``response_url`` (ephemeral by default)."""
        body: dict[str, Any] = {
            "text": message.text,
            "response_type": "ephemeral",
            "replace_original": replace_original,
        }
        if message.blocks:
            body["blocks"] = list(message.blocks)
        try:
            async with self.session.post(response_url, json=body) as response:
                if response.status == 429:
                    raise RateLimited("response_url", retry_after_of(response.headers))
                if response.status >= 500:
                    raise SlackUnavailable(f"response_url: HTTP {response.status}")
                if response.status >= 400:
                    raise SlackRefused("response_url", f"HTTP {response.status}")
        except SlackError as e:
            self._outcome("response_url", e)
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            error = SlackUnavailable(f"response_url: {type(e).__name__}: {e}")
            self._outcome("response_url", error)
            raise error from None
        self._outcome("response_url", None)


def backoff(error: Exception, attempt: int, base: float = 1.0, cap: float = 30.0) -> float:
    """Seconds to wait before trying again after ``error`` (the ``attempt``-th failure in a row):
    what a 429 asks for, else exponential from ``base``."""
    if isinstance(error, RateLimited):
        return error.retry_after
    return float(min(cap, base * 2 ** min(max(attempt - 1, 0), 10)))
