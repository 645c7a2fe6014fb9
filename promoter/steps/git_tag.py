"""``git-tag``: an annotated tag on a worktree's HEAD; a replay reuses the recorded date."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    StepStatus,
    succeeded,
)
from promoter.steps.git import (
    RAW_DATE_RE,
    Git,
    identity_of,
    open_worktree,
    recorded_date,
    ref_name_problem,
)

# What git-tag records for a replay (StepResult.replay_data).
TAGGER_DATE_KEY = "taggerDate"


async def git_tag(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-tag``: an annotated tag on HEAD. Re-running with the tag already on HEAD is a no-op.

    Output: ``{"tag": <name>, "commit": <sha>}``.
    """
    cfg = Config("git-tag", config)
    path = open_worktree(ctx, "git-tag", cfg)
    tag = cfg.str("tag")
    problem = ref_name_problem(tag)
    if problem:
        raise ConfigRefused(f"git-tag: config.tag {problem}")
    signer = cfg.map("signer")
    if signer.get("signingKey"):
        raise ConfigRefused("git-tag: config.signer.signingKey: signed tags are not supported")
    message = str(signer.get("signingMessage") or cfg.opt_str("message") or tag)
    git = Git(ctx, "git-tag")
    if signer:
        name, email = identity_of("git-tag", Config("git-tag", signer, "config.signer"))
        if name:
            git.env["GIT_COMMITTER_NAME"] = name
        if email:
            git.env["GIT_COMMITTER_EMAIL"] = email
    # Replaying: the recorded date makes the same tag object, which a pushed tag must be.
    date = recorded_date(ctx.replay, TAGGER_DATE_KEY)
    if date:
        git.env["GIT_COMMITTER_DATE"] = date
    head = await git.run("rev-parse", "HEAD", cwd=path)
    existing = await git.try_run(
        "rev-parse", "--verify", "-q", f"refs/tags/{tag}^{{commit}}", cwd=path
    )
    if existing.ok:
        if existing.stdout.strip() == head:
            return succeeded({"tag": tag, "commit": head}, message="tag already exists")
        raise StepError(f"git-tag: tag {tag!r} already exists on another commit", terminal=True)
    await git.run("tag", "-a", "-F", "-", tag, head, cwd=path, stdin=message)
    tagged = await git.run(
        "for-each-ref", "--format=%(taggerdate:raw)", f"refs/tags/{tag}", cwd=path
    )
    return StepResult(
        StepStatus.SUCCEEDED,
        output={"tag": tag, "commit": head},
        replay_data={TAGGER_DATE_KEY: tagged} if RAW_DATE_RE.match(tagged) else None,
    )


STEPS: dict[str, Step] = {"git-tag": FunctionStep(git_tag, effect=Effect.LOCAL)}
