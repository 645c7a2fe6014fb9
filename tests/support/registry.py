"""A real container registry for tests: Debian's ``docker-registry`` (CNCF distribution).

``running_registry`` starts ``/usr/bin/docker-registry`` on 127.0.0.1 with a random port, its
storage under a tmp directory and a generated config; with ``token_auth=True`` it also starts a
tiny token server (the Bearer challenge flow Docker Hub, GHCR and Harbor use) that signs JWTs
with a throw-away key whose certificate the registry trusts. Tests push images through the
registry's HTTP API: blobs, then manifests they build, single-platform or a multi-arch index.

The binary comes from ``apt-get install -y docker-registry`` (``.ci/run`` installs it); when it is
missing the test says what to install: skipped on a developer's machine, failed in CI (``CI``
set, as ``.ci/run`` does), so CI never passes without running it.

With ``htpasswd=(user, password)`` the registry demands HTTP Basic auth itself (distribution's
``auth.htpasswd``, a bcrypt htpasswd file, as a small private registry is set up): every
request without those credentials answers ``401`` with a ``Basic`` challenge; the test pushes
with them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import jwt
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

REGISTRY_BINARY = "/usr/bin/docker-registry"
INSTALL_HINT = (
    "the registry tests need Debian's docker-registry (the CNCF distribution server): "
    "run `apt-get install -y docker-registry` (as .ci/run does)"
)
USERNAME = "ci-robot"
PASSWORD = "registry-test-password"
SERVICE = "longshoreman-test-registry"

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 at a free port (a chart index, a fake registry endpoint);
    yields its base URL ``http://127.0.0.1:<port>``."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class TokenServer:
    """Issues registry tokens for Basic-authenticated requests (and refuses anonymous ones)."""

    key: rsa.RSAPrivateKey
    cert: x509.Certificate
    url: str = ""
    issued: int = 0
    anonymous_refused: int = 0
    # Other (user, password) pairs to accept: a GitHub App's installation tokens, as GHCR does.
    accepts: Callable[[str, str], bool] = lambda user, password: False

    def token(self, scope: str) -> str:
        access = []
        for item in scope.split(" "):
            if item.count(":") >= 2:
                kind, rest = item.split(":", 1)
                name, actions = rest.rsplit(":", 1)
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = dt.datetime.now(dt.UTC)
        claims = {
            "iss": "longshoreman-test-issuer",
            "sub": USERNAME,
            "aud": SERVICE,
            "iat": now,
            "nbf": now - dt.timedelta(seconds=30),
            "exp": now + dt.timedelta(minutes=5),
            "jti": base64.urlsafe_b64encode(hashlib.sha256(str(now).encode()).digest()).decode(),
            "access": access,
        }
        x5c = base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()
        self.issued += 1
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"x5c": [x5c]})

    async def handle(self, request: web.Request) -> web.Response:
        expected = "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        given = request.headers.get("Authorization") or ""
        user, _, password = (
            base64.b64decode(given.removeprefix("Basic ")).decode().partition(":")
            if given.startswith("Basic ")
            else ("", "", "")
        )
        if given != expected and not self.accepts(user, password):
            self.anonymous_refused += 1
            return web.json_response({"details": "unauthorized"}, status=401)
        token = self.token(request.query.get("scope", ""))
        return web.json_response({"token": token, "access_token": token, "expires_in": 300})


@dataclass
class Registry:
    """A running registry; ``host`` is ``127.0.0.1:<port>``, ``repo(name)`` a repoURL on it."""

    host: str
    session: aiohttp.ClientSession
    tokens: TokenServer | None = None
    pushed: list[str] = field(default_factory=list)
    # (user, password) when the registry demands Basic auth (htpasswd).
    basic: tuple[str, str] | None = None

    def repo(self, name: str) -> str:
        return f"{self.host}/{name}"

    def _headers(self, name: str) -> dict[str, str]:
        if self.basic is not None:
            user, password = self.basic
            return {
                "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            }
        if self.tokens is None:
            return {}
        return {"Authorization": f"Bearer {self.tokens.token(f'repository:{name}:pull,push')}"}

    async def push_blob(self, name: str, data: bytes) -> str:
        digest = _digest(data)
        base = f"http://{self.host}/v2/{name}/blobs/uploads/"
        async with self.session.post(base, headers=self._headers(name)) as response:
            assert response.status == 202, await response.text()
            location = response.headers["Location"]
        if location.startswith("/"):
            location = f"http://{self.host}{location}"
        separator = "&" if "?" in location else "?"
        async with self.session.put(
            f"{location}{separator}digest={digest}",
            data=data,
            headers={**self._headers(name), "Content-Type": "application/octet-stream"},
        ) as response:
            assert response.status == 201, await response.text()
        return digest

    async def push_manifest(
        self, name: str, reference: str, manifest: Mapping[str, Any], media_type: str
    ) -> str:
        body = json.dumps(manifest).encode()
        async with self.session.put(
            f"http://{self.host}/v2/{name}/manifests/{reference}",
            data=body,
            headers={**self._headers(name), "Content-Type": media_type},
        ) as response:
            assert response.status == 201, await response.text()
        self.pushed.append(f"{name}:{reference}")
        return _digest(body)

    async def _image_manifest(
        self,
        name: str,
        created: dt.datetime,
        labels: Mapping[str, str] | None,
        annotations: Mapping[str, str] | None,
        platform: tuple[str, str],
        layer: bytes,
    ) -> dict[str, Any]:
        config = {
            "created": created.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "architecture": platform[1],
            "os": platform[0],
            "config": {"Labels": dict(labels or {})},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
        }
        config_bytes = json.dumps(config).encode()
        config_digest = await self.push_blob(name, config_bytes)
        layer_digest = await self.push_blob(name, layer)
        manifest: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": OCI_CONFIG,
                "digest": config_digest,
                "size": len(config_bytes),
            },
            "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer)}],
        }
        if annotations:
            manifest["annotations"] = dict(annotations)
        return manifest

    async def push_image(
        self,
        name: str,
        tag: str,
        *,
        created: dt.datetime | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        platform: tuple[str, str] = ("linux", "amd64"),
    ) -> str:
        """A single-platform image; returns its manifest digest."""
        created = created or dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        layer = f"{name}:{tag}:{platform}".encode()
        manifest = await self._image_manifest(name, created, labels, annotations, platform, layer)
        return await self.push_manifest(name, tag, manifest, OCI_MANIFEST)

    async def push_index(
        self,
        name: str,
        tag: str,
        platforms: Sequence[tuple[str, str]],
        *,
        created: dt.datetime | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> str:
        """A multi-arch OCI index over one image per platform (plus an attestation entry
        with an ``unknown`` platform, as BuildKit writes); returns the index digest."""
        created = created or dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        entries = []
        for os_, arch in platforms:
            layer = f"{name}:{tag}:{os_}/{arch}".encode()
            manifest = await self._image_manifest(name, created, None, None, (os_, arch), layer)
            body = json.dumps(manifest).encode()
            digest = await self.push_manifest(name, _digest(body), manifest, OCI_MANIFEST)
            entries.append(
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": len(body),
                    "platform": {"os": os_, "architecture": arch},
                    "annotations": {"org.example.arch": arch},
                }
            )
        attestation = await self._image_manifest(
            name, created, None, None, ("unknown", "unknown"), b"attestation"
        )
        att_body = json.dumps(attestation).encode()
        await self.push_manifest(name, _digest(att_body), attestation, OCI_MANIFEST)
        entries.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": _digest(att_body),
                "size": len(att_body),
                "platform": {"os": "unknown", "architecture": "unknown"},
            }
        )
        index: dict[str, Any] = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
        if annotations:
            index["annotations"] = dict(annotations)
        return await self.push_manifest(name, tag, index, OCI_INDEX)

    async def push_chart(self, name: str, version: str) -> str:
        """An OCI Helm chart (Helm writes ``+`` in versions as ``_`` in tags)."""
        config = json.dumps({"name": name.rsplit("/", 1)[-1], "version": version}).encode()
        config_digest = await self.push_blob(name, config)
        layer = f"chart {name} {version}".encode()
        layer_digest = await self.push_blob(name, layer)
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.cncf.helm.config.v1+json",
                "digest": config_digest,
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                    "digest": layer_digest,
                    "size": len(layer),
                }
            ],
        }
        return await self.push_manifest(name, version.replace("+", "_"), manifest, OCI_MANIFEST)

    async def push_chart_archive(self, name: str, version: str, archive: bytes) -> str:
        """A real Helm chart (a ``helm package`` archive) as ``helm push`` stores it."""
        config = json.dumps(
            {"apiVersion": "v2", "name": name.rsplit("/", 1)[-1], "version": version}
        ).encode()
        config_digest = await self.push_blob(name, config)
        layer_digest = await self.push_blob(name, archive)
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.cncf.helm.config.v1+json",
                "digest": config_digest,
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                    "digest": layer_digest,
                    "size": len(archive),
                }
            ],
        }
        return await self.push_manifest(name, version.replace("+", "_"), manifest, OCI_MANIFEST)


def _key_and_cert() -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "longshoreman-test-tokens")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


@contextlib.asynccontextmanager
async def running_registry(
    tmp_path: Path, *, token_auth: bool = False, htpasswd: tuple[str, str] | None = None
) -> AsyncIterator[Registry]:
    """Start docker-registry (and, with ``token_auth``, its token server; with ``htpasswd``,
    Basic auth for that one user) for one test."""
    if shutil.which(REGISTRY_BINARY) is None:
        # As the browser test does with chromium: a fresh machine's `make test` (Python, git
        # and make only) says what to install; CI, where .ci/run installs it, fails.
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    port = _free_port()
    root = tmp_path / "registry"
    root.mkdir()
    config = [
        "version: 0.1",
        "log:",
        "  level: error",
        "  accesslog:",
        "    disabled: true",
        "storage:",
        "  filesystem:",
        f"    rootdirectory: {root / 'data'}",
        "  delete:",
        "    enabled: true",
        "http:",
        f"  addr: 127.0.0.1:{port}",
        f"  secret: {hashlib.sha256(str(root).encode()).hexdigest()}",
    ]
    tokens: TokenServer | None = None
    runner: web.AppRunner | None = None
    if token_auth:
        key, cert = _key_and_cert()
        tokens = TokenServer(key, cert)
        bundle = root / "token-cert.pem"
        bundle.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        app = web.Application()
        app.router.add_get("/token", tokens.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        token_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        tokens.url = f"http://127.0.0.1:{token_port}/token"
        config += [
            "auth:",
            "  token:",
            f"    realm: {tokens.url}",
            f"    service: {SERVICE}",
            "    issuer: longshoreman-test-issuer",
            f"    rootcertbundle: {bundle}",
        ]
    if htpasswd is not None:
        user, password = htpasswd
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
        (root / "htpasswd").write_text(f"{user}:{hashed}\n")
        config += [
            "auth:",
            "  htpasswd:",
            "    realm: longshoreman-test-registry",
            f"    path: {root / 'htpasswd'}",
        ]
    (root / "config.yml").write_text("\n".join(config) + "\n")
    log = (root / "registry.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        REGISTRY_BINARY,
        "serve",
        str(root / "config.yml"),
        stdout=log,
        stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL,
    )
    session = aiohttp.ClientSession()
    try:
        for _ in range(200):
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{port}/v2/") as response:
                    if response.status in (200, 401):
                        break
            if proc.returncode is not None:
                raise RuntimeError(
                    f"docker-registry exited: {(root / 'registry.log').read_text()[-2000:]}"
                )
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("docker-registry did not start within 10s")
        yield Registry(f"127.0.0.1:{port}", session, tokens, basic=htpasswd)
    finally:
        await session.close()
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log.close()
        if runner is not None:
            await runner.cleanup()
