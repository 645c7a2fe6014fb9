"""The one place the per-event-family routers are composed, and how an event is dispatched.

Each family has its own module and ``gidgethub.routing.Router`` (bedevere's layout). Dispatch
differs from ``Router.dispatch`` in one way that matters: every matching handler runs even when
an earlier one raised, and a failure is logged with the delivery id.
"""

from __future__ import annotations

import logging

from gidgethub import routing, sansio

from handlers import (
    check_run,
    deployment_status,
    issue_comment,
    packages,
    pull_request,
    push,
)
from handlers.context import Deps, event_repo

log = logging.getLogger(__name__)

ROUTER = routing.Router(
    pull_request.router,
    issue_comment.router,
    check_run.router,
    push.router,
    deployment_status.router,
    packages.router,
)


def ordering_key(event: sansio.Event) -> str:
    """Events with the same key are handled in order; others in parallel.

    A pull request and its comments share a key (``repo#number``); a check run's events follow
    its Promotion; pushes follow their branch.
    """
    data = event.data if isinstance(event.data, dict) else {}
    repo = event_repo(data)
    if event.event == "pull_request" and data.get("pull_request"):
        return f"{repo}#{data['pull_request'].get('number')}"
    if event.event == "issue_comment" and data.get("issue"):
        return f"{repo}#{data['issue'].get('number')}"
    if event.event == "check_run" and data.get("check_run"):
        run = data["check_run"]
        return f"check:{run.get('external_id') or run.get('id')}"
    if event.event == "push":
        return f"{repo}@{data.get('ref')}"
    return f"delivery:{event.delivery_id}"


async def dispatch(event: sansio.Event, deps: Deps, router: routing.Router = ROUTER) -> int:
    """Run every handler for ``event``; return how many failed."""
    failures = 0
    extra = {"delivery_id": event.delivery_id, "github_event": event.event}
    callbacks = router.fetch(event)
    if not callbacks:
        log.debug("no handler for %s", event.event, extra=extra)
    for callback in sorted(callbacks, key=lambda c: getattr(c, "__qualname__", "")):
        try:
            await callback(event, deps)
        except Exception:
            failures += 1
            log.exception(
                "handler %s failed on %s delivery %s",
                getattr(callback, "__qualname__", callback),
                event.event,
                event.delivery_id,
                extra=extra,
            )
    return failures
