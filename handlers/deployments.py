"""What GitHub's Deployments show for a Promotion, decided purely.

A Stage that opts in (``longshoreman.dev/github-deployments``, see
:func:`promoter.resources.annotations.github_environment`) is a GitHub *environment*; each
Promotion to it
becomes one Deployment on each of its Freight's commits in the repositories the App is installed
on (REST "Deployments", https://docs.github.com/en/rest/deployments), and its statuses follow the
Promotion::

    Pending -> queued    Running -> in_progress    Succeeded -> success
    Failed -> failure    Errored -> error          Aborted -> error ("aborted by ...")

These functions take the Promotion's read model (:class:`promoter.chat.views.PromotionView`) and
what
GitHub already holds (:class:`Existing`) and return what to write (:data:`Action`);
``handlers/environments.py`` gathers the facts and sends the actions. Choices that matter:

- ``auto_merge: false`` and ``required_contexts: []``: the Promotion decided already; GitHub must
  neither merge the default branch into the ref nor refuse because our own ``promote:`` check run
  is still in progress (without ``required_contexts`` GitHub answers 409 then).
- ``auto_inactive: false`` on every status, and the previous Deployment of *ours* made
  ``inactive`` explicitly: GitHub's ``auto_inactive`` would also deactivate Deployments other
  people or tools made in that environment, which are theirs to manage (and it never applies to
  production environments, where "what runs now" matters most).
- Each Deployment names its Promotion in its payload (``payload.longshoreman.promotion``), so a
  restarted leader finds the one it made before instead of creating a second; a status equal to
  the newest one on GitHub is never sent again, an ``inactive`` Deployment is never revived, and
  a status never moves back (a stale copy of the Promotion must not undo a newer state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from handlers.checks import clip_plain
from promoter.chat import neutral
from promoter.chat.views import PromotionView
from promoter.resources.annotations import GitHubEnvironment
from promoter.resources.model import name_of, parse_time
from promoter.resources.stages import phase_of

TASK = "deploy"
PAYLOAD_KEY = "longshoreman"
DESCRIPTION_LIMIT = 140  # GitHub: "The maximum description length is 140 characters."
# How many of our older Deployments of the environment are looked at for one to make inactive.
HISTORY = 10

_STATE = {
    "Pending": "queued",
    "Running": "in_progress",
    "Succeeded": "success",
    "Failed": "failure",
    "Errored": "error",
    "Aborted": "error",
}
# How far along a state is: a status never goes back (``inactive`` ends a Deployment).
_RANK = {
    "pending": 0,
    "queued": 0,
    "in_progress": 1,
    "success": 2,
    "failure": 2,
    "error": 2,
    "inactive": 3,
}
# What a status shows: equal on these means "GitHub shows it already".
SHOWN = ("state", "description", "log_url", "environment_url")


@dataclass(frozen=True, slots=True)
class Existing:
    """One Deployment GitHub holds for the repository and environment, as far as it matters.

    ``latest`` is its newest status (None: none yet, or not read).
    """

    id: int
    promotion: str  # ``namespace/name`` from our payload; "" when the payload is not ours
    ours: bool  # made by this App (``performed_via_github_app``) with our payload
    latest: Mapping[str, Any] | None = None

    @property
    def state(self) -> str:
        return str((self.latest or {}).get("state") or "")


@dataclass(frozen=True, slots=True)
class Create:
    """Create the Deployment (then post ``status`` on it)."""

    fields: Mapping[str, Any]
    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Post:
    """Post a status on an existing Deployment."""

    deployment: int
    status: Mapping[str, Any]


Action = Create | Post


def promotion_key(view: PromotionView) -> str:
    return f"{view.namespace}/{view.name}"


def parse(deployment: Mapping[str, Any], app_id: str | None) -> Existing:
    """A Deployment from GitHub's REST shape: whose it is and which Promotion it names."""
    payload = deployment.get("payload")
    ours_payload = payload.get(PAYLOAD_KEY) if isinstance(payload, Mapping) else None
    promotion = (
        str(ours_payload.get("promotion") or "") if isinstance(ours_payload, Mapping) else ""
    )
    app = deployment.get("performed_via_github_app")
    by_us = app_id is not None and isinstance(app, Mapping) and str(app.get("id")) == str(app_id)
    return Existing(int(deployment["id"]), promotion, bool(by_us and promotion))


