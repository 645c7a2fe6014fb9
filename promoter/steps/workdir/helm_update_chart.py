"""``helm-update-chart``: set the versions of a Helm chart's dependencies in its Chart.yaml, then
refresh ``Chart.lock`` and ``charts/`` as Kargo does (``helm dependency update``).

The Chart.yaml edit keeps the file's formatting (the round-trip YAML editor). The refresh runs
Helm's own dependency manager through Helm's Go SDK (:mod:`promoter.ports.helm`,
:mod:`promoter.steps.helm_dependencies`) with the project's ``helm`` credentials: the
dependencies are resolved (Chart.yaml's ranges too), downloaded into ``charts/`` and locked, and
the commit message says what Chart.lock changed (Kargo's). Without ``charts`` only the ranges
are resolved. A replay (another replica rebuilding the work directory) puts back the Chart.lock
this step wrote and builds ``charts/`` from it, so it never resolves anew.

Where helm-python-sdk is not installed, only Chart.yaml is edited, as before Helm was to be
had: the step's message says Chart.lock was not refreshed and how to install the SDK, and
``charts`` is required.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.ports import helm as helm_port
from promoter.rules.helm_template import commit_message
from promoter.steps import helm_dependencies
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    succeeded,
)
from promoter.steps.workdir.files import (
    freight_name,
    read_text,
    scalar_text,
    write_text_atomic,
)

# Without helm-python-sdk only Chart.yaml is edited: Chart.lock (if any) and charts/ are left as
# they were, and the step's message says so (a later `helm dependency build` would refuse the
# stale lock).
_NO_HELM_NOTE = (
    "Chart.lock and charts/ were not refreshed: helm dependency update needs helm-python-sdk "
    "(pip install 'longshoreman[helm]')"
)
KIND = "helm-update-chart"
# replay_data key: the Chart.lock this step wrote, put back by a replay.
CHART_LOCK_KEY = "chartLock"


def _freight_chart_version(
    ctx: StepContext, kind: str, item: Config, repository: str, name: str
) -> str:
    repo = repository.rstrip("/")
    for chart in ctx.freight.get("charts") or []:
        if not isinstance(chart, Mapping):
            continue
        repo_url = str(chart.get("repoURL") or "").rstrip("/")
        chart_name = str(chart.get("name") or "")
        # Classic repositories name the chart; an OCI Freight chart's repoURL ends with it.
        if (repo_url == repo and chart_name == name) or (
            repo_url == f"{repo}/{name}" and chart_name in ("", name)
        ):
            version = chart.get("version")
            if version:
                return str(version)
    raise StepError(
        f"{kind}: {item.prefix}.version is not set and the target Freight {freight_name(ctx)} "
        f"has no chart {name!r} from {repository!r}",
        terminal=True,
    )


def _edit_chart_yaml(
    ctx: StepContext, config: Mapping[str, Any], with_helm: bool
) -> tuple[str, Path, dict[str, str]]:
    """Set the listed dependencies' versions in Chart.yaml (written only when one changed);
    returns the path as configured, the chart's directory and what changed."""
    kind = KIND
    cfg = Config(kind, config)
    cfg.only(("path", "charts"))
    raw_dir = cfg.str("path")
    items = cfg.items("charts")
    if not items and (not with_helm or cfg.has("charts")):
        if with_helm:
            # Kargo's schema: charts may be left out, but not empty.
            raise ConfigRefused(f"{kind}: config.charts must have at least 1 item")
        # Kargo then lets helm resolve the SemVer ranges in Chart.yaml against the repositories.
        raise ConfigRefused(
            f"{kind}: config.charts is empty; updating dependencies to the newest versions their "
            "ranges allow needs `helm dependency update`, which needs helm-python-sdk "
            "(pip install 'longshoreman[helm]'). List the charts to update."
        )
    directory = ctx.path(raw_dir, field_name="path")
    chart_file = directory / "Chart.yaml"
    if not chart_file.is_file():
        raise StepError(f"{kind}: no Chart.yaml in config.path {raw_dir!r}", terminal=True)
    from promoter.steps.workdir import yamledit

    document = yamledit.RoundTripYaml(
        read_text(chart_file, kind, raw_dir), kind=kind, source=f"{raw_dir}/Chart.yaml"
    )
    data = document.data
    dependencies = data.get("dependencies") if isinstance(data, dict) else None
    if not isinstance(dependencies, list):
        raise StepError(f"{kind}: {raw_dir}/Chart.yaml has no dependencies list", terminal=True)
    changes: dict[str, str] = {}
    for item in items:
        repository, name = item.str("repository"), item.str("name")
        alias = item.opt_str("alias")
        version = item.opt_str("version") or _freight_chart_version(
            ctx, kind, item, repository, name
        )
        dependency = next(
            (
                dep
                for dep in dependencies
                if isinstance(dep, dict)
                and dep.get("name") == name
                and dep.get("repository") == repository
                and (alias is None or dep.get("alias") == alias)
            ),
            None,
        )
        if dependency is None:
            listed = ", ".join(
                f"{dep.get('repository')} {dep.get('name')}"
                for dep in dependencies
                if isinstance(dep, dict)
            )
            raise StepError(
                f"{kind}: {item.prefix}: no dependency in {raw_dir}/Chart.yaml has repository "
                f"{repository!r} and name {name!r}{f' and alias {alias!r}' if alias else ''} "
                f"(dependencies: {listed or 'none'})",
                terminal=True,
            )
        old = dependency.get("version")
        if old is not None and scalar_text(old) == version:
            continue
        dependency["version"] = yamledit.keep_style(old, version)
        changes[alias or name] = f"{scalar_text(old)} -> {version}" if old is not None else version
    if changes:
        write_text_atomic(chart_file, document.text())
    return raw_dir, directory, changes


