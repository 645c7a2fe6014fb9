"""GitHub App settings: validated from the environment, naming the variable, hiding secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from handlers.settings import DEFAULT_API_URL, GitHubSettings, GitHubSettingsError
from tests.support.github import app_private_key


def env(**extra: str) -> dict[str, str]:
    base = {
        "LONGSHOREMAN_GITHUB_APP_ID": "4242",
        "LONGSHOREMAN_GITHUB_PRIVATE_KEY": app_private_key(),
        "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": "hunter2-secret",
    }
    base.update(extra)
    return {k: v for k, v in base.items() if v != ""}


def test_disabled_without_any_github_variable() -> None:
    settings = GitHubSettings.from_env({})
    assert not settings.enabled
    assert settings.api_url == DEFAULT_API_URL
    assert settings.project == "default"


def test_enabled_with_inline_key_and_secret_kept_out_of_repr() -> None:
    settings = GitHubSettings.from_env(env())
    assert settings.enabled and settings.app_id == "4242"
    assert "hunter2" not in repr(settings)
    assert "PRIVATE KEY" not in repr(settings)


def test_key_with_escaped_newlines_and_key_file(tmp_path: Path) -> None:
    flattened = app_private_key().replace("\n", "\\n")
    assert GitHubSettings.from_env(env(LONGSHOREMAN_GITHUB_PRIVATE_KEY=flattened)).private_key
    key_file = tmp_path / "app.pem"
    key_file.write_text(app_private_key())
    settings = GitHubSettings.from_env(
        env(LONGSHOREMAN_GITHUB_PRIVATE_KEY="", LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE=str(key_file))
    )
    assert settings.private_key == app_private_key()


def test_enterprise_api_url_and_project_mapping() -> None:
    settings = GitHubSettings.from_env(
        env(
            LONGSHOREMAN_GITHUB_API_URL="https://ghe.example.com/api/v3/",
            LONGSHOREMAN_GITHUB_PROJECT="kargo-demo",
            LONGSHOREMAN_GITHUB_REPO_PROJECTS="Example/App=team-a, example/other=team-b",
        )
    )
    assert settings.api_url == "https://ghe.example.com/api/v3"
    assert settings.project_for("example/app") == "team-a"
    assert settings.project_for("EXAMPLE/OTHER") == "team-b"
    assert settings.project_for("example/unlisted") == "kargo-demo"


def test_which_installations_get_deployments() -> None:
    everyone = GitHubSettings.from_env(env())
    assert everyone.deployments_in("any/repo")
    assert not GitHubSettings.from_env(env(LONGSHOREMAN_GITHUB_DEPLOYMENTS="off")).deployments_in(
        "any/repo"
    )
    some = GitHubSettings.from_env(env(LONGSHOREMAN_GITHUB_DEPLOYMENTS="My-Org, me"))
    assert some.deployments_in("my-org/app") and some.deployments_in("ME/dotfiles")
    assert not some.deployments_in("other/app")


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": ""}, "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET"),
        ({"LONGSHOREMAN_GITHUB_APP_ID": "abc"}, "LONGSHOREMAN_GITHUB_APP_ID"),
        ({"LONGSHOREMAN_GITHUB_APP_ID": ""}, "LONGSHOREMAN_GITHUB_APP_ID"),
        ({"LONGSHOREMAN_GITHUB_PRIVATE_KEY": ""}, "LONGSHOREMAN_GITHUB_PRIVATE_KEY"),
        (
            {"LONGSHOREMAN_GITHUB_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\nnope"},
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY",
        ),
        (
            {"LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE": "/nonexistent/app.pem"},
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY",
        ),
        ({"LONGSHOREMAN_GITHUB_API_URL": "ftp://example.com"}, "LONGSHOREMAN_GITHUB_API_URL"),
        (
            {"LONGSHOREMAN_GITHUB_API_URL": "https://user:pw@example.com"},
            "LONGSHOREMAN_GITHUB_API_URL",
        ),
        ({"LONGSHOREMAN_GITHUB_REPO_PROJECTS": "just-a-name"}, "LONGSHOREMAN_GITHUB_REPO_PROJECTS"),
        ({"LONGSHOREMAN_GITHUB_PROJECT": "Not_A_Namespace"}, "LONGSHOREMAN_GITHUB_PROJECT"),
        ({"LONGSHOREMAN_GITHUB_WEBHOOK_WORKERS": "0"}, "LONGSHOREMAN_GITHUB_WEBHOOK_WORKERS"),
        (
            {"LONGSHOREMAN_GITHUB_PROMOTION_URL": "https://x/{stage}"},
            "LONGSHOREMAN_GITHUB_PROMOTION_URL",
        ),
        (
            {"LONGSHOREMAN_GITHUB_DEPLOYMENTS": "my-org, not/an-account"},
            "LONGSHOREMAN_GITHUB_DEPLOYMENTS",
        ),
    ],
)
def test_problems_name_the_variable_and_hide_secrets(
    overrides: dict[str, str], variable: str
) -> None:
    with pytest.raises(GitHubSettingsError) as err:
        GitHubSettings.from_env(env(**overrides))
    assert variable in str(err.value)
    assert "hunter2" not in str(err.value)
    assert "PRIVATE KEY-----" not in str(err.value)
