"""A hand-built :class:`StepContext` for calling step objects directly in tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from promoter.steps.base import GitSettings, StepContext, StepServices
from promoter.telemetry import NO_TELEMETRY, Telemetry

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
