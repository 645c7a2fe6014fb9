"""A credential Secret's ``repoURL`` pattern goes through the RE2 port: a runaway one answers.

A Secret labelled as a repository credential with ``repoURLIsRegex: "true"`` is matched against
every URL a Warehouse, a git step or an oci step asks for (Kargo's ``database.go``, Go's RE2).
"""

from __future__ import annotations

import base64

from promoter.ports.credentials import CredentialType
from promoter.rules.credentials import find_secret, parse_secret
from tests.support.runaway import RUNAWAY_PATTERN, RUNAWAY_TEXT, comes_back


def pattern_secret(name: str, repo_url: str) -> dict[str, object]:
    data = {"repoURL": repo_url, "repoURLIsRegex": "true", "username": "u", "password": "p"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": "kargo-demo",
            "labels": {"kargo.akuity.io/cred-type": "git"},
        },
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def test_a_runaway_repo_url_pattern_answers_and_the_next_secret_still_matches() -> None:
    runaway = parse_secret(pattern_secret("a-runaway", RUNAWAY_PATTERN))
    fitting = parse_secret(pattern_secret("b-fitting", "a+!$"))
    assert runaway is not None and fitting is not None
    with comes_back("a credential Secret's repoURL pattern"):
        found = find_secret([runaway, fitting], CredentialType.GIT, RUNAWAY_TEXT)
    assert found is fitting
