"""Tests for the file steps (promoter/steps/workdir/)  on real files in a temporary work
directory.

Each step object is called directly, as the engine would, with an already rendered config. The
data files of Kargo's documentation examples (yaml-update, helm-update-chart, ...) are inlined,
with their comment headers, to check that formatting survives an edit byte for byte.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from promoter.errors import StepError
from promoter.steps.base import StepContext, StepResult, StepStatus
from promoter.steps.registry import BUILTIN_KINDS, builtin_registry
from promoter.steps.workdir.updates import parse_key
from tests.support import objects
from tests.support.helmcharts import chart_archive, serving_chart_repository
from tests.support.steps import make_context

FREIGHT = objects.freight(
    "f00d",
    namespace="kargo-demo",
    warehouse="my-warehouse",
    images=[
        {"repoURL": "my/image", "tag": "1.2.3", "digest": "sha256:abc123"},
        {"repoURL": "other/image", "tag": "v9", "digest": "sha256:def456"},
    ],
    charts=[
        {"repoURL": "https://example-chart-repo", "name": "some-chart", "version": "1.4.0"},
        {"repoURL": "oci://example-chart-registry/some-chart", "version": "1.5.0"},
    ],
)


# Every step, each imported from its own module on first use.
STEPS = builtin_registry()
WORKDIR = "promoter.steps.workdir."


def make_ctx(work_dir: Path, freight: Mapping[str, Any] | None = None) -> StepContext:
    return make_context(
        work_dir, freight=FREIGHT if freight is None else freight, work_dir=work_dir
    )


async def run(
    kind: str, tmp_path: Path, config: Mapping[str, Any], freight: Mapping[str, Any] | None = None
) -> StepResult:
    step = STEPS[kind]
    return await step.run(make_ctx(tmp_path, freight), config)


async def run_error(
    kind: str, tmp_path: Path, config: Mapping[str, Any], freight: Mapping[str, Any] | None = None
) -> StepError:
    with pytest.raises(StepError) as caught:
        await run(kind, tmp_path, config, freight)
    return caught.value


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    return path


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def lexists(path: Path) -> bool:
    return os.path.lexists(path)


def freeze(path: Path) -> int:
    """Backdate a file's mtime so a test can tell whether a step rewrote it."""
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    return path.stat().st_mtime_ns


def test_registry_lists_every_step() -> None:
    workdir = {k for k, module in BUILTIN_KINDS.items() if module.startswith(WORKDIR)}
    assert workdir >= {
        "yaml-update",
        "json-update",
        "yaml-parse",
        "json-parse",
        "helm-update-chart",
        "copy",
        "delete",
        "file-write",
        "yaml-merge",
    }
    assert workdir >= {"kustomize-build", "kustomize-set-image"}


# --- key syntax ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "parts"),
    [
        ("image.tag", [("image", False), ("tag", False)]),
        ("example\\.com/version", [("example.com/version", False)]),
        (
            "configs.example\\.com/feature.enabled",
            [("configs", False), ("example.com/feature", False), ("enabled", False)],
        ),
        ("containers.0.image", [("containers", False), ("0", False), ("image", False)]),
        ("ports.:80", [("ports", False), ("80", True)]),
        ("a\\:b", [("a:b", False)]),
        ("path\\\\to.file", [("path\\to", False), ("file", False)]),
    ],
)
def test_parse_key(key: str, parts: list[tuple[str, bool]]) -> None:
    assert [(p.name, p.map_key) for p in parse_key(key)] == parts


@pytest.mark.parametrize("key", ["", "a..b", "a.", ".a", "a\\x", "a\\", "a:b", "a.:"])
def test_parse_key_rejects(key: str) -> None:
    with pytest.raises(ValueError):
        parse_key(key)


# --- yaml-update -----------------------------------------------------------------------------

VALUES = """\
# Values for my-chart (comment kept)
image:
  repository: my/image   # where from
  tag: "v1.0.0"  # bumped by Kargo
replicas: 2
env:
  example.com/version: 'v1.0.0'
containers:
- name: my-app
  image: my-app:v1.0
  args: [--verbose, --port=80]
notes: |
  line one
  line two
# trailing comment
"""


async def test_yaml_update_preserves_comments_order_and_quotes(tmp_path: Path) -> None:
    path = write(tmp_path / "src/values.yaml", VALUES)
    result = await run(
        "yaml-update",
        tmp_path,
        {
            "path": "./src/values.yaml",
            "updates": [
                {"key": "image.tag", "value": "v1.1.0"},
                {"key": "env.example\\.com/version", "value": "v1.1.0"},
                {"key": "containers.0.image", "value": "my-app:v1.1"},
                {"key": "replicas", "value": 3},
            ],
        },
    )
    assert result.status is StepStatus.SUCCEEDED
    assert read(path) == VALUES.replace('tag: "v1.0.0"', 'tag: "v1.1.0"').replace(
        "'v1.0.0'", "'v1.1.0'"
    ).replace("my-app:v1.0", "my-app:v1.1").replace("replicas: 2", "replicas: 3")
    assert result.output == {
        "commitMessage": "Updated ./src/values.yaml\n"
        "\n- image.tag: v1.1.0"
        "\n- env.example\\.com/version: v1.1.0"
        "\n- containers.0.image: my-app:v1.1"
        "\n- replicas: 3"
    }


