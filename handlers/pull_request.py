"""``pull_request`` events: a closed pull request wakes the Promotions waiting on it.

``git-wait-for-pr`` (and ``git-merge-pr`` with ``wait``) report the PR's URL in their output; the
reconciler indexes Running Promotions by it, so waking touches exactly the Promotions waiting on
this PR. Merged or not does not matter here: the step itself reads the PR and decides.
"""

from __future__ import annotations

import logging

from gidgethub import routing, sansio

from handlers.context import Deps, event_repo

log = logging.getLogger(__name__)

router = routing.Router()


@router.register("pull_request", action="closed")
async def on_pull_request_closed(event: sansio.Event, deps: Deps) -> None:
    pr = event.data.get("pull_request") or {}
    urls = [url for url in (pr.get("html_url"), pr.get("url")) if url]
    woken = sum(deps.service.wake_pr(str(url)) for url in dict.fromkeys(urls))
    log.info(
        "pull request %s#%s closed (merged: %s); woke %d Promotion(s)",
        event_repo(event.data),
        pr.get("number"),
        bool(pr.get("merged")),
        woken,
        extra={"delivery_id": event.delivery_id},
    )
