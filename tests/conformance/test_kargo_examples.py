"""Kargo's documentation examples run unchanged through the local runner, with either apiVersion.

Every example in ``kargo-docs/`` of the conformance folder (:mod:`tests.support.conformance`)
whose steps are all built in is either run here (its step list copied verbatim into a Stage or
PromotionTask, against a real local bare repository that Kargo's example URL is mapped to with
git's ``insteadOf``) or listed in ``EXCLUDED`` with the reason; a guard test keeps the two lists
complete. Examples that are fragments (Kargo's docs elide the clone with ``# ...``) get the clone
their text assumes as a prelude; the example's own steps are never edited.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from promoter.local.cli import main
from tests.support import conformance
from tests.support.gitrepo import RemoteRepo, git_env, make_remote

FIXTURES = conformance.root() / "kargo-docs"
REPO_URL = "https://github.com/example/repo.git"
BUILT_IN = {
    "git-clone",
    "git-clear",
    "git-commit",
    "git-push",
    "git-tag",
    "yaml-update",
    "json-update",
    "yaml-parse",
    "json-parse",
    "kustomize-set-image",
    "helm-update-chart",
    "copy",
    "delete",
    "file-write",
    "compose-output",
    "fail",
    "http",
    "http-download",
    "untar",
    "set-metadata",
}

CHART_YAML = """\
apiVersion: v2
name: my-chart
version: 0.1.0
dependencies:
- repository: https://example-chart-repo
  name: some-chart
  version: 1.2.3
- repository: oci://example-chart-registry
  name: some-chart
  version: 1.2.3
"""
KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- deployment.yaml
"""
MAIN_FILES = {
    "charts/my-chart/Chart.yaml": CHART_YAML,
    "charts/my-chart/values.yaml": "# values for my-chart\nimage:\n  tag: v1.0.0 # set by Kargo\n",
    "base/kustomization.yaml": KUSTOMIZATION,
    "base/deployment.yaml": "kind: Deployment\n",
    "config.json": '{\n  "image": {\n    "tag": "v1.0.0"\n  }\n}\n',
    "configs/settings.json": '{"image": {"tag": "v1.0.0"}, "replicas": 1}\n',
    "configs/common/a.yaml": "a: 1\n",
    "apps.yaml": "apps:\n  test:\n    replicas: 2\n    region: eu\n",
    "stages/test/kustomization.yaml": "resources:\n- ../../base\n",
    "Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.4.2\n",
}
STAGE_FILES = {
    "unwanted/file": "x\n",
    "tmp/scratch": "x\n",
    "build.log": "log\n",
    "a/one.tmp": "t\n",
    "a/b/two.tmp": "t\n",
    "build/out.bin": "b\n",
    "keep.yaml": "keep: true\n",
}
OVERLAY_KUSTOMIZATION = "resources:\n- ../../base\npatches:\n- path: overlay.yaml\n"

CLONE_PRELUDE = [
    {
        "uses": "git-clone",
        "config": {
            "repoURL": REPO_URL,
            "checkout": [
                {"commit": "${{ commitFrom('" + REPO_URL + "').ID }}", "path": "./src"},
                {"branch": "stage/${{ ctx.stage }}", "create": True, "path": "./out"},
            ],
        },
    }
]


@dataclass
class World:
    tmp: Path
    remote: RemoteRepo
    main_sha: str
    overlay_sha: str
    work: Path
    promotion: dict[str, Any] = field(default_factory=dict)

    def file(self, path: str) -> str:
        name = self.promotion["metadata"]["name"]
        return (self.work / name / path).read_text()

    def exists(self, path: str) -> bool:
        return (self.work / self.promotion["metadata"]["name"] / path).exists()

    def state(self, alias: str) -> Any:
        return self.promotion["status"]["state"][alias]


@dataclass(frozen=True)
class Case:
    check: Callable[[World], None]
    prelude: list[dict[str, Any]] = field(default_factory=list)
    # Run the example's steps inside a PromotionTask (its text uses task.outputs / task vars).
    in_task: bool = False
    also: tuple[str, ...] = ()  # further examples whose steps follow (a page's next example)
    overlay_freight: bool = False
    # Further Stages and Freight the example names, as objects (set-metadata's targets).
    objects: tuple[dict[str, Any], ...] = ()
    # Steps after the example's own (reading back what it did).
    then: tuple[dict[str, Any], ...] = ()


def _checks_out_freight_commit_and_new_branch(w: World) -> None:
    assert w.state("step-1")["commits"]["./src"] == w.main_sha or w.main_sha in json.dumps(
        w.state("step-1")
    )
    assert "stage/test" in w.remote.branches()
    assert w.file("src/charts/my-chart/values.yaml") == MAIN_FILES["charts/my-chart/values.yaml"]


def _cleared(w: World) -> None:
    assert sorted(p.name for p in (w.work / w.promotion["metadata"]["name"] / "out").iterdir()) == [
        ".git"
    ]


def _sparse(w: World) -> None:
    # The example asks for charts/my-app (absent here) and configs/common; cone mode keeps files
    # at the top level and leaves every other directory out.
    assert w.exists("src/configs/common/a.yaml") and w.exists("src/apps.yaml")
    assert not w.exists("src/charts/my-chart/Chart.yaml") and not w.exists("src/base")


def _copied_overlay(w: World) -> None:
    assert w.file("src/stages/test/kustomization.yaml") == OVERLAY_KUSTOMIZATION
    assert w.file("overlay/stages/test/kustomization.yaml") == OVERLAY_KUSTOMIZATION


def _deleted_many(w: World) -> None:
    for gone in ("out/unwanted/file", "out/tmp", "out/build.log"):
        assert not w.exists(gone)
    assert w.exists("out/keep.yaml")


def _deleted_globs(w: World) -> None:
    for gone in ("out/a/one.tmp", "out/a/b/two.tmp", "out/build"):
        assert not w.exists(gone)
    assert w.exists("out/keep.yaml") and w.exists("out/build.log")


def _pushed(w: World) -> None:
    assert w.remote.head("stage/test") is not None


def _pushed_generated_branch(w: World) -> None:
    branch = w.state("push")["branch"]
    assert branch == f"kargo/promotion/{w.promotion['metadata']['name']}"
    assert branch in w.remote.branches()


def _pushed_tag(w: World) -> None:
    assert "v1.0.0" in w.remote.tags()


def _commit_message_from_kustomize(w: World) -> None:
    message = w.remote.log("stage/test")[0][1]
    assert message.startswith("test: Updated")


def _yaml_parsed(w: World) -> None:
    assert w.state("values") == {"imageTag": "v1.0.0"}


def _json_parsed(w: World) -> None:
    assert w.state("values") == {"imageTag": "v1.0.0"}


def _yaml_updated(w: World) -> None:
    assert w.file("src/charts/my-chart/values.yaml") == (
        # The comment keeps its column.
        "# values for my-chart\nimage:\n  tag: 1.2.3  # set by Kargo\n"
    )


def _json_updated(w: World) -> None:
    assert json.loads(w.file("src/configs/settings.json")) == {
        "image": {"tag": "1.2.3"},
        "replicas": 1,
    }


def _kustomize_tag(w: World) -> None:
    assert "newTag: 1.2.3" in w.file("src/base/kustomization.yaml")


def _kustomize_new_name(w: World) -> None:
    text = w.file("src/base/kustomization.yaml")
    assert "newName: 123456789012.dkr.ecr.us-west-2.amazonaws.com/my-image" in text


def _file_written(w: World) -> None:
    assert yaml.safe_load(w.file("out/app-config.yaml")) == {"replicas": 2, "region": "eu"}
    assert json.loads(w.file("out/app-config.json")) == {"replicas": 2, "region": "eu"}


def _semver_bumped(w: World) -> None:
    assert yaml.safe_load(w.file("src/Chart.yaml"))["version"] == "1.5.0"


def _task_cloned(w: World) -> None:
    assert w.exists("target/charts/my-chart/Chart.yaml")


def _metadata_object(kind: str, name: str, metadata: dict[str, Any]) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": kind, "metadata": {"name": name, "namespace": "kargo-demo"}}
    if kind == "Freight":
        obj["origin"] = {"kind": "Warehouse", "name": "my-warehouse"}
    else:
        obj["spec"] = {"requestedFreight": []}
    obj["status"] = {"metadata": metadata}
    return obj


