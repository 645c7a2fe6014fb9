"""The server's environment variable names: its own carry one prefix, and the old names still work.

Every setting that is the server's own is named ``LONGSHOREMAN_<NAME>``. Some were not at first
(``PORT``, ``WATCH_NAMESPACE``, ``GITHUB_APP_ID``, ``SLACK_BOT_TOKEN``, ...): unprefixed, they
could be taken for another program's (``PORT`` is set by many platforms, ``GITHUB_*`` by every
CI runner). A deployment that still sets an old name keeps working, and the server's log says
which name to use instead (:attr:`app.settings.Settings.renamed`, logged once logging is set up).

Names other programs define are read as they are, unprefixed: ``KUBECONFIG`` (kubectl's and
every Kubernetes client's), ``POD_NAME`` (the name manifests give the Downward API's pod name),
and ``GIT_AUTHOR_NAME`` / ``GIT_AUTHOR_EMAIL`` (git's own, which git reads the same way).

Pure: each Settings class passes its old names and reads only the new ones from the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

PREFIX = "LONGSHOREMAN_"


def new_name(old: str) -> str:
    return PREFIX + old


def with_new_names(env: Mapping[str, str], old_names: Iterable[str]) -> dict[str, str]:
    """``env`` with each old name's value under its new name too, where the new one is unset."""
    current = dict(env)
    for old, new in renamed_in_use(env, old_names):
        current[new] = env[old]
    return current


def renamed_in_use(env: Mapping[str, str], old_names: Iterable[str]) -> list[tuple[str, str]]:
    """(old, new) for each old name set in ``env`` whose new name is not: what to warn about.

    Where both are set the new one wins and the old one is not reported: a deployment moving
    over may set both for a while.
    """
    return [(old, new_name(old)) for old in old_names if old in env and new_name(old) not in env]
