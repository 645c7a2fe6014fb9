"""Repository URLs that came from a user: which ones a git process may reach, and how one is
shown or stored without the credentials someone put in it.

One rule for every place that hands a user's URL to git: the git steps (``git-clone``, the PR
steps) and Warehouse discovery. Like ``git clone`` run by a hosting service, it refuses local
repositories: ``file://`` URLs and bare paths. A Warehouse or Promotion on a path would otherwise
read whatever the server can read, another project's discovery mirror among it (its directory is
computable from the project's name and the repository's URL). Tests and operators that need a
local remote map a public URL to it with git's ``url.<base>.insteadOf`` in the server's own git
configuration, which git applies after this check and which no manifest can change.

Credentials never travel in a URL: one with a password (or, for http(s), a user name, which git
would send as a token) is refused here, and every URL shown or stored (a Warehouse's status, a
Freight's ``commits[].repoURL``, a chat message) goes through :func:`without_credentials` first,
so one that slipped in anyway (an image or chart repository, a message from git) is not repeated.

This module sits at the bottom of ``promoter/`` (beside ``errors``) so that the steps, the
Warehouse spec and the front ends can all import it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["SCP_LIKE_RE", "repo_url_problem", "without_credentials"]

# ``scheme://userinfo@``: the userinfo runs to the last ``@`` before the host's first ``/``, so a
# password holding an ``@`` is stripped whole.
_URL_USERINFO_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s]*@")
# ``[user@]host:path``, which git reads as ssh (no slash before the colon).
SCP_LIKE_RE = re.compile(r"^(?:[A-Za-z0-9._~-]+@)?[A-Za-z0-9.-]+:(?!//)[^\s]+$")
_ALLOWED_SCHEMES = frozenset({"https", "http", "ssh", "git"})


def without_credentials(text: str) -> str:
    """``text`` with ``user:password@`` removed from every URL in it (a URL or a message)."""
    return _URL_USERINFO_RE.sub(r"\g<scheme>", text)


def repo_url_problem(url: str) -> str | None:
    """Why git may not be pointed at ``url``, or None. Allows https, http, ssh, git and
    scp-like ``user@host:path`` URLs; refuses ``file://``, bare paths, other transports
    (``ext::``, ``fd::``) and credentials in the URL.
    """
    if not url:
        return "must not be empty"
    if url.startswith("-"):
        return "must not start with '-'"
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        return "must not contain whitespace or control characters"
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme.lower() not in _ALLOWED_SCHEMES:
            return (
                f"uses scheme {parts.scheme!r}; allowed are "
                f"{', '.join(sorted(_ALLOWED_SCHEMES))} and scp-like user@host:path "
                "(local repositories are refused, as a hosted git-clone refuses them)"
            )
        if parts.password is not None or (
            parts.username is not None and parts.scheme.lower() in ("https", "http")
        ):
            return (
                "must not contain credentials; give them to Longshoreman as a credentials "
                "Secret of the project instead"
            )
        if not parts.hostname:
            return "has no host"
        return None
    if SCP_LIKE_RE.match(url) and "::" not in url:
        return None
    return (
        "is not a remote repository URL (https://, ssh://, git:// or user@host:path); "
        "local paths are refused"
    )
