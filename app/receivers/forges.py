"""Bitbucket, Gitea and Azure (Container Registry and DevOps) webhooks, decided purely.

The shapes and rules are Kargo's receivers (``pkg/webhook/external/bitbucket.go``, ``gitea.go``,
``azure.go``), reduced like the other senders (:mod:`app.receivers.senders`) to a
:class:`~app.receivers.senders.Delivery`:

* **Bitbucket** (Cloud ``repo:push``: ``repository.links.html.href``, each change's ``new``
  branch or tag; Data Center ``repo:refs_changed``: ``repository.links.clone[].href``, each
  change's ``ref.id``). Signed: ``X-Hub-Signature`` is ``sha256=<hex>`` (or ``sha1=``), the
  HMAC of the body with the Secret's ``secret``. Pull-request events (``pullrequest:*``,
  ``pr:*``) are accepted and change nothing here: Longshoreman's pull-request steps work on
  GitHub only. Any other event is a 400.
* **Gitea** (``X-Gitea-Event: push``: ``repository.clone_url``, ``ref``, the commits' changed
  paths unless Gitea truncated the list). Signed like Bitbucket (``X-Gitea-Signature``).
  ``pull_request`` is accepted and changes nothing; any other event is a 501.
* **Azure**, told apart by ``User-Agent`` as Kargo does: Azure Container Registry
  (``AzureContainerRegistry/...``: ``push`` -> ``request.host/target.repository`` with
  ``target.tag``, an image or, by its media type, a chart; ``ping`` answers 200) and Azure DevOps
  (``VSServices/...``: ``git.push`` -> ``resource.repository.remoteUrl`` and the
  ``refUpdates[].name``; pull-request events accepted, changing nothing). Unsigned: the
  receiver's path, derived from its Secret, is the credential.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from app.receivers.senders import BadDelivery, Delivery, _json, _obj, _str, _strings
from promoter.warehouses.freight import normalize_git_url
from promoter.warehouses.refresh import image_repo_urls

__all__ = ["azure", "bitbucket", "gitea", "hub_signature_matches"]

_PR_CHANGES_NOTHING = "pull request events change nothing here (pull-request steps are GitHub's)"


def hub_signature_matches(signature: str | None, body: bytes, secret: str) -> bool:
    """go-github's ValidateSignature, which Kargo's Bitbucket and Gitea receivers use:
    ``sha256=<hex>`` or ``sha1=<hex>`` HMAC of the body (Gitea also sends the bare hex)."""
    if not signature:
        return False
    algorithm, _, given = signature.strip().partition("=")
    if not given:
        algorithm, given = "sha256", algorithm
    digest = {"sha256": hashlib.sha256, "sha1": hashlib.sha1}.get(algorithm.lower())
    if digest is None:
        return False
    computed = hmac.new(secret.encode(), body, digest).hexdigest()
    return hmac.compare_digest(given.lower().encode(), computed.encode())


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value or () if isinstance(v, Mapping)] if isinstance(value, list) else []


def _changed_paths(payload: Mapping[str, Any], total_key: str) -> tuple[str, ...]:
    commits = _items(payload.get("commits"))
    total = payload.get(total_key)
    if isinstance(total, int) and total > len(commits):
        return ()  # truncated: every Warehouse on the ref is refreshed, whatever its paths
    paths = {
        path
        for commit in commits
        for key in ("added", "modified", "removed")
        for path in _strings(commit.get(key))
    }
    return tuple(sorted(paths))


def bitbucket(body: bytes, event: str | None) -> Delivery:
    if event in ("pullrequest:fulfilled", "pullrequest:rejected", "pr:merged", "pr:declined"):
        return Delivery((), ignored=_PR_CHANGES_NOTHING)
    if event not in ("repo:push", "repo:refs_changed"):
        raise BadDelivery(f"event type {event or ''} is not supported")
    payload = _json(body)
    links = _obj(_obj(payload, "repository"), "links")
    if event == "repo:push":
        href = _str(_obj(links, "html"), "href")
        refs = []
        for change in _items(_obj(payload, "push").get("changes")):
            new = _obj(change, "new")
            if not _str(new, "name"):
                continue  # a deleted branch or tag
            kind = "tags" if _str(new, "type") == "tag" else "heads"
            refs.append(f"refs/{kind}/{_str(new, 'name')}")
        return Delivery((normalize_git_url(href),) if href else (), tuple(refs))
    urls = [normalize_git_url(h) for c in _items(links.get("clone")) if (h := _str(c, "href"))]
    refs = [i for c in _items(payload.get("changes")) if (i := _str(_obj(c, "ref"), "id"))]
    return Delivery(tuple(dict.fromkeys(urls)), tuple(refs))


def gitea(body: bytes, event: str | None) -> Delivery:
    if event == "pull_request":
        return Delivery((), ignored=_PR_CHANGES_NOTHING)
    if event != "push":
        raise BadDelivery(f"event type {event or ''} is not supported", 501)
    payload = _json(body)
    url = _str(_obj(payload, "repository"), "clone_url")
    return Delivery(
        (normalize_git_url(url),) if url else (),
        _strings(_str(payload, "ref")),
        _changed_paths(payload, "total_commits"),
    )


def azure(body: bytes, user_agent: str | None) -> Delivery:
    agent = user_agent or ""
    if agent.startswith("AzureContainerRegistry"):
        payload = _json(body)
        action = _str(payload, "action")
        if action == "ping":
            return Delivery((), ignored="ping event received, webhook is configured correctly")
        if action != "push":
            raise BadDelivery(f"event type {action} is not supported")
        target = _obj(payload, "target")
        repo = f"{_str(_obj(payload, 'request'), 'host')}/{_str(target, 'repository')}"
        urls = image_repo_urls(repo, _str(target, "mediaType"))
        return Delivery(tuple(urls), _strings(_str(target, "tag")))
    if agent.startswith("VSServices"):
        payload = _json(body)
        event = _str(payload, "eventType")
        if event in ("git.pullrequest.merged", "git.pullrequest.updated"):
            return Delivery((), ignored=_PR_CHANGES_NOTHING)
        if event != "git.push":
            raise BadDelivery(f"event type {event} is not supported")
        resource = _obj(payload, "resource")
        url = _str(_obj(resource, "repository"), "remoteUrl")
        refs = [n for u in _items(resource.get("refUpdates")) if (n := _str(u, "name"))]
        return Delivery((normalize_git_url(url),) if url else (), tuple(refs))
    raise BadDelivery("request does not appear to have originated from a supported service")