async def test_yaml_update_kargo_doc_examples(tmp_path: Path) -> None:
    # yaml-update.1, .2 and .3 from Kargo's docs, each with its leading comment lines.
    header = "# Example from Kargo's documentation\n# (Apache-2.0)\n"
    one = write(tmp_path / "one.yaml", header + "image:\n  tag: v1.0.0\n")
    two = write(tmp_path / "two.yaml", header + "example.com/version: v1.0.0\n")
    three = write(
        tmp_path / "three.yaml", header + "containers:\n- name: my-app\n  image: my-app:v1.0\n"
    )
    await run(
        "yaml-update",
        tmp_path,
        {"path": "one.yaml", "updates": [{"key": "image.tag", "value": "v2"}]},
    )
    await run(
        "yaml-update",
        tmp_path,
        {"path": "two.yaml", "updates": [{"key": "example\\.com/version", "value": "v2"}]},
    )
    await run(
        "yaml-update",
        tmp_path,
        {"path": "three.yaml", "updates": [{"key": "containers.0.image", "value": "my-app:v2"}]},
    )
    assert read(one) == header + "image:\n  tag: v2\n"
    assert read(two) == header + "example.com/version: v2\n"
    assert read(three) == header + "containers:\n- name: my-app\n  image: my-app:v2\n"


async def test_yaml_update_keeps_indented_sequences_and_document_start(tmp_path: Path) -> None:
    text = (
        "# leading comment before the document start\n"
        "---\n"
        "spec:\n"
        "    template:\n"
        "        spec:\n"
        "            containers:\n"
        "              - name: app\n"
        "                image: app:1.0   # pinned\n"
    )
    path = write(tmp_path / "deploy.yaml", text)
    await run(
        "yaml-update",
        tmp_path,
        {
            "path": "deploy.yaml",
            "updates": [{"key": "spec.template.spec.containers.0.image", "value": "app:2.0"}],
        },
    )
    assert read(path) == text.replace("app:1.0", "app:2.0")


async def test_yaml_update_keeps_crlf_and_missing_final_newline(tmp_path: Path) -> None:
    path = write(tmp_path / "v.yaml", "a: 1\r\nb:\r\n  c: x")
    await run(
        "yaml-update", tmp_path, {"path": "v.yaml", "updates": [{"key": "b.c", "value": "y"}]}
    )
    assert path.read_bytes() == b"a: 1\r\nb:\r\n  c: y"


async def test_yaml_update_keeps_lines_ruamel_would_normalise(tmp_path: Path) -> None:
    text = "nodeSelector: null\naffinity: ~\nodd:     spacing   # note\nimage:\n    tag: v1\n"
    path = write(tmp_path / "v.yaml", text)
    await run(
        "yaml-update",
        tmp_path,
        {"path": "v.yaml", "updates": [{"key": "image.tag", "value": "v2"}]},
    )
    assert read(path) == text.replace("tag: v1", "tag: v2")


async def test_yaml_update_creates_missing_keys_and_appends(tmp_path: Path) -> None:
    path = write(tmp_path / "v.yaml", "# top\nimage:\n  tag: v1\nlist:\n- a\n")
    await run(
        "yaml-update",
        tmp_path,
        {
            "path": "v.yaml",
            "updates": [
                {"key": "image.pullPolicy", "value": "Always"},
                {"key": "resources.limits.cpu", "value": "500m"},
                {"key": "list.-1", "value": "b"},
                {"key": "list.2", "value": "c"},
            ],
        },
    )
    assert read(path) == (
        "# top\nimage:\n  tag: v1\n  pullPolicy: Always\nlist:\n- a\n- b\n- c\n"
        "resources:\n  limits:\n    cpu: 500m\n"
    )


async def test_yaml_update_quotes_strings_that_look_like_other_types(tmp_path: Path) -> None:
    path = write(tmp_path / "v.yaml", "version: v1\nenabled: yes-please\n")
    result = await run(
        "yaml-update",
        tmp_path,
        {
            "path": "v.yaml",
            "updates": [{"key": "version", "value": "1.20"}, {"key": "enabled", "value": "true"}],
        },
    )
    assert read(path) == "version: '1.20'\nenabled: 'true'\n"
    assert (
        result.output["commitMessage"] == 'Updated v.yaml\n\n- version: "1.20"\n- enabled: "true"'
    )


