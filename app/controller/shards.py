"""The shard label, kept the way ``spec.shard`` says, by the controller responsible for each object.

Kargo's admission webhooks copy a Stage's or Warehouse's ``spec.shard`` into the
``kargo.akuity.io/shard`` label and give each new Promotion its Stage's. Without a webhook in the
path, the controller that is responsible for an object now (by its label: see
:class:`promoter.control.shards.Shard`) does the same: a new Stage with ``spec.shard: a`` is
unlabelled, so the default controller sees it, labels it ``a``, and from then on only shard
``a``'s controller lists and watches it. A Promotion takes its Stage's shard; one made with
kubectl starts unlabelled, so again the default controller moves it. The Promotions that
Longshoreman creates (chat, auto-promotion) carry the label from the start.

Decisions are :func:`promoter.control.shards.label_patch`; this module gathers the objects
from the informers' events (no I/O in a callback), and the leader writes the labels, one merge
patch each, with the resourceVersion it decided on (a stale one answers ``Conflict``, and the
event that comes with the change decides again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from app.controller import kube as k
from promoter.control.shards import Shard, declared_shard, label_patch
from promoter.resources.model import meta, name_of, namespace_of

log = logging.getLogger(__name__)

# (kind, namespace, name)
LabelKey = tuple[str, str, str]
StageLookup = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]

_TYPES = {rt.kind: rt for rt in (k.STAGES, k.WAREHOUSES, k.PROMOTIONS)}


class ShardLabels:
    """Mirrors shards into labels for the objects this controller is responsible for."""

    def __init__(self, kube: k.Kube, shard: Shard, *, stage: StageLookup) -> None:
        self.kube = kube
        self.shard = shard
        # Where a Promotion's Stage is found: the cache, else the API (a Stage of another
        # shard is not in this controller's cache).
        self.stage = stage
        self._pending: dict[LabelKey, Mapping[str, Any]] = {}
        self._wake = asyncio.Event()

    # ---- informer callbacks (no I/O) ---------------------------------------------------------

    def listener(self, kind: str) -> Callable[[Mapping[str, Any], Mapping[str, Any] | None], None]:
        """A listener of the router for ``kind`` (Stage, Promotion), which hears only what this
        controller is responsible for; a Warehouse's informer calls :meth:`observe` itself."""
        return lambda obj, old: self.observe(kind, obj)

    def observe(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Queue a label check of ``obj`` when it is this controller's (no I/O here)."""
        if not self.shard.responsible_for(obj):
            return
        if kind != "Promotion" and label_patch(obj, declared_shard(obj)) is None:
            return  # the common case, decided without queueing anything
        self._pending[(kind, namespace_of(obj) or "", name_of(obj))] = obj
        self._wake.set()

    # ---- the leader's writer -----------------------------------------------------------------

    async def run(self) -> None:
        """Write what the events queued, until cancelled (the leader only)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            pending, self._pending = self._pending, {}
            for key, obj in pending.items():
                await self._fix(key, obj)

    async def _wanted(self, kind: str, obj: Mapping[str, Any]) -> str | None:
        if kind != "Promotion":
            return declared_shard(obj)
        stage_name = str((obj.get("spec") or {}).get("stage") or "")
        stage = await self.stage(namespace_of(obj) or "", stage_name) if stage_name else None
        return None if stage is None else declared_shard(stage)

    async def _fix(self, key: LabelKey, obj: Mapping[str, Any]) -> None:
        kind, namespace, name = key
        wanted: str | None = None
        try:
            wanted = await self._wanted(kind, obj)
            patch = None if wanted is None else label_patch(obj, wanted)
            if patch is None:
                return
            await self.kube.patch(
                _TYPES[kind],
                namespace,
                name,
                patch,
                resource_version=str(meta(obj).get("resourceVersion") or "") or None,
            )
        except (k.NotFound, k.Conflict):
            return  # gone, or changed: its own event decides again
        except k.KubeError as e:
            log.warning(
                "could not label %s %s/%s for shard %r: %s", kind, namespace, name, wanted, e
            )
            return
        log.info("%s %s/%s now belongs to shard %r", kind, namespace, name, wanted or "(default)")
