"""User-group membership for authorization, cached briefly.

Only the groups a Stage (or the default list) names are looked up, one ``usergroups.users.list``
per group per TTL; concurrent commands share one lookup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from promoter.clock import SYSTEM, Clock
from slack.api import SlackApi


class UserGroups:
    def __init__(self, api: SlackApi, ttl: float = 60.0, clock: Clock = SYSTEM) -> None:
        self.api = api
        self.ttl = ttl
        self.clock = clock
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._inflight: dict[str, asyncio.Future[frozenset[str]]] = {}

    async def members(self, group: str) -> frozenset[str]:
        """Raises slack.api.SlackError when Slack cannot tell us."""
        cached = self._members.get(group)
        if cached is not None and self.clock.monotonic() - cached[0] < self.ttl:
            return cached[1]
        inflight = self._inflight.get(group)
        if inflight is not None:
            return await asyncio.shield(inflight)
        future: asyncio.Future[frozenset[str]] = asyncio.get_running_loop().create_future()
        self._inflight[group] = future
        try:
            members = frozenset(await self.api.usergroup_members(group))
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as e:
            future.set_exception(e)
            future.exception()  # retrieved: waiters (if any) get it; none is not an error
            raise
        finally:
            self._inflight.pop(group, None)
        self._members[group] = (self.clock.monotonic(), members)
        future.set_result(members)
        return members

    async def of(self, user: str, groups: Iterable[str]) -> list[str]:
        """Which of ``groups`` ``user`` belongs to."""
        out = []
        for group in groups:
            if user in await self.members(group):
                out.append(group)
        return out