async def test_yaml_update_is_a_no_op_when_values_are_already_set(tmp_path: Path) -> None:
    path = write(tmp_path / "v.yaml", "image:\n    tag:   'v1'   # odd spacing kept\n")
    before = freeze(path)
    result = await run(
        "yaml-update",
        tmp_path,
        {"path": "v.yaml", "updates": [{"key": "image.tag", "value": "v1"}]},
    )
    assert path.stat().st_mtime_ns == before
    assert "already up to date" in result.message
    # Kargo reports commitMessage whenever there are updates; a later git-commit refers to it.
    assert result.output["commitMessage"] == "Updated v.yaml\n\n- image.tag: v1"


async def test_yaml_update_missing_file_is_a_clear_terminal_error(tmp_path: Path) -> None:
    err = await run_error(
        "yaml-update", tmp_path, {"path": "./src/nope.yaml", "updates": [{"key": "a", "value": 1}]}
    )
    assert err.terminal
    assert "config.path './src/nope.yaml' does not exist" in err.message


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"updates": [{"key": "a", "value": 1}]}, "yaml-update: config.path is required"),
        ({"path": "v.yaml"}, "yaml-update: config.updates is required"),
        ({"path": "v.yaml", "updates": []}, "config.updates must list at least one update"),
        ({"path": "v.yaml", "updates": "a=1"}, "config.updates must be a list"),
        ({"path": "v.yaml", "updates": [{"value": 1}]}, "config.updates[0].key is required"),
        ({"path": "v.yaml", "updates": [{"key": "a"}]}, "config.updates[0].value is required"),
        (
            {"path": "v.yaml", "updates": [{"key": "a", "value": 1}, {"key": "a..b", "value": 1}]},
            "config.updates[1].key 'a..b' has an empty part",
        ),
        (
            {"path": "v.yaml", "updates": [{"key": "list.x", "value": 1}]},
            "config.updates[0].key 'list.x': list is a list, but 'x' is not a list index",
        ),
        (
            {"path": "v.yaml", "updates": [{"key": "list.5", "value": 1}]},
            "index 5 is past the end of a list of 1 items",
        ),
    ],
)
async def test_yaml_update_bad_config_names_the_field(
    tmp_path: Path, config: dict[str, Any], expected: str
) -> None:
    write(tmp_path / "v.yaml", "list:\n- a\n")
    err = await run_error("yaml-update", tmp_path, config)
    assert err.terminal
    assert expected in err.message


@pytest.mark.parametrize("text", ["a: [1, 2\n", "a: 1\n---\nb: 2\n"])
async def test_yaml_update_refuses_invalid_or_multi_document_yaml(
    tmp_path: Path, text: str
) -> None:
    write(tmp_path / "v.yaml", text)
    err = await run_error(
        "yaml-update", tmp_path, {"path": "v.yaml", "updates": [{"key": "a", "value": 1}]}
    )
    assert err.terminal
    assert "is not valid YAML" in err.message


# --- json-update -----------------------------------------------------------------------------

SETTINGS = """\
{
    "image": {"repository": "my/image", "tag": "v1.0.0"},
    "example.com/version": "v1.0.0",
    "containers": [
        { "name": "my-app", "image": "my-app:v1.0" }
    ],
    "ports": [80, 443],
    "replicas": 2,
    "debug": false
}
"""


async def test_json_update_splices_values_and_keeps_formatting(tmp_path: Path) -> None:
    path = write(tmp_path / "src/configs/settings.json", SETTINGS)
    result = await run(
        "json-update",
        tmp_path,
        {
            "path": "./src/configs/settings.json",
            "updates": [
                {"key": "image.tag", "value": "v1.1.0"},
                {"key": "example\\.com/version", "value": "v1.1.0"},
                {"key": "containers.0.image", "value": "my-app:v1.1"},
                {"key": "replicas", "value": 3},
                {"key": "debug", "value": True},
            ],
        },
    )
    assert read(path) == SETTINGS.replace('"v1.0.0"', '"v1.1.0"').replace(
        "my-app:v1.0", "my-app:v1.1"
    ).replace('"replicas": 2', '"replicas": 3').replace("false", "true")
    assert result.output == {
        "commitMessage": "Updated ./src/configs/settings.json\n"
        '\n- image.tag: "v1.1.0"'
        '\n- example\\.com/version: "v1.1.0"'
        '\n- containers.0.image: "my-app:v1.1"'
        "\n- replicas: 3"
        "\n- debug: true"
    }


