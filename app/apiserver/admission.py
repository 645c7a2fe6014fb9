"""Admission in the emulator: where a real server calls its mutating and validating webhooks.

The emulator stands alone (it imports none of Longshoreman), so what admission decides comes
from whoever builds it: ``create_apiserver_app(admission=...)`` takes an :data:`Admission`,
called on every create and update of a custom resource's main endpoint (a webhook's rules
name ``promotions``, not ``promotions/status``, so status writes pass, as on a real server),
dry runs included. It gets an :class:`AdmissionRequest` and answers with the object to store
(mutated, or as it came) and the field problems that refuse it, all of them at once; the
store then answers 422 Invalid naming each field, as kube-apiserver relays a webhook's
``Invalid`` status.

The order is the real server's: mutation before the schema (pruning, defaults, validation),
validation after it, on the object as it would be stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from app.apiserver.errors import FieldCause

JsonObject = dict[str, Any]

Operation = Literal["CREATE", "UPDATE"]
Stage = Literal["mutate", "validate"]


@dataclass(frozen=True)
class AdmissionRequest:
    """One write as admission sees it. ``lookup(group, plural, namespace, name)`` reads a
    stored object (namespace empty for cluster-scoped kinds) and ``list(group, plural,
    namespace)`` a namespace's, as a webhook reads its cache."""

    stage: Stage
    operation: Operation
    group: str
    plural: str
    kind: str
    obj: JsonObject
    old: JsonObject | None
    user: str
    lookup: Callable[[str, str, str, str], JsonObject | None]
    list: Callable[[str, str, str], list[JsonObject]]


@dataclass(frozen=True)
class AdmissionResponse:
    """The object to go on with (None: unchanged) and the problems that refuse it."""

    obj: JsonObject | None = None
    causes: list[FieldCause] = field(default_factory=list)


Admission = Callable[[AdmissionRequest], AdmissionResponse]
