"""What both Helm steps do with a chart's dependencies, as Kargo's ephemeral dependency manager
(pkg/helm/dependency_manager.go) does it: check local (``file://``) dependencies, find the
project's ``helm`` credentials for the repositories, build ``charts/`` (``helm-template``'s
``buildDependencies``) and update them (``helm-update-chart``: refresh ``charts/`` and
``Chart.lock``, report what the lock changed, and leave an unchanged lock byte for byte as it
was, since Helm stamps a new ``generated`` time on every update).

Helm itself is behind :mod:`promoter.ports.helm`; these functions are the steps' edge.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from promoter.errors import ConfigRefused, StepError
from promoter.ports import helm as helm_port
from promoter.ports.credentials import Credential, CredentialsError, CredentialType
from promoter.rules.helm_template import lock_changes
from promoter.steps.base import StepContext


def declared(kind: str, chart_file: Path) -> list[Mapping[str, Any]]:
    """The ``dependencies`` of a Chart.yaml or Chart.lock (empty when it has none)."""
    try:
        document = yaml.safe_load(chart_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise StepError(f"{kind}: failed to read {chart_file.name}: {e}", terminal=True) from None
    listed = document.get("dependencies") if isinstance(document, Mapping) else None
    return [d for d in listed or [] if isinstance(d, Mapping)]


def check_local(
    kind: str, ctx: StepContext, chart: Path, deps: Sequence[Mapping[str, Any]]
) -> None:
    """Kargo's validateLocalDependency: a ``file://`` dependency is relative and stays inside
    the work directory (symlinks included)."""
    for dep in deps:
        repository = str(dep.get("repository") or "")
        if not repository.startswith("file://"):
            continue
        relative = repository.removeprefix("file://")
        if os.path.isabs(relative):
            raise StepError(
                f"{kind}: invalid dependency {repository!r}: dependency path {relative!r} must "
                "be relative",
                terminal=True,
            )
        try:
            ctx.path(os.path.relpath(chart / relative, ctx.work_dir), field_name="path")
        except ConfigRefused:
            raise StepError(
                f"{kind}: invalid dependency {repository!r}: dependency path is outside the "
                "work directory",
                terminal=True,
            ) from None


async def repository_access(
    kind: str, ctx: StepContext, deps: Sequence[Mapping[str, Any]]
) -> helm_port.RepositoryAccess:
    """The project's ``helm`` credentials for the chart's repositories, and whether OCI ones are
    spoken to over plain HTTP (only when every OCI host is local, as Kargo decides: Helm's
    registry client takes one scheme)."""
    port = ctx.services.git.credentials
    found: dict[tuple[str, str], Credential] = {}
    oci_hosts = []
    for dep in deps:
        repository = str(dep.get("repository") or "")
        if not repository.startswith(("http://", "https://", "oci://")):
            continue
        if repository.startswith("oci://"):
            oci_hosts.append(repository.removeprefix("oci://").split("/", 1)[0])
        if port is None:
            continue
        try:
            credential = await port.get(ctx.project, CredentialType.HELM, repository)
        except CredentialsError as e:
            raise StepError(f"{kind}: {e}", retry_after=e.retry_after) from None
        if credential is not None:
            found[(credential.username, credential.password)] = credential
    if len(found) > 1:
        sources = ", ".join(sorted(c.source or "?" for c in found.values()))
        raise StepError(
            f"{kind}: the chart's dependencies need different credentials ({sources}); Helm's "
            "dependency manager takes one username and password",
            terminal=True,
        )
    plain = bool(oci_hosts) and all(helm_port.plain_http_host(h) for h in oci_hosts)
    username, password = next(iter(found), ("", ""))
    return helm_port.RepositoryAccess(username, password, plain_http=plain)


async def build(kind: str, ctx: StepContext, helm: helm_port.Helm, chart: Path) -> None:
    """``helm dependency build`` (an update when there is no Chart.lock yet, as Helm does)."""
    deps = declared(kind, chart / "Chart.yaml")
    if not deps:
        return
    check_local(kind, ctx, chart, deps)
    access = await repository_access(kind, ctx, deps)
    await ctx.services.io.call(helm.build_dependencies, chart, access)


async def update(kind: str, ctx: StepContext, helm: helm_port.Helm, chart: Path) -> dict[str, str]:
    """``helm dependency update``; returns what Chart.lock changed (name -> ``old -> new``, the
    new version for an addition, ``""`` for a removal). An unchanged lock is put back as it was."""
    deps = declared(kind, chart / "Chart.yaml")
    check_local(kind, ctx, chart, deps)
    access = await repository_access(kind, ctx, deps)
    lock = chart / "Chart.lock"
    before_text = lock.read_bytes() if lock.is_file() else None
    before = declared(kind, lock) if before_text is not None else []
    await ctx.services.io.call(helm.update_dependencies, chart, access)
    after = declared(kind, lock) if lock.is_file() else []
    changes = lock_changes(before, after)
    if not changes and before_text is not None:
        lock.write_bytes(before_text)
    return changes
