"""The GitHub adapter of the pull-request steps' port (:class:`promoter.steps.github.PullRequests`).

A ``repoURL`` names ``owner/repo``; the installation serving it is looked up once and cached by
the client. Every gidgethub or network exception is translated into the engine's error kinds
here (:func:`handlers.client.step_error`), so the steps never see HTTP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import gidgethub

from handlers.client import GitHubAPI, GitHubClient, step_error
from promoter.errors import StepError
from promoter.steps.github import Comparison, NotMergeable, PullRequest, repo_full_name

T = TypeVar("T")

# git's well-known empty tree: an orphan branch's first commit points at it.
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def parse_pull(data: Any) -> PullRequest:
    """A REST pull request object, parsed at the edge."""
    return PullRequest(
        number=int(data["number"]),
        url=str(data.get("html_url") or data.get("url") or ""),
        open=data.get("state") == "open",
        merged=bool(data.get("merged") or data.get("merged_at")),
        head_branch=str((data.get("head") or {}).get("ref") or ""),
        base_branch=str((data.get("base") or {}).get("ref") or ""),
        head_sha=str((data.get("head") or {}).get("sha") or ""),
        merge_commit=(data.get("merge_commit_sha") or None)
        if (data.get("merged") or data.get("merged_at"))
        else None,
        created_at=str(data.get("created_at") or ""),
    )


def _path(*parts: str) -> str:
    # Branch names may hold '/', '#', '{': quote each part ourselves instead of relying on URI
    # template expansion, so a ref can never change the path's meaning.
    return "/" + "/".join(quote(part, safe="/") for part in parts)


class GitHubPullRequests:
    """``ctx.services.extra["github"]`` for the PR steps, over the App's installations."""

    def __init__(self, client: GitHubClient) -> None:
        self.client = client

    async def _api(self, repo_url: str) -> tuple[GitHubAPI, str]:
        full_name = repo_full_name(repo_url)
        try:
            return await self.client.repo_api(full_name), full_name
        except gidgethub.BadRequest as e:
            if int(e.status_code) == 404:
                raise StepError(
                    f"the GitHub App is not installed on {full_name} (or cannot see it)",
                    terminal=True,
                ) from None
            raise step_error(e, f"finding the App's installation on {full_name}") from None
        except Exception as e:
            raise step_error(e, f"finding the App's installation on {full_name}") from None

    @staticmethod
    async def _guard(what: str, awaitable: Awaitable[T]) -> T:
        try:
            return await awaitable
        except StepError:
            raise
        except Exception as e:
            raise step_error(e, what) from None

    async def find(self, repo_url: str, *, head: str, base: str) -> list[PullRequest]:
        api, name = await self._api(repo_url)
        repo = f"/repos/{name}"
        owner = name.split("/")[0]

        async def collect() -> list[PullRequest]:
            out = []
            async for item in api.getiter(
                f"{repo}/pulls{{?state,head,base,per_page}}",
                {"state": "all", "head": f"{owner}:{head}", "base": base, "per_page": 100},
            ):
                out.append(parse_pull(item))
            return out

        return await self._guard(f"listing pull requests of {name}", collect())

    async def get(self, repo_url: str, number: int) -> PullRequest:
        api, name = await self._api(repo_url)
        repo = f"/repos/{name}"
        data = await self._guard(
            f"reading pull request #{number} of {name}", api.getitem(f"{repo}/pulls/{number}")
        )
        return parse_pull(data)

    async def create(
        self,
        repo_url: str,
        *,
        head: str,
        base: str,
        title: str,
        body: str,
        labels: Sequence[str],
    ) -> PullRequest:
        api, name = await self._api(repo_url)
        repo = f"/repos/{name}"
        what = f"opening a pull request {head} -> {base} in {name}"
        try:
            data = await api.post(
                f"{repo}/pulls", data={"title": title, "head": head, "base": base, "body": body}
            )
        except gidgethub.BadRequest as e:
            if "already exists" not in _errors_text(e):
                raise step_error(e, what) from None
            # Another replica (or a crash after the POST) got there first: adopt its PR.
            found = [pr for pr in await self.find(repo_url, head=head, base=base) if pr.open]
            if not found:
                raise step_error(e, what) from None
            pr = found[0]
        except Exception as e:
            raise step_error(e, what) from None
        else:
            pr = parse_pull(data)
        if labels:
            await self._guard(
                f"labelling pull request #{pr.number}",
                api.post(f"{repo}/issues/{pr.number}/labels", data={"labels": list(labels)}),
            )
        return pr

    async def merge(
        self, repo_url: str, number: int, *, method: str | None, title: str, message: str
    ) -> PullRequest:
        api, name = await self._api(repo_url)
        repo = f"/repos/{name}"
        body: dict[str, Any] = {"commit_title": title, "commit_message": message}
        if method:
            body["merge_method"] = method
        try:
            await api.put(f"{repo}/pulls/{number}/merge", data=body)
        except gidgethub.BadRequest as e:
            # 405: not mergeable (checks, conflicts, draft); 409: the head moved meanwhile.
            if int(e.status_code) in (405, 409):
                raise NotMergeable(f"GitHub will not merge pull request #{number}: {e}") from None
            raise step_error(e, f"merging pull request #{number}") from None
        except Exception as e:
            raise step_error(e, f"merging pull request #{number}") from None
        return await self.get(repo_url, number)

    async def branch_head(self, repo_url: str, branch: str) -> str | None:
        api, name = await self._api(repo_url)
        repo = f"/repos/{name}"
        try:
            data = await api.getitem(repo + _path("branches", branch))
        except gidgethub.BadRequest as e:
            if int(e.status_code) == 404:
                return None
            raise step_error(e, f"reading branch {branch!r}") from None
        except Exception as e:
            raise step_error(e, f"reading branch {branch!r}") from None
        return str(data["commit"]["sha"])

    async def compare(self, repo_url: str, base: str, head: str) -> Comparison:
        api, name = await self._api(repo_url)
        repo = f"/repos/{name}"
        try:
            data = await api.getitem(repo + _path("compare", f"{base}...{head}"))
        except gidgethub.BadRequest as e:
            if int(e.status_code) == 404:
                # No common ancestor (a freshly created orphan target): everything differs.
                return Comparison(ahead_by=1, files_changed=1)
            raise step_error(e, f"comparing {base}...{head}") from None
        except Exception as e:
            raise step_error(e, f"comparing {base}...{head}") from None
        return Comparison(int(data.get("ahead_by") or 0), len(data.get("files") or ()))

    async def commit_message(self, repo_url: str, ref: str) -> str:
        api, name = await self._api(repo_url)
        repo = f"/repos/{name}"
        data = await self._guard(f"reading commit {ref}", api.getitem(repo + _path("commits", ref)))
        return str((data.get("commit") or {}).get("message") or "")

    async def create_branch(self, repo_url: str, branch: str, message: str) -> None:
        api, name = await self._api(repo_url)
        repo = f"/repos/{name}"
        commit = await self._guard(
            f"creating branch {branch!r}",
            api.post(
                f"{repo}/git/commits", data={"message": message, "tree": EMPTY_TREE, "parents": []}
            ),
        )
        try:
            await api.post(
                f"{repo}/git/refs", data={"ref": f"refs/heads/{branch}", "sha": commit["sha"]}
            )
        except gidgethub.BadRequest as e:
            if "already exists" in _errors_text(e):
                return  # created meanwhile (another replica, an earlier attempt)
            raise step_error(e, f"creating branch {branch!r}") from None
        except Exception as e:
            raise step_error(e, f"creating branch {branch!r}") from None


def _errors_text(e: gidgethub.BadRequest) -> str:
    parts = [str(e)]
    for error in getattr(e, "errors", None) or ():
        if isinstance(error, dict):
            parts.append(str(error.get("message") or ""))
        else:
            parts.append(str(error))
    return " ".join(parts).lower()
