"""SlackSettings.from_env: validated once, every error names its variable, secrets stay hidden."""

from __future__ import annotations

import pytest

from slack.settings import SlackSettings, SlackSettingsError

GOOD = {
    "LONGSHOREMAN_SLACK_BOT_TOKEN": "xoxb-1-secret-token",
    "LONGSHOREMAN_SLACK_SIGNING_SECRET": "shh-signing-secret",
}


def test_defaults_and_parsing() -> None:
    s = SlackSettings.from_env(
        {
            **GOOD,
            "LONGSHOREMAN_SLACK_API_URL": "http://127.0.0.1:9999/api",
            "LONGSHOREMAN_SLACK_DEFAULT_PROMOTERS": "U123, S0GROUP ,W999",
            "LONGSHOREMAN_SLACK_PROJECT": "kargo-demo",
            "LONGSHOREMAN_SLACK_CONFIRM_TTL": "120",
            "LONGSHOREMAN_SLACK_TEAM_ID": "T0TEAM",
        }
    )
    assert s.team_id == "T0TEAM"
    assert s.api_url == "http://127.0.0.1:9999/api/"
    assert s.default_promoters == ("U123", "S0GROUP", "W999")
    assert (s.namespace, s.confirm_ttl) == ("kargo-demo", 120.0)
    d = SlackSettings.from_env(GOOD)
    assert (d.api_url, d.namespace, d.default_promoters, d.team_id) == (
        "https://slack.com/api/",
        "default",
        (),
        None,
    )


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"LONGSHOREMAN_SLACK_SIGNING_SECRET": "x"}, "LONGSHOREMAN_SLACK_BOT_TOKEN"),
        (
            {**GOOD, "LONGSHOREMAN_SLACK_BOT_TOKEN": "xoxp-user-token"},
            "LONGSHOREMAN_SLACK_BOT_TOKEN",
        ),
        ({"LONGSHOREMAN_SLACK_BOT_TOKEN": "xoxb-1"}, "LONGSHOREMAN_SLACK_SIGNING_SECRET"),
        ({**GOOD, "LONGSHOREMAN_SLACK_API_URL": "slack.com/api"}, "LONGSHOREMAN_SLACK_API_URL"),
        (
            {**GOOD, "LONGSHOREMAN_SLACK_DEFAULT_PROMOTERS": "alice"},
            "LONGSHOREMAN_SLACK_DEFAULT_PROMOTERS",
        ),
        ({**GOOD, "LONGSHOREMAN_SLACK_PROJECT": "Not_A_Namespace"}, "LONGSHOREMAN_SLACK_PROJECT"),
        ({**GOOD, "LONGSHOREMAN_SLACK_TEAM_ID": "acme"}, "LONGSHOREMAN_SLACK_TEAM_ID"),
        ({**GOOD, "LONGSHOREMAN_SLACK_CONFIRM_TTL": "soon"}, "LONGSHOREMAN_SLACK_CONFIRM_TTL"),
        ({**GOOD, "LONGSHOREMAN_SLACK_CONFIRM_TTL": "0"}, "LONGSHOREMAN_SLACK_CONFIRM_TTL"),
        (
            {**GOOD, "LONGSHOREMAN_SLACK_UPDATE_INTERVAL": "nan"},
            "LONGSHOREMAN_SLACK_UPDATE_INTERVAL",
        ),
    ],
)
def test_errors_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(SlackSettingsError) as err:
        SlackSettings.from_env(env)
    assert variable in str(err.value)
    assert "secret-token" not in str(err.value)


def test_secrets_never_in_repr() -> None:
    s = SlackSettings.from_env(GOOD)
    assert "secret" not in repr(s) and "secret" not in str(s)


def test_slack_is_optional() -> None:
    assert SlackSettings.optional_from_env({}) is None
    assert SlackSettings.optional_from_env(GOOD) is not None
    with pytest.raises(SlackSettingsError, match="LONGSHOREMAN_SLACK_SIGNING_SECRET"):
        SlackSettings.optional_from_env({"LONGSHOREMAN_SLACK_BOT_TOKEN": "xoxb-1"})
