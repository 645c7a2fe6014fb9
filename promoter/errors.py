"""Kinds of errors the engine understands.

Adapters translate library exceptions (HTTP, git, Kubernetes) into these, so the engine never sees
an HTTP exception and can decide purely: retry later, give up, or refuse.
"""

from __future__ import annotations


class LongshoremanError(Exception):
    """Base class of our own errors."""


class InvalidInput(LongshoremanError):
    """User input (a manifest, a var, a flag) is wrong. Names the file and field where it can."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.source = source
        self.field = field
        parts = []
        if source:
            parts.append(source)
        if field:
            parts.append(field)
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.bare_message = message


class StepError(LongshoremanError):
    """A step could not do its work.

    ``terminal=False``: a technical problem that may pass (network, a rejected push); the engine
    counts it against ``retry.errorThreshold`` and tries again. ``terminal=True``: retrying cannot
    help (bad config, unauthorized); the step ends Errored at once.
    """

    def __init__(self, message: str, *, terminal: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.terminal = terminal
        self.retry_after = retry_after


class PolicyRefused(LongshoremanError):
    """An action was refused by policy (authorization, a Stage's rules)."""