async def test_json_update_new_key_rewrites_with_the_files_indentation(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", '{\n  "image": {\n    "tag": "v1"\n  }\n}\n')
    await run(
        "json-update",
        tmp_path,
        {"path": "c.json", "updates": [{"key": "image.digest", "value": "sha256:1"}]},
    )
    assert read(path) == '{\n  "image": {\n    "tag": "v1",\n    "digest": "sha256:1"\n  }\n}\n'


async def test_json_update_no_op_does_not_touch_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", '{"image": {"tag": "v1"}}')
    before = freeze(path)
    await run(
        "json-update",
        tmp_path,
        {"path": "c.json", "updates": [{"key": "image.tag", "value": "v1"}]},
    )
    assert path.stat().st_mtime_ns == before


async def test_json_update_refuses_non_scalar_values_and_invalid_json(tmp_path: Path) -> None:
    write(tmp_path / "c.json", '{"a": 1}')
    write(tmp_path / "bad.json", "{'a': 1}")
    err = await run_error(
        "json-update", tmp_path, {"path": "c.json", "updates": [{"key": "a", "value": {"b": 1}}]}
    )
    assert err.terminal
    assert "config.updates[0].value for 'a' must be a string, number or boolean" in err.message
    err = await run_error(
        "json-update", tmp_path, {"path": "bad.json", "updates": [{"key": "a", "value": 2}]}
    )
    assert err.terminal
    assert "'bad.json' is not valid JSON" in err.message


# --- yaml-parse / json-parse -----------------------------------------------------------------


async def test_yaml_parse_extracts_values_with_expressions(tmp_path: Path) -> None:
    # yaml-parse.2 from Kargo's docs, plus the apps map file-write.1 reads with ctx.stage.
    write(
        tmp_path / "src/charts/my-chart/values.yaml",
        '# Example 2\nimage:\n  tag: "v1.2.3"\nreleased: 2024-05-01\n',
    )
    write(tmp_path / "src/apps.yaml", "apps:\n  test:\n    replicas: 2\n  prod:\n    replicas: 5\n")
    values = await run(
        "yaml-parse",
        tmp_path,
        {
            "path": "./src/charts/my-chart/values.yaml",
            "outputs": [
                {"name": "imageTag", "fromExpression": "image.tag"},
                {"name": "released", "fromExpression": "released"},
            ],
        },
    )
    # Dates stay strings, as in Kargo (YAML is decoded through JSON there).
    assert values.output == {"imageTag": "v1.2.3", "released": "2024-05-01"}
    apps = await run(
        "yaml-parse",
        tmp_path,
        {
            "path": "./src/apps.yaml",
            "outputs": [{"name": "appConfig", "fromExpression": "apps[ctx.stage]"}],
        },
    )
    assert apps.output == {"appConfig": {"replicas": 2}}


async def test_json_parse_and_non_map_roots(tmp_path: Path) -> None:
    write(tmp_path / "src/config.json", '{"image": {"tag": "latest"}, "rbac": {"on": true}}')
    write(tmp_path / "list.yaml", "- a\n- b\n")
    result = await run(
        "json-parse",
        tmp_path,
        {
            "path": "./src/config.json",
            "outputs": [{"name": "imageTag", "fromExpression": "image.tag"}],
        },
    )
    assert result.output == {"imageTag": "latest"}
    listed = await run(
        "yaml-parse",
        tmp_path,
        {"path": "list.yaml", "outputs": [{"name": "first", "fromExpression": "root[0]"}]},
    )
    assert listed.output == {"first": "a"}


async def test_parse_errors_are_terminal_and_name_the_field(tmp_path: Path) -> None:
    write(tmp_path / "v.yaml", "image:\n  tag: v1\n")
    write(tmp_path / "empty.yaml", "\n")
    err = await run_error(
        "yaml-parse",
        tmp_path,
        {"path": "v.yaml", "outputs": [{"name": "x", "fromExpression": "nope.tag"}]},
    )
    assert err.terminal
    assert err.message.startswith("yaml-parse: config.outputs[0].fromExpression")
    err = await run_error("yaml-parse", tmp_path, {"path": "v.yaml", "outputs": [{"name": "x"}]})
    assert err.terminal
    assert "config.outputs[0].fromExpression is required" in err.message
    err = await run_error("json-parse", tmp_path, {"path": "v.yaml"})
    assert "json-parse: config.outputs is required" in err.message
    err = await run_error(
        "yaml-parse",
        tmp_path,
        {"path": "empty.yaml", "outputs": [{"name": "x", "fromExpression": "a"}]},
    )
    assert "'empty.yaml' is empty" in err.message
    err = await run_error(
        "json-parse",
        tmp_path,
        {"path": "v.yaml", "outputs": [{"name": "x", "fromExpression": "a"}]},
    )
    assert "'v.yaml' is not valid JSON" in err.message
    err = await run_error(
        "yaml-parse",
        tmp_path,
        {"path": "gone.yaml", "outputs": [{"name": "x", "fromExpression": "a"}]},
    )
    assert "config.path 'gone.yaml' does not exist" in err.message


# --- kustomize-set-image ---------------------------------------------------------------------

KUSTOMIZATION = """\
# Base for every stage
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment.yaml   # the app
images:
  - name: my/image   # bumped by Kargo
    newTag: 1.0.0
  - name: nginx
    newName: my-registry/nginx
    newTag: "1.25"
"""


async def test_kustomize_set_image_with_explicit_tag_keeps_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "src/base/kustomization.yaml", KUSTOMIZATION)
    result = await run(
        "kustomize-set-image",
        tmp_path,
        {"path": "./src/base", "images": [{"image": "my/image", "tag": "1.2.4"}]},
    )
    assert read(path) == KUSTOMIZATION.replace("newTag: 1.0.0", "newTag: 1.2.4")
    assert result.output == {
        "commitMessage": "Updated ./src/base to use new image\n\n- my/image:1.2.4"
    }


