"""Kargo's ``set-freight-alias`` step: what giving a Freight a new alias means, decided purely.

A Freight's alias is the short name people use for it (``frozen-tauntaun``). Kargo keeps it in
two places, the ``alias`` field and the ``kargo.akuity.io/alias`` label (its admission webhook
copies one to the other and refuses an alias another Freight of the namespace already has), and
the step writes both with one merge patch. Longshoreman reads the ``alias`` field everywhere; it
has no webhook, so the uniqueness check is made here, before writing, against the Freight the
store knows. The Freight live wherever the caller keeps them, behind the :class:`FreightAliases`
port: the controller's is over the Kubernetes API, the local runner's over the loaded manifests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from promoter.errors import ConfigRefused
from promoter.resources.freight_refs import ALIAS_LABEL
from promoter.resources.model import meta

# A label value (Kubernetes): the API server would refuse anything else in the label.
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


class FreightAliases(Protocol):
    """Reads Freight of a namespace and writes an alias patch onto one of them."""

    def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The Freight, or None when the store does not know it."""
        ...

    def list(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        """Every Freight of the namespace the store knows (for the uniqueness check)."""
        ...

    async def write_alias(self, namespace: str, name: str, alias: str) -> None:
        """Write ``alias`` into the Freight's ``alias`` field and :data:`ALIAS_LABEL` label
        (:func:`alias_patch`). Raises a StepError when it cannot."""
        ...


def go_quote(text: str) -> str:
    """Go's ``%q`` for the plain text of names and aliases (what Kargo's messages show)."""
    return json.dumps(text, ensure_ascii=False)


def alias_of(freight: Mapping[str, Any]) -> str:
    return str(freight.get("alias") or "")


def check_alias(kind: str, alias: str) -> None:
    if not _LABEL_VALUE.fullmatch(alias):
        raise ConfigRefused(
            f"{kind}: config.alias {alias!r} is not a valid alias: at most 63 letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit (it is stored in the "
            f"{ALIAS_LABEL} label)"
        )


def needs_alias(
    freight: Mapping[str, Any],
    others: Iterable[Mapping[str, Any]],
    alias: str,
    namespace: str,
) -> bool:
    """Whether ``freight`` must be written to have ``alias`` (False: it already has it).

    Refuses (Kargo: the webhook's refusal ends the step Failed) an alias another Freight of the
    namespace has, in its field or its label.
    """
    name = meta(freight).get("name")
    for other in others:
        if meta(other).get("name") == name:
            continue
        labels = meta(other).get("labels") or {}
        if alias_of(other) == alias or labels.get(ALIAS_LABEL) == alias:
            raise ConfigRefused(
                f"failed to patch alias for Freight {go_quote(str(name))} in project "
                f"{go_quote(namespace)}: alias {go_quote(alias)} already used by another piece "
                f"of Freight in namespace {go_quote(namespace)}"
            )
    labels = meta(freight).get("labels") or {}
    return not (alias_of(freight) == alias and labels.get(ALIAS_LABEL) == alias)


def alias_patch(alias: str) -> dict[str, Any]:
    """Kargo's merge patch: the field and the label, in one write."""
    return {"metadata": {"labels": {ALIAS_LABEL: alias}}, "alias": alias}


class InMemoryFreightAliases:
    """:class:`FreightAliases` over Freight held in memory (the local runner's manifests).

    Writes stay in this store; the objects it was built from are not changed.
    """

    def __init__(self, objects: Iterable[Mapping[str, Any]], default_namespace: str) -> None:
        self._freight: dict[tuple[str, str], dict[str, Any]] = {}
        for obj in objects:
            name = meta(obj).get("name")
            if obj.get("kind") == "Freight" and name:
                namespace = meta(obj).get("namespace") or default_namespace
                self._freight[(namespace, str(name))] = dict(obj)

    def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._freight.get((namespace, name))

    def list(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return [obj for (ns, _), obj in self._freight.items() if ns == namespace]

    async def write_alias(self, namespace: str, name: str, alias: str) -> None:
        obj = self._freight[(namespace, name)]
        meta_copy = dict(meta(obj))
        meta_copy["labels"] = {**(meta_copy.get("labels") or {}), ALIAS_LABEL: alias}
        self._freight[(namespace, name)] = {**obj, "metadata": meta_copy, "alias": alias}
