"""Acting from where people look: the port a status page (and anything else that is not a
conversation) asks to carry out a command for a named person.

A page has no thread to reply in and no button payload of its own: it hands a
:class:`~promoter.chat.grammar.Command` (parsed from its form with the chat grammar, so the
words mean what they mean in a comment) and who asked, and shows the :class:`Acted` it gets
back. The front end that knows the person (GitHub, for a GitHub sign-in) implements
:class:`Acting` with the same facts, planner and authorization as its comments, so a page can
never allow what a pull request comment would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from promoter.chat.grammar import Command
from promoter.chat.port import PromotionRef

Outcome = Literal["done", "refused", "confirm"]


@dataclass(frozen=True, slots=True)
class Acted:
    """What a command did, in words for the person who asked.

    ``refused``: nothing changed and ``text`` says why (the words a PR comment's reply uses);
    ``confirm``: the Stage asks for a confirmation first (the command again, ``confirmed``);
    ``done``: ``text`` says what was done; ``promotion`` is the Promotion created, if any.
    """

    outcome: Outcome
    text: str
    promotion: PromotionRef | None = None


class Acting(Protocol):
    """Carry out ``command`` in project ``namespace`` for ``login``, under that front end's
    rules for that person."""

    async def act(self, namespace: str, login: str, command: Command) -> Acted: ...