async def test_kustomize_set_image_takes_tag_or_digest_from_the_freight(tmp_path: Path) -> None:
    path = write(tmp_path / "base/kustomization.yaml", KUSTOMIZATION)
    result = await run(
        "kustomize-set-image",
        tmp_path,
        {
            "path": "base",
            "images": [
                {"image": "my/image"},
                {"image": "other/image", "useDigest": True, "newName": "mirror/other"},
            ],
        },
    )
    assert read(path) == KUSTOMIZATION.replace("newTag: 1.0.0", "newTag: 1.2.3") + (
        "  - name: other/image\n    newName: mirror/other\n    digest: sha256:def456\n"
    )
    assert result.output["commitMessage"] == (
        "Updated base to use new images\n\n- my/image:1.2.3\n- mirror/other@sha256:def456"
    )


async def test_kustomize_set_image_digest_replaces_tag(tmp_path: Path) -> None:
    path = write(tmp_path / "base/kustomization.yml", KUSTOMIZATION)
    await run(
        "kustomize-set-image",
        tmp_path,
        {"path": "base", "images": [{"image": "nginx", "digest": "sha256:feed", "newName": "*"}]},
    )
    assert read(path) == KUSTOMIZATION.replace(
        '    newName: my-registry/nginx\n    newTag: "1.25"\n',
        "    newName: my-registry/nginx\n    digest: sha256:feed\n",
    )


async def test_kustomize_set_image_without_images_sets_all_freight_images(tmp_path: Path) -> None:
    path = write(tmp_path / "base/Kustomization", "resources:\n- deployment.yaml\n")
    result = await run("kustomize-set-image", tmp_path, {"path": "base"})
    assert read(path) == (
        "resources:\n- deployment.yaml\nimages:\n"
        "- name: my/image\n  newTag: 1.2.3\n  digest: sha256:abc123\n"
        "- name: other/image\n  newTag: v9\n  digest: sha256:def456\n"
    )
    assert result.output["commitMessage"].startswith("Updated base to use new images\n")


async def test_kustomize_set_image_changing_an_image_name(tmp_path: Path) -> None:
    # kustomize-set-image.2 from Kargo's docs: no tag given, so the Freight's tag is used.
    east = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-image"
    west = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-image"
    freight = {"images": [{"repoURL": east, "tag": "2.0.0"}]}
    path = write(tmp_path / "src/base/kustomization.yaml", "images: []\n")
    await run(
        "kustomize-set-image",
        tmp_path,
        {"path": "./src/base", "images": [{"image": east, "newName": west}]},
        freight=freight,
    )
    assert read(path) == f"images:\n- name: {east}\n  newName: {west}\n  newTag: 2.0.0\n"


async def test_kustomize_set_image_errors(tmp_path: Path) -> None:
    write(tmp_path / "base/kustomization.yaml", KUSTOMIZATION)
    err = await run_error(
        "kustomize-set-image", tmp_path, {"path": "base", "images": [{"image": "unknown/image"}]}
    )
    assert err.terminal
    assert "has no image 'unknown/image' (Freight images: my/image, other/image)" in err.message
    err = await run_error(
        "kustomize-set-image",
        tmp_path,
        {"path": "base", "images": [{"image": "my/image", "tag": "1", "digest": "sha256:1"}]},
    )
    assert "config.images[0].tag and .digest are mutually exclusive" in err.message
    err = await run_error(
        "kustomize-set-image", tmp_path, {"path": "base", "images": [{"tag": "1"}]}
    )
    assert "config.images[0].image is required" in err.message
    err = await run_error(
        "kustomize-set-image",
        tmp_path,
        {
            "path": "base",
            "images": [{"image": "my/image", "fromOrigin": {"kind": "Warehouse", "name": "other"}}],
        },
    )
    assert "fromOrigin Warehouse/other does not match" in err.message
    err = await run_error(
        "kustomize-set-image", tmp_path, {"path": "missing", "images": [{"image": "my/image"}]}
    )
    assert "config.path 'missing' is not a directory" in err.message
    write(tmp_path / "empty/README.md", "nothing here\n")
    err = await run_error(
        "kustomize-set-image", tmp_path, {"path": "empty", "images": [{"image": "my/image"}]}
    )
    assert (
        "no kustomization.yaml, kustomization.yml, Kustomization in config.path 'empty'"
        in err.message
    )
    write(tmp_path / "base/kustomization.yml", "images: []\n")
    err = await run_error(
        "kustomize-set-image", tmp_path, {"path": "base", "images": [{"image": "my/image"}]}
    )
    assert "holds several kustomization files" in err.message


