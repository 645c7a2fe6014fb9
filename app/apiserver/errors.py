"""Kubernetes ``Status`` failures, built the way kube-apiserver builds them.

Clients key on ``code``, ``reason`` and ``details`` (the Python client surfaces them as
``ApiException.status`` and ``.body``), so the shapes and messages follow
k8s.io/apimachinery/pkg/api/errors closely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class FieldCause:
    """One field-level problem inside an ``Invalid`` (422) status."""

    reason: str
    message: str
    field: str

    def to_json(self) -> JsonObject:
        return {"reason": self.reason, "message": self.message, "field": self.field}


@dataclass
class StatusError(Exception):
    """A request failure that the HTTP layer renders as a ``Status`` object."""

    code: int
    reason: str
    message: str
    details: JsonObject | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def to_status(self) -> JsonObject:
        status: JsonObject = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


@dataclass(frozen=True)
class ResourceRef:
    """What the error helpers need to know about the resource an error is about."""

    group: str
    plural: str
    kind: str

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


def _details(ref: ResourceRef, name: str, **extra: Any) -> JsonObject:
    # The real server puts the *resource* (plural) into details.kind; see
    # apimachinery/pkg/api/errors.NewNotFound.
    details: JsonObject = {"name": name}
    if ref.group:
        details["group"] = ref.group
    details["kind"] = ref.plural
    details.update(extra)
    return details


def not_found(ref: ResourceRef, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{ref.qualified} "{name}" not found', _details(ref, name))


def unknown_resource() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(ref: ResourceRef, name: str) -> StatusError:
    return StatusError(
        409, "AlreadyExists", f'{ref.qualified} "{name}" already exists', _details(ref, name)
    )


def conflict(ref: ResourceRef, name: str, why: str | None = None) -> StatusError:
    why = why or (
        "the object has been modified; please apply your changes to the latest version "
        "and try again"
    )
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {ref.qualified} "{name}": {why}',
        _details(ref, name),
    )


def invalid(ref: ResourceRef, name: str, causes: list[FieldCause]) -> StatusError:
    rendered = [f"{c.field}: {c.message}" for c in causes]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    details: JsonObject = {"name": name}
    if ref.group:
        details["group"] = ref.group
    # Unlike NotFound, NewInvalid puts the Kind (not the resource) into details.kind.
    details["kind"] = ref.kind
    details["causes"] = [c.to_json() for c in causes]
    return StatusError(
        422, "Invalid", f'{ref.qualified_kind} "{name}" is invalid: {summary}', details
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def forbidden(ref: ResourceRef, name: str, why: str) -> StatusError:
    return StatusError(
        403,
        "Forbidden",
        f'{ref.qualified} "{name}" is forbidden: {why}',
        _details(ref, name),
    )


def method_not_allowed(verb: str, ref: ResourceRef) -> StatusError:
    return StatusError(
        405,
        "MethodNotAllowed",
        f"{verb} is not supported on resources of kind {ref.qualified!r}",
        {"group": ref.group, "kind": ref.plural} if ref.group else {"kind": ref.plural},
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
        {"causes": [{"reason": "UnexpectedHeader", "message": content_type}]},
    )


def expired(message: str) -> StatusError:
    # Watch caches answer a too-old resourceVersion with reason "Expired" and code 410
    # (apiserver/pkg/storage/cacher/watch_cache.go: errors.NewResourceExpired).
    return StatusError(410, "Expired", message)


def internal_error(message: str) -> StatusError:
    return StatusError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def too_many_requests(retry_after: int) -> StatusError:
    return StatusError(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        {"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )
