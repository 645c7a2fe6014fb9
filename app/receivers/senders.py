"""What each registry's webhook sends, and how it proves it is the sender (pure functions).

Each sender's payload is reduced to a :class:`Delivery`: the repository URLs it names (already
normalised as Kargo normalises subscriptions) and the qualifiers (tags, chart versions, git refs)
that decide which of the subscribed Warehouses care (:mod:`promoter.warehouses.refresh`). The
shapes follow Kargo's ``pkg/webhook/external`` receivers and the senders' own documentation:

* **Docker Hub** (docs.docker.com/docker-hub/repos/manage/webhooks): ``push_data.tag``,
  ``push_data.media_type``, ``repository.repo_name``. Docker Hub cannot sign or add a header,
  so the secret is in the URL (a token derived from it, as Kargo does).
* **Quay** (docs.quay.io, "Repository notifications"): ``docker_url``, ``updated_tags``.
  Unsigned too: token in the URL.
* **Harbor** (goharbor.io, "Webhook notifications"): ``type`` must be ``PUSH_ARTIFACT``;
  ``event_data.resources[].tag`` and ``resource_url``. Harbor sends the configured
  "Auth Header" verbatim in ``Authorization``.
* **GitLab** (docs.gitlab.com, "Webhook events"): ``Push Hook`` and ``Tag Push Hook`` for git
  subscriptions (Kargo's GitLab receiver handles the same); ``X-Gitlab-Token`` carries the
  secret token.
* **Artifactory** (jfrog.com, "Webhooks", docker domain): ``event_type`` ``pushed``, ``domain``
  ``docker``, ``data.image_type`` ``docker`` or ``oci`` (a chart), ``data.path``,
  ``data.repo_key``, ``data.tag``, ``jpd_origin``. Signed: ``X-Jfrog-Event-Auth`` is the hex
  HMAC-SHA256 of the body with the secret token.
* **Generic**: for anything else (a CI job, a script): ``{"repoURL": ..., "qualifiers": [...]}``
  with the token in the URL. Kargo's generic receiver evaluates configured expressions over the
  request; ours takes the two facts directly, which is all those expressions compute.

GitHub's ``package`` / ``registry_package`` events arrive on the GitHub App's own webhook and are
handled beside ``push`` (``handlers/packages.py``), verified with the App's webhook secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from promoter.warehouses.freight import (
    normalize_chart_url,
    normalize_git_url,
    normalize_image_url,
)
from promoter.warehouses.refresh import image_repo_urls

__all__ = [
    "BadDelivery",
    "Delivery",
    "artifactory",
    "dockerhub",
    "generic",
    "gitlab",
    "harbor",
    "hmac_sha256_matches",
    "quay",
    "same_secret",
]


class BadDelivery(ValueError):
    """A payload the receiver cannot use; ``status`` is the HTTP answer (400 or 501)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Delivery:
    """What an event says changed: where, and which tags/versions/refs."""

    repo_urls: tuple[str, ...]
    qualifiers: tuple[str, ...] = ()
    changed_files: tuple[str, ...] = ()
    # Nothing to refresh by design (an event type we accept but that changes nothing).
    ignored: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        urls = ", ".join(self.repo_urls) or "no repository"
        return f"{urls} ({', '.join(self.qualifiers)})" if self.qualifiers else urls


# ---------------------------------------------------------------- authentication