# --- helm-update-chart -----------------------------------------------------------------------
#
# Chart.yaml keeps its formatting byte for byte; Chart.lock and charts/ are refreshed by Helm's
# SDK against a chart repository on 127.0.0.1 (tests/unit/steps/test_helm_update_chart_lock.py
# has Kargo's table; the fallback without the SDK is tests/integration/test_helm_template_cli.py).


def chart_yaml(repository: str, version: str) -> str:
    # helm-update-chart.1/.4/.5/.7 from Kargo's docs, with their comment lines.
    return (
        "# Example from Kargo's documentation of the `helm-update-chart` step\n"
        "# (akuity/kargo docs, Apache-2.0)\n"
        "apiVersion: v2\nname: example\ntype: application\nversion: 0.1.0\nappVersion: 0.1.0\n"
        f"dependencies:\n- repository: {repository}\n  name: some-chart\n  version: {version}\n"
    )


def some_chart(tmp_path: Path, *versions: str) -> list[Path]:
    return [
        chart_archive(
            tmp_path / "dist",
            {"Chart.yaml": f"apiVersion: v2\nname: some-chart\nversion: {v}\n"},
        )
        for v in versions
    ]


def with_chart_from(repo_url: str) -> dict[str, Any]:
    return objects.freight(
        "f00d", namespace="kargo-demo", warehouse="my-warehouse",
        charts=[{"repoURL": repo_url, "name": "some-chart", "version": "1.4.0"}],
    )  # fmt: skip


async def test_helm_update_chart_classic_repository(tmp_path: Path) -> None:
    pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    async with serving_chart_repository(some_chart(tmp_path, "1.2.3", "1.3.0")) as repo:
        path = write(tmp_path / "src/charts/my-chart/Chart.yaml", chart_yaml(repo.url, "1.2.3"))
        result = await run(
            "helm-update-chart",
            tmp_path,
            {
                "path": "./src/charts/my-chart",
                "charts": [{"repository": repo.url, "name": "some-chart", "version": "1.3.0"}],
            },
        )
    assert read(path) == chart_yaml(repo.url, "1.3.0")
    # Kargo's message says what Chart.lock changed: there was none before.
    assert result.output == {
        "commitMessage": "Updated chart dependencies for ./src/charts/my-chart\n"
        "\n- some-chart: 1.3.0"
    }
    assert (tmp_path / "src/charts/my-chart/charts/some-chart-1.3.0.tgz").is_file()


async def test_helm_update_chart_version_from_the_freight(tmp_path: Path) -> None:
    pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    async with serving_chart_repository(some_chart(tmp_path, "1.2.3", "1.4.0")) as repo:
        path = write(tmp_path / "chart/Chart.yaml", chart_yaml(repo.url, "1.2.3"))
        config = {"path": "chart", "charts": [{"repository": repo.url, "name": "some-chart"}]}
        first = await run("helm-update-chart", tmp_path, config, with_chart_from(repo.url))
        assert read(path) == chart_yaml(repo.url, "1.4.0")
        assert first.output["commitMessage"].endswith("- some-chart: 1.4.0")
        lock = read(tmp_path / "chart/Chart.lock")
        before = freeze(path)
        second = await run("helm-update-chart", tmp_path, config, with_chart_from(repo.url))
    assert second.output == {}
    assert path.stat().st_mtime_ns == before
    assert read(tmp_path / "chart/Chart.lock") == lock


async def test_helm_update_chart_errors(tmp_path: Path) -> None:
    write(tmp_path / "chart/Chart.yaml", chart_yaml("https://example-chart-repo", "1.2.3"))
    err = await run_error(
        "helm-update-chart",
        tmp_path,
        {
            "path": "chart",
            "charts": [{"repository": "https://elsewhere", "name": "some-chart", "version": "1"}],
        },
    )
    assert err.terminal
    assert (
        "config.charts[0]: no dependency in chart/Chart.yaml has repository 'https://elsewhere'"
        in err.message
    )
    err = await run_error("helm-update-chart", tmp_path, {"path": "chart", "charts": []})
    assert "config.charts" in err.message
    err = await run_error(
        "helm-update-chart",
        tmp_path,
        {"path": "chart", "charts": [{"repository": "https://x", "name": "y"}]},
    )
    assert (
        "config.charts[0].version is not set and the target Freight f00d has no chart 'y'"
        in err.message
    )
    err = await run_error(
        "helm-update-chart",
        tmp_path,
        {"path": "nochart", "charts": [{"name": "y", "repository": "r", "version": "1"}]},
    )
    assert "no Chart.yaml in config.path 'nochart'" in err.message
    err = await run_error(
        "helm-update-chart", tmp_path, {"path": "chart", "charts": [{"name": "y", "version": "1"}]}
    )
    assert "config.charts[0].repository is required" in err.message


# --- copy ------------------------------------------------------------------------------------


async def test_copy_file_creates_parent_directories(tmp_path: Path) -> None:
    # copy.1 from Kargo's docs.
    write(tmp_path / "overlay/stages/test/kustomization.yaml", "resources: [../../base]\n")
    await run(
        "copy",
        tmp_path,
        {
            "inPath": "./overlay/stages/test/kustomization.yaml",
            "outPath": "./src/stages/test/kustomization.yaml",
        },
    )
    assert read(tmp_path / "src/stages/test/kustomization.yaml") == "resources: [../../base]\n"


async def test_copy_directory_merges_skips_git_symlinks_and_ignored(tmp_path: Path) -> None:
    write(tmp_path / "src/a.yaml", "a: new\n")
    write(tmp_path / "src/sub/b.yaml", "b: 1\n")
    write(tmp_path / "src/sub/skip.tmp", "x\n")
    write(tmp_path / "src/testdata/t.yaml", "t\n")
    write(tmp_path / "src/.git/HEAD", "ref: refs/heads/main\n")
    (tmp_path / "src/link.yaml").symlink_to(tmp_path / "src/a.yaml")
    write(tmp_path / "out/a.yaml", "a: old\n")
    write(tmp_path / "out/keep.yaml", "keep\n")
    await run(
        "copy",
        tmp_path,
        {"inPath": "./src", "outPath": "./out", "ignore": "# editor junk\ntestdata/\n*.tmp\n"},
    )
    assert tree(tmp_path / "out") == ["a.yaml", "keep.yaml", "sub", "sub/b.yaml"]
    assert read(tmp_path / "out/a.yaml") == "a: new\n"


async def test_copy_errors(tmp_path: Path) -> None:
    write(tmp_path / "src/a.yaml", "a\n")
    err = await run_error("copy", tmp_path, {"inPath": "nope", "outPath": "out"})
    assert err.terminal
    assert "config.inPath 'nope' does not exist" in err.message
    err = await run_error("copy", tmp_path, {"inPath": "src", "outPath": "src/nested"})
    assert "is inside config.inPath" in err.message
    err = await run_error("copy", tmp_path, {"inPath": "src"})
    assert "copy: config.outPath is required" in err.message


# --- delete ----------------------------------------------------------------------------------


async def test_delete_single_path_and_list(tmp_path: Path) -> None:
    write(tmp_path / "out/unwanted/file", "x")
    write(tmp_path / "out/tmp/a", "x")
    write(tmp_path / "out/build.log", "x")
    write(tmp_path / "out/keep", "x")
    await run("delete", tmp_path, {"path": "./out/unwanted/file"})
    assert not (tmp_path / "out/unwanted/file").exists()
    await run("delete", tmp_path, {"paths": ["./out/tmp", "./out/build.log", "./out/never-there"]})
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep", "unwanted"]


async def test_delete_globs(tmp_path: Path) -> None:
    # delete.3 from Kargo's docs.
    for name in (
        "out/a.tmp",
        "out/x/b.tmp",
        "out/x/y/.c.tmp",
        "out/x/keep.yaml",
        "out/build/artifact",
    ):
        write(tmp_path / name, "x")
    await run(
        "delete",
        tmp_path,
        {"paths": ["./out/**/*.tmp", "./out/build/"], "pathsAreGlobs": True, "strict": True},
    )
    assert tree(tmp_path) == ["out", "out/x", "out/x/keep.yaml", "out/x/y"]


async def test_delete_strict_and_config_errors(tmp_path: Path) -> None:
    err = await run_error("delete", tmp_path, {"path": "out/missing", "strict": True})
    assert err.terminal
    assert "config.path 'out/missing' does not exist" in err.message
    err = await run_error(
        "delete", tmp_path, {"paths": ["out/*.nothing"], "pathsAreGlobs": True, "strict": True}
    )
    assert "config.paths[0] 'out/*.nothing' matches nothing" in err.message
    err = await run_error("delete", tmp_path, {"path": "a", "paths": ["b"]})
    assert "config.path and config.paths are mutually exclusive" in err.message
    err = await run_error("delete", tmp_path, {})
    assert "one of config.path or config.paths is required" in err.message
    err = await run_error("delete", tmp_path, {"path": "."})
    assert "is the work directory itself" in err.message
    err = await run_error("delete", tmp_path, {"paths": ["../*"], "pathsAreGlobs": True})
    assert "config.paths[0] '../*' must stay inside the work directory" in err.message


