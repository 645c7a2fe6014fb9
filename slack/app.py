"""The Slack app: ``/promote``, ``/approve``, buttons and live Promotion messages, on aiohttp.

``setup_slack(app, settings, service)`` mounts a slack-bolt :class:`AsyncApp` at
``POST /slack/events`` (slash commands and interactivity share it). Bolt verifies every request
(``v0`` HMAC signature, timestamp within 5 minutes; 401 otherwise, before any listener runs).
Before bolt sees a verified request, two things a signature cannot say are checked here: that
it is not a replay (a signature seen within the window is answered with an empty 200 and does
nothing), and, with ``LONGSHOREMAN_SLACK_TEAM_ID``, that it comes from that workspace (403).
Every listener acks at once and hands the work to a tracked background task; what it decides
comes from :mod:`slack.commands` and what it says from :mod:`slack.messages`. Anything that goes
wrong after the ack is told to the user as an ephemeral message.

The app layer appends :meth:`SlackIntegration.on_promotion` to the controller's listeners.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from cachetools import TTLCache
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from promoter.chat.diff import (
    FreightDiff,
    RangeSource,
    current_freight,
    freight_diff,
    ranges_to_fetch,
)
from promoter.chat.grammar import (
    APPROVE_SLASH,
    FREEZE_SLASH,
    SLASH,
    UNFREEZE_SLASH,
    Command,
    CommandError,
    parse_command,
    parse_slash,
    reason_of,
)
from promoter.chat.planner import (
    AlreadyApproved,
    AskConfirm,
    Cancelled,
    DoAbort,
    DoApprove,
    DoFreeze,
    DoPromote,
    DoReverify,
    DoUnfreeze,
    Facts,
    Plan,
    Refusal,
    ShowDiff,
    ShowHelp,
    ShowStatus,
    plan,
    stages_to_authorize,
)
from promoter.chat.port import (
    FreightAnnotator,
    PromotionService,
    projects_of,
    promote_decided,
    set_freeze,
)
from promoter.chat.projects import Defaults, NotResolved, Route, SlackChannel, route
from promoter.chat.targets import find_stage, named_stage, naming
from promoter.clock import SYSTEM, Clock
from promoter.errors import PermanentError, TemporaryError
from promoter.ports.telemetry import NO_TELEMETRY, Telemetry
from promoter.resources import annotations as ann
from promoter.resources.model import name_of
from promoter.tasks import stop_tasks
from slack import blocks as b
from slack import messages as m
from slack.announcements import stages_to_announce
from slack.api import SlackApi, SlackError
from slack.blocks import Message
from slack.commands import (
    PendingPromotion,
    authored_on_slack,
    authorizer,
    groups_to_resolve,
    needs_confirmation,
)
from slack.groups import UserGroups
from slack.live import LiveMessages
from slack.settings import SlackSettings

log = logging.getLogger(__name__)


class _NoTokenSkippedWarning(logging.Filter):
    """Drops bolt's "As you gave `client` as well, `token` will be unused" warning.

    Bolt reads ``SLACK_BOT_TOKEN`` from the environment by itself when given no token, so with
    our own client (which carries the API URL) it warns at every start, although the token is
    the one :func:`authorize` hands it. Nothing is wrong, so nothing is said.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


bolt_log = logging.getLogger(f"{__name__}.bolt")
bolt_log.addFilter(_NoTokenSkippedWarning())

