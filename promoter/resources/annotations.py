"""Every annotation Longshoreman reads or writes, with the code that encodes and parses it.

Annotations are how front ends, the controller and people talk through the cluster: a chat
command asks for an abort by annotating the Promotion and the controller, maybe on another
replica, acts on it; a Stage lists who may promote; the GitHub and Slack front ends remember
which comment, check runs and message belong to a Promotion. A writer and its reader must agree
on a key and a format, so both live here, next to each other, and nothing else spells a key.

Where Kargo has its own key (``kargo.akuity.io/...``) we accept it too, ours first, so objects
written for Kargo (or by its CLI and UI) work unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Also our API group (promoter.resources.model.GROUP is this): annotation keys share its prefix.
GROUP = "longshoreman.dev"
KARGO_GROUP = "kargo.akuity.io"

# ---- on Promotions ------------------------------------------------------------------------------

CREATE_ACTOR_ANNOTATIONS = (f"{GROUP}/create-actor", f"{KARGO_GROUP}/create-actor")
ABORT_ANNOTATIONS = (f"{GROUP}/abort", f"{KARGO_GROUP}/abort")
# Set (to "true") on a Promotion that puts back Freight the Stage had before: expressions see it
# as ctx.meta.promotion.rollback, as in Kargo.
ROLLBACK_ANNOTATIONS = (f"{GROUP}/rollback", f"{KARGO_GROUP}/rollback")
# On an automatic rollback: the failure it answers (``promotion/<name>``, ``verification/<id>``),
# so each failure is rolled back once, also across restarts.
ROLLBACK_OF = f"{GROUP}/rollback-of"
# The GitHub front end's comment, check runs and last shown digest; the Slack front end's
# message. Kept on the Promotion so any replica carries on after a restart.
GITHUB_REPLY = f"{GROUP}/github-reply"
GITHUB_CHECKS = f"{GROUP}/github-checks"
# What a Promotion's check runs and reply last showed, and what its newest verification's
# ``verify:`` runs did (promoter.chat.shown: digests, one annotation per writer), so a restarted or
# new leader that replays every Promotion and Stage writes nothing to GitHub that did not change.
GITHUB_SHOWN = f"{GROUP}/github-shown"
GITHUB_VERIFY_SHOWN = f"{GROUP}/github-verify-shown"
SLACK_MESSAGE = f"{GROUP}/slack-message"
# The GitHub Deployments a Promotion wrote (``{"ids": {"owner/repo@sha": id}, "environment":
# ..., "environmentURL": ..., "links": [...], "warning": ..., "shown": digest}``): ids so a new
# leader finds them at once, links and a warning for the status pages and ``/status``.
GITHUB_DEPLOYMENT = f"{GROUP}/github-deployment"

# ---- on project namespaces ----------------------------------------------------------------------

# A namespace is a project when labelled so (Kargo's label, or ours), value "true".
PROJECT_LABELS = (f"{GROUP}/project", f"{KARGO_GROUP}/project")
# Routing that lives with the project: the Slack channel IDs whose commands act on it and where
# its announcements go, and the GitHub repositories (``owner/repo``) whose comments act on it.
# Comma-separated.
PROJECT_SLACK_CHANNELS = f"{GROUP}/slack-channels"
PROJECT_GITHUB_REPOSITORIES = f"{GROUP}/github-repositories"


def is_project(namespace: Mapping[str, Any]) -> bool:
    """Whether a Namespace object is labelled a project (ours or Kargo's label, "true")."""
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    return any(str(labels.get(key, "")).lower() == "true" for key in PROJECT_LABELS)


def listed(obj: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A comma-separated annotation as its entries, blanks dropped, order kept, no repeats."""
    raw = str(annotations_of(obj).get(key) or "")
    return tuple(dict.fromkeys(e.strip() for e in raw.split(",") if e.strip()))


# ---- on Stages and Warehouses -------------------------------------------------------------------

REFRESH_ANNOTATIONS = (f"{GROUP}/refresh", f"{KARGO_GROUP}/refresh")
REVERIFY_ANNOTATIONS = (f"{GROUP}/reverify", f"{KARGO_GROUP}/reverify")
# Kargo spells "abort the verification" as ``kargo.akuity.io/abort`` on the Stage.
ABORT_VERIFICATION_ANNOTATIONS = (f"{GROUP}/abort-verification", f"{KARGO_GROUP}/abort")
AUTO_PROMOTE = f"{GROUP}/auto-promote"
GITHUB_PROMOTERS = f"{GROUP}/github-promoters"
SLACK_PROMOTERS = f"{GROUP}/slack-promoters"
# Who may approve Freight for the Stage (``/approve``), in the promoters' language; without
# them, whoever may promote to the Stage may approve for it (Kargo asks for its "promote" verb).
GITHUB_APPROVERS = f"{GROUP}/github-approvers"
SLACK_APPROVERS = f"{GROUP}/slack-approvers"
# "false": nobody may approve Freight for the Stage that carries their own change.
SELF_APPROVAL = f"{GROUP}/self-approval"
SLACK_CONFIRM = f"{GROUP}/slack-confirm"
# A freeze from chat (/freeze), JSON: on a Stage, or on a ProjectConfig for the whole project
# (promoter.control.freezes encodes and reads it).
FREEZE = f"{GROUP}/freeze"
# On a ProjectConfig: who may /freeze and /unfreeze (else each Stage's promoters).
FREEZERS = f"{GROUP}/freezers"
SLACK_CHANNEL = f"{GROUP}/slack-channel"
# GitHub Deployments for a Stage's Promotions: opt-in ("true", or the owner/repo list to write to),
# the environment's name (the Stage's by default), its kind and its URL.
GITHUB_DEPLOYMENTS = f"{GROUP}/github-deployments"
GITHUB_ENVIRONMENT = f"{GROUP}/github-environment"
GITHUB_ENVIRONMENT_TYPE = f"{GROUP}/github-environment-type"
GITHUB_ENVIRONMENT_URL = f"{GROUP}/github-environment-url"

# ---- on Freight -------------------------------------------------------------------------------

# The Stages whose Slack channel was told this Freight is available to them (once each).
SLACK_ANNOUNCED = f"{GROUP}/slack-announced"
# When a Warehouse made it, to the microsecond: creationTimestamp has whole seconds, and two
# Freight of one second would otherwise be of the same age
# (promoter.resources.stages.freight_created).
FREIGHT_CREATED = f"{GROUP}/created"

# ---- on AnalysisRuns ----------------------------------------------------------------------------

# On AnalysisRuns started by a re-verify request: which request, so a retry adopts the run.
VERIFICATION_REQUEST = f"{GROUP}/verification-request"
VERIFICATION_ACTOR = f"{GROUP}/actor"
# Full values of labels that had to be shortened (and the Promotion, as Kargo annotates it).
VERIFICATION_STAGE = f"{GROUP}/stage"
VERIFICATION_FREIGHT = f"{GROUP}/freight"
VERIFICATION_PROMOTION = f"{GROUP}/promotion"

# ---- on Argo CD Applications --------------------------------------------------------------------

AUTHORIZED_STAGE = f"{GROUP}/authorized-stage"
KARGO_AUTHORIZED_STAGE = f"{KARGO_GROUP}/authorized-stage"
AUTHORIZATION_ANNOTATIONS = (AUTHORIZED_STAGE, KARGO_AUTHORIZED_STAGE)
# The operation.info entry naming the Promotion that started an operation.
PROMOTION_INFO = f"{GROUP}/promotion"
KARGO_PROMOTION_INFO = f"{KARGO_GROUP}/promotion"
PROMOTION_INFO_KEYS = (PROMOTION_INFO, KARGO_PROMOTION_INFO)


# ---- reading ------------------------------------------------------------------------------------


def annotations_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    metadata = (obj or {}).get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def first(obj: Mapping[str, Any] | None, keys: Sequence[str]) -> str | None:
    """The value of the first of ``keys`` set (non-empty) on ``obj``."""
    annotations = annotations_of(obj)
    for key in keys:
        if annotations.get(key):
            return str(annotations[key])
    return None


def read_json(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A JSON object kept in an annotation; ``{}`` when absent or not a JSON object (a person
    may have edited it)."""
    raw = annotations_of(obj).get(key)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# ---- pairs: what a writer puts, what the reader gets back ---------------------------------------


def create_actor(actor: str) -> dict[str, str]:
    return {CREATE_ACTOR_ANNOTATIONS[0]: actor}


def created_by(promotion: Mapping[str, Any]) -> str | None:
    """The actor recorded by whoever created the Promotion (our builder, Kargo's API), if any."""
    return first(promotion, CREATE_ACTOR_ANNOTATIONS)


def is_rollback(promotion: Mapping[str, Any]) -> bool:
    """Whether the Promotion was created as a rollback (Kargo: the annotation says "true")."""
    return first(promotion, ROLLBACK_ANNOTATIONS) == "true"


def rollback(failure: str) -> dict[str, str]:
    """A rollback Promotion's annotations: Kargo's flag, and the failure it answers."""
    return {ROLLBACK_ANNOTATIONS[0]: "true", ROLLBACK_OF: failure}


def rollback_of(promotion: Mapping[str, Any]) -> str | None:
    return annotations_of(promotion).get(ROLLBACK_OF) or None


def abort(actor: str) -> dict[str, str]:
    """Ask the controller to abort a Promotion, in Kargo's JSON form."""
    return {ABORT_ANNOTATIONS[0]: json.dumps({"action": "terminate", "actor": actor})}


def abort_request(obj: Mapping[str, Any]) -> str | None:
    """The actor asking to abort this Promotion, or None when nobody is.

    Accepts ``terminate`` or Kargo's JSON form ``{"action": "terminate", "actor": "..."}``.
    """
    annotations = annotations_of(obj)
    for key in ABORT_ANNOTATIONS:
        raw = annotations.get(key)
        if not raw:
            continue
        raw = str(raw).strip()
        if raw == "terminate":
            return "unknown"
        try:
            request = json.loads(raw)
        except ValueError:
            continue
        if isinstance(request, Mapping) and request.get("action") == "terminate":
            return str(request.get("actor") or "unknown")
    return None


def reverify(actor: str, now: datetime) -> dict[str, str]:
    """Ask for the Stage's verification to run again; the time makes each request new."""
    return {REVERIFY_ANNOTATIONS[0]: json.dumps({"actor": actor, "at": now.isoformat()})}


def reverify_request(stage: Mapping[str, Any]) -> str | None:
    return first(stage, REVERIFY_ANNOTATIONS)


def refresh_token(obj: Mapping[str, Any] | None) -> str | None:
    return first(obj, REFRESH_ANNOTATIONS)


# ---- GitHub environments ----------------------------------------------------------------------

_TRUE = ("true", "yes", "on", "*", "all")
# A URL a chat message or a page may link to as is (no spaces, quotes or markup delimiters).
SAFE_URL = re.compile(r"^https?://[^\s<>|\"'`()\[\]]+$")
ENVIRONMENT_TYPES = ("production", "transient", "standard")


@dataclass(frozen=True, slots=True)
class GitHubEnvironment:
    """A Stage's GitHub environment, as its annotations describe it."""

    name: str
    repos: tuple[str, ...] | None = None  # ``owner/repo`` (lower case) to write to; None: all
    production: bool | None = None  # None: GitHub's default (true for "production")
    transient: bool = False
    url: str | None = None  # environment_url, when the Stage names one

    def covers(self, repo: str) -> bool:
        return self.repos is None or repo.lower() in self.repos


def github_environment(stage: Mapping[str, Any] | None) -> GitHubEnvironment | None:
    """The Stage's GitHub environment when it opts in to Deployments, else None.

    ``github-deployments`` is ``true`` (every GitHub repository of the Freight's commits) or a
    comma-separated ``owner/repo`` list; anything else (``false``, empty) opts out.
    ``github-environment-type`` is ``production``, ``transient`` or ``standard``; an unknown value
    is treated as ``standard`` (a typo must not mark an environment production).
    """
    raw = (first(stage, (GITHUB_DEPLOYMENTS,)) or "").strip()
    if not raw or raw.lower() in ("false", "no", "off", "none"):
        return None
    repos: tuple[str, ...] | None = None
    if raw.lower() not in _TRUE:
        repos = tuple(r.strip().lower() for r in raw.split(",") if "/" in r.strip())
        if not repos:
            return None
    metadata = (stage or {}).get("metadata") or {}
    name = (first(stage, (GITHUB_ENVIRONMENT,)) or str(metadata.get("name") or "")).strip()
    kind = (first(stage, (GITHUB_ENVIRONMENT_TYPE,)) or "").strip().lower()
    url = (first(stage, (GITHUB_ENVIRONMENT_URL,)) or "").strip() or None
    if url is not None and not SAFE_URL.match(url):
        url = None  # not a link we can show safely; Argo CD's URL (or none) stands in
    return GitHubEnvironment(
        name=name,
        repos=repos,
        production=True if kind == "production" else (False if kind else None),
        transient=kind == "transient",
        url=url,
    )


def auto_promotes(stage: Mapping[str, Any]) -> bool:
    """Whether the Stage promotes new Freight by itself (``AUTO_PROMOTE: "true"``)."""
    return str(annotations_of(stage).get(AUTO_PROMOTE) or "").lower() == "true"


def self_approval_allowed(stage: Mapping[str, Any]) -> bool:
    """Whether the authors of a change may approve its Freight for the Stage (``SELF_APPROVAL``;
    allowed unless it says "false", as in Kargo, which has no such rule)."""
    return str(annotations_of(stage).get(SELF_APPROVAL) or "").strip().lower() != "false"


def confirm_required(stage: Mapping[str, Any]) -> bool:
    """Whether acting on the Stage asks for a confirmation first (``SLACK_CONFIRM``: "true";
    Slack's buttons and the status pages' forms both ask)."""
    return str(annotations_of(stage).get(SLACK_CONFIRM) or "").strip().lower() == "true"


def announced_to(freight: Mapping[str, Any]) -> set[str]:
    """The Stages already told about this Freight (``SLACK_ANNOUNCED``, comma-separated)."""
    raw = str(annotations_of(freight).get(SLACK_ANNOUNCED) or "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def announced(freight: Mapping[str, Any], stages: Iterable[str]) -> dict[str, str]:
    """The annotation after also telling ``stages``."""
    return {SLACK_ANNOUNCED: ",".join(sorted(announced_to(freight) | set(stages)))}