async def test_delete_removes_a_symlink_not_its_target(tmp_path: Path) -> None:
    target = write(tmp_path / "out/real.yaml", "x")
    (tmp_path / "out/link.yaml").symlink_to(target)
    await run("delete", tmp_path, {"path": "out/link.yaml"})
    assert target.exists()
    assert not lexists(tmp_path / "out/link.yaml")


# --- file-write ------------------------------------------------------------------------------


async def test_file_write_creates_and_protects_files(tmp_path: Path) -> None:
    config = {"path": "./out/app-config.yaml", "contents": "replicas: 2\n"}
    await run("file-write", tmp_path, config)
    path = tmp_path / "out/app-config.yaml"
    assert read(path) == "replicas: 2\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The same contents again (a retried step) is fine; different contents need overwrite.
    await run("file-write", tmp_path, config)
    err = await run_error("file-write", tmp_path, {**config, "contents": "replicas: 3\n"})
    assert err.terminal
    assert "config.path './out/app-config.yaml' already exists; set overwrite: true" in err.message
    await run(
        "file-write", tmp_path, {**config, "contents": "", "overwrite": True, "permissions": "0644"}
    )
    assert read(path) == ""
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"contents": "x"}, "file-write: config.path is required"),
        ({"path": "a.txt"}, "config.contents is required and must be a string, got NoneType"),
        (
            {"path": "a.txt", "contents": {"a": 1}},
            "config.contents is required and must be a string, got dict",
        ),
        (
            {"path": "a.txt", "contents": "x", "overwrite": "maybe"},
            "config.overwrite must be true or false",
        ),
        (
            {"path": "a.txt", "contents": "x", "permissions": "0755"},
            "must not include executable bits",
        ),
        (
            {"path": "a.txt", "contents": "x", "permissions": "644"},
            "must be an octal mode like 0644",
        ),
        (
            {"path": "out/.git/config", "contents": "x"},
            "writing inside a .git directory is refused",
        ),
    ],
)
async def test_file_write_bad_config(tmp_path: Path, config: dict[str, Any], expected: str) -> None:
    err = await run_error("file-write", tmp_path, config)
    assert err.terminal
    assert expected in err.message


# --- paths out of the work directory ---------------------------------------------------------

ESCAPES = [
    ("yaml-update", "path", lambda p: {"path": p, "updates": [{"key": "a", "value": 1}]}),
    ("json-update", "path", lambda p: {"path": p, "updates": [{"key": "a", "value": 1}]}),
    (
        "yaml-parse",
        "path",
        lambda p: {"path": p, "outputs": [{"name": "a", "fromExpression": "a"}]},
    ),
    (
        "json-parse",
        "path",
        lambda p: {"path": p, "outputs": [{"name": "a", "fromExpression": "a"}]},
    ),
    (
        "kustomize-set-image",
        "path",
        lambda p: {"path": p, "images": [{"image": "my/image", "tag": "1"}]},
    ),
    (
        "helm-update-chart",
        "path",
        lambda p: {"path": p, "charts": [{"repository": "r", "name": "n", "version": "1"}]},
    ),
    ("copy", "inPath", lambda p: {"inPath": p, "outPath": "out"}),
    ("copy", "outPath", lambda p: {"inPath": "inside.yaml", "outPath": p}),
    ("delete", "path", lambda p: {"path": p}),
    ("delete", "paths[0]", lambda p: {"paths": [p]}),
    ("file-write", "path", lambda p: {"path": p, "contents": "x", "overwrite": True}),
]


@pytest.mark.parametrize(("kind", "field_name", "make"), ESCAPES)
@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
async def test_paths_cannot_leave_the_work_directory(
    tmp_path: Path, kind: str, field_name: str, make: Any, how: str
) -> None:
    outside = tmp_path / "outside"
    write(outside / "target/a.yaml", "a: 1\n")
    write(outside / "target/Chart.yaml", "dependencies: []\n")
    write(outside / "target/kustomization.yaml", "images: []\n")
    work = tmp_path / "work"
    write(work / "inside.yaml", "a: 1\n")
    (work / "escape").symlink_to(outside / "target")
    is_dir = kind in ("kustomize-set-image", "helm-update-chart")
    leaf = "" if is_dir else "/a.yaml"
    raw = {
        "dotdot": f"./sub/../../outside/target{leaf}",
        "absolute": f"{outside}/target{leaf}",
        "symlink": f"./escape{leaf}",
    }[how]
    err = await run_error(kind, work, make(raw))
    assert err.terminal
    assert f"config.{field_name} " in err.message
    assert "absolute" in err.message or "outside the Promotion's work directory" in err.message
    assert read(outside / "target/a.yaml") == "a: 1\n"
