"""Logging for the server process: one JSON object per line, context fields, secrets redacted.

:func:`configure_logging` installs one stderr handler on the root logger with two filters:

- :class:`ContextFilter` copies the fields of :func:`promoter.ports.telemetry.log_context` (set per
  reconcile by the reconciler and per delivery by the webhook worker) onto each record, so a
  line says which ``promotion``, ``stage``, ``namespace`` or ``delivery_id`` it is about;
- :class:`RedactingFilter` renders the message, the traceback and the stack *before* any
  formatter sees them and removes secrets from the text: the configured values (GitHub webhook
  secret and private key, Slack token and signing secret), values registered while running
  (installation tokens as GitHub issues them: :meth:`Redactor.add`), and anything that looks like
  a credential (``ghs_``/``ghp_``/``github_pat_`` tokens, ``xox?-`` Slack tokens, ``Bearer``
  values and ``Authorization`` headers, PEM private keys, ``scheme://user:password@``).

Redacting the record rather than one formatter's output means both the text and the JSON
format, and any handler added later with these filters, are covered.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from promoter.ports.telemetry import CONTEXT_FIELDS, current_log_context

REDACTED = "***"
# Shorter values are not treated as secrets: replacing "1" or "on" everywhere would garble
# every line, and such values protect nothing anyway.
MIN_SECRET_LENGTH = 4
# Installation tokens are registered as they are issued (one per installation per hour); keep
# the most recent ones. Older ones have expired, and the ghs_ pattern catches them regardless.
MAX_DYNAMIC_SECRETS = 4096

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # A PEM private key, or what is left of one when the end marker was cut off.
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)",
            re.DOTALL,
        ),
        "[REDACTED PRIVATE KEY]",
    ),
    # Header lines and dict reprs: "Authorization: token x", "'Authorization': 'Bearer x'".
    (
        re.compile(
            r"(?i)\b((?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)"
            r"(?:(?:bearer|basic|token)\s+)?[^\s'\",}]+"
        ),
        r"\1" + REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1" + REDACTED),
    # GitHub tokens: installation (ghs_), personal (ghp_), OAuth (gho_), user (ghu_), refresh
    # (ghr_) and fine-grained personal tokens.
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    # Slack tokens: bot (xoxb-), user (xoxp-), app-level (xapp-) and the older kinds.
    (re.compile(r"\b(?:xox[a-z]|xapp)-[A-Za-z0-9-]+"), REDACTED),
    # Credentials in a URL: https://user:password@host, https://token@host.
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"<>]+@"), r"\1" + REDACTED + "@"),
)


class Redactor:
    """Removes secrets from text: credential-shaped patterns, then registered values."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._static: set[str] = set()
        self._dynamic: OrderedDict[str, None] = OrderedDict()
        self._literal: re.Pattern[str] | None = None

    def add(self, secret: str | None, *, static: bool = False) -> None:
        """Never log ``secret`` (nor, for multi-line values, any long line of it)."""
        if not secret:
            return
        variants = {secret, secret.strip()}
        if "\n" in secret:
            # Logged through repr() or JSON, a PEM key's newlines become "\n".
            variants.add(secret.replace("\n", "\\n"))
            variants.update(
                line.strip()
                for line in secret.splitlines()
                if len(line) >= 16 and not line.startswith("-----")
            )
        values = {v for v in variants if len(v) >= MIN_SECRET_LENGTH}
        if not values:
            return
        with self._lock:
            if static:
                self._static.update(values)
            else:
                for value in values:
                    self._dynamic[value] = None
                    self._dynamic.move_to_end(value)
                while len(self._dynamic) > MAX_DYNAMIC_SECRETS:
                    self._dynamic.popitem(last=False)
            everything = sorted(self._static | set(self._dynamic), key=len, reverse=True)
            self._literal = re.compile("|".join(re.escape(v) for v in everything))

    def add_static(self, secrets: Iterable[str | None]) -> None:
        for secret in secrets:
            self.add(secret, static=True)

    def redact(self, text: str) -> str:
        # Patterns first: they see whole shapes (a PEM block from its BEGIN line to its END
        # line, or to the end of a truncated one) before registered values break them up.
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        literal = self._literal
        if literal is not None:
            text = literal.sub(REDACTED, text)
        return text


# The process's redactor: the server registers its configured secrets here at start, and the
# GitHub client its installation tokens as they are issued.
REDACTOR = Redactor()

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
) | {"message", "asctime", "taskName"}


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class ContextFilter(logging.Filter):
    """Copies :func:`promoter.ports.telemetry.log_context` fields onto the record (``extra=``
    wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in current_log_context().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class RedactingFilter(logging.Filter):
    """Renders the record's text and removes secrets from it (see the module docstring)."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor or REDACTOR
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        redact = self.redactor.redact
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not lose the line
            message = f"{record.msg!r} % {record.args!r}"
        record.msg, record.args = redact(message), None
        if record.exc_info:
            # Formatted now, so no formatter formats the raw traceback (with its locals' reprs
            # in exception messages) again later.
            record.exc_text = self._formatter.formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        for key, value in extra_fields(record).items():
            if isinstance(value, str):
                setattr(record, key, redact(value))
            elif not isinstance(value, int | float | bool) and value is not None:
                setattr(record, key, redact(_json_text(value)))
        return True


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the context fields when known,
    other ``extra=`` fields, and the exception's traceback as one string."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extras = extra_fields(record)
        for key in CONTEXT_FIELDS:
            if extras.get(key) is not None:
                out[key] = str(extras[key])
        for key, value in sorted(extras.items()):
            if key not in out and key not in CONTEXT_FIELDS:
                out[key] = value if isinstance(value, str | int | float | bool) else str(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """The human format, with the context fields appended when known."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = [
            f"{key}={getattr(record, key)}"
            for key in CONTEXT_FIELDS
            if getattr(record, key, None) is not None
        ]
        if not context:
            return line
        first, newline, rest = line.partition("\n")
        return f"{first} [{' '.join(context)}]{newline}{rest}"


def handler_for(log_format: str, redactor: Redactor | None = None) -> logging.Handler:
    """A stderr handler with the context and redaction filters and the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactingFilter(redactor))
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    return handler


def configure_logging(log_format: str, level: str, secrets: Iterable[str | None] = ()) -> None:
    """Route every log record (and Python warnings) through one redacting stderr handler."""
    REDACTOR.add_static(secrets)
    root = logging.getLogger()
    root.handlers[:] = [handler_for(log_format)]
    root.setLevel(level)
    logging.captureWarnings(True)
    # aiohttp's access log would print a line per probe.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