def _read_metadata(**expressions: str) -> tuple[dict[str, Any], ...]:
    return ({"uses": "compose-output", "as": "read", "config": expressions},)


def _metadata_set_on_stage_and_freight(w: World) -> None:
    assert w.state("read") == {
        # Keys the Stage already had are kept.
        "stage": {"kept": "yes", "foo": "hello", "bar": 42},
        "freight": {"baz": True, "qux": ["a", "b", "c"]},
        "qux": ["a", "b", "c"],
    }


def _nested_metadata_replaces_whole_values(w: World) -> None:
    assert w.state("read")["stage"] == {
        "foo": {
            "nested": "value",
            "numbers": [1, 2, 3],
            "items": [{"name": "item1", "value": "abc"}, {"name": "item2", "value": "xyz"}],
        },
        "bar": {"alpha": "one", "beta": "two"},
    }
    assert w.state("read")["item"] == "xyz"


RUNNABLE: dict[str, Case] = {
    "git-clone.1.yaml": Case(_checks_out_freight_commit_and_new_branch),
    "git-clone.3.yaml": Case(_sparse),
    "git-clone.4.yaml": Case(_checks_out_freight_commit_and_new_branch),
    "git-clear.1.yaml": Case(_cleared),
    "copy.1.yaml": Case(_copied_overlay, overlay_freight=True),
    "delete.2.yaml": Case(_deleted_many, prelude=CLONE_PRELUDE),
    "delete.3.yaml": Case(_deleted_globs, prelude=CLONE_PRELUDE),
    "git-push.1.yaml": Case(_pushed, prelude=CLONE_PRELUDE),
    "git-push.2.yaml": Case(_pushed_generated_branch, prelude=CLONE_PRELUDE),
    "git-push.3.yaml": Case(_pushed_tag, prelude=CLONE_PRELUDE),
    "git-commit.2.yaml": Case(
        _commit_message_from_kustomize,
        prelude=[
            *CLONE_PRELUDE,
            {
                "uses": "kustomize-set-image",
                "as": "update-image",
                "config": {"path": "./src/base", "images": [{"image": "my/image"}]},
            },
            {"uses": "copy", "config": {"inPath": "./src/base", "outPath": "./out/base"}},
        ],
        also=("git-push.1.yaml",),
    ),
    "yaml-parse.1.yaml": Case(_yaml_parsed),
    "json-parse.1.yaml": Case(_json_parsed),
    "yaml-update.4.yaml": Case(_yaml_updated),
    "json-update.1.yaml": Case(_json_updated),
    "kustomize-set-image.1.yaml": Case(_kustomize_tag),
    "kustomize-set-image.2.yaml": Case(_kustomize_new_name),
    "file-write.1.yaml": Case(_file_written, prelude=CLONE_PRELUDE, also=("file-write.2.yaml",)),
    "expressions.35.yaml": Case(_semver_bumped, prelude=CLONE_PRELUDE, in_task=True),
    "promotion-tasks.3.yaml": Case(_task_cloned, in_task=True),
    "promotion-tasks.5.yaml": Case(_task_cloned, in_task=True),
    "set-metadata.1.yaml": Case(
        _metadata_set_on_stage_and_freight,
        objects=(
            _metadata_object("Stage", "production", {"kept": "yes", "foo": "old"}),
            _metadata_object("Freight", "my-app-freight", {}),
        ),
        then=_read_metadata(
            stage="${{ stageMetadata('production') }}",
            freight="${{ freightMetadata('my-app-freight') }}",
            qux="${{ freightMetadata('my-app-freight', 'qux') }}",
        ),
    ),
    "set-metadata.2.yaml": Case(
        _nested_metadata_replaces_whole_values,
        # The old `foo` map is replaced, not merged into.
        objects=(_metadata_object("Stage", "staging", {"foo": {"old": 1}}),),
        then=_read_metadata(
            stage="${{ stageMetadata('staging') }}",
            item="${{ stageMetadata('staging').foo.items[1].value }}",
        ),
    ),
}

