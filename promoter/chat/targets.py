"""The Stage a typed command names, found across projects: one way for both front ends.

``project/stage`` or an unqualified name typed where several projects (or none) apply is
resolved by :func:`promoter.chat.projects.stage_target` over the Stages of the projects it
searches, read through the port. A command that names no Stage, or is typed where exactly one
project applies, stays in that project.
"""

from __future__ import annotations

from promoter.chat.port import PromotionService, projects_of
from promoter.chat.projects import InProject, NotResolved, Route, search_space, stage_target
from promoter.resources.model import name_of


async def find_stage(
    service: PromotionService, stage: str, where: Route, *, only_here: bool = False
) -> InProject | NotResolved:
    """Which project's Stage ``stage`` (maybe ``project/stage``) means, typed at ``where``.

    ``only_here``: only the place's own projects are reachable (GitHub, where a repository's
    permissions say who may act, so they never reach another team's project)."""
    reachable = list(where.projects) if only_here else [p.name for p in projects_of(service)]
    if "/" not in stage and where.project is not None:
        return InProject(where.project, stage)
    stages = {
        ns: {name_of(s) for s in (await service.snapshot(ns)).stages}
        for ns in search_space(where, reachable)
        if "/" not in stage
    }
    return stage_target(stage, where, reachable, stages)