def state_of(view: PromotionView) -> str:
    return _STATE.get(view.phase, "queued")


def description(view: PromotionView) -> str:
    """One line (at most 140 characters): where the Promotion is, and then its verification."""
    freight = view.label.short
    state = state_of(view)
    if state == "queued":
        text = f"Queued: {freight} to {view.stage}"
    elif state == "in_progress":
        # Not the step: each would be another status in GitHub's history of the environment.
        text = f"Promoting {freight} to {view.stage}"
    elif state == "success":
        text = f"Promoted {freight}"
        verification = view.verification
        if verification is not None and verification.state == "passed":
            text += ", verified"
        elif verification is not None and verification.state == "failed":
            text += ", verification failed" + (
                f": {verification.message}" if verification.message else ""
            )
        elif (
            view.verifiable
            and verification is not None
            and verification.state in ("pending", "running")
        ):
            text += ", verifying"
    elif view.phase == "Aborted":
        text = view.message or "aborted"
    else:
        text = f"{view.phase}: {view.message}" if view.message else view.phase
    # Messages and aliases came from others (promoter.chat.neutral).
    return clip_plain(neutral.plain(text), DESCRIPTION_LIMIT)


def deployment_fields(view: PromotionView, env: GitHubEnvironment, sha: str) -> dict[str, Any]:
    """The body of "Create a deployment" for the Promotion on commit ``sha``."""
    fields: dict[str, Any] = {
        "ref": sha,
        "task": TASK,
        "environment": env.name,
        "auto_merge": False,
        "required_contexts": [],
        "description": clip_plain(
            neutral.plain(
                f"Promotion {view.name} of Freight {view.label.short} to Stage {view.stage}"
            ),
            DESCRIPTION_LIMIT,
        ),
        "payload": {
            PAYLOAD_KEY: {
                "promotion": promotion_key(view),
                "namespace": view.namespace,
                "stage": view.stage,
                "freight": view.freight,
                "freightAlias": view.label.alias,
            }
        },
        "transient_environment": env.transient,
    }
    if env.production is not None:
        fields["production_environment"] = env.production
    return fields


def status_fields(
    view: PromotionView, *, log_url: str | None, environment_url: str | None
) -> dict[str, Any]:
    """The body of "Create a deployment status" for where the Promotion is now."""
    fields: dict[str, Any] = {
        "state": state_of(view),
        "description": description(view),
        "auto_inactive": False,
    }
    if log_url:
        fields["log_url"] = log_url
    if environment_url:
        fields["environment_url"] = environment_url
    return fields


def inactive_fields(successor: str | None) -> dict[str, Any]:
    by = f"Promotion {successor}" if successor else "a later Promotion"
    return {
        "state": "inactive",
        "description": clip_plain(f"Replaced by {by}", DESCRIPTION_LIMIT),
        "auto_inactive": False,
    }


def shown(status: Mapping[str, Any] | None) -> tuple[str, ...]:
    """What a status shows, comparable between ours to send and GitHub's newest."""
    return tuple(str((status or {}).get(key) or "") for key in SHOWN)


def find_mine(existing: Sequence[Existing], key: str) -> Existing | None:
    """Our Deployment for the Promotion ``key`` (the oldest, should a race have made two)."""
    mine = [e for e in existing if e.ours and e.promotion == key]
    return min(mine, key=lambda e: e.id) if mine else None