def _without_helm(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    raw_dir, directory, changes = _edit_chart_yaml(ctx, config, with_helm=False)
    note = _NO_HELM_NOTE
    if (directory / "Chart.lock").exists() and changes:
        note += "; the existing Chart.lock is now out of date"
    if not changes:
        return succeeded(message=f"{raw_dir}/Chart.yaml already up to date; {note}")
    message = f"Updated chart dependencies for {raw_dir}\n"
    message += "".join(f"\n- {name}: {change}" for name, change in changes.items())
    return succeeded({"commitMessage": message}, message=f"updated {raw_dir}/Chart.yaml; {note}")


async def helm_update_chart(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    try:
        helm = helm_port.load(KIND)
    except helm_port.HelmMissing:
        return await ctx.services.io.call(_without_helm, ctx, config)
    raw_dir, directory, _ = await ctx.services.io.call(_edit_chart_yaml, ctx, config, True)
    lock = directory / "Chart.lock"
    recorded = ctx.replay.data.get(CHART_LOCK_KEY) if ctx.replay is not None else None
    if recorded is not None:
        # Rebuild exactly what the first run locked; never resolve the ranges again.
        await ctx.services.io.call(lock.write_text, recorded, "utf-8")
        await helm_dependencies.build(KIND, ctx, helm, directory)
        return succeeded(dict(ctx.replay.output) if ctx.replay else {})
    changes = await helm_dependencies.update(KIND, ctx, helm, directory)
    written = await ctx.services.io.call(_read_lock, lock)
    message = commit_message(raw_dir, changes)
    result = succeeded(
        {"commitMessage": message} if message else {},
        message=f"updated {raw_dir}/Chart.lock" if changes else f"{raw_dir}/Chart.lock unchanged",
    )
    return replace(result, replay_data={CHART_LOCK_KEY: written} if written is not None else None)


def _read_lock(lock: Path) -> str | None:
    return lock.read_text(encoding="utf-8") if lock.is_file() else None


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "helm-update-chart": FunctionStep(helm_update_chart, effect=Effect.LOCAL),
}
