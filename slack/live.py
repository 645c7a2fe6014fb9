"""Live Promotion messages: one channel message per Promotion, updated in place.

The controller calls :meth:`LiveMessages.on_promotion` on every Promotion change (on every
replica; it must not block), which only records the newest object and wakes that Promotion's
follower task: one task per Promotion, sequential per Promotion, parallel across them (kopf's
shape). A follower renders the message purely (:mod:`slack.messages`) and sends only what
changed, at most once per ``update_interval`` per message, so rapid status writes coalesce.

Only the leader posts: where the message is (channel, ts), which thread replies were posted and
a digest of what the message shows (:mod:`promoter.chat.shown`) are written to the Promotion
(``longshoreman.dev/slack-message``), so a restarted or newly elected replica continues the same
message, repeats no reply and sends no ``chat.update`` for a message that did not change. Slack
being slow, rate limiting (429 ``Retry-After`` is honoured for every message) or down never
touches the Promotion: the follower keeps the newest state and catches up when Slack answers
again.

chat.postMessage has no idempotency key: when a post's answer is lost (a timeout, a dropped
connection, a 5xx) Slack may have posted the message all the same. Every live message carries
metadata naming its Promotion and a random per-post nonce (:class:`slack.messages.LiveTag`), and
before posting again the follower looks for it in one page of the channel's history around the
lost attempts, adopting it if it is there. Without the ``channels:history`` /
``groups:history`` scopes it cannot look, says so once, and posts again (possibly twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from cachetools import LRUCache

from promoter.chat.diff import (
    FreightDiff,
    RangeSource,
    freight_diff,
    promotion_base,
    ranges_to_fetch,
)
from promoter.chat.port import PromotionService
from promoter.chat.views import Verification, promotion_view
from promoter.clock import SYSTEM, Clock
from promoter.errors import NotFound
from promoter.resources import annotations as ann
from promoter.resources.model import meta, name_of, namespace_of
from promoter.resources.stages import phase_of
from promoter.tasks import stop_tasks
from slack.api import (
    Posted,
    RateLimited,
    SlackApi,
    SlackError,
    SlackRefused,
    SlackUnavailable,
    backoff,
)
from slack.blocks import Message
from slack.messages import (
    LiveTag,
    MessageRecord,
    channel_of,
    message_digest,
    message_final,
    notable_events,
    render_promotion,
    tagged,
)

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, promotion)

# Followers that keep failing for reasons other than Slack (the cluster port) give up after this
# many attempts in a row; the next change of the Promotion starts a new follower.
MAX_ATTEMPTS = 8
# Finished messages remembered, so late events for them cost nothing.
FINISHED_MEMORY = 10_000
# A post whose answer was lost is looked for in the channel's history from this many seconds
# before its first attempt to this many after its last (our clock and Slack's differ a little),
# in one page of at most HISTORY_LIMIT messages: bounded, whatever the channel's traffic.
HISTORY_MARGIN = 30.0
HISTORY_LIMIT = 20
HISTORY_SCOPES = "channels:history and groups:history"


class Outcome(Enum):
    IGNORED = "ignored"  # the Stage subscribes no channel
    FOLLOWING = "following"  # not finished: wait for the next change
    WATCHING = "watching"  # finished, verification still to come: look again periodically
    FINAL = "final"  # nothing more will change


def key_of(obj: Mapping[str, Any]) -> Key:
    return (namespace_of(obj) or "default", name_of(obj))


@dataclass(frozen=True, slots=True)
class LostPost:
    """A live message's post that got no answer: the message may be in ``channel`` all the
    same, tagged ``tag``, posted between ``since`` and ``until`` (wall clock, seconds)."""

    channel: str
    tag: LiveTag
    since: float
    until: float


def slack_ts(seconds: float) -> str:
    return f"{max(0.0, seconds):.6f}"


class LiveMessages:
    def __init__(
        self,
        service: PromotionService,
        *,
        update_interval: float = 1.0,
        verify_poll: float = 10.0,
        verify_window: float = 1800.0,
        retry_delay: float = 1.0,
        promotion_url: str | None = None,
        clock: Clock = SYSTEM,
        freight_url: str | None = None,
        project_channel: Callable[[str], str | None] = lambda namespace: None,
        diffs: RangeSource | None = None,
    ) -> None:
        self.service = service
        # What each Promotion changes (its Freight against the Stage's before it), computed
        # once per message from the GitHub App's cache of commit ranges.
        self.diffs = diffs
        self._diffs: LRUCache[Key, FreightDiff | None] = LRUCache(maxsize=FINISHED_MEMORY)
        # Where a Promotion of a Stage without a channel of its own is followed: its
        # project's first channel (longshoreman.dev/slack-channels on the namespace).
        self.project_channel = project_channel
        self.clock = clock  # its wall time is compared with Slack's message timestamps
        # {namespace}/{promotion} template of the Promotion's status page (None: no link).
        self.promotion_url = promotion_url
        self.freight_url = freight_url  # {namespace}/{freight}: the Freight's page
        self.update_interval = update_interval
        self.verify_poll = verify_poll
        self.verify_window = verify_window
        self.retry_delay = retry_delay
        self.api: SlackApi | None = None
        self._pending: dict[Key, dict[str, Any]] = {}
        self._wake: dict[Key, asyncio.Event] = {}
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._records: dict[Key, MessageRecord] = {}
        # What each message shows and when it may next be updated; kept (bounded) after a
        # message is final, so a Re-verify right after the final update neither repeats it nor
        # updates sooner than update_interval.
        self._shown: LRUCache[Key, Message] = LRUCache(maxsize=FINISHED_MEMORY)
        self._annotated: dict[Key, str] = {}
        self._next_send: LRUCache[Key, float] = LRUCache(maxsize=FINISHED_MEMORY)
        self._finished: OrderedDict[Key, None] = OrderedDict()
        # Re-verifications being followed: the verification result they started from (None
        # until first seen); the message is not final until the result is a new one.
        self._rewatch: dict[Key, str | None] = {}
        self._lost: dict[Key, LostPost] = {}
        # conversations.history errors already explained in the log (said once each).
        self._history_refusals: set[str] = set()
        self._blocked_until = 0.0
        self._closed = False

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self, api: SlackApi) -> None:
        self.api = api
        for key in list(self._pending):  # changes seen before the HTTP session existed
            self._ensure_follower(key)

    async def close(self) -> None:
        self._closed = True
        await stop_tasks(self._tasks.values(), "live-message followers")

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def idle(self) -> None:
        """Wait until no follower is running (tests and benchmarks)."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    # ---- the listener -------------------------------------------------------------------------

    def on_promotion(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A Promotion changed. Never blocks, never raises into the controller."""
        if self._closed or not self.service.is_leader():
            return
        key = key_of(obj)
        if key in self._tasks:
            self._pending[key] = obj
            self._wake[key].set()
            return
        if key in self._finished:
            return
        record = MessageRecord.of(obj)
        if record is not None and record.final:
            return
        if record is None and key not in self._records and phase_of(obj).terminal:
            # Finished before we ever saw it running (history replayed at start): announcing it
            # now would flood the channel with old news.
            if old is None or phase_of(old).terminal:
                return
        self._pending[key] = obj
        self._ensure_follower(key)

    def watch_again(self, obj: dict[str, Any]) -> None:
        """Follow a finished message again (its Stage is being re-verified)."""
        if self._closed:
            return
        key = key_of(obj)
        self._finished.pop(key, None)
        self._rewatch[key] = None
        record = MessageRecord.of(obj) or self._records.get(key)
        if record is not None:
            self._records[key] = replace(record, final=False)
        self._pending[key] = obj
        if key in self._wake:
            self._wake[key].set()
        self._ensure_follower(key)

    def _ensure_follower(self, key: Key) -> None:
        if self.api is None or key in self._tasks:
            return
        self._wake[key] = asyncio.Event()
        self._tasks[key] = asyncio.create_task(self._follow(key), name=f"slack-live-{key[1]}")

    # ---- the follower -------------------------------------------------------------------------

    async def _follow(self, key: Key) -> None:
        last: dict[str, Any] | None = None
        watch_until: float | None = None
        failures = 0
        try:
            while True:
                obj = self._pending.pop(key, None)
                stale = False
                if obj is None:
                    if last is None or watch_until is None:
                        return  # up to date; the next change starts a new follower
                    if self.clock.monotonic() >= watch_until:
                        log.info(
                            "gave up waiting for a verification result", extra={"promotion": key[1]}
                        )
                        self._forget(key)
                        return
                    wake = self._wake[key]
                    wake.clear()
                    # A timeout block, not wait_for (docs/architecture.md, bounded waits).
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.verify_poll):
                            await wake.wait()
                    obj = self._pending.pop(key, None)
                    if obj is None:
                        obj, stale = last, True
                delay = (
                    max(self._next_send.get(key, 0.0), self._blocked_until) - self.clock.monotonic()
                )
                if delay > 0:
                    await asyncio.sleep(delay)
                    newer = self._pending.pop(key, None)  # the newest, coalesced
                    if newer is not None:
                        obj, stale = newer, False
                if not self.service.is_leader():
                    return  # the new leader replays every Promotion and takes over
                try:
                    outcome = await self._sync(key, obj, stale=stale)
                except SlackRefused as e:
                    # channel_not_found, not_in_channel, invalid_blocks...: the same call will
                    # fail again. Say so once; a later change of the Promotion tries again.
                    log.warning(
                        "Slack refused a Promotion message: %s",
                        e,
                        extra={"promotion": key[1], "namespace": key[0]},
                    )
                    return
                except SlackError as e:
                    failures += 1
                    wait = backoff(e, failures, self.retry_delay)
                    if isinstance(e, RateLimited):
                        # Rate limits are per workspace and method: every follower waits.
                        self._blocked_until = max(
                            self._blocked_until, self.clock.monotonic() + wait
                        )
                    else:
                        self._next_send[key] = self.clock.monotonic() + wait
                    log.info(
                        "Slack unavailable for a Promotion message, retrying in %.1fs: %s",
                        wait,
                        e,
                        extra={"promotion": key[1], "namespace": key[0]},
                    )
                    self._pending.setdefault(key, obj)
                    continue
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    failures += 1
                    log.exception(
                        "following a Promotion in Slack failed",
                        extra={"promotion": key[1], "namespace": key[0]},
                    )
                    if failures >= MAX_ATTEMPTS:
                        return
                    self._next_send[key] = self.clock.monotonic() + backoff(
                        e, failures, self.retry_delay
                    )
                    self._pending.setdefault(key, obj)
                    continue
                failures = 0
                last = obj
                if key in self._pending:
                    continue
                if outcome is Outcome.FINAL:
                    self._remember_finished(key)
                    return
                if outcome is Outcome.IGNORED:
                    return
                if outcome is Outcome.WATCHING and watch_until is None:
                    watch_until = self.clock.monotonic() + self.verify_window
        finally:
            self._tasks.pop(key, None)
            self._wake.pop(key, None)
            self._rewatch.pop(key, None)
            # Left only when giving up (leadership lost, Slack refused): the next change of
            # the Promotion brings a fresh copy.
            self._pending.pop(key, None)

    def _remember_finished(self, key: Key) -> None:
        self._finished[key] = None
        while len(self._finished) > FINISHED_MEMORY:
            self._finished.popitem(last=False)
        self._records.pop(key, None)
        self._annotated.pop(key, None)
        self._lost.pop(key, None)

    def _forget(self, key: Key) -> None:
        """Drop what is kept per message (the annotation has what a later change needs)."""
        self._records.pop(key, None)
        self._shown.pop(key, None)
        self._annotated.pop(key, None)
        self._next_send.pop(key, None)
        self._lost.pop(key, None)

    def _awaiting_reverify(self, key: Key, verification: Verification | None) -> bool:
        if key not in self._rewatch:
            return False
        current = verification.since if verification is not None else ""
        baseline = self._rewatch[key]
        if baseline is None:
            self._rewatch[key] = current
            return True
        if current == baseline:
            return True
        del self._rewatch[key]
        return False

    async def _post_once(self, key: Key, channel: str, message: Message) -> tuple[Posted, bool]:
        """Post the Promotion's message, unless an earlier post whose answer was lost made it:
        then adopt that one. Returns where the message is and whether it was found."""
        assert self.api is not None
        lost = self._lost.get(key)
        if lost is not None and lost.channel == channel:
            ts = await self._find(lost)
            if ts is not None:
                del self._lost[key]
                return Posted(channel, ts), True
            tag, since = lost.tag, lost.since
        else:
            tag, since = LiveTag(key[0], key[1], secrets.token_hex(8)), self.clock.now().timestamp()
        try:
            posted = await self.api.post(channel, message, metadata=tag.metadata())
        except SlackUnavailable:
            # Posted or not: Slack did not say. (A 429 or an ok: false posted nothing.)
            self._lost[key] = LostPost(channel, tag, since, self.clock.now().timestamp())
            raise
        self._lost.pop(key, None)
        return posted, False

    async def _find(self, lost: LostPost) -> str | None:
        """The ts of the lost post's message if the channel shows it, else None (also when the
        history cannot be read: posting again risks a duplicate, not posting risks none)."""
        assert self.api is not None
        try:
            seen = await self.api.history(
                lost.channel,
                oldest=slack_ts(lost.since - HISTORY_MARGIN),
                latest=slack_ts(lost.until + HISTORY_MARGIN),
                limit=HISTORY_LIMIT,
            )
        except SlackRefused as e:
            if e.error not in self._history_refusals:
                self._history_refusals.add(e.error)
                log.warning(
                    "cannot read channel history (%s), so a Promotion message whose post got no "
                    "answer is posted again and may show twice; the bot needs the %s scopes",
                    e.error,
                    HISTORY_SCOPES,
                    extra={"promotion": lost.tag.promotion, "channel": lost.channel},
                )
            return None
        return tagged([(s.ts, s.metadata) for s in seen], lost.tag)

    async def _sync(self, key: Key, obj: dict[str, Any], *, stale: bool = False) -> Outcome:
        """Bring the Promotion's message up to date with ``obj``: post, update, reply, record.

        ``stale``: ``obj`` is the last one seen (a verification watch looking again); the
        cache's copy, if any, is newer.
        """
        assert self.api is not None
        namespace, name = key
        snapshot = await self.service.snapshot(namespace)
        if stale:
            cached = next((p for p in snapshot.promotions if name_of(p) == name), None)
            if cached is not None:
                obj = dict(cached)
        link = None
        if self.promotion_url:
            link = self.promotion_url.format(namespace=namespace, promotion=name)
        # The one read model, built once; the message only formats it.
        stage = snapshot.stage(str((obj.get("spec") or {}).get("stage") or ""))
        view = promotion_view(
            obj,
            stage=stage,
            stages=snapshot.stages,
            freights=snapshot.freight,
            link=link,
            project=snapshot.project_config,
            cluster=snapshot.cluster_config,
            freight_link=_page_of(self.freight_url, namespace, obj),
        )
        verification = view.verification
        message = render_promotion(view, await self._diff(key, obj, stage, snapshot.freight))

        record = self._records.get(key) or MessageRecord.of(obj)
        if record is None:
            channel = channel_of(stage) or self.project_channel(key[0])
            if channel is None:
                return Outcome.IGNORED
            posted, found = await self._post_once(key, channel, message)
            record = MessageRecord(posted.channel, posted.ts)
            self._records[key] = record
            if found:
                # It shows what was rendered for the lost attempt: updated just below.
                self._shown.pop(key, None)
            else:
                self._shown[key] = message
                self._next_send[key] = self.clock.monotonic() + self.update_interval
            log.info(
                "found a Promotion message whose post got no answer"
                if found
                else "posted a Promotion message",
                extra={"promotion": name, "channel": record.channel, "ts": record.ts},
            )
        else:
            self._records[key] = record
        digest = message_digest(message)
        if key not in self._shown and record.shown == digest:
            self._shown[key] = message  # shown before a restart: nothing to send
        if self._shown.get(key) != message:
            await self.api.update(record.channel, record.ts, message)
            self._shown[key] = message
            self._next_send[key] = self.clock.monotonic() + self.update_interval

        for event, reply in notable_events(obj, verification):
            if event in record.events:
                continue
            await self.api.post(record.channel, reply, thread_ts=record.ts)
            record = replace(record, events=(*record.events, event))
            self._records[key] = record

        final = message_final(obj, verification) and not self._awaiting_reverify(key, verification)
        # What the message shows is recorded (MessageRecord.shown), running or finished.
        record = replace(record, final=final, shown=digest)
        self._records[key] = record
        value = record.to_annotation()
        current = (meta(obj).get("annotations") or {}).get(ann.SLACK_MESSAGE)
        if value != current and value != self._annotated.get(key):
            try:
                await self.service.annotate(namespace, name, ann.SLACK_MESSAGE, value)
            except NotFound:
                return Outcome.FINAL  # the Promotion is gone
            self._annotated[key] = value
        if final:
            return Outcome.FINAL
        return Outcome.WATCHING if phase_of(obj).terminal else Outcome.FOLLOWING

    async def _diff(
        self,
        key: Key,
        promotion: Mapping[str, Any],
        stage: Mapping[str, Any] | None,
        freights: list[Mapping[str, Any]],
    ) -> FreightDiff | None:
        """What the Promotion changes in its Stage, as the check run shows it (the same base:
        :func:`promoter.chat.diff.promotion_base`); None when its Freight is unknown."""
        if key in self._diffs:
            return self._diffs[key]
        spec = promotion.get("spec") or {}
        freight = next((f for f in freights if name_of(f) == spec.get("freight")), None)
        diff = None
        if freight is not None:
            backwards = ann.is_rollback(promotion) or None
            base = promotion_base(stage, freight, freights)
            keys = ranges_to_fetch(base, freight, backwards=backwards)
            facts = await self.diffs.facts(keys) if self.diffs is not None and keys else {}
            diff = freight_diff(
                str(spec.get("stage") or ""), base, freight, facts, backwards=backwards
            )
        self._diffs[key] = diff
        return diff


def _page_of(template: str | None, namespace: str, promotion: Mapping[str, Any]) -> str | None:
    """The page of the Promotion's Freight from a ``{namespace}``/``{freight}`` template."""
    freight = str((promotion.get("spec") or {}).get("freight") or "")
    if not template or not freight:
        return None
    return template.format(namespace=namespace, freight=freight)
