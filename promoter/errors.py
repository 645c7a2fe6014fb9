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
    help (unauthorized, a missing object); the step ends Errored at once. A refused config is
    :class:`ConfigRefused`.
    """

    def __init__(self, message: str, *, terminal: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.terminal = terminal
        self.retry_after = retry_after

    def with_message(self, message: str) -> StepError:
        """The same error, of the same kind, saying ``message`` (redacted, or with a prefix)."""
        # Not copy.copy: subclasses take other __init__ arguments (MetadataObjectMissing).
        other = type(self).__new__(type(self), message)
        other.__dict__.update(self.__dict__)
        other.message = message
        other.args = (message,)
        return other


class ConfigRefused(StepError):
    """A step refuses its config: a missing or malformed field, fields that exclude each other, a
    path leading out of the work directory, a file it must not overwrite.

    Always terminal, and the step ends ``Failed``, not ``Errored``: Kargo's steps return
    ``Failed`` with a ``TerminalError`` when their config fails validation (every
    ``convert()``, file-write's path checks), and its engine keeps that status; ``Errored`` is
    left for what went wrong while the step worked (a remote, the cluster, a bug).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, terminal=True)


class PolicyRefused(LongshoremanError):
    """An action was refused by policy (authorization, a Stage's rules)."""