ON_A_LOCAL_SERVER = "run against a local server in test_kargo_docs_http.py"
EXCLUDED: dict[str, str] = {
    "delete.1.yaml": "its git-commit has no `message`, which Kargo's schema requires too (our "
    "step refuses it naming config.message); delete.2 and delete.3 run the delete step",
    "file-write.2.yaml": "continues file-write.1 (reads its outputs); run as part of that case",
    "helm-update-chart.2.yaml": "the example references `${{ chartRepo }}`, a name it never "
    "defines (Kargo rejects it too); helm-update-chart.6 is the same step written correctly",
    "helm-update-chart.6.yaml": "after the Chart.yaml edit the step runs `helm dependency "
    "update` (as Kargo does), which must reach the example's oci://example-chart-registry; "
    "tests/unit/steps/test_helm_update_chart_lock.py runs Kargo's own table against local "
    "repositories",
    "helm-update-chart.8.yaml": "without `charts` Kargo runs `helm dependency update` against the "
    "example's repositories, which are not reachable here; see helm-update-chart.6",
    "expressions.18.yaml": "uses freightStatus(), which reads Freight status from the cluster",
    "fail.1.yaml": "calls https://api.example.com (no network here); the http step's examples run "
    "against a local server in test_kargo_docs_http.py",
    "promotion-tasks.7.yaml": "reads task.outputs['wait-for-pr'] from steps the example omits",
    "http.1.yaml": f"needs network (api.example.com); {ON_A_LOCAL_SERVER}",
    "http.3.yaml": f"needs network (catfacts.net); {ON_A_LOCAL_SERVER}",
    "http.4.yaml": f"needs network (catfacts.net); {ON_A_LOCAL_SERVER}",
    "http.5.yaml": "needs network (slack.com) and secret(), which is not implemented; "
    "test_http.py posts such a body to a local server",
    "http.6.yaml": f"needs network (api.example.com); {ON_A_LOCAL_SERVER}",
    "http.8.yaml": f"needs network (api.example.com); {ON_A_LOCAL_SERVER}",
    "http.9.yaml": f"needs network (api.example.com); {ON_A_LOCAL_SERVER}",
    "http-download.1.yaml": "needs network (example.com); run against a local server in "
    "test_kargo_docs_http.py",
    "http-download.2.yaml": "needs network (artifacts.example.com) and secret(), which is not "
    "implemented; run in test_kargo_docs_http.py with the secret's value filled in",
    "http-download.3.yaml": "needs network (artifacts.example.com) and secret(), which is not "
    "implemented; run in test_kargo_docs_http.py with the secret's value filled in",
    "http-download.4.yaml": "needs network (charts.example.com) and chartFrom() on a chart "
    "Freight; its http-download and untar run in test_kargo_docs_http.py",
}


