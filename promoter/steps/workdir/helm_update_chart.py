"""``helm-update-chart``: set the versions of a Helm chart's dependencies in its Chart.yaml."""

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
    succeeded,
)
from promoter.steps.workdir.files import (
    freight_name,
    in_thread,
    read_text,
    scalar_text,
    write_text_atomic,
)

# Kargo follows the Chart.yaml edit with `helm dependency update`, refreshing Chart.lock and the
# charts/ directory. Longshoreman has no helm binary, so only Chart.yaml is edited: Chart.lock (if
# any) and charts/ are left as they were, and the step's message says so. A later
# `helm dependency build` will then refuse the stale Chart.lock; commit Chart.yaml without a lock
# file or refresh it outside Longshoreman.
_NO_HELM_NOTE = (
    "Chart.lock and charts/ were not refreshed (Longshoreman does not run helm dependency update)"
)


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


def _helm_update_chart(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "helm-update-chart"
    cfg = Config(kind, config)
    raw_dir = cfg.str("path")
    items = cfg.items("charts")
    if not items:
        # Kargo then lets helm resolve the SemVer ranges in Chart.yaml against the repositories.
        raise ConfigRefused(
            f"{kind}: config.charts is empty; updating dependencies to the newest versions their "
            "ranges allow needs `helm dependency update`, which Longshoreman does not run. "
            "List the charts to update."
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
    note = _NO_HELM_NOTE
    if (directory / "Chart.lock").exists() and changes:
        note += "; the existing Chart.lock is now out of date"
    if not changes:
        return succeeded(message=f"{raw_dir}/Chart.yaml already up to date; {note}")
    write_text_atomic(chart_file, document.text())
    message = f"Updated chart dependencies for {raw_dir}\n"
    message += "".join(f"\n- {name}: {change}" for name, change in changes.items())
    return succeeded({"commitMessage": message}, message=f"updated {raw_dir}/Chart.yaml; {note}")


helm_update_chart = in_thread(_helm_update_chart)


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "helm-update-chart": FunctionStep(helm_update_chart, effect=Effect.LOCAL),
}