def same_secret(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented secret (a header, a URL token)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def hmac_sha256_matches(signature: str | None, body: bytes, secret: str) -> bool:
    """Artifactory's ``X-Jfrog-Event-Auth``: the hex HMAC-SHA256 of the body."""
    if not signature:
        return False
    computed = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(signature.strip().lower().encode(), computed.encode())


# ---------------------------------------------------------------- payloads


def _json(body: bytes) -> Mapping[str, Any]:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadDelivery("invalid request body: not JSON") from None
    if not isinstance(payload, Mapping):
        raise BadDelivery("invalid request body: not a JSON object")
    return payload


def _obj(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    return value if isinstance(value, Mapping) else {}


def _str(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    return value if isinstance(value, str) else ""


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, Sequence):
        return tuple(v for v in value if isinstance(v, str) and v)
    return ()


def dockerhub(body: bytes) -> Delivery:
    payload = _json(body)
    push, repository = _obj(payload, "push_data"), _obj(payload, "repository")
    repo = _str(repository, "repo_name")
    if not repo:
        raise BadDelivery("invalid request body: repository.repo_name is missing")
    tag = _str(push, "tag")
    return Delivery(tuple(image_repo_urls(repo, _str(push, "media_type"))), _strings(tag))


def quay(body: bytes) -> Delivery:
    payload = _json(body)
    docker_url = _str(payload, "docker_url")
    if not docker_url:
        raise BadDelivery("invalid request body: docker_url is missing")
    urls = dict.fromkeys([normalize_image_url(docker_url), normalize_chart_url(docker_url)])
    return Delivery(tuple(urls), _strings(payload.get("updated_tags")))


def harbor(body: bytes) -> Delivery:
    payload = _json(body)
    if _str(payload, "type") != "PUSH_ARTIFACT":
        raise BadDelivery(f"unsupported event type {_str(payload, 'type')!r} (want PUSH_ARTIFACT)")
    resources = [r for r in _obj(payload, "event_data").get("resources") or () if r]
    resources = [r for r in resources if isinstance(r, Mapping)]
    if not resources:
        return Delivery((), ignored="no resources in the event")
    url = _str(resources[0], "resource_url")
    urls = dict.fromkeys([normalize_image_url(url), normalize_chart_url(url)]) if url else {}
    return Delivery(tuple(urls), tuple(_str(r, "tag") for r in resources if _str(r, "tag")))


def gitlab(body: bytes, event: str | None) -> Delivery:
    """``Push Hook`` / ``Tag Push Hook``; other events are accepted and ignored (a merge request
    event is how Kargo notices a merged PR, which our open-pr steps learn from GitHub)."""
    if event not in ("Push Hook", "Tag Push Hook"):
        return Delivery((), ignored=f"GitLab event {event or '(none)'!r} refreshes no Warehouse")
    payload = _json(body)
    urls = [
        normalize_git_url(url)
        for where in ("project", "repository")
        for key in ("git_http_url", "git_ssh_url")
        if (url := _str(_obj(payload, where), key))
    ]
    ref = _str(payload, "ref")
    changed: tuple[str, ...] = ()
    commits = [c for c in payload.get("commits") or () if isinstance(c, Mapping)]
    total = payload.get("total_commits_count")
    # GitLab truncates the commit list (20 commits): then the paths are unknown, and every
    # Warehouse on the ref is refreshed rather than only those whose paths match.
    if event == "Push Hook" and not (isinstance(total, int) and total > len(commits)):
        paths = {
            path
            for commit in commits
            for key in ("added", "modified", "removed")
            for path in _strings(commit.get(key))
        }
        changed = tuple(sorted(paths))
    return Delivery(tuple(dict.fromkeys(urls)), _strings(ref), changed)


def artifactory(body: bytes, virtual_repo: str = "") -> Delivery:
    payload = _json(body)
    data = _obj(payload, "data")
    if _str(payload, "event_type") != "pushed" or _str(payload, "domain") != "docker":
        raise BadDelivery("event type must be 'pushed' and domain must be 'docker'", 501)
    image_type = _str(data, "image_type")
    if image_type not in ("docker", "oci"):
        raise BadDelivery(f"unsupported image type {image_type!r}", 501)
    origin = _str(payload, "jpd_origin")
    host = urlsplit(origin).netloc if "://" in origin else origin
    sections = _str(data, "path").split("/")
    if len(sections) < 2:
        raise BadDelivery(f"invalid value {_str(data, 'path')!r} in payload's data.path field")
    repo = "/".join([host, virtual_repo or _str(data, "repo_key"), *sections[:-2]])
    url = normalize_image_url(repo) if image_type == "docker" else normalize_chart_url(repo)
    return Delivery((url,), _strings(_str(data, "tag")))


def generic(body: bytes) -> Delivery:
    payload = _json(body)
    repos = _strings(payload.get("repoURLs")) + _strings(payload.get("repoURL"))
    if not repos:
        raise BadDelivery("invalid request body: repoURL (or repoURLs) is required")
    urls: dict[str, None] = {}
    for repo in repos:
        for url in (normalize_image_url(repo), normalize_chart_url(repo), normalize_git_url(repo)):
            urls[url] = None
    return Delivery(tuple(urls), _strings(payload.get("qualifiers")))
