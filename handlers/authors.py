"""Who wrote, pushed into or merged the changes a Freight carries, as GitHub knows it: for the
self-approval rule.

A Stage annotated ``longshoreman.dev/self-approval: "false"`` refuses ``/approve`` from anyone
whose change the Freight carries (:func:`promoter.chat.planner.plan` decides; this module
gathers the fact). Free text never counts: a commit's ``Author:`` line is whatever its
committer typed. What counts is the accounts GitHub links to each of the Freight's commits
(https://docs.github.com/en/rest/commits/commits#get-a-commit: ``author`` and ``committer``,
the accounts whose verified addresses the commit carries; a merge made on github.com is
authored by whoever merged it) and, for every pull request GitHub associates with the commit
(https://docs.github.com/en/rest/commits/commits#list-pull-requests-associated-with-a-commit),
the pull request's author, whoever merged it
(https://docs.github.com/en/rest/pulls/pulls#get-a-pull-request, ``merged_by``) and the
accounts of each of its commits
(https://docs.github.com/en/rest/pulls/pulls#list-commits-on-a-pull-request), so a commit
slipped into someone else's pull request counts for its own author.

Fail closed: when any commit's author cannot be established (a repository on another host or
reached over ``ssh://``, one the App is not installed on, a commit GitHub does not know, an
address no account has), the answer is None, "cannot tell", and the planner refuses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import gidgethub

from handlers.client import GitHubAPI, GitHubClient
from handlers.git_credentials import github_repo

log = logging.getLogger(__name__)

# A pull request with more commits than this is not read to its end by GitHub's list (250 at
# most); past it, its commits' authors cannot all be established.
_PULL_COMMITS_READ = 250


class _Unknown(Exception):
    """A change whose author GitHub cannot name."""


def _logins(commit: Mapping[str, Any]) -> set[str]:
    """The accounts GitHub links to a commit (lower case); ``_Unknown`` without an author."""
    author = commit.get("author")
    login = author.get("login") if isinstance(author, Mapping) else None
    if not login:
        raise _Unknown(f"commit {commit.get('sha')} has no GitHub account as its author")
    out = {str(login).lower()}
    committer = commit.get("committer")
    if isinstance(committer, Mapping) and committer.get("login"):
        out.add(str(committer["login"]).lower())
    return out


def _user(obj: Any, key: str) -> Iterable[str]:
    user = obj.get(key) if isinstance(obj, Mapping) else None
    login = user.get("login") if isinstance(user, Mapping) else None
    return (str(login).lower(),) if login else ()


async def _pull_people(gh: GitHubAPI, repo: str, number: int) -> set[str]:
    """The author, the merger and the authors and committers of every commit of a pull
    request."""
    pull = await gh.getitem(f"/repos/{repo}/pulls/{number}")
    people = {*_user(pull, "user"), *_user(pull, "merged_by")}
    if int(pull.get("commits") or 0) > _PULL_COMMITS_READ:
        raise _Unknown(f"{repo}#{number} has more commits than GitHub lists")
    async for commit in gh.getiter(f"/repos/{repo}/pulls/{number}/commits"):
        people |= _logins(commit)
    return people


async def _commit_people(client: GitHubClient, repo_url: str, sha: str) -> set[str]:
    repo = github_repo(repo_url, client.settings.git_base_url)
    if repo is None:
        raise _Unknown(f"{repo_url} is not a repository of {client.settings.git_base_url}")
    try:
        gh = await client.repo_api(repo)
        people = _logins(await gh.getitem(f"/repos/{repo}/commits/{sha}"))
        pulls = await gh.getitem(f"/repos/{repo}/commits/{sha}/pulls")
        for pull in pulls if isinstance(pulls, list) else ():
            if isinstance(pull, Mapping) and pull.get("number"):
                people |= await _pull_people(gh, repo, int(pull["number"]))
    except gidgethub.BadRequest as e:
        # 404: not installed there, or no such repository; 422: GitHub does not know the
        # commit. Either way GitHub names no author for it.
        if int(e.status_code) not in (404, 422):
            raise
        raise _Unknown(f"{repo}@{sha}: GitHub answered {e.status_code}") from None
    return people


async def freight_authors(client: GitHubClient, freight: Mapping[str, Any]) -> set[str] | None:
    """The GitHub logins (lower case) of everyone who authored, committed or merged a change the
    Freight carries; None when that cannot be established for every one of its commits."""
    authors: set[str] = set()
    for commit in freight.get("commits") or ():
        if not isinstance(commit, Mapping) or not commit.get("id"):
            continue
        try:
            authors |= await _commit_people(
                client, str(commit.get("repoURL") or ""), str(commit["id"])
            )
        except _Unknown as e:
            name = (freight.get("metadata") or {}).get("name")
            log.info("the authors of Freight %s cannot be established: %s", name, e)
            return None
    return authors
