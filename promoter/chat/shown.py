"""What a front end last showed on each of its surfaces, so that it writes only what changed.

A *surface* is one thing people see that the bot writes and rewrites: a Promotion's ``promote:``
check runs, its reply to a command, a ``verify:`` check run, a GitHub Deployment's status, a
Slack message. The one rule for all of them: render the content, take its :func:`digest`, and
send a write only when that differs from the digest last shown. The front end keeps the digests
in memory and records them on the Kubernetes object the content follows (a :class:`Shown` in an
annotation of its own), so a restarted replica, or a new leader, which replays every Promotion and
Stage, compares with what was shown before instead of writing it all again: with history, those
identical writes would grow with every Stage at every rollout of the Deployment and spend the
GitHub App's and the Slack bot's rate limits.

The digest is taken over what a surface shows, which is built from stored objects only: no
surface reads the clock (a duration is ``finishedAt - startedAt``, never "3 minutes ago"), so the
same objects give the same digest on any replica, at any time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from promoter.resources import annotations as ann


def digest(*content: Any) -> str:
    """A short digest of ``content`` (JSON-able; mappings in any key order digest the same).

    The same as Slack messages' digests were before this module (``MessageRecord.shown``), so
    messages recorded by an older release are not sent again after an upgrade.
    """
    text = json.dumps(list(content), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Shown:
    """Surface -> digest of what it last showed (and ``notes``: facts learned while showing it
    that the content depends on, such as the check run's page a reply links to)."""

    digests: Mapping[str, str] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)

    def shows(self, surface: str, value: str) -> bool:
        return self.digests.get(surface) == value

    def showing(self, surface: str, value: str) -> Shown:
        return Shown({**self.digests, surface: value}, self.notes)

    def noting(self, name: str, value: str) -> Shown:
        return Shown(self.digests, {**self.notes, name: value})

    def only(self, *surfaces: str) -> Shown:
        """Just these surfaces' digests (a record that must not grow with history)."""
        return Shown({s: d for s, d in self.digests.items() if s in surfaces}, self.notes)

    def to_annotation(self) -> str:
        data: dict[str, Any] = {"shown": dict(sorted(self.digests.items()))}
        if self.notes:
            data["notes"] = dict(sorted(self.notes.items()))
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def of(cls, obj: Mapping[str, Any], key: str) -> Shown:
        """The record in ``obj``'s annotation ``key``; empty when absent or not ours (an older
        release's bare digest, a person's edit): then everything is shown once more."""
        data = ann.read_json(obj, key)
        digests, notes = data.get("shown"), data.get("notes")
        return cls(
            {str(k): str(v) for k, v in digests.items()} if isinstance(digests, Mapping) else {},
            {str(k): str(v) for k, v in notes.items()} if isinstance(notes, Mapping) else {},
        )
