"""Bitbucket, Gitea and Azure webhook payloads and signatures (app/receivers/forges.py), with
the payloads of Kargo's receiver tests (pkg/webhook/external/{bitbucket,gitea,azure}_test.go)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from app.receivers.forges import azure, bitbucket, gitea, hub_signature_matches
from app.receivers.senders import BadDelivery


def body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def sign(data: bytes, secret: str, algorithm: str = "sha256") -> str:
    digest = hmac.new(secret.encode(), data, getattr(hashlib, algorithm)).hexdigest()
    return f"{algorithm}={digest}"


def test_hub_signatures() -> None:
    data = b'{"a": 1}'
    assert hub_signature_matches(sign(data, "s3cret"), data, "s3cret")
    assert hub_signature_matches(sign(data, "s3cret", "sha1"), data, "s3cret")
    assert hub_signature_matches(sign(data, "s3cret").removeprefix("sha256="), data, "s3cret")
    assert not hub_signature_matches(sign(data, "other"), data, "s3cret")
    assert not hub_signature_matches("md5=abc", data, "s3cret")
    assert not hub_signature_matches(None, data, "s3cret")
    assert not hub_signature_matches("", data, "s3cret")


BITBUCKET_PUSH = {
    "push": {
        "changes": [
            {"new": {"type": "branch", "name": "main"}},
            {"new": {"type": "tag", "name": "v1.0.0"}},
            {"new": None},
        ]
    },
    "repository": {"links": {"html": {"href": "https://bitbucket.org/example/repo"}}},
}


def test_a_bitbucket_cloud_push() -> None:
    delivery = bitbucket(body(BITBUCKET_PUSH), "repo:push")
    assert delivery.repo_urls == ("https://bitbucket.org/example/repo",)
    assert delivery.qualifiers == ("refs/heads/main", "refs/tags/v1.0.0")


def test_a_bitbucket_server_refs_changed_names_its_clone_urls() -> None:
    payload = {
        "changes": [{"ref": {"id": "refs/heads/main"}}],
        "repository": {
            "links": {
                "clone": [
                    {"href": "ssh://git@bitbucket.example.com:7999/proj/repo.git"},
                    {"href": "https://bitbucket.example.com/scm/proj/repo.git"},
                ]
            }
        },
    }
    delivery = bitbucket(body(payload), "repo:refs_changed")
    assert delivery.repo_urls == (
        "ssh://git@bitbucket.example.com:7999/proj/repo",
        "https://bitbucket.example.com/scm/proj/repo",
    )
    assert delivery.qualifiers == ("refs/heads/main",)


@pytest.mark.parametrize("event", ["pullrequest:fulfilled", "pr:merged", "pr:declined"])
def test_bitbucket_pull_request_events_change_nothing(event: str) -> None:
    assert bitbucket(b"{}", event).ignored


def test_bitbucket_refuses_other_events_and_bad_bodies() -> None:
    with pytest.raises(BadDelivery, match="event type issue:created is not supported") as caught:
        bitbucket(b"{}", "issue:created")
    assert caught.value.status == 400
    with pytest.raises(BadDelivery, match="not JSON"):
        bitbucket(b"not json", "repo:push")


GITEA_PUSH = {
    "ref": "refs/heads/main",
    "repository": {"clone_url": "https://gitea.example.com/example/repo.git"},
    "commits": [{"added": ["apps/a.yaml"], "modified": ["README.md"], "removed": []}],
    "total_commits": 1,
}


def test_a_gitea_push_with_its_paths() -> None:
    delivery = gitea(body(GITEA_PUSH), "push")
    assert delivery.repo_urls == ("https://gitea.example.com/example/repo",)
    assert delivery.qualifiers == ("refs/heads/main",)
    assert delivery.changed_files == ("README.md", "apps/a.yaml")


def test_truncated_gitea_commits_skip_path_filtering() -> None:
    delivery = gitea(body({**GITEA_PUSH, "total_commits": 30}), "push")
    assert delivery.changed_files == ()


def test_gitea_other_events() -> None:
    assert gitea(b"{}", "pull_request").ignored
    with pytest.raises(BadDelivery) as caught:
        gitea(b"{}", "issues")
    assert caught.value.status == 501


ACR_PUSH = {
    "action": "push",
    "target": {
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "repository": "example/app",
        "tag": "v1.2.3",
    },
    "request": {"host": "example.azurecr.io"},
}


def test_an_acr_image_push() -> None:
    delivery = azure(body(ACR_PUSH), "AzureContainerRegistry/1.0")
    assert delivery.repo_urls == ("example.azurecr.io/example/app",)
    assert delivery.qualifiers == ("v1.2.3",)


def test_an_acr_chart_push() -> None:
    target = {**ACR_PUSH["target"], "mediaType": "application/vnd.cncf.helm.config.v1+json"}
    delivery = azure(body({**ACR_PUSH, "target": target}), "AzureContainerRegistry/1.0")
    # A chart's subscription URL is normalised without oci:// too, so one spelling matches.
    assert delivery.repo_urls == ("example.azurecr.io/example/app",)


def test_an_acr_ping_is_acknowledged() -> None:
    delivery = azure(body({"action": "ping"}), "AzureContainerRegistry/1.0")
    assert delivery.ignored == "ping event received, webhook is configured correctly"


def test_an_azure_devops_push() -> None:
    payload = {
        "eventType": "git.push",
        "resource": {
            "refUpdates": [{"name": "refs/heads/main"}],
            "repository": {"remoteUrl": "https://dev.azure.com/org/project/_git/repo"},
        },
    }
    delivery = azure(body(payload), "VSServices/16.255")
    assert delivery.repo_urls == ("https://dev.azure.com/org/project/_git/repo",)
    assert delivery.qualifiers == ("refs/heads/main",)


def test_azure_refusals() -> None:
    with pytest.raises(BadDelivery, match="supported service"):
        azure(b"{}", "curl/8.0")
    with pytest.raises(BadDelivery, match="event type delete is not supported"):
        azure(body({"action": "delete"}), "AzureContainerRegistry/1.0")
    with pytest.raises(BadDelivery, match=r"event type git\.tag is not supported"):
        azure(body({"eventType": "git.tag"}), "VSServices/16.255")
    assert azure(body({"eventType": "git.pullrequest.merged"}), "VSServices/1").ignored
