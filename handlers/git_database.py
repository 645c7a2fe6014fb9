"""The GitHub adapter of ``github-push``'s port (:class:`promoter.steps.github_push.GitDatabase`).

GitHub's REST "Git database" operations and the commit comparison, as the App's installation on
the repository a ``repoURL`` names (https://docs.github.com/rest/git):

- ``GET /repos/{owner}/{repo}/git/ref/{ref}``: a ref's object, 404 when there is none;
- ``GET /repos/{owner}/{repo}/compare/{base}...{head}`` with ``per_page``/``page``;
- ``POST /repos/{owner}/{repo}/git/commits`` with ``message``, ``tree``, ``parents`` and, only for
  commits Longshoreman does not vouch for, ``author`` and ``committer`` (without them GitHub
  attributes the commit to the App and signs it);
- ``POST /repos/{owner}/{repo}/git/refs``, ``PATCH`` and ``DELETE .../git/refs/{ref}``; GitHub
  answers a ref update that is not a fast-forward with 422, which becomes
  :class:`~promoter.steps.github_push.NotFastForward`.

The bodies are built by the pure functions below (``commit_body``...), so what is sent reads in
one place. Before anything, :meth:`GitHubGitDatabase.check_installed` says in words when the
repository is not on the App's GitHub or the App is not installed on it; every other failure is
translated into the engine's error kinds here (:func:`handlers.client.step_error`).
"""

from __future__ import annotations

from typing import Any

import gidgethub

from handlers.client import GitHubAPI, GitHubClient, step_error
from handlers.git_credentials import github_repo
from handlers.pull_requests import _errors_text, _path
from promoter.errors import StepError
from promoter.steps.github_push import KIND as STEP
from promoter.steps.github_push import (
    CommitRange,
    NewCommit,
    NotFastForward,
    Person,
    RemoteCommit,
)

# The largest page GitHub's compare returns; a push replays far fewer (10 by default).
PER_PAGE = 100


def commit_body(commit: NewCommit) -> dict[str, Any]:
    """``POST .../git/commits``: author and committer only when the commit carries them."""
    body: dict[str, Any] = {
        "message": commit.message,
        "tree": commit.tree,
        "parents": list(commit.parents),
    }
    for key, person in (("author", commit.author), ("committer", commit.committer)):
        if person is not None:
            body[key] = {"name": person.name, "email": person.email}
            if person.date:
                body[key]["date"] = person.date
    return body


def _person(data: Any) -> Person | None:
    if not isinstance(data, dict) or not data.get("name"):
        return None
    return Person(str(data["name"]), str(data.get("email") or ""), str(data.get("date") or ""))


def parse_commit(data: Any) -> RemoteCommit:
    """A commit of a comparison (REST ``commit`` schema), parsed at the edge."""
    inner = data.get("commit") or {}
    return RemoteCommit(
        sha=str(data["sha"]),
        tree=str((inner.get("tree") or {}).get("sha") or ""),
        message=str(inner.get("message") or ""),
        author=_person(inner.get("author")),
        committer=_person(inner.get("committer")),
        parents=tuple(str(p["sha"]) for p in data.get("parents") or ()),
    )