EVENTS_PATH = "/slack/events"
# Slash commands and button clicks are a few kilobytes; refuse anything far bigger before
# reading it (the app's own limit is sized for GitHub's 25 MB webhooks).
MAX_BODY = 1024 * 1024
# Slack refuses a request older than 5 minutes (as bolt does); a signature is remembered a
# little longer, so a replay is recognised for as long as its timestamp would pass.
REPLAY_WINDOW = 6 * 60.0
REPLAY_MEMORY = 100_000
# Metric labels for what a verified request was (Slack's payload types we may see).
_KINDS = frozenset(
    {"block_actions", "view_submission", "view_closed", "shortcut", "message_action"}
)


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asked, and where to answer them."""

    team: str
    user: str
    channel: str | None
    response_url: str | None

    @property
    def actor(self) -> str:
        return f"slack:{self.team}/{self.user}"

    @classmethod
    def of_command(cls, body: Mapping[str, Any]) -> Requester:
        return cls(
            team=str(body.get("team_id") or ""),
            user=str(body.get("user_id") or ""),
            channel=body.get("channel_id") or None,
            response_url=body.get("response_url") or None,
        )

    @classmethod
    def of_action(cls, body: Mapping[str, Any]) -> Requester:
        user = body.get("user") or {}
        team = body.get("team") or {}
        return cls(
            team=str(team.get("id") or user.get("team_id") or ""),
            user=str(user.get("id") or ""),
            channel=(body.get("channel") or {}).get("id") or None,
            response_url=body.get("response_url") or None,
        )


def _team_of(body: Mapping[str, Any]) -> str:
    """The workspace a slash command (``team_id``) or an interaction (``team.id``) came from."""
    team = body.get("team")
    if isinstance(team, Mapping) and team.get("id"):
        return str(team["id"])
    return str(body.get("team_id") or "")


def _kind(body: Mapping[str, Any]) -> str:
    """What a verified request was, as a metric label from a fixed set."""
    if body.get("command"):
        return "command"
    kind = str(body.get("type") or "")
    return kind if kind in _KINDS else "other"


def _action_value(body: Mapping[str, Any]) -> str:
    acts = body.get("actions") or [{}]
    return str((acts[0] or {}).get("value") or "")


class SlackIntegration:
    """Everything Slack: the bolt app, the Web API client and the live messages."""

    def __init__(
        self,
        settings: SlackSettings,
        service: PromotionService,
        *,
        clock: Clock = SYSTEM,
        telemetry: Telemetry = NO_TELEMETRY,
        diffs: RangeSource | None = None,
    ) -> None:
        self.settings = settings
        self.service = service
        # Where Freight diffs' commits come from (the GitHub App's, wired in by the app);
        # without it a diff shows versions only.
        self.diffs = diffs
        self.clock = clock
        self.telemetry = telemetry
        self._verifier = SignatureVerifier(settings.signing_secret)
        self._signatures: TTLCache[str, bool] = TTLCache(
            maxsize=REPLAY_MEMORY, ttl=REPLAY_WINDOW, timer=clock.monotonic
        )
        self.api: SlackApi | None = None
        self.groups: UserGroups | None = None
        self.live = LiveMessages(
            service,
            update_interval=settings.update_interval,
            verify_poll=settings.verify_poll,
            verify_window=settings.verify_window,
            retry_delay=settings.retry_delay,
            promotion_url=settings.promotion_url,
            freight_url=settings.freight_url,
            clock=clock,
            project_channel=self._project_channel,
            diffs=diffs,
        )
        self._jobs: set[asyncio.Task[None]] = set()
        self._confirmed: dict[str, float] = {}  # nonce -> expiry: one Promotion per Confirm
        # (project, Freight, Stage) told in this process
        self._announced: set[tuple[str, str, str]] = set()
        token = settings.bot_token

        async def authorize(
            enterprise_id: str | None, team_id: str | None, user_id: str | None
        ) -> AuthorizeResult:
            return AuthorizeResult(
                enterprise_id=enterprise_id, team_id=team_id, user_id=user_id, bot_token=token
            )

        self.bolt = AsyncApp(
            signing_secret=settings.signing_secret,
            # No token here: authorize() hands bolt the token, so no request waits on (or fails
            # with) an auth.test round trip to Slack; start() checks the token once.
            client=AsyncWebClient(base_url=settings.api_url),
            authorize=authorize,
            # Our listeners only ack and hand off, so running them before answering costs
            # nothing and spares bolt's 10 ms ack polling and its untracked tasks.
            process_before_response=True,
            request_verification_enabled=True,
            logger=bolt_log,
        )
        self._listen()

    def _listen(self) -> None:
        Handler = Callable[[AsyncAck, dict[str, Any]], Coroutine[Any, Any, None]]

        def plain(handler: Handler) -> Handler:
            # Bolt passes listener arguments by parameter name and counts a bound method's
            # `self` among them, so it gets a plain function.
            async def listener(ack: AsyncAck, body: dict[str, Any]) -> None:
                await handler(ack, body)

            return listener

        self.bolt.command(SLASH)(plain(self._on_command))
        self.bolt.command(APPROVE_SLASH)(plain(self._on_approve_command))
        self.bolt.command(FREEZE_SLASH)(plain(self._on_freeze_command))
        self.bolt.command(UNFREEZE_SLASH)(plain(self._on_unfreeze_command))
        self.bolt.action(m.ABORT)(plain(self._on_abort))
        self.bolt.action(m.REVERIFY)(plain(self._on_reverify))
        next_stage = re.compile(re.escape(m.PROMOTE_NEXT) + r"\.\d+$")
        self.bolt.action(next_stage)(plain(self._on_promote_next))
        self.bolt.action(m.PROMOTE)(plain(self._on_promote_next))
        self.bolt.action(m.CONFIRM)(plain(self._on_confirm))
        self.bolt.action(m.CANCEL)(plain(self._on_cancel))

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.api = SlackApi.create(
            self.settings.bot_token, self.settings.api_url, telemetry=self.telemetry
        )
        self.groups = UserGroups(self.api, ttl=self.settings.usergroup_ttl, clock=self.clock)
        self.live.start(self.api)
        self._spawn(self._check_token())

    async def close(self) -> None:
        await self.live.close()
        await stop_tasks(self._jobs, "Slack jobs")
        if self.api is not None:
            await self.api.close()

    async def lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        await self.start()
        yield
        await self.close()

    async def idle(self) -> None:
        """Wait until background work (commands, clicks, live messages) is done."""
        while self._jobs or self.live.busy:
            await asyncio.gather(*self._jobs, return_exceptions=True)
            await self.live.idle()

    def on_promotion(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """For ``controller.listeners``: a Promotion changed."""
        self.live.on_promotion(obj, old)

    def on_freight(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """For ``controller.freight_listeners``: a Freight appeared or changed (verified
        upstream, say), so it may be news to a Stage's channel. Only the leader tells."""
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        if not self._reaches(namespace) or self.api is None:
            return
        if not self.service.is_leader():
            return
        self._spawn(self._announce(namespace, name_of(obj)))

    # ---- which project -----------------------------------------------------------------------

    def _default_project(self) -> str | None:
        """Where channels no project names act: LONGSHOREMAN_SLACK_PROJECT when set, or (no
        project labelled at all) the one namespace this bot served before projects."""
        if self.settings.project_set or not projects_of(self.service):
            return self.settings.namespace
        return None

    def _route(self, channel: str | None) -> Route:
        """The project(s) a command typed in ``channel`` acts on (promoter.chat.projects)."""
        defaults = Defaults(project=self._default_project())
        return route(SlackChannel(channel or ""), projects_of(self.service), defaults)

    def _project_channel(self, namespace: str) -> str | None:
        """The project's first Slack channel: where its announcements and live messages go
        when a Stage names no channel of its own."""
        for project in projects_of(self.service):
            if project.name == namespace and project.slack_channels:
                return project.slack_channels[0]
        return None

    def _reaches(self, namespace: str) -> bool:
        """Whether ``namespace`` is a project this bot acts on (a button, a Freight)."""
        return namespace == self._default_project() or any(
            p.name == namespace for p in projects_of(self.service)
        )

    async def _announce(self, ns: str, freight_name: str) -> None:
        snapshot = await self.service.snapshot(ns)
        freight = next((f for f in snapshot.freight if name_of(f) == freight_name), None)
        if freight is None or self.api is None:
            return
        now = self.clock.now()
        told = []
        fallback = self._project_channel(ns)
        for stage in stages_to_announce(
            freight, snapshot.stages, snapshot.freight, now, project_channel=fallback is not None
        ):
            key = (ns, freight_name, name_of(stage))
            channel = m.channel_of(stage) or fallback
            if key in self._announced or channel is None:
                continue
            # Claimed before the post: two events of one Freight in a row post once.
            self._announced.add(key)
            current = current_freight(stage, freight, snapshot.freight)
            diff = await self._freight_diff(name_of(stage), current, freight)
            try:
                await self.api.post(channel, m.freight_available(ns, name_of(stage), freight, diff))
            except SlackError as e:
                self._announced.discard(key)
                log.warning("could not tell %s about Freight %s: %s", channel, freight_name, e)
                continue
            told.append(name_of(stage))
        if told and isinstance(self.service, FreightAnnotator):
            await self.service.annotate_freight(ns, freight_name, ann.announced(freight, told))

    async def _freight_diff(
        self, stage: str, current: Mapping[str, Any] | None, freight: Mapping[str, Any]
    ) -> FreightDiff:
        """What ``freight`` changes in ``stage``, with the commits GitHub knows (no request
        when nothing changed; the App's cache answers the same range once)."""
        keys = ranges_to_fetch(current, freight)
        facts = await self.diffs.facts(keys) if self.diffs is not None and keys else {}
        return freight_diff(stage, current, freight, facts)

    async def _diff(self, stage_name: str, freight_name: str) -> FreightDiff | None:
        """The diff a confirmation shows, from the cluster's view now; None when the Stage or
        Freight went away meanwhile."""
        snapshot = await self.service.snapshot(self.settings.namespace)
        stage = snapshot.stage(stage_name)
        freight = next((f for f in snapshot.freight if name_of(f) == freight_name), None)
        if stage is None or freight is None:
            return None
        current = current_freight(stage, freight, snapshot.freight)
        return await self._freight_diff(stage_name, current, freight)

    async def handle(self, request: web.Request) -> web.Response:
        """``POST /slack/events``."""
        count = self.telemetry.webhook_delivery
        if (request.content_length or 0) > MAX_BODY:
            count("slack", "unverified", "too_large")
            return web.Response(status=413, text="payload too large\n")
        # StreamReader.read(n) returns what has arrived so far (often one TCP chunk), not
        # n bytes: read to the end, stopping once past the limit.
        body = await _read_body(request, MAX_BODY)
        if len(body) > MAX_BODY:
            count("slack", "unverified", "too_large")
            return web.Response(status=413, text="payload too large\n")
        try:
            bolt_request = AsyncBoltRequest(
                body=body.decode("utf-8", errors="replace"),
                query=request.query_string,
                headers=dict(request.headers),
            )
        except (AttributeError, TypeError, ValueError, KeyError, IndexError):
            # Bolt parses the body before verifying the signature, and trips on payloads that
            # are not JSON objects (payload=null): that is a bad request, not our crash.
            count("slack", "unverified", "bad_request")
            return web.Response(status=400, text="malformed request\n")
        screened = self._screen(request, bolt_request)
        if screened is not None:
            return screened
        response = await self.bolt.async_dispatch(bolt_request)
        if response.status >= 500:
            # Bolt answers 500 when its own matching trips on a payload of an unexpected shape
            # (actions: null); our listeners only ack. Slack would retry a 5xx for nothing.
            log.warning("Slack request of an unexpected shape refused (bolt failed on it)")
            count("slack", _kind(bolt_request.body), "bad_request")
            return web.Response(status=400, text="malformed request\n")
        if response.status == 401:
            count("slack", "unverified", "invalid_signature")
        else:
            outcome = {200: "accepted", 404: "unhandled"}.get(response.status, "error")
            count("slack", _kind(bolt_request.body), outcome)
        return await to_aiohttp_response(response)

    def _screen(self, request: web.Request, bolt_request: AsyncBoltRequest) -> web.Response | None:
        """A verified request that is a replay, or from another workspace, answered here."""
        signature = request.headers.get("X-Slack-Signature")
        timestamp = request.headers.get("X-Slack-Request-Timestamp")
        body = bolt_request.raw_body
        if signature is None or not self._verifier.is_valid(body, timestamp, signature):
            return None  # bolt answers 401
        kind = _kind(bolt_request.body)
        if signature in self._signatures:
            log.warning("Slack request replayed within its signature window; ignored")
            self.telemetry.webhook_delivery("slack", kind, "duplicate")
            return web.Response(status=200, text="")
        self._signatures[signature] = True
        team = _team_of(bolt_request.body)
        if self.settings.team_id is not None and team != self.settings.team_id:
            log.warning("Slack request from workspace %r refused (not the configured one)", team)
            self.telemetry.webhook_delivery("slack", kind, "refused")
            return web.Response(status=403, text="this app serves another Slack workspace\n")
        return None

    async def _check_token(self) -> None:
        assert self.api is not None
        try:
            who = await self.api.auth_test()
        except SlackError as e:
            log.error("Slack: auth.test failed; is LONGSHOREMAN_SLACK_BOT_TOKEN right? (%s)", e)
            return
        log.info(
            "Slack: connected as %s in %s", who.get("user"), who.get("team"), extra={"slack": who}
        )

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    # ---- listeners: ack, then hand off --------------------------------------------------------

    async def _on_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            command = parse_slash(str(body.get("text") or ""))
        except CommandError as e:
            await self._ack_with(ack, m.usage(reason_of(e)))
            return
        await ack()
        self._spawn(self._run_typed(command, Requester.of_command(body)))

    async def _on_approve_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """``/approve FREIGHT for STAGE``: ``/promote approve ...`` under its own name."""
        try:
            command = parse_command("approve", str(body.get("text") or ""))
        except CommandError as e:
            await self._ack_with(ack, m.usage(reason_of(e)))
            return
        await ack()
        self._spawn(self._run_typed(command, Requester.of_command(body)))

    async def _on_freeze_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """``/freeze STAGE|PROJECT ...``: ``/promote freeze ...`` under its own name."""
        await self._on_named("freeze", ack, body)

    async def _on_unfreeze_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await self._on_named("unfreeze", ack, body)

    async def _on_named(self, name: str, ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            command = parse_command(name, str(body.get("text") or ""))
        except CommandError as e:
            await self._ack_with(ack, m.usage(reason_of(e)))
            return
        await ack()
        self._spawn(self._run_typed(command, Requester.of_command(body)))

    async def _on_abort(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        value = self._value(body)
        if value is not None:
            command = Command("abort", target=str(value.get("promotion") or ""))
            self._spawn(self._run(command, Requester.of_action(body), str(value["ns"])))

    async def _on_reverify(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        value = self._value(body)
        if value is not None:
            command = Command("verify", stage=str(value.get("stage") or ""))
            promotion = str(value.get("promotion") or "")
            self._spawn(
                self._run(command, Requester.of_action(body), str(value["ns"]), follow=promotion)
            )

    async def _on_promote_next(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        value = self._value(body)
        if value is not None:
            command = Command(
                "promote",
                freight=str(value.get("freight") or ""),
                stage=str(value.get("stage") or ""),
                after=str(value.get("after") or "") or None,
            )
            self._spawn(self._run(command, Requester.of_action(body), str(value["ns"])))

    async def _on_confirm(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        self._spawn(self._confirm(_action_value(body), Requester.of_action(body)))

    async def _on_cancel(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        # The Cancel button carries the same value as Confirm: its project.
        try:
            ns = PendingPromotion.from_value(_action_value(body)).namespace
        except ValueError:
            ns = self._default_project() or ""
        self._spawn(self._run(Command("cancel"), Requester.of_action(body), ns))

    @staticmethod
    async def _ack_with(ack: AsyncAck, message: Message) -> None:
        await ack(text=message.text, blocks=list(message.blocks), response_type="ephemeral")

    def _value(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """A button's value (JSON we wrote), only for a project this bot acts on."""
        try:
            value = json.loads(_action_value(body))
        except ValueError:
            return None
        if not isinstance(value, Mapping) or not self._reaches(str(value.get("ns") or "")):
            return None
        return value

    # ---- the work -----------------------------------------------------------------------------

    async def _run_typed(self, command: Command, who: Requester) -> None:
        """A typed command: the channel it was typed in says which project it acts on."""
        where = self._route(who.channel)
        stage = named_stage(command)
        if stage and ("/" in stage or where.project is None):
            # A qualified name, or a Stage looked for across projects (promoter.chat.targets).
            try:
                target = await find_stage(self.service, stage, where)
            except (PermanentError, TemporaryError) as e:
                await self._tell(who, m.say(f":warning: {e}. Nothing was changed."))
                return
            if isinstance(target, NotResolved):
                await self._tell(who, m.refused(target.reason))
                return
            command = naming(command, target.stage)
            await self._run(command, who, target.project)
        elif where.project is not None:
            await self._run(command, who, where.project)
        elif where.projects:
            await self._tell(who, m.several_projects(where.projects))
        else:
            names = [p.name for p in projects_of(self.service)]
            await self._tell(who, m.unmapped_channel(who.channel, names))

    async def _decide(self, command: Command, who: Requester, ns: str) -> Plan:
        """Gather the facts (the project, the user's groups where a promoter list names
        groups, the time) and ask the planner every front end shares."""
        # The project's own promoters (its namespace's slack-promoters), else the server's.
        project = next((p for p in projects_of(self.service) if p.name == ns), None)
        defaults = (
            project.slack_promoters if project and project.slack_promoters else None
        ) or self.settings.default_promoters
        snapshot = await self.service.snapshot(ns)
        groups: list[str] = []
        wanted = groups_to_resolve(stages_to_authorize(command, snapshot), defaults)
        if wanted:
            assert self.groups is not None
            groups = await self.groups.of(who.user, wanted)
        now = self.clock.now()
        facts = Facts(
            snapshot,
            authorizer(who.user, groups, defaults),
            now=now,
            confirm=needs_confirmation,
            may_approve=authorizer(who.user, groups, defaults, approve=True),
            authored=authored_on_slack,
            actor=who.actor,
        )
        return plan(command, facts)

    async def _run(
        self, command: Command, who: Requester, ns: str, *, follow: str | None = None
    ) -> None:
        """Decide and carry out one command in project ``ns``; every outcome is told to
        ``who``."""
        try:
            decision = await self._decide(command, who, ns)
            await self._carry_out(decision, who, ns, confirmed=command.confirmed)
            if follow and isinstance(decision, DoReverify):
                snapshot = await self.service.snapshot(ns)
                watched = next((p for p in snapshot.promotions if name_of(p) == follow), None)
                if watched is not None:
                    self.live.watch_again(dict(watched))
        except SlackError as e:
            await self._tell(
                who,
                m.say(
                    f":warning: Could not check your user groups with Slack ({b.escape(str(e))}). "
                    "Nothing was changed; try again in a moment."
                ),
                replace=command.confirmed,
            )
        except PermanentError as e:  # not found, refused, invalid: the user must change it
            await self._tell(who, m.refused(b.escape(str(e))), replace=command.confirmed)
        except TemporaryError as e:
            await self._tell(
                who,
                m.say(f":warning: {b.escape(str(e))}. Nothing was changed."),
                replace=command.confirmed,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("slack command failed", extra={"command": command.raw, "user": who.user})
            await self._tell(
                who,
                m.say(f":warning: That failed ({type(e).__name__}); see the server log."),
                replace=command.confirmed,
            )

    async def _carry_out(
        self, decision: Plan, who: Requester, ns: str, *, confirmed: bool = False
    ) -> None:
        if isinstance(decision, Refusal):
            await self._tell(who, m.refused(decision.reason), replace=confirmed)
        elif isinstance(decision, ShowHelp):
            await self._tell(
                who,
                m.usage(
                    allowed=decision.allowed,
                    refused=decision.refused,
                    approvable=decision.approvable,
                ),
            )
        elif isinstance(decision, DoApprove):
            await self.service.approve(ns, decision.stage, decision.freight, actor=who.actor)
            log.info(
                "freight approved from Slack",
                extra={"freight": decision.freight, "stage": decision.stage, "actor": who.actor},
            )
            await self._tell(who, m.approved(decision.label.short, decision.stage))
        elif isinstance(decision, AlreadyApproved):
            await self._tell(
                who,
                m.already_approved(
                    decision.label.short, decision.stage, decision.approval.approved_by
                ),
            )
        elif isinstance(decision, ShowStatus):
            await self._tell(who, m.status_table(decision.rows, ns))
        elif isinstance(decision, ShowDiff):
            diff = await self._freight_diff(decision.stage, decision.current, decision.freight)
            await self._tell(who, m.freight_diff_message(diff, decision.label))
        elif isinstance(decision, DoFreeze):
            await set_freeze(self.service, ns, decision.stage, decision.freeze.to_annotation())
            log.info("frozen from Slack", extra={"stage": decision.stage, "actor": who.actor})
            said = decision.said(ns, self.clock.now())
            await self._tell(who, m.say(f":snowflake: {b.escape(said)}"))
        elif isinstance(decision, DoUnfreeze):
            await set_freeze(self.service, ns, decision.stage, None)
            log.info("unfrozen from Slack", extra={"stage": decision.stage, "actor": who.actor})
            await self._tell(who, m.say(f":sunny: {b.escape(decision.said(ns))}"))
        elif isinstance(decision, Cancelled):
            await self._tell(who, m.say("Cancelled. Nothing was changed."), replace=True)
        elif isinstance(decision, AskConfirm):
            pending = PendingPromotion.new(
                ns,
                decision.stage,
                decision.freight,
                who.user,
                self.clock.now().timestamp(),
                self.settings.confirm_ttl,
                label=decision.label.short,
            )
            shown = await self._diff(decision.stage, decision.freight)
            prompt = m.confirm_prompt(
                pending, decision.label.short, self.settings.confirm_ttl, shown
            )
            await self._tell(who, prompt)
        elif isinstance(decision, DoPromote):
            ref = await promote_decided(
                self.service,
                ns,
                decision.stage,
                decision.freight,
                decision.create,
                actor=who.actor,
            )
            log.info(
                "promotion created from Slack",
                extra={"promotion": ref.name, "stage": ref.stage, "actor": who.actor},
            )
            if confirmed:
                text = f":rocket: Confirmed: Promotion `{ref.name}` to *{decision.stage}* created."
            else:
                text = (
                    f":rocket: Promotion `{ref.name}` of *{b.escape(decision.label.short)}* to "
                    f"*{decision.stage}* created."
                )
            await self._tell(who, m.say(text), replace=confirmed)
        elif isinstance(decision, DoAbort):
            for promotion in decision.promotions:
                await self.service.abort(ns, promotion, actor=who.actor)
            names = ", ".join(f"`{p}`" for p in decision.promotions)
            await self._tell(who, m.say(f":octagonal_sign: Abort of {names} requested."))
        elif isinstance(decision, DoReverify):
            await self.service.reverify(ns, decision.stage, actor=who.actor)
            await self._tell(who, m.say(f":mag: Re-verification of *{decision.stage}* requested."))

    async def _confirm(self, raw: str, who: Requester) -> None:
        """A Confirm press: the button's own checks, then the planner decides again (the
        promoters, the Stage and the Freight's availability may have changed since)."""
        try:
            pending = PendingPromotion.from_value(raw)
        except ValueError:
            await self._tell(who, m.refused("that button is not one of mine"))
            return
        now = self.clock.now().timestamp()
        if not self._reaches(pending.namespace):
            await self._tell(who, m.refused("that confirmation is for another project"))
            return
        if pending.user != who.user:
            only = f":no_entry: only <@{pending.user}> can confirm this. Nothing was changed."
            await self._tell(who, m.say(only))
            return
        if pending.expired(now):
            await self._tell(
                who,
                m.say(
                    ":hourglass: This confirmation expired. Nothing was changed; run "
                    f"`{pending.retry_command()}` again."
                ),
                replace=True,
            )
            return
        self._confirmed = {n: t for n, t in self._confirmed.items() if t > now}
        if pending.nonce in self._confirmed:
            await self._tell(who, m.say("Already confirmed."), replace=True)
            return
        self._confirmed[pending.nonce] = pending.expires_at
        command = Command(
            "promote",
            freight=pending.freight,
            stage=pending.stage,
            confirmed=True,
            raw=pending.retry_command(),
        )
        try:
            decision = await self._decide(command, who, pending.namespace)
            if not isinstance(decision, DoPromote):
                # Refused now: the button may be pressed again once that changes.
                self._confirmed.pop(pending.nonce, None)
            await self._carry_out(decision, who, pending.namespace, confirmed=True)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._confirmed.pop(pending.nonce, None)
            log.exception("confirmed promotion failed", extra={"user": who.user})
            reason = (
                str(e)
                if isinstance(e, PermanentError | TemporaryError | SlackError)
                else type(e).__name__
            )
            await self._tell(
                who, m.say(f":warning: Promotion failed: {b.escape(reason)}"), replace=True
            )

    async def _tell(self, who: Requester, message: Message, *, replace: bool = False) -> None:
        """An ephemeral answer: through response_url, else chat.postEphemeral."""
        assert self.api is not None
        if who.response_url:
            try:
                await self.api.respond(who.response_url, message, replace_original=replace)
                return
            except SlackError as e:
                log.warning("response_url failed (%s); trying chat.postEphemeral", e)
        if who.channel and who.user:
            try:
                await self.api.post_ephemeral(who.channel, who.user, message)
                return
            except SlackError as e:
                log.warning("chat.postEphemeral failed: %s", e, extra={"user": who.user})
        log.warning("could not tell a Slack user: %s", message.text, extra={"user": who.user})


def setup_slack(
    app: web.Application,
    settings: SlackSettings,
    service: PromotionService,
    *,
    clock: Clock = SYSTEM,
    telemetry: Telemetry = NO_TELEMETRY,
    diffs: RangeSource | None = None,
) -> SlackIntegration:
    """Mount Slack on ``app`` (``POST /slack/events``); start and stop it with the app.

    The caller appends ``integration.on_promotion`` to the controller's listeners.
    """
    integration = SlackIntegration(settings, service, clock=clock, telemetry=telemetry, diffs=diffs)
    app.router.add_post(EVENTS_PATH, integration.handle)
    app.cleanup_ctx.append(integration.lifecycle)
    return integration


async def _read_body(request: web.Request, limit: int) -> bytes:
    """The whole request body, or its first ``limit + 1`` bytes when it is longer."""
    body = bytearray()
    while len(body) <= limit:
        chunk = await request.content.read(limit + 1 - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)


__all__ = ["EVENTS_PATH", "SlackIntegration", "SlackSettings", "setup_slack"]