def needs_history(status: Mapping[str, Any], mine: Existing | None) -> bool:
    """Whether the older Deployments must be read: only to make one inactive on success."""
    return status.get("state") == "success" and (mine is None or mine.state != "inactive")


def plan(
    key: str,
    fields: Mapping[str, Any],
    status: Mapping[str, Any],
    mine: Existing | None,
    older: Sequence[Existing] = (),
    *,
    superseded: bool = False,
) -> list[Action]:
    """What to write for one Promotion on one commit.

    ``mine`` is our Deployment for it (None: none found; ``latest`` must be read); ``older`` our
    and others' older Deployments of the same repository and environment, newest first, with
    ``latest`` read; ``superseded``: a later Promotion of the Stage has finished.
    """
    actions: list[Action] = []
    if mine is None:
        actions.append(Create(fields, status))
    else:
        if mine.state == "inactive":
            return []  # replaced by a newer Promotion: it stays as GitHub shows it
        if superseded and _RANK.get(mine.state, 0) >= _RANK["success"]:
            # Finished and followed by another: its verification's news (now "superseded") is
            # no news; only one a crash left unfinished is brought to its end.
            return []
        if superseded and status.get("state") == "success":
            # Its successor may have looked for an active predecessor before this one ended:
            # ending it "success" now would show it as what runs.
            return [Post(mine.id, inactive_fields(None))]
        ahead = _RANK.get(str(status.get("state")), 0) >= _RANK.get(mine.state, 0)
        if ahead and shown(status) != shown(mine.latest):
            actions.append(Post(mine.id, status))
    if status.get("state") == "success":
        for previous in older:
            if mine is not None and previous.id >= mine.id:
                continue
            if not previous.ours or previous.promotion == key:
                continue  # someone else's: theirs to manage
            if previous.state == "success":
                actions.append(Post(previous.id, inactive_fields(key.rpartition("/")[2])))
                break
            if previous.state == "inactive":
                break  # everything before it was made inactive already
    return actions


def by_app(obj: Mapping[str, Any], app_id: str | None) -> bool:
    app = obj.get("performed_via_github_app")
    return app_id is not None and isinstance(app, Mapping) and str(app.get("id")) == str(app_id)


def status_event(data: Mapping[str, Any], app_id: str | None) -> str:
    """What a ``deployment_status`` webhook is to us: ``echo`` (our own write coming back),
    ``theirs`` (a Deployment someone else made: left alone) or ``changed`` (someone else wrote a
    status on one of ours: what we remember of it is stale)."""
    deployment = data.get("deployment")
    status = data.get("deployment_status")
    if not isinstance(deployment, Mapping) or not isinstance(status, Mapping):
        return "theirs"
    if not deployment.get("id") or not parse(deployment, app_id).ours:
        return "theirs"
    return "echo" if by_app(status, app_id) else "changed"


def superseded(promotion: Mapping[str, Any], promotions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether another Promotion of the same Stage finished after this finished one.

    Such a Promotion gets no Deployment it does not have yet (a crash before it was written is
    covered: its successor's success makes whatever it had inactive). The Stage's
    ``lastPromotion`` cannot tell: it is written after the Promotion finishes.
    """
    status = promotion.get("status") or {}
    mine = parse_time(status.get("finishedAt"))
    if mine is None or not phase_of(promotion).terminal:
        return False
    stage = (promotion.get("spec") or {}).get("stage")
    for other in promotions:
        if name_of(other) == name_of(promotion) or (other.get("spec") or {}).get("stage") != stage:
            continue
        theirs = parse_time((other.get("status") or {}).get("finishedAt"))
        if theirs is not None and theirs > mine and phase_of(other).terminal:
            return True
    return False


def environment_page(repo_web_url: str, environment: str) -> str:
    """GitHub's page of an environment's Deployments in a repository."""
    return f"{repo_web_url.rstrip('/')}/deployments/{quote(environment, safe='')}"
