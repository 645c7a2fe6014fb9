"""Ports for observability that every layer may use: a metrics sink and the log context.

``handlers/`` and ``slack/`` must not import the wiring layer (``app/``), where the Prometheus
registry lives, so they report through :class:`Telemetry`, a small port the app layer fills in
at wiring time (:class:`app.metrics.Metrics` implements it). :data:`NO_TELEMETRY` is the default
for tests and tools that do not care.

:func:`log_context` puts the fields that say what a log line is about (``promotion``, ``stage``,
``namespace``, ``delivery_id``) into a context variable for the duration of a block; the app's
logging setup copies them onto every record logged inside it, so call sites need not pass
``extra=`` everywhere. A context variable follows asyncio tasks: a reconcile or a webhook
delivery sets it once and every line it logs, at any depth, carries it.

Only the standard library is imported here, so the engine's layer contract still holds.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Protocol

# The fields a log line may carry to say what it is about.
CONTEXT_FIELDS = ("promotion", "stage", "namespace", "delivery_id")

# Read-only mappings, replaced (never mutated) by each block, so the shared default is safe.
_EMPTY: Mapping[str, str] = MappingProxyType({})
_context: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "longshoreman_log_context", default=_EMPTY
)


def current_log_context() -> Mapping[str, str]:
    """The fields set by the enclosing :func:`log_context` blocks (innermost wins)."""
    return _context.get()


@contextlib.contextmanager
def log_context(**fields: str | None) -> Iterator[None]:
    """Within the block, every log record carries ``fields`` (``None`` values are skipped)."""
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"unknown log context field(s): {', '.join(sorted(unknown))}")
    merged = {**_context.get(), **{k: v for k, v in fields.items() if v is not None}}
    token = _context.set(MappingProxyType(merged))
    try:
        yield
    finally:
        _context.reset(token)


def set_log_context(**fields: str | None) -> None:
    """Add ``fields`` to the context until the enclosing :func:`log_context` block (or the
    current asyncio task) ends; for code that learns what it works on half-way."""
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"unknown log context field(s): {', '.join(sorted(unknown))}")
    merged = {**_context.get(), **{k: v for k, v in fields.items() if v is not None}}
    _context.set(MappingProxyType(merged))


class Telemetry(Protocol):
    """Where adapters report what they did; label values must come from small, fixed sets."""

    def api_call(self, api: str, operation: str, outcome: str) -> None:
        """One call to an external API (``github``, ``slack``): ``operation`` is the HTTP method
        or Slack method name, ``outcome`` the status code or a word (``error``, ``ok``...)."""

    def rate_limited(self, api: str, seconds: float) -> None:
        """The API asked us to wait ``seconds`` (slept in place or handed back to the caller)."""

    def webhook_delivery(self, source: str, event: str, outcome: str) -> None:
        """One inbound delivery (``github``, ``slack``) and what the request path did with it
        (``accepted``, ``duplicate``, ``invalid_signature``, ``too_large``...); for accepted
        deliveries, once more when processed (``handled`` or ``failed``), inside the delivery's
        :func:`log_context` (a recording fake may read its ``delivery_id`` from there)."""

    def git_call(self, command: str, seconds: float) -> None:
        """One git subprocess (``command`` is git's subcommand: ``clone``, ``push``...) and how
        long it ran."""


class _NoTelemetry:
    def api_call(self, api: str, operation: str, outcome: str) -> None:
        pass

    def rate_limited(self, api: str, seconds: float) -> None:
        pass

    def webhook_delivery(self, source: str, event: str, outcome: str) -> None:
        pass

    def git_call(self, command: str, seconds: float) -> None:
        pass


NO_TELEMETRY: Telemetry = _NoTelemetry()
