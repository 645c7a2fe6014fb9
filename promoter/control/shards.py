"""Shards: which controller runs which Stage (Kargo's ``spec.shard``), decided purely.

More replicas of one controller add availability, not throughput: one leader runs every
Promotion. Kargo scales out with shards, and this module keeps its semantics:

- A Stage's or Warehouse's ``spec.shard`` is mirrored into the ``kargo.akuity.io/shard`` label
  (Kargo's admission webhooks do it; here the controller responsible for the object does,
  see :func:`label_patch`), and a Promotion carries its Stage's shard in the same label.
- A controller runs with a shard name and whether it is the default controller
  (``SHARD_NAME``, ``IS_DEFAULT_CONTROLLER``) and acts only on what it is responsible for
  (:meth:`Shard.responsible_for`, Kargo's ``ResponsibleFor`` predicate): objects labelled with
  its name, and, for the default controller (or one with no name), objects with no shard label.
  A shard's controller caches only its shard (:meth:`Shard.label_selector`, Kargo's
  ``GetShardRequirement``); the default controller caches everything and filters
  (:meth:`Shard.cache_selector`: it collects the Freight, which needs every Stage).
- Each shard elects its own leader (:meth:`Shard.lease_name`), so shards run side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promoter.resources.model import meta

SHARD_LABEL = "kargo.akuity.io/shard"


@dataclass(frozen=True, slots=True)
class Shard:
    """This controller's place among the shards (no name: the one and only, or the default)."""

    name: str = ""
    is_default: bool = False

    def label_selector(self) -> str | None:
        """The label selector the informers of sharded kinds list and watch with; None when
        one selector cannot say it (the default controller of a named shard)."""
        if self.name:
            return None if self.is_default else f"{SHARD_LABEL}={self.name}"
        return f"!{SHARD_LABEL}"

    def cache_selector(self) -> str | None:
        """The label selector this controller's informers of Stages, Promotions and Warehouses
        use. A default controller (or one without a name) caches everything and filters with
        :meth:`responsible_for`, even where Kargo's selector could say "unlabelled only": it
        collects Freight, which belongs to no shard, and must know every Stage that holds one
        (an unsharded install, where nothing is labelled, loses nothing by it)."""
        return None if self.is_default or not self.name else self.label_selector()

    def responsible_for(self, obj: Mapping[str, Any] | None) -> bool:
        """Whether this controller acts on ``obj`` (by its shard label)."""
        if obj is None:
            return False
        label = shard_of(obj)
        return label == self.name or (label == "" and self.is_default)

    def lease_name(self, base: str) -> str:
        """The Lease this shard's replicas elect their leader with: one per shard."""
        return f"{base}-{self.name}" if self.name else base


# An unsharded install: the one controller is responsible for every object without a label.
NO_SHARD = Shard()


def shard_of(obj: Mapping[str, Any]) -> str:
    """The shard an object is labelled for ("" when none)."""
    return str((meta(obj).get("labels") or {}).get(SHARD_LABEL) or "")


def declared_shard(obj: Mapping[str, Any]) -> str:
    """The shard a Stage or Warehouse names in ``spec.shard`` ("" when none)."""
    return str((obj.get("spec") or {}).get("shard") or "")


def label_patch(obj: Mapping[str, Any], wanted: str) -> dict[str, Any] | None:
    """The merge patch that makes ``obj``'s shard label say ``wanted`` (removes it for ""),
    or None when it already does. ``wanted`` is the object's own ``spec.shard`` for Stages and
    Warehouses (:func:`declared_shard`) and its Stage's for a Promotion."""
    if shard_of(obj) == wanted:
        return None
    return {"metadata": {"labels": {SHARD_LABEL: wanted or None}}}
