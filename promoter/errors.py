"""Kinds of errors the engine and the front ends understand.

Adapters translate library exceptions (HTTP, git, Kubernetes) into these, so the engine never sees
an HTTP exception and a caller can tell what to do from the kind alone:

- :class:`TemporaryError`: trouble that passes (still starting, the cluster did not answer);
  try again, after ``retry_after`` seconds when it is known.
- :class:`PermanentError`: trying again cannot help until the user changes something. Its kinds:
  :class:`InvalidInput` (a manifest, var or flag is wrong: names the file and field),
  :class:`NotFound` (a named object does not exist) and :class:`Refused` (policy said no: the
  Freight is not available to the Stage; the cluster's validation, admission or RBAC).

The message of each is written for the user who asked: it names the problem, never a secret.
Steps have their own pair (:class:`StepError` and :class:`ConfigRefused`), which the engine turns
into a step's status.
"""

from __future__ import annotations


class LongshoremanError(Exception):
    """Base class of our own errors."""


class TemporaryError(LongshoremanError):
    """Trouble that may pass: try again, after ``retry_after`` seconds when that is known."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(LongshoremanError):
    """Trying again cannot help: the user must change something (see the subclasses)."""


class NotFound(PermanentError):
    """A named object (a Stage, a Freight, a Promotion) does not exist."""


class Refused(PermanentError):
    """Policy said no: the Freight is not available to the Stage, or the cluster refused the
    object (validation, admission, RBAC). Nothing was changed."""


class InvalidInput(PermanentError):
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
