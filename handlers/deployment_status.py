"""``deployment_status`` events: our own writes coming back, and others' changes to ours.

Every status the App writes on a Deployment (:mod:`handlers.environments`) comes back as a
webhook; that echo changes nothing and costs no request. A status someone else wrote on one of
our Deployments (a person marking it ``inactive``, another tool) makes what we remember of it
stale: it is forgotten, so the next change of the Promotion reads GitHub first and never revives
an inactive Deployment. Deployments other people or tools made are left alone.
"""

from __future__ import annotations

import logging

from gidgethub import routing, sansio

from handlers import deployments as d
from handlers.context import Deps, event_repo

log = logging.getLogger(__name__)

router = routing.Router()


@router.register("deployment_status")
async def on_deployment_status(event: sansio.Event, deps: Deps) -> None:
    kind = d.status_event(event.data, deps.settings.app_id)
    deployment = event.data.get("deployment") or {}
    extra = {"delivery_id": event.delivery_id}
    if kind == "changed":
        deps.forget_deployment(int(deployment["id"]))
        log.info(
            "someone else set Deployment %s in %s to %s; it will be read again",
            deployment.get("id"),
            event_repo(event.data),
            (event.data.get("deployment_status") or {}).get("state"),
            extra=extra,
        )
    else:
        log.debug("deployment_status (%s) ignored", kind, extra=extra)
