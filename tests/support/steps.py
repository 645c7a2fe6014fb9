"""A hand-built :class:`StepContext` for calling step objects directly in tests (and
:func:`run_step` to run a built-in kind with one), :func:`run_template` for running steps
through the builder and the engine, and the table shape of Kargo's config refusals."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from promoter.engine import engine
from promoter.engine.builder import build_promotion
from promoter.errors import ConfigRefused
from promoter.ports.telemetry import NO_TELEMETRY, Telemetry
from promoter.resources.model import Promotion, TaskRef, TaskSpec, parse_stage
from promoter.steps.base import GitSettings, StepContext, StepResult, StepServices
from promoter.steps.registry import builtin_registry
from tests.support import objects

FIXED_NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def make_context(
    tmp_path: Path,
    *,
    freight: Mapping[str, Any] | None = None,
    state: Mapping[str, Any] | None = None,
    git_env: Mapping[str, str] | None = None,
    secrets: Sequence[str] = (),
    project: str = "demo",
    stage: str = "test",
    promotion: str = "test.01hzzzzzzzzzzzzzzzzzzzzzzz.abc1234",
    alias: str = "step-1",
    previous_output: Mapping[str, Any] | None = None,
    work_dir: Path | None = None,
    extra_services: Mapping[str, Any] | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
) -> StepContext:
    """A StepContext whose work directory is ``tmp_path/work`` (created) unless given."""
    if work_dir is None:
        work_dir = tmp_path / "work"
    work_dir.mkdir(parents=True, exist_ok=True)
    return StepContext(
        project=project,
        stage=stage,
        promotion=promotion,
        alias=alias,
        actor="tester",
        work_dir=work_dir,
        freight=dict(freight or {}),
        state=dict(state or {}),
        previous_output=dict(previous_output or {}),
        services=StepServices(
            git=GitSettings(env=dict(git_env or {}), secrets=tuple(secrets)),
            extra=dict(extra_services or {}),
            telemetry=telemetry,
        ),
        now=FIXED_NOW,
        started_at=FIXED_NOW,
    )


class _NoTasks:
    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        return None


async def run_template(
    steps: Sequence[Mapping[str, Any]],
    work_dir: Path,
    *,
    freight: Mapping[str, Any],
    services: StepServices | None = None,
    vars_: Sequence[Mapping[str, Any]] = (),
    rollback: bool = False,
    warehouses: Mapping[str, Mapping[str, Any] | None] | None = None,
    extra_functions: Mapping[str, Callable[..., Any]] | None = None,
    now: datetime = FIXED_NOW,
) -> Promotion:
    """Run a Stage template of ``steps`` (and ``vars_``) through the builder and the engine,
    on the builtin steps, until it stops; the Stage is ``test`` in the Freight's namespace."""
    namespace = str((freight.get("metadata") or {}).get("namespace") or "demo")
    stage = parse_stage(
        objects.stage(
            "test",
            namespace=namespace,
            steps=[dict(s) for s in steps],
            template_vars=vars_ or None,
        )
    )
    promotion = replace(
        build_promotion(stage, freight, _NoTasks(), actor="alice"), rollback=rollback
    )
    runtime = engine.Runtime(
        registry=builtin_registry(),
        services=services or StepServices(),
        work_dir=work_dir,
        freight=freight,
        warehouses=warehouses,
        extra_functions=dict(extra_functions or {}),
        clock=lambda: now,
    )
    return (await engine.advance(promotion, runtime)).promotion


# The built-in steps, each imported from its own module on first use.
STEPS = builtin_registry()


async def run_step(kind: str, work: Path, config: Mapping[str, Any]) -> StepResult:
    """Run the built-in step ``kind`` with a rendered config, ``work`` as its work directory."""
    return await STEPS[kind].run(make_context(work, work_dir=work), config)


def write_files(work: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@dataclass(frozen=True)
class RefusalCase:
    """A config Kargo refuses (its test named), and what our refusal says."""

    kargo_test: str
    config: dict[str, Any]
    says: str


async def assert_schema_refuses(kind: str, case: RefusalCase, work: Path) -> None:
    """Kargo's JSON schema check (Test_*_convert): the file exists, so only the config can be
    what is refused."""
    write_files(work, {"valid.toml": "[app]\nversion = '1'\n"})
    with pytest.raises(ConfigRefused, match=re.escape(case.says)):
        await run_step(kind, work, case.config)
