"""Helm charts for tests: files in a work directory, chart archives as ``helm package`` makes
them, and a classic chart repository (``index.yaml`` and the archives) served over HTTP on
127.0.0.1, with HTTP Basic auth when asked."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import tarfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from aiohttp import web

from tests.support.registry import serving


def write_files(root: Path, files: Mapping[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def chart_archive(directory: Path, files: Mapping[str, str]) -> Path:
    """``<name>-<version>.tgz`` in ``directory``: the chart's files under ``<name>/``, as
    ``helm package`` lays them out."""
    meta = yaml.safe_load(files["Chart.yaml"])
    name, version = meta["name"], meta["version"]
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}-{version}.tgz"
    with tarfile.open(target, "w:gz") as archive:
        for relative, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{relative}")
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return target


@dataclass
class ChartRepository:
    url: str
    requests: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def serving_chart_repository(
    archives: Sequence[Path], *, basic: tuple[str, str] | None = None
) -> AsyncIterator[ChartRepository]:
    """A classic chart repository at ``<url>/index.yaml`` holding ``archives`` (the list as it
    is at each request); with
    ``basic``, every request must carry that username and password."""
    repo = ChartRepository("")

    def files_now() -> dict[str, bytes]:
        # Read on every request: a test may add archives to its list while the server runs.
        return {archive.name: archive.read_bytes() for archive in archives}

    expected = None
    if basic is not None:
        expected = "Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()

    def index() -> str:
        entries: dict[str, list[dict[str, object]]] = {}
        for name, data in files_now().items():
            with tarfile.open(fileobj=io.BytesIO(data)) as archive:
                member = next(m for m in archive.getmembers() if m.name.endswith("/Chart.yaml"))
                extracted = archive.extractfile(member)
                assert extracted is not None
                meta = yaml.safe_load(extracted.read())
            entry = dict(meta)
            entry["digest"] = hashlib.sha256(data).hexdigest()
            entry["urls"] = [f"{repo.url}/{name}"]
            entries.setdefault(meta["name"], []).append(entry)
        return yaml.safe_dump({"apiVersion": "v1", "entries": entries})

    async def handle(request: web.Request) -> web.StreamResponse:
        repo.requests.append(request.path)
        if expected is not None and request.headers.get("Authorization") != expected:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="charts"'})
        name = request.match_info["name"]
        if name == "index.yaml":
            return web.Response(text=index(), content_type="text/yaml")
        files = files_now()
        if name in files:
            return web.Response(body=files[name], content_type="application/gzip")
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/charts/{name}", handle)
    async with serving(app) as base:
        repo.url = f"{base}/charts"
        yield repo