def _steps_of(doc: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(vars, steps) of an example: a bare list, {vars, steps}, or a Stage."""
    if isinstance(doc, list):
        return [], doc
    if "steps" in doc:
        return doc.get("vars") or [], doc["steps"]
    spec = doc.get("spec", doc)
    tspec = spec["promotionTemplate"]["spec"]
    return tspec.get("vars") or [], tspec["steps"]


def _load(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return _steps_of(yaml.safe_load((FIXTURES / name).read_text()))


def _uses(obj: Any) -> set[str]:
    if isinstance(obj, dict):
        found = {obj["uses"]} if isinstance(obj.get("uses"), str) else set()
        if isinstance(obj.get("task"), dict):
            found.add("task")
        for v in obj.values():
            found |= _uses(v)
        return found
    if isinstance(obj, list):
        return set().union(*(_uses(v) for v in obj)) if obj else set()
    return set()


def test_every_built_in_example_is_run_or_excluded_with_a_reason() -> None:
    candidates = set()
    for path in conformance.files("kargo-docs", "*.yaml"):
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue
        uses = set().union(*(_uses(d) for d in docs)) if docs else set()
        if uses and uses <= BUILT_IN:
            candidates.add(path.name)
    missing = candidates - set(RUNNABLE) - set(EXCLUDED)
    assert not missing, f"examples neither run nor excluded: {sorted(missing)}"
    assert len(RUNNABLE) >= 20


@pytest.fixture
def world(tmp_path: Path) -> World:
    remote = make_remote(tmp_path, files=MAIN_FILES)
    main_sha = remote.head("main")
    assert main_sha is not None
    remote.commit_files("stage/test", STAGE_FILES, "stage content", orphan=True)
    overlay_sha = remote.commit_files(
        "overlay", {"stages/test/kustomization.yaml": OVERLAY_KUSTOMIZATION}, "overlay"
    )
    git_env(tmp_path, {remote.url: REPO_URL})
    return World(
        tmp=tmp_path,
        remote=remote,
        main_sha=main_sha,
        overlay_sha=overlay_sha,
        work=tmp_path / "work",
    )


def _manifests(world: World, case: Case, name: str, api_version: str) -> list[dict[str, Any]]:
    vars_, steps = _load(name)
    for more in case.also:
        more_vars, more_steps = _load(more)
        vars_ = vars_ + more_vars
        steps = steps + more_steps
    origin = {"kind": "Warehouse", "name": "base" if case.overlay_freight else "my-warehouse"}
    freight = {
        "apiVersion": api_version,
        "kind": "Freight",
        "metadata": {"name": "f0e1d2c3b4a5968778695a4b3c2d1e0f12345678", "namespace": "kargo-demo"},
        "alias": "example",
        "origin": origin,
        "commits": [{"repoURL": REPO_URL, "id": world.main_sha, "branch": "main"}],
        "images": [
            {"repoURL": "my/image", "tag": "1.2.3", "digest": "sha256:" + "a" * 64},
            {"repoURL": "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-image", "tag": "2.0.0"},
        ],
        "charts": [
            {"repoURL": "oci://example-chart-registry/some-chart", "version": "1.3.0"},
            {"repoURL": "https://example-chart-repo", "name": "some-chart", "version": "1.4.0"},
        ],
    }
    stage: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "Stage",
        "metadata": {"name": "test", "namespace": "kargo-demo"},
        "spec": {"requestedFreight": [{"origin": origin, "sources": {"direct": True}}]},
    }
    docs: list[dict[str, Any]] = [freight, stage]
    docs += [{"apiVersion": api_version, **obj} for obj in case.objects]
    steps = steps + list(case.then)
    if case.overlay_freight:
        stage["status"] = {
            "freightHistory": [
                {
                    "items": {
                        "Warehouse/test-overlay": {
                            "name": "0verlay",
                            "origin": {"kind": "Warehouse", "name": "test-overlay"},
                            "commits": [{"repoURL": REPO_URL, "id": world.overlay_sha}],
                        }
                    }
                }
            ]
        }
    task_vars = [{"name": "repoURL"}, {"name": "targetBranch", "value": "main"}]
    if case.in_task:
        docs.append(
            {
                "apiVersion": api_version,
                "kind": "PromotionTask",
                "metadata": {"name": "example-task", "namespace": "kargo-demo"},
                "spec": {"vars": task_vars + vars_, "steps": case.prelude + steps},
            }
        )
        stage["spec"]["promotionTemplate"] = {
            "spec": {
                "steps": [
                    {
                        "task": {"name": "example-task"},
                        "vars": [{"name": "repoURL", "value": REPO_URL}],
                    }
                ]
            }
        }
    else:
        stage["spec"]["promotionTemplate"] = {
            "spec": {
                "vars": [{"name": "gitRepo", "value": REPO_URL}, *vars_],
                "steps": case.prelude + steps,
            }
        }
    return docs


@pytest.mark.parametrize("api_version", ["kargo.akuity.io/v1alpha1", "longshoreman.dev/v1alpha1"])
@pytest.mark.parametrize("name", sorted(RUNNABLE))
def test_kargo_example_runs_unchanged(world: World, name: str, api_version: str) -> None:
    case = RUNNABLE[name]
    path = world.tmp / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(_manifests(world, case, name, api_version)))
    out, err = io.StringIO(), io.StringIO()
    code = main(
        [
            "run",
            "--manifests",
            str(path),
            "--stage",
            "test",
            "--freight",
            "example",
            "--work-dir",
            str(world.work),
            "--output",
            "json",
            "--git-config",
            str(world.tmp / "gitconfig-longshoreman-tests"),
        ],
        stdout=out,
        stderr=err,
    )
    assert code == 0, err.getvalue()
    world.promotion = json.loads(out.getvalue())
    assert world.promotion["status"]["phase"] == "Succeeded"
    case.check(world)
