"""SlackSettings.from_env: validated once, every error names its variable, secrets stay hidden."""

from __future__ import annotations

import pytest

from slack.settings import SlackSettings, SlackSettingsError

GOOD = {"SLACK_BOT_TOKEN": "xoxb-1-secret-token", "SLACK_SIGNING_SECRET": "shh-signing-secret"}


def test_defaults_and_parsing() -> None:
    s = SlackSettings.from_env(
        {
            **GOOD,
            "SLACK_API_URL": "http://127.0.0.1:9999/api",
            "SLACK_DEFAULT_PROMOTERS": "U123, S0GROUP ,W999",
            "SLACK_PROJECT": "kargo-demo",
            "SLACK_CONFIRM_TTL": "120",
        }
    )
    assert s.api_url == "http://127.0.0.1:9999/api/"
    assert s.default_promoters == ("U123", "S0GROUP", "W999")
    assert (s.namespace, s.confirm_ttl) == ("kargo-demo", 120.0)
    d = SlackSettings.from_env(GOOD)
    assert (d.api_url, d.namespace, d.default_promoters) == (
        "https://slack.com/api/",
        "default",
        (),
    )


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SLACK_SIGNING_SECRET": "x"}, "SLACK_BOT_TOKEN"),
        ({**GOOD, "SLACK_BOT_TOKEN": "xoxp-user-token"}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_SIGNING_SECRET"),
        ({**GOOD, "SLACK_API_URL": "slack.com/api"}, "SLACK_API_URL"),
        ({**GOOD, "SLACK_DEFAULT_PROMOTERS": "alice"}, "SLACK_DEFAULT_PROMOTERS"),
        ({**GOOD, "SLACK_PROJECT": "Not_A_Namespace"}, "SLACK_PROJECT"),
        ({**GOOD, "SLACK_CONFIRM_TTL": "soon"}, "SLACK_CONFIRM_TTL"),
        ({**GOOD, "SLACK_CONFIRM_TTL": "0"}, "SLACK_CONFIRM_TTL"),
        ({**GOOD, "SLACK_UPDATE_INTERVAL": "nan"}, "SLACK_UPDATE_INTERVAL"),
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
    with pytest.raises(SlackSettingsError, match="SLACK_SIGNING_SECRET"):
        SlackSettings.optional_from_env({"SLACK_BOT_TOKEN": "xoxb-1"})
