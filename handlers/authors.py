"""Who authored the changes a Freight carries, as GitHub knows it: for the self-approval rule.

A Stage annotated ``longshoreman.dev/self-approval: "false"`` refuses ``/approve`` from anyone
whose change the Freight carries (:func:`promoter.chat.planner.plan` decides; this module
gathers the fact). A change's author is the author of a pull request GitHub associates with
one of the Freight's commits ("List pull requests associated with a commit",
https://docs.github.com/en/rest/commits/commits#list-pull-requests-associated-with-a-commit),
in the repositories of the GitHub host this App serves that it is installed on. A commit in a
repository the App cannot read has no known author here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import gidgethub

from handlers.client import GitHubClient
from handlers.git_credentials import github_repo

log = logging.getLogger(__name__)


async def freight_authors(client: GitHubClient, freight: Mapping[str, Any]) -> set[str]:
    """The GitHub logins (lower case) of the authors of the pull requests of the Freight's
    commits."""
    authors: set[str] = set()
    for commit in freight.get("commits") or ():
        if not isinstance(commit, Mapping) or not commit.get("id"):
            continue
        repo = github_repo(str(commit.get("repoURL") or ""), client.settings.git_base_url)
        if repo is None:
            continue
        owner, name = repo.split("/", 1)
        try:
            gh = await client.repo_api(repo)
            pulls = await gh.getitem(
                "/repos/{owner}/{repo}/commits/{commit_sha}/pulls",
                {"owner": owner, "repo": name, "commit_sha": str(commit["id"])},
            )
        except gidgethub.BadRequest as e:
            # 404: not installed there, or no such repository; 422: GitHub does not know the
            # commit. Either way GitHub names no author for it.
            if int(e.status_code) not in (404, 422):
                raise
            log.info("no pull requests known for %s@%s (%s)", repo, commit["id"], e.status_code)
            continue
        for pull in pulls if isinstance(pulls, list) else ():
            login = ((pull or {}).get("user") or {}).get("login")
            if login:
                authors.add(str(login).lower())
    return authors
