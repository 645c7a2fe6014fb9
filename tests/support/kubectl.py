"""kubectl as a child process against a kubeconfig, for tests that check what a user sees."""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

# Tests that run the kubectl program: skipped where it is not installed, except in CI (which
# installs it), where they must run.
needs_kubectl = pytest.mark.skipif(
    shutil.which("kubectl") is None and not os.environ.get("CI"),
    reason="kubectl not installed (CI installs it and runs these)",
)


def kubectl_env(kubeconfig: Path) -> dict[str, str]:
    """The environment for kubectl against ``kubeconfig``: its discovery cache beside the
    kubeconfig. kubectl caches discovery per host:port for hours, and test servers bind fresh
    ports that an earlier server (another run, another group) may have used: with the shared
    ~/.kube/cache, kubectl can send a request to a path this server does not serve (404 "the
    server could not find the requested resource")."""
    return {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "KUBECACHEDIR": str(kubeconfig.parent / "kubectl-cache"),
    }


@dataclass(frozen=True)
class KubectlResult:
    code: int
    stdout: str
    stderr: str


async def run_kubectl(
    kubeconfig: Path, *args: str, stdin: str = "", within: float = 30
) -> KubectlResult:
    """``kubectl --kubeconfig <kubeconfig> args...`` in ``kubectl_env``."""
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=kubectl_env(kubeconfig),
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), within)
    return KubectlResult(process.returncode or 0, out.decode(), err.decode())
