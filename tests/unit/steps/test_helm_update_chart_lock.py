"""helm-update-chart refreshing Chart.lock and charts/ as Kargo does, with Helm's Go SDK
(helm-python-sdk) against a chart repository served over HTTP on 127.0.0.1 and Debian's
docker-registry as an OCI registry.

Ported from Kargo's Test_helmChartUpdater_run (pkg/promotion/runner/builtin/
helm_chart_updater_test.go): the commit message comes from what Chart.lock changed, the
dependency is downloaded into charts/, and Chart.lock is written.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from promoter.errors import StepError
from promoter.steps.base import Replaying, StepContext, StepStatus
from promoter.steps.registry import builtin_registry
from tests.support import objects
from tests.support.helmcharts import chart_archive, serving_chart_repository, write_files
from tests.support.registry import running_registry
from tests.support.steps import make_context

pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

STEP = builtin_registry()["helm-update-chart"]


def example_chart(version: str) -> dict[str, str]:
    return {
        "Chart.yaml": f"apiVersion: v2\nname: examplechart\nversion: {version}\n",
        "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: example\n",
    }


def umbrella(repository: str, version: str = ">=0.0.1") -> str:
    return (
        "apiVersion: v2\nname: test-chart\nversion: 0.1.0\ndependencies:\n"
        f'- name: examplechart\n  version: "{version}"\n  repository: {repository}\n'
    )


def ctx_for(tmp_path: Path, chart_yaml: str, charts: list[dict[str, Any]] = ()) -> StepContext:
    work = tmp_path / "work"
    write_files(work, {"testchart/Chart.yaml": chart_yaml})
    freight = objects.freight(
        "f00d", namespace="test-project", warehouse="test-warehouse", charts=list(charts)
    )
    return make_context(tmp_path, project="test-project", work_dir=work, freight=freight)


async def test_successful_run_with_http_repository(tmp_path: Path) -> None:
    archive = chart_archive(tmp_path / "dist", example_chart("0.1.0"))
    async with serving_chart_repository([archive]) as repo:
        ctx = ctx_for(
            tmp_path,
            umbrella(repo.url),
            [{"repoURL": repo.url, "name": "examplechart", "version": "0.1.0"}],
        )
        result = await STEP.run(
            ctx,
            {
                "path": "testchart",
                "charts": [{"repository": repo.url, "name": "examplechart", "version": "0.1.0"}],
            },
        )
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {
        "commitMessage": "Updated chart dependencies for testchart\n\n- examplechart: 0.1.0"
    }
    chart = ctx.work_dir / "testchart"
    assert "version: 0.1.0" in (chart / "Chart.yaml").read_text()
    assert (chart / "charts" / "examplechart-0.1.0.tgz").is_file()
    assert (chart / "Chart.lock").is_file()


async def test_successful_run_with_a_semver_range_and_no_charts(tmp_path: Path) -> None:
    archives = [
        chart_archive(tmp_path / "dist", example_chart("0.1.0")),
        chart_archive(tmp_path / "dist", example_chart("0.2.0")),
        chart_archive(tmp_path / "dist", example_chart("1.0.0")),
    ]
    async with serving_chart_repository(archives) as repo:
        ctx = ctx_for(tmp_path, umbrella(repo.url, "<1.0.0"))
        result = await STEP.run(ctx, {"path": "testchart"})
        chart = ctx.work_dir / "testchart"
        assert result.output == {
            "commitMessage": "Updated chart dependencies for testchart\n\n- examplechart: 0.2.0"
        }
        assert (chart / "charts" / "examplechart-0.2.0.tgz").is_file()
        lock = (chart / "Chart.lock").read_text()
        # Nothing changed: no commit message, and the lock is left as it was (Helm would stamp
        # a new `generated` time).
        again = await STEP.run(ctx, {"path": "testchart"})
    assert again.output == {}
    assert (chart / "Chart.lock").read_text() == lock


async def test_a_new_version_changes_the_lock(tmp_path: Path) -> None:
    archives = [
        chart_archive(tmp_path / "dist", example_chart("0.1.0")),
        chart_archive(tmp_path / "dist", example_chart("0.2.0")),
    ]
    async with serving_chart_repository(archives) as repo:
        ctx = ctx_for(tmp_path, umbrella(repo.url, "0.1.0"))
        await STEP.run(ctx, {"path": "testchart"})
        result = await STEP.run(
            ctx,
            {
                "path": "testchart",
                "charts": [{"repository": repo.url, "name": "examplechart", "version": "0.2.0"}],
            },
        )
    chart = ctx.work_dir / "testchart"
    assert result.output["commitMessage"].endswith("- examplechart: 0.1.0 -> 0.2.0")
    assert "version: 0.2.0" in (chart / "Chart.lock").read_text()
    assert sorted(p.name for p in (chart / "charts").iterdir()) == ["examplechart-0.2.0.tgz"]


async def test_an_oci_dependency(tmp_path: Path) -> None:
    archive = chart_archive(tmp_path / "dist", example_chart("0.3.0"))
    async with running_registry(tmp_path) as registry:
        await registry.push_chart_archive("charts/examplechart", "0.3.0", archive.read_bytes())
        repository = f"oci://{registry.host}/charts"
        ctx = ctx_for(
            tmp_path,
            umbrella(repository, "0.1.0"),
            [{"repoURL": f"{repository}/examplechart", "version": "0.3.0"}],
        )
        result = await STEP.run(
            ctx,
            {"path": "testchart", "charts": [{"repository": repository, "name": "examplechart"}]},
        )
    chart = ctx.work_dir / "testchart"
    assert result.output["commitMessage"].endswith("- examplechart: 0.3.0")
    assert 'version: "0.3.0"' in (chart / "Chart.yaml").read_text()
    assert (chart / "charts" / "examplechart-0.3.0.tgz").is_file()


async def test_an_unreachable_repository_errors_and_leaves_the_lock(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, umbrella("http://127.0.0.1:9/charts", "0.1.0"))
    write_files(ctx.work_dir, {"testchart/Chart.lock": "dependencies: []\n"})
    with pytest.raises(StepError) as caught:
        await STEP.run(ctx, {"path": "testchart"})
    assert "failed to update chart dependencies" in str(caught.value)
    assert (ctx.work_dir / "testchart/Chart.lock").read_text() == "dependencies: []\n"


async def test_a_replay_rebuilds_what_the_first_run_locked(tmp_path: Path) -> None:
    archives = [chart_archive(tmp_path / "dist", example_chart("0.1.0"))]
    async with serving_chart_repository(archives) as repo:
        ctx = ctx_for(tmp_path, umbrella(repo.url, ">=0.1.0"))
        first = await STEP.run(ctx, {"path": "testchart"})
        assert first.replay_data is not None
        assert "version: 0.1.0" in first.replay_data["chartLock"]
        # Another replica rebuilds the work directory; the repository has a newer version now.
        archives.append(chart_archive(tmp_path / "dist", example_chart("0.2.0")))
        replica = ctx_for(tmp_path / "replica", umbrella(repo.url, ">=0.1.0"))
        replaying = replace(replica, replay=Replaying(first.output, first.replay_data))
        again = await STEP.run(replaying, {"path": "testchart"})
    chart = replica.work_dir / "testchart"
    assert again.output == first.output
    assert sorted(p.name for p in (chart / "charts").iterdir()) == ["examplechart-0.1.0.tgz"]
    assert (chart / "Chart.lock").read_text() == first.replay_data["chartLock"]
