"""The Stage a typed command names, found across projects: one way for both front ends.

``project/stage`` or an unqualified name typed where several projects (or none) apply is
resolved by :func:`promoter.chat.projects.stage_target` over the Stages of the projects it
searches, read through the port. A command that names no Stage, or is typed where exactly one
project applies, stays in that project. ``/freeze`` and ``/unfreeze`` name a Stage or a project:
only a qualified ``project/stage`` target is a Stage to find (an unqualified one may be the
project's own name, which the planner decides in the place's project).
"""

from __future__ import annotations

from dataclasses import replace

from promoter.chat.grammar import Command
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


def named_stage(command: Command) -> str | None:
    """The Stage ``command`` names for :func:`find_stage`, or None: its Stage, or the qualified
    target of ``/freeze`` and ``/unfreeze``."""
    if command.stage:
        return command.stage
    if command.name in ("freeze", "unfreeze") and command.target and "/" in command.target:
        return command.target
    return None


def naming(command: Command, stage: str) -> Command:
    """``command`` with the Stage :func:`named_stage` read resolved to ``stage`` (its name in
    the project found)."""
    if command.stage:
        return replace(command, stage=stage)
    return replace(command, target=stage)
