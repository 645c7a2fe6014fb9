"""The Slack integration's settings: read from the environment once, validated, failing fast.

Every problem names the variable. The bot token and signing secret never appear in ``repr`` (so
not in logs or tracebacks either).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from promoter.environment import with_new_names

# Slack IDs: users U…/W… (Enterprise Grid), user groups S….
_SLACK_ID = re.compile(r"^[UWS][A-Z0-9]{2,}$")
_TEAM = re.compile(r"^[TE][A-Z0-9]{2,}$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class SlackSettingsError(ValueError):
    """A Slack setting is missing or malformed; the message names the variable."""


# Read under these names before they took the LONGSHOREMAN_ prefix: still read, and logged at
# start as deprecated (promoter.environment).
RENAMED = (
    "SLACK_API_URL",
    "SLACK_BOT_TOKEN",
    "SLACK_CONFIRM_TTL",
    "SLACK_DEFAULT_PROMOTERS",
    "SLACK_PROJECT",
    "SLACK_SIGNING_SECRET",
    "SLACK_UPDATE_INTERVAL",
)


def _float(env: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SlackSettingsError(f"{name}={raw!r} is not a number of seconds") from None
    if not value >= minimum:  # also refuses NaN
        raise SlackSettingsError(f"{name}={raw!r} must be at least {minimum:g}")
    return value


# No slots: from_env reads the defaults from the class (cls.api_url...).
@dataclass(frozen=True)
class SlackSettings:
    """Everything the Slack integration is configured with."""

    bot_token: str = field(repr=False)
    signing_secret: str = field(repr=False)
    api_url: str = "https://slack.com/api/"
    # Who may act when a Stage lists nobody in longshoreman.dev/slack-promoters (user and
    # user-group IDs); empty allows every member of the workspace.
    default_promoters: tuple[str, ...] = ()
    # The Kargo project (namespace) slash commands act on in channels no project names
    # (longshoreman.dev/slack-channels on its namespace); when projects are labelled, only if
    # set (project_set), so an unmapped channel says how to map it instead.
    namespace: str = "default"
    project_set: bool = False
    # How long a Confirm button stays valid.
    confirm_ttl: float = 300.0
    # At most one chat.update per message per this many seconds (Slack's chat.update is rate
    # limited per workspace; rapid status writes are coalesced into one update).
    update_interval: float = 1.0
    # After a Promotion succeeds, how often and how long to look for its verification result.
    verify_poll: float = 10.0
    verify_window: float = 1800.0
    # How long a user group's member list is trusted.
    usergroup_ttl: float = 60.0
    # First wait after Slack (or the cluster) failed a live-message update; doubles to 30 s.
    retry_delay: float = 1.0
    # Link template for a Promotion's page ({namespace}, {promotion}); the app layer sets it
    # from LONGSHOREMAN_PUBLIC_URL. None: messages carry no link.
    promotion_url: str | None = None
    # The workspace (team ID, T…) the app serves (LONGSHOREMAN_SLACK_TEAM_ID): requests from
    # any other are refused. One signing secret signs for every workspace an app is installed
    # in, so the signature alone does not say which one is asking. None: not checked.
    team_id: str | None = None

    def link_for(self, namespace: str, promotion: str) -> str | None:
        if not self.promotion_url:
            return None
        return self.promotion_url.format(namespace=namespace, promotion=promotion)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SlackSettings:
        env = with_new_names(os.environ if env is None else env, RENAMED)
        token = env.get("LONGSHOREMAN_SLACK_BOT_TOKEN", "").strip()
        if not token:
            raise SlackSettingsError(
                "LONGSHOREMAN_SLACK_BOT_TOKEN is not set (the bot token, xoxb-...)"
            )
        if not token.startswith("xoxb-"):
            # Do not echo the value: it is a secret even when it is the wrong kind.
            raise SlackSettingsError(
                "LONGSHOREMAN_SLACK_BOT_TOKEN must be a bot token (starting xoxb-)"
            )
        secret = env.get("LONGSHOREMAN_SLACK_SIGNING_SECRET", "").strip()
        if not secret:
            raise SlackSettingsError(
                "LONGSHOREMAN_SLACK_SIGNING_SECRET is not set (Basic Information > App Credentials)"
            )
        api_url = env.get("LONGSHOREMAN_SLACK_API_URL", "").strip() or cls.api_url
        parts = urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SlackSettingsError(
                f"LONGSHOREMAN_SLACK_API_URL={api_url!r} is not an http(s) URL"
            )
        if not api_url.endswith("/"):
            api_url += "/"  # slack_sdk joins method names onto it
        promoters = tuple(
            p.strip()
            for p in env.get("LONGSHOREMAN_SLACK_DEFAULT_PROMOTERS", "").split(",")
            if p.strip()
        )
        for p in promoters:
            if not _SLACK_ID.match(p):
                raise SlackSettingsError(
                    f"LONGSHOREMAN_SLACK_DEFAULT_PROMOTERS: {p!r} is not a Slack user (U…/W…) or "
                    "user-group (S…) ID"
                )
        namespace = env.get("LONGSHOREMAN_SLACK_PROJECT", "").strip() or cls.namespace
        if not _NAMESPACE.match(namespace):
            raise SlackSettingsError(
                f"LONGSHOREMAN_SLACK_PROJECT={namespace!r} is not a valid namespace name"
            )
        team_id = env.get("LONGSHOREMAN_SLACK_TEAM_ID", "").strip() or None
        if team_id is not None and not _TEAM.match(team_id):
            raise SlackSettingsError(
                f"LONGSHOREMAN_SLACK_TEAM_ID={team_id!r} is not a Slack team ID (T…)"
            )
        return cls(
            team_id=team_id,
            bot_token=token,
            signing_secret=secret,
            api_url=api_url,
            default_promoters=promoters,
            namespace=namespace,
            project_set=bool(env.get("LONGSHOREMAN_SLACK_PROJECT", "").strip()),
            confirm_ttl=_float(env, "LONGSHOREMAN_SLACK_CONFIRM_TTL", cls.confirm_ttl, 1.0),
            update_interval=_float(
                env, "LONGSHOREMAN_SLACK_UPDATE_INTERVAL", cls.update_interval, 0.0
            ),
        )

    @classmethod
    def optional_from_env(cls, env: Mapping[str, str] | None = None) -> SlackSettings | None:
        """None when Slack is not configured at all (neither token nor secret is set)."""
        env = with_new_names(os.environ if env is None else env, RENAMED)
        if not env.get("LONGSHOREMAN_SLACK_BOT_TOKEN") and not env.get(
            "LONGSHOREMAN_SLACK_SIGNING_SECRET"
        ):
            return None
        return cls.from_env(env)
