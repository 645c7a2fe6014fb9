"""Which Freight a reference means: Kargo's rule, written once.

A person or a Promotion names a Freight by its name or by its alias (``frozen-tauntaun``).
Kargo's API resolves such a reference by exact name first, and only when no Freight has that
name by the ``kargo.akuity.io/alias`` label (``pkg/api/freight.go``, ``GetFreightByNameOrAlias``
and ``GetFreightByAlias``, which lists by label selector and takes the first item, the API
server listing by name). So an alias that happens to equal another Freight's name never shadows
that Freight. Every place that looks a Freight up by name or alias (chat, the status pages, the
controller running a Promotion, the local runner's manifests) asks :func:`find_freight`, so a
reference cannot mean one Freight in chat and another on the pages.

The Freight live wherever the caller keeps them, behind the :class:`FreightLookup` port: the
controller's is an informer with an index on the alias (``app.controller.informer``), the others
hold a plain list (:class:`FreightList`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, overload

from promoter.resources.model import meta, name_of

ALIAS_LABEL = "kargo.akuity.io/alias"


def aliases_of(freight: Mapping[str, Any]) -> tuple[str, ...]:
    """The aliases a Freight answers to: its :data:`ALIAS_LABEL` label (what Kargo selects on)
    and its ``alias`` field. Kargo's admission webhook keeps the two equal; a Freight written
    without it (by hand, by an older Longshoreman) may carry only one, and answers to either."""
    label = (meta(freight).get("labels") or {}).get(ALIAS_LABEL)
    field = freight.get("alias")
    return tuple(dict.fromkeys(str(a) for a in (label, field) if a))


class FreightLookup(Protocol):
    """Freight of one namespace, by name and by alias."""

    def named(self, name: str) -> Mapping[str, Any] | None:
        """The Freight called ``name``, or None."""
        ...

    def aliased(self, alias: str) -> Sequence[Mapping[str, Any]]:
        """Every Freight answering to ``alias`` (:func:`aliases_of`), in any order."""
        ...


def find_freight(ref: str, lookup: FreightLookup) -> Mapping[str, Any] | None:
    """The Freight ``ref`` means: the one named ``ref``, else one aliased ``ref``, else None.

    Two Freight with the same alias (Kargo's webhook refuses that; a cluster without it may not):
    the first by name, as Kargo's label-selected list returns them.
    """
    if not ref:
        return None
    named = lookup.named(ref)
    if named is not None:
        return named
    return min(lookup.aliased(ref), key=name_of, default=None)


class FreightList(Sequence[Mapping[str, Any]]):
    """:class:`FreightLookup` over Freight held in a list (a chat snapshot, the pages' cache
    read, loaded manifests), indexed once when built. It is the list too: a page or a
    ``/status`` that looks up many references wraps its Freight once and hands this on, rather
    than index the same list again for every reference."""

    def __init__(self, freights: Iterable[Mapping[str, Any]]) -> None:
        self._items = list(freights)
        self._named: dict[str, Mapping[str, Any]] = {}
        self._aliased: dict[str, list[Mapping[str, Any]]] = {}
        for freight in self._items:
            self._named.setdefault(name_of(freight), freight)
            for alias in aliases_of(freight):
                self._aliased.setdefault(alias, []).append(freight)

    @classmethod
    def of(cls, freights: Iterable[Mapping[str, Any]]) -> FreightList:
        """``freights`` as a FreightList, indexed only when it is not one already."""
        return freights if isinstance(freights, FreightList) else cls(freights)

    def named(self, name: str) -> Mapping[str, Any] | None:
        return self._named.get(name)

    def aliased(self, alias: str) -> Sequence[Mapping[str, Any]]:
        return self._aliased.get(alias, ())

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)


def freight_in(ref: str, freights: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """:func:`find_freight` among ``freights`` (indexed here unless a :class:`FreightList`)."""
    return find_freight(ref, FreightList.of(freights))
