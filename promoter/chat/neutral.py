"""The one neutraliser for text that came from others, for every surface that shows it.

A git server's message, a Freight alias, a step's error, an AnalysisRun's message, an actor
annotation, a deep link's title and URL: none of it was written by the person who reads it, and
some of it was written by someone who would like it to do more than be read. Every outbound
surface passes such text through one of these functions, chosen by how the surface renders:

- :func:`quiet`: GitHub Markdown (pull request replies, check run summaries). ``@user`` and
  ``@org/team`` mentions are broken with a zero-width space (a bot's comment notifies whoever it
  mentions), and so are ``#123`` references (each one would add an event to that issue's
  timeline); ``<`` and ``>`` become entities, so no HTML, ``<!-- hidden -->`` comment or
  ``<details>`` reaches the page; ``[`` and ``]`` are escaped, so no ``[text](url)`` link
  shows one address and leads to another. A bare URL still autolinks on GitHub, showing its own
  address, which is honest.
- :func:`cell`: the same on one line, for a Markdown table cell or a quoted message (``|``
  escaped).
- :func:`code`: text put inside a backtick code span, where nothing renders but a backtick or a
  newline would end the span early (mentions are broken there too: a span clipped by a length
  limit is no span).
- :func:`fenced`: text inside a fenced code block (full step messages): no fence to end ours.
- :func:`plain`: plain-text fields (a GitHub Deployment's description): mentions broken, one
  line.
- :func:`mrkdwn`: Slack's mrkdwn. Slack treats only ``&``, ``<`` and ``>`` as control characters
  (https://api.slack.com/reference/surfaces/formatting#escaping); escaping them turns
  ``<!channel>``, ``<@U123>`` and ``<https://evil|innocent>`` into plain text.
- :func:`link_url`: a URL put into link syntax (Markdown ``[t](url)``, Slack ``<url|t>``): only
  ``http`` and ``https``, with the characters that would end or split the link (``|``, ``>``,
  ``)``, spaces...) percent-encoded; anything else is no link at all.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["cell", "code", "fenced", "link_url", "mrkdwn", "plain", "quiet"]

ZERO_WIDTH_SPACE = "\u200b"
# A mention is "@" before a login or an org/team slug; a reference is "#" before a number.
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_REFERENCE = re.compile(r"#(?=[0-9])")
_MARKDOWN = str.maketrans({"<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]"})
_MRKDWN = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# Characters a URL may carry that end or split a link in Markdown or Slack, or that no
# well-formed URL holds unencoded; each becomes its percent-encoding.
_URL_UNSAFE = str.maketrans(
    {c: f"%{ord(c):02X}" for c in ' "<>\\^`{|}()[]' + "".join(map(chr, range(0x20))) + "\x7f"}
)


def _unmentioned(text: str) -> str:
    return _REFERENCE.sub("#" + ZERO_WIDTH_SPACE, _MENTION.sub("@" + ZERO_WIDTH_SPACE, text))


def quiet(text: str) -> str:
    """Text from others, safe in GitHub Markdown: it reads the same and does nothing."""
    return _unmentioned(text.translate(_MARKDOWN))


def cell(text: str) -> str:
    """:func:`quiet` on one line, for a Markdown table cell or a ``> quote`` line."""
    flat = " ".join(text.split()).replace("|", "\\|").replace("`", "'")
    return quiet(flat)


def code(text: str) -> str:
    """Text for inside a backtick code span: one line, no backtick to end the span (and the
    mentions broken all the same, in case a span is cut short by a limit)."""
    return _unmentioned(" ".join(text.split()).replace("`", "'"))


def fenced(text: str) -> str:
    """Text for inside a fenced code block: no fence to end ours, mentions broken."""
    return _unmentioned(text.replace("```", "'''"))


def plain(text: str) -> str:
    """Text from others for a plain-text field: one line, mentions broken."""
    return _unmentioned(" ".join(text.split()))


def mrkdwn(text: str) -> str:
    """Text from others, safe in Slack's mrkdwn: no mention, link or special command."""
    return text.translate(_MRKDWN)


def link_url(url: str) -> str | None:
    """``url`` made safe for link syntax, or None when it is not an http(s) URL."""
    url = url.strip()
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return None
    if scheme not in ("http", "https"):
        return None
    return url.translate(_URL_UNSAFE)
