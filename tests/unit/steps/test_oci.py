"""``oci-download`` and ``oci-push`` against a real registry (Debian's docker-registry on
127.0.0.1, tests/support/registry.py), with cases from Kargo's own tests
(pkg/promotion/runner/builtin/oci_downloader_test.go and oci_pusher_test.go, named per case).
They run through the engine with the server's registry port (app/controller/oci.py)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.controller.credentials import ClusterCredentials
from app.controller.oci import Registries
from app.controller.warehouses.credentials import DockerConfigCredentials
from app.settings import Settings, SettingsError
from promoter.resources.model import Phase
from promoter.steps.base import StepServices
from tests.support.registry import PASSWORD, USERNAME, Registry, running_registry
from tests.support.steps import run_template

FREIGHT = {"metadata": {"name": "f", "namespace": "demo"}, "origin": {"name": "w"}}
CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


@pytest.fixture
async def registry(tmp_path: Path) -> AsyncIterator[Registry]:
    async with running_registry(tmp_path) as running:
        yield running


@pytest.fixture
async def port() -> AsyncIterator[Registries]:
    registries = Registries()
    yield registries
    await registries.close()


async def run(steps: list[dict[str, Any]], work: Path, port: Registries | None) -> Any:
    return await run_template(steps, work, freight=FREIGHT, services=StepServices(oci=port))


def download(ref: str, **config: Any) -> dict[str, Any]:
    return {
        "uses": "oci-download",
        "as": "dl",
        "config": {"imageRef": ref, "outPath": "out/a", **config},
    }


# ---- oci-download -------------------------------------------------------------------------------


# Test_ociDownloader_run "successful extraction": the first layer, written to outPath.
async def test_download_writes_the_first_layer(
    tmp_path: Path, registry: Registry, port: Registries
) -> None:
    await registry.push_image("acme/app", "1.0.0")
    done = await run([download(registry.repo("acme/app") + ":1.0.0")], tmp_path / "w", port)
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert (tmp_path / "w" / "out" / "a").read_bytes() == b"acme/app:1.0.0:('linux', 'amd64')"


# "specific media type extraction" (an OCI Helm chart, oci:// as for Helm) and "specific media
# type not found".
@pytest.mark.parametrize(
    ("media_type", "expected"),
    [(CHART_LAYER, b"chart charts/app 1.2.3"), ("application/x-none", None)],
    ids=["specific media type extraction", "specific media type not found"],
)
async def test_download_by_media_type(
    tmp_path: Path, registry: Registry, port: Registries, media_type: str, expected: bytes | None
) -> None:
    await registry.push_chart("charts/app", "1.2.3")
    ref = "oci://" + registry.repo("charts/app") + ":1.2.3"
    done = await run([download(ref, mediaType=media_type)], tmp_path / "w", port)
    if expected is None:
        assert done.status.phase is Phase.ERRORED
        assert 'no layer found with media type "application/x-none"' in done.status.message
    else:
        assert done.status.phase is Phase.SUCCEEDED, done.status.message
        assert (tmp_path / "w" / "out" / "a").read_bytes() == expected


async def test_download_of_an_index_takes_the_linux_amd64_image(
    tmp_path: Path, registry: Registry, port: Registries
) -> None:
    await registry.push_index("acme/multi", "2.0", [("linux", "arm64"), ("linux", "amd64")])
    done = await run([download(registry.repo("acme/multi") + ":2.0")], tmp_path / "w", port)
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert (tmp_path / "w" / "out" / "a").read_bytes() == b"acme/multi:2.0:linux/amd64"


# Test_ociDownloader_prepareOutputPath "path already exists" / "... with overwrite allowed".
@pytest.mark.parametrize("overwrite", [False, True])
async def test_download_over_an_existing_file(
    tmp_path: Path, registry: Registry, port: Registries, overwrite: bool
) -> None:
    await registry.push_image("acme/app", "1.0.0")
    ref = registry.repo("acme/app") + ":1.0.0"
    steps = [
        {"uses": "file-write", "config": {"path": "out/a", "contents": "old"}},
        download(ref, allowOverwrite=overwrite),
    ]
    done = await run(steps, tmp_path / "w", port)
    if overwrite:
        assert done.status.phase is Phase.SUCCEEDED, done.status.message
        assert (tmp_path / "w" / "out" / "a").read_bytes().startswith(b"acme/app")
    else:
        assert "file already exists at out/a and overwrite is not allowed" in done.status.message
        assert (tmp_path / "w" / "out" / "a").read_text() == "old"


# Test_ociDownloader_validate, and "invalid image reference" / "path traversal attempt".
@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"outPath": "a"}, "config.imageRef is required"),
        ({"imageRef": "127.0.0.1:1/x:1"}, "config.outPath is required"),
        ({"imageRef": "no reference", "outPath": "a"}, "is not a reference"),
        ({"imageRef": "127.0.0.1:1/x:1", "outPath": "../escape"}, "leads outside"),
        ({"imageRef": "127.0.0.1:1/x:1", "outPath": "a", "extra": 1}, "extra"),
    ],
    ids=["imageRef is not specified", "outPath is not specified", "invalid image reference",
         "path traversal attempt", "unknown field"],
)  # fmt: skip
async def test_download_config_refusals(
    tmp_path: Path, port: Registries, config: dict[str, Any], message: str
) -> None:
    done = await run([{"uses": "oci-download", "config": config}], tmp_path / "w", port)
    assert done.status.phase is Phase.FAILED
    assert message in done.status.message


# Test_ociDownloader_resolveImage "invalid image reference": Kargo's schema lets it through,
# the parser does not; Errored.
async def test_download_of_an_unparsable_reference_errors(tmp_path: Path, port: Registries) -> None:
    done = await run([download("invalid::ref")], tmp_path / "w", port)
    assert done.status.phase is Phase.ERRORED
    assert 'failed to parse image reference "invalid::ref"' in done.status.message


async def test_a_missing_artifact_errors(
    tmp_path: Path, registry: Registry, port: Registries
) -> None:
    done = await run([download(registry.repo("acme/none") + ":1")], tmp_path / "w", port)
    assert done.status.phase is Phase.ERRORED
    assert "failed to resolve image" in done.status.message and "404" in done.status.message


async def test_without_registry_access_the_steps_say_so(tmp_path: Path) -> None:
    done = await run([download("127.0.0.1:1/x:1")], tmp_path / "w", None)
    assert "needs the server's registry access" in done.status.message


# Credentials from the operator's Docker config.json, against a registry that wants a token.
async def test_credentials_come_from_the_operators_docker_config(tmp_path: Path) -> None:
    async with running_registry(tmp_path, token_auth=True) as registry:
        await registry.push_image("acme/private", "1")
        ref = registry.repo("acme/private") + ":1"
        anonymous = Registries()
        try:
            refused = await run([download(ref)], tmp_path / "a", anonymous)
        finally:
            await anonymous.close()
        assert refused.status.phase is Phase.ERRORED
        auth = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
        with_credentials = Registries(
            ClusterCredentials(None, docker_config=DockerConfigCredentials(config))
        )
        try:
            done = await run(
                [download(ref), {"uses": "oci-push", "as": "push", "config": {
                    "srcRef": ref, "destRef": registry.repo("acme/copy") + ":1"}}],
                tmp_path / "b",
                with_credentials,
            )  # fmt: skip
        finally:
            await with_credentials.close()
        assert done.status.phase is Phase.SUCCEEDED, done.status.message
        assert (
            PASSWORD not in json.dumps(done.to_object()) and PASSWORD not in refused.status.message
        )


# ---- oci-push -----------------------------------------------------------------------------------


def push(src: str, dest: str, **config: Any) -> dict[str, Any]:
    return {"uses": "oci-push", "as": "push", "config": {"srcRef": src, "destRef": dest, **config}}


async def pushed(registry: Registry, port: Registries, name: str, reference: str) -> Any:
    return await port.manifest(registry.repo(name), reference, insecure=False, project="demo")


# Test_ociPusher_run "push single image to new tag", "push image by digest", "cross-repo push".
@pytest.mark.parametrize(
    ("source", "dest"),
    [("test/image:v1.0.0", "test/image:v2.0.0"), ("test/image@DIGEST", "test/image:pinned"),
     ("test/image:v1.0.0", "other/repo:latest")],
    ids=["push single image to new tag", "push image by digest", "cross-repo push"],
)  # fmt: skip
async def test_push_copies_the_image(
    tmp_path: Path, registry: Registry, port: Registries, source: str, dest: str
) -> None:
    digest = await registry.push_image("test/image", "v1.0.0")
    src = registry.repo(source.replace("DIGEST", digest))
    done = await run([push(src, registry.repo(dest))], tmp_path / "w", port)
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    name, tag = dest.split(":")
    assert done.status.state["push"] == {
        "image": registry.repo(dest),
        "digest": digest,
        "tag": tag,
    }
    assert (await pushed(registry, port, name, tag)).digest == digest


# "push image index", "push with annotations", "push index with unprefixed annotations goes to
# child manifests", "push index with scoped annotations".
async def test_push_an_index_and_annotations(
    tmp_path: Path, registry: Registry, port: Registries
) -> None:
    index_digest = await registry.push_index(
        "test/multi", "v1", [("linux", "amd64"), ("linux", "arm64")]
    )
    await registry.push_image("test/image", "v1")
    src_index, src_image = registry.repo("test/multi:v1"), registry.repo("test/image:v1")
    done = await run(
        [
            {**push(src_index, registry.repo("test/multi:v2")), "as": "plain"},
            {**push(src_image, registry.repo("test/image:annotated"), annotations={
                "org.opencontainers.image.source": "https://github.com/example"}), "as": "image"},
            {**push(src_index, registry.repo("test/multi:annotated"),
                    annotations={"io.kargo.test": "true"}), "as": "children"},
            {**push(src_index, registry.repo("other/multi:scoped"), annotations={
                "index:io.kargo.index-only": "idx", "manifest:io.kargo.manifest-only": "mfst",
                "io.kargo.default": "both"}), "as": "scoped"},
        ],
        tmp_path / "w",
        port,
    )  # fmt: skip
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert done.status.state["plain"]["digest"] == index_digest
    image = (await pushed(registry, port, "test/image", "annotated")).document()
    assert image["annotations"]["org.opencontainers.image.source"] == "https://github.com/example"
    children = (await pushed(registry, port, "test/multi", "annotated")).document()
    assert "io.kargo.test" not in (children.get("annotations") or {})
    for entry in children["manifests"]:
        child = (await pushed(registry, port, "test/multi", entry["digest"])).document()
        assert child["annotations"]["io.kargo.test"] == "true"
    scoped = (await pushed(registry, port, "other/multi", "scoped")).document()
    assert scoped["annotations"] == {"io.kargo.index-only": "idx"}
    for entry in scoped["manifests"]:
        child = (await pushed(registry, port, "other/multi", entry["digest"])).document()
        assert child["annotations"] == {
            "io.kargo.manifest-only": "mfst",
            "io.kargo.default": "both",
        }


# "source not found", "invalid source reference", "invalid destination reference" (a digest
# is no destination: it needs a tag).
async def test_push_errors(tmp_path: Path, registry: Registry, port: Registries) -> None:
    dest = registry.repo("test/image:copy")
    missing = await run(
        [push(registry.repo("nonexistent/image:v1.0.0"), dest)], tmp_path / "a", port
    )
    assert missing.status.phase is Phase.ERRORED
    assert "failed to get source artifact" in missing.status.message
    bad_src = await run([push("invalid::ref", dest)], tmp_path / "b", port)
    assert bad_src.status.phase is Phase.FAILED
    assert 'failed to parse source reference "invalid::ref"' in bad_src.status.message
    bad_dest = await run(
        [push(dest, registry.repo("test/image@sha256:" + "0" * 64))], tmp_path / "c", port
    )
    assert bad_dest.status.phase is Phase.FAILED and "config.destRef" in bad_dest.status.message


def test_the_registry_credentials_setting_is_checked_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SettingsError, match=r"LONGSHOREMAN_REGISTRY_AUTH_FILE: .*bad\.json"):
        Settings.from_env({"LONGSHOREMAN_REGISTRY_AUTH_FILE": str(bad)})
    good = tmp_path / "config.json"
    good.write_text(json.dumps({"auths": {"https://ghcr.io": {"username": "u", "password": "p"}}}))
    settings = Settings.from_env({"LONGSHOREMAN_REGISTRY_AUTH_FILE": str(good)})
    assert settings.registry_auth_file == good
    assert DockerConfigCredentials(good)("ghcr.io") == ("u", "p")
    assert DockerConfigCredentials(good)("quay.io") is None