class GitHubGitDatabase:
    """``ctx.services.extra["github-git"]``, over the App's installations."""

    def __init__(self, client: GitHubClient) -> None:
        self.client = client

    def _full_name(self, repo_url: str) -> str:
        full_name = github_repo(repo_url, self.client.settings.git_base_url)
        if full_name is None:
            raise StepError(
                f"{STEP}: {repo_url.strip()} is not a repository on the GitHub the App serves "
                f"({self.client.settings.git_base_url}); use git-push for it",
                terminal=True,
            )
        return full_name

    async def _api(self, repo_url: str) -> tuple[GitHubAPI, str]:
        full_name = self._full_name(repo_url)
        try:
            return await self.client.repo_api(full_name), full_name
        except gidgethub.BadRequest as e:
            if int(e.status_code) == 404:
                raise StepError(
                    f"{STEP}: the GitHub App is not installed on {full_name} (or cannot see it); "
                    "github-push acts as the App, so install it on that repository (or use "
                    "git-push)",
                    terminal=True,
                ) from None
            raise step_error(e, f"{STEP}: finding the App's installation on {full_name}") from None
        except Exception as e:
            raise step_error(e, f"{STEP}: finding the App's installation on {full_name}") from None

    async def check_installed(self, repo_url: str) -> None:
        await self._api(repo_url)

    async def ref(self, repo_url: str, ref: str) -> str | None:
        api, name = await self._api(repo_url)
        try:
            data = await api.getitem(f"/repos/{name}" + _path("git", "ref", ref))
        except gidgethub.BadRequest as e:
            if int(e.status_code) == 404:
                return None
            raise step_error(e, f"reading ref {ref} of {name}") from None
        except Exception as e:
            raise step_error(e, f"reading ref {ref} of {name}") from None
        return str(data["object"]["sha"])

    async def compare(self, repo_url: str, base: str, head: str, *, limit: int) -> CommitRange:
        api, name = await self._api(repo_url)
        what = f"comparing {base[:12]}...{head[:12]} in {name}"
        commits: list[RemoteCommit] = []
        page = 1
        while True:
            try:
                data = await api.getitem(
                    f"/repos/{name}" + _path("compare", f"{base}...{head}") + "{?per_page,page}",
                    {"per_page": PER_PAGE, "page": page},
                )
            except Exception as e:
                raise step_error(e, what) from None
            listed = [parse_commit(c) for c in data.get("commits") or ()]
            commits += listed
            total = int(data.get("total_commits") or 0)
            if not listed or len(commits) >= min(total, limit + 1):
                break
            page += 1
        return CommitRange(
            status=str(data.get("status") or ""),
            merge_base=str((data.get("merge_base_commit") or {}).get("sha") or ""),
            total=total,
            commits=tuple(commits),
        )

    async def create_commit(self, repo_url: str, commit: NewCommit) -> str:
        api, name = await self._api(repo_url)
        try:
            data = await api.post(f"/repos/{name}/git/commits", data=commit_body(commit))
        except Exception as e:
            raise step_error(e, f"creating a commit in {name}") from None
        return str(data["sha"])

    async def create_ref(self, repo_url: str, ref: str, sha: str) -> None:
        api, name = await self._api(repo_url)
        try:
            await api.post(f"/repos/{name}/git/refs", data={"ref": ref, "sha": sha})
        except gidgethub.BadRequest as e:
            if int(e.status_code) == 422 and "already exists" in _errors_text(e):
                # Created meanwhile (another Promotion pushing to a new branch): try again,
                # integrating what is there now.
                raise NotFastForward(
                    f"creating {ref} in {name}: GitHub answered 422: {e}"
                ) from None
            raise step_error(e, f"creating {ref} in {name}") from None
        except Exception as e:
            raise step_error(e, f"creating {ref} in {name}") from None

    async def update_ref(self, repo_url: str, ref: str, sha: str, *, force: bool) -> None:
        api, name = await self._api(repo_url)
        try:
            await api.patch(
                f"/repos/{name}" + _path("git", "refs", ref), data={"sha": sha, "force": force}
            )
        except gidgethub.BadRequest as e:
            # 422 is GitHub's answer both to a branch that moved meanwhile (try again) and to
            # branch protection refusing the commits (say so: retrying cannot help).
            if int(e.status_code) == 422 and "fast forward" in _errors_text(e):
                raise NotFastForward(
                    f"moving {ref} of {name} to {sha[:12]}: GitHub answered 422: {e}"
                ) from None
            raise step_error(e, f"moving {ref} of {name}") from None
        except Exception as e:
            raise step_error(e, f"moving {ref} of {name}") from None

    async def delete_ref(self, repo_url: str, ref: str) -> None:
        api, name = await self._api(repo_url)
        try:
            await api.delete(f"/repos/{name}" + _path("git", "refs", ref))
        except gidgethub.BadRequest as e:
            if int(e.status_code) == 422 and "does not exist" in _errors_text(e):
                return  # never made (the attempt stopped before), or deleted already
            raise step_error(e, f"deleting {ref} of {name}") from None
        except Exception as e:
            raise step_error(e, f"deleting {ref} of {name}") from None
