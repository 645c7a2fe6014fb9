"""``package`` and ``registry_package`` events: ghcr.io pushes refresh the Warehouses that care.

GitHub sends both when a container image or an OCI Helm chart is published to ghcr.io (the
App must subscribe to "Packages" events). As Kargo's GitHub receiver does, only ``published``
and ``updated`` actions of ``CONTAINER``/``docker`` packages refresh anything; the package URL
(``ghcr.io/acme/app:1.4.2``; GitHub sometimes sends ``ghcr.io/acme/app:``) names the
repository, the manifest's config media type says whether it is an image or a chart, and the
tag decides which subscriptions care (:func:`promoter.warehouses.refresh.warehouses_to_refresh`).

The delivery was verified with the App's webhook secret before it got here
(:mod:`handlers.webhook`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gidgethub import routing, sansio

from handlers.context import Deps
from handlers.push import WarehouseRefresher
from promoter.warehouses.refresh import image_repo_urls, warehouses_to_refresh

log = logging.getLogger(__name__)

router = routing.Router()

_CONTAINER_TYPES = ("container", "docker")


def package_delivery(event: str, payload: Mapping[str, Any]) -> tuple[list[str], str] | None:
    """The repository URLs and the tag a package event names; None: it refreshes nothing."""
    if payload.get("action") not in ("published", "updated"):
        return None
    package = payload.get("package" if event == "package" else "registry_package") or {}
    version = package.get("package_version") if isinstance(package, Mapping) else None
    if not isinstance(version, Mapping):
        return None
    if str(package.get("package_type") or "").lower() not in _CONTAINER_TYPES:
        return None
    container = version.get("container_metadata") or {}
    manifest = container.get("manifest") or {}
    config = manifest.get("config") if isinstance(manifest, Mapping) else None
    media_type = str((config or {}).get("media_type") or "") if isinstance(config, Mapping) else ""
    url = str(version.get("package_url") or "").removesuffix(":")
    if not url:
        return None
    tag = str((container.get("tag") or {}).get("name") or "")
    return image_repo_urls(url, media_type), tag


@router.register("package")
@router.register("registry_package")
async def on_package(event: sansio.Event, deps: Deps) -> None:
    found = package_delivery(event.event, event.data)
    service = deps.service
    if found is None or not isinstance(service, WarehouseRefresher):
        return
    urls, tag = found
    namespace = deps.namespace_for(event.data)
    targets = warehouses_to_refresh(await service.warehouses(namespace), urls, [tag])
    extra = {"delivery_id": event.delivery_id}
    if not targets:
        log.info(
            "%s %s:%s: no Warehouse subscribes; nothing refreshed",
            event.event,
            urls[0],
            tag,
            extra=extra,
        )
        return
    for target_namespace, name in targets:
        await service.refresh_warehouse(target_namespace, name)
    log.info(
        "%s %s:%s: refreshing Warehouse(s) %s",
        event.event,
        urls[0],
        tag,
        ", ".join(name for _, name in targets),
        extra=extra,
    )
