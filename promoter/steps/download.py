"""The ``http-download`` step: fetch one file over HTTP/S into the Promotion's work directory.

Follows Kargo's ``http-download`` step (docs/.../30-promotion-steps/http-download.md): ``url``,
``outPath``, ``headers[]``, ``queryParams[]``, ``allowOverwrite`` (default false: an existing file
is a terminal error), ``insecureSkipTLSVerify``, ``timeout`` (default 5m, Kargo's) and
``errorExpression`` (a message taken from a refused download's response). No outputs.

Every request goes through :mod:`promoter.steps.http` (the one module of ``promoter/`` with an
HTTP client): the same host policy (``HttpSettings.allow_hosts``/``deny_hosts``, private
addresses refused unless allowed, judged on the connected address and on every redirect), the
same config checks and the same redaction, so header and query values never appear in messages.
Bodies larger than ``HttpSettings.max_download_bytes`` (Kargo's 100 MiB by default) are refused.
The body is streamed into a temporary file next to ``outPath`` and renamed over it only once
complete, so a failed or interrupted download never leaves a partial file.

A download only changes the work directory, so a replica that rebuilds the work directory
downloads again; the SHA-256 of what was downloaded first is recorded for that replay
(``StepResult.replay_data``), and a file that has changed since is refused rather than used.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.steps import http
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    StepStatus,
)
from promoter.steps.workdir.files import file_target

KIND = "http-download"

# Kargo: "Defaults to 5 minutes".
DEFAULT_TIMEOUT_SECONDS = 300.0
_KNOWN_KEYS = frozenset(
    {
        "url",
        "outPath",
        "headers",
        "queryParams",
        "allowOverwrite",
        "insecureSkipTLSVerify",
        "timeout",
        "errorExpression",
    }
)


@dataclass(frozen=True, slots=True)
class DownloadSpec:
    """A validated download: the GET request to send and where its body goes."""

    request: http.HttpRequestSpec
    out_path: str
    allow_overwrite: bool


def parse_config(config: Mapping[str, Any]) -> DownloadSpec:
    """Validate the rendered config like Kargo's JSON schema does; every problem is terminal."""
    cfg = Config(KIND, config)
    cfg.only(_KNOWN_KEYS)
    url = cfg.str("url")
    http.check_http_url(url, "url", KIND)
    headers = tuple(http.name_value_pairs(cfg, "headers"))
    for name, value in headers:
        if any(c in name or c in value for c in "\r\n\0"):
            raise ConfigRefused(
                f"{KIND}: config.headers {name!r} contains a line break or NUL character"
            )
    request = http.HttpRequestSpec(
        method="GET",
        url=url,
        headers=headers,
        query_params=tuple(http.name_value_pairs(cfg, "queryParams")),
        body="",
        insecure_skip_tls_verify=cfg.bool("insecureSkipTLSVerify"),
        proxy=None,
        timeout_seconds=http.duration(cfg, "timeout", DEFAULT_TIMEOUT_SECONDS),
        poll_interval_seconds=http.DEFAULT_POLL_INTERVAL_SECONDS,
        response_content_type=None,
        success_expression=None,
        failure_expression=None,
        error_expression=cfg.opt_str("errorExpression"),
        outputs=(),
    )
    return DownloadSpec(
        request=request, out_path=cfg.str("outPath"), allow_overwrite=cfg.bool("allowOverwrite")
    )


def _target(ctx: StepContext, spec: DownloadSpec) -> Path:
    raw = spec.out_path
    target = file_target(ctx, KIND, raw, "outPath")
    if target.exists() and not spec.allow_overwrite:
        raise ConfigRefused(
            f"{KIND}: config.outPath {raw!r} already exists; set allowOverwrite: true to replace it"
        )
    return target


def _move_into_place(tmp: Path, target: Path, spec: DownloadSpec) -> int:
    # Checked again: another step (or a concurrent retry) may have created it meanwhile.
    if target.exists() and not spec.allow_overwrite:
        raise ConfigRefused(
            f"{KIND}: config.outPath {spec.out_path!r} already exists; set allowOverwrite: "
            "true to replace it"
        )
    size = tmp.stat().st_size
    os.replace(tmp, target)
    return size


def _discard(tmp: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()


def _refused_message(spec: DownloadSpec, response: http.HttpResponse) -> str:
    message = f"HTTP request failed with status {response.status}"
    if spec.request.error_expression is None:
        return message
    variables = {"response": http.build_response_variables(response, None)}
    detail = http.error_message(spec.request.error_expression, variables, KIND)
    return f"{message}: {json.dumps(detail)}" if detail else message


async def http_download_step(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """Run the ``http-download`` step."""
    settings = ctx.services.http
    spec = parse_config(config)
    redact = http.redactor(ctx, spec.request)
    where = f"GET {spec.request.safe_url()}"
    policy = http.policy_of(settings)
    target = await asyncio.to_thread(_target, ctx, spec)
    await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as handle:

            async def write(chunk: bytes) -> None:
                digest.update(chunk)
                await asyncio.to_thread(handle.write, chunk)

            try:
                response = await http.download(
                    spec.request, settings.max_download_bytes, policy, write
                )
            except (StepError, *http.TRANSPORT_ERRORS) as exc:
                error = http.transport_error(KIND, where, exc, spec.request.timeout_seconds)
                raise StepError(redact(error.message), terminal=error.terminal) from None
        if not 200 <= response.status < 300:
            message = _refused_message(spec, response)
            # Kargo retries a refused download like any other error, up to errorThreshold.
            raise StepError(redact(f"{KIND}: {where}: {message}"))
        sha256 = digest.hexdigest()
        recorded = ctx.replay.data.get(SHA256_KEY) if ctx.replay is not None else None
        if recorded and recorded != sha256:
            raise StepError(
                redact(
                    f"{KIND}: {where} now serves other content than when this step first ran "
                    f"(SHA-256 {sha256[:12]}, was {recorded[:12]}); the work directory cannot be "
                    "rebuilt as it was"
                ),
                terminal=True,
            )
        size = await asyncio.to_thread(_move_into_place, tmp, target, spec)
    finally:
        await asyncio.to_thread(_discard, tmp)
    return StepResult(
        StepStatus.SUCCEEDED,
        message=redact(f"downloaded {size} bytes from {where} to {spec.out_path}"),
        replay_data={SHA256_KEY: sha256},
    )


# What a replay compares the new download with.
SHA256_KEY = "sha256"

STEPS: dict[str, Step] = {KIND: FunctionStep(http_download_step, effect=Effect.LOCAL)}

__all__: Sequence[str] = ("DEFAULT_TIMEOUT_SECONDS", "STEPS", "DownloadSpec", "http_download_step")
