"""The benchmarks' ``--real-apiserver`` mode: kube-apiserver v1.20 + etcd, set up as a user would.

``tests/support/realcluster.py`` starts the two processes on 127.0.0.1 (the binary that
``scripts/build-kube-apiserver.sh`` caches in ``.cache/apiserver``, or under
``LONGSHOREMAN_APISERVER_CACHE``). Unlike the emulator, the real server starts without our
CRDs: they are installed here the way the install guide says (``kubectl apply``), and the run
waits until they are Established, so the benchmark's first write does not race the CRD's
registration.

CPU is read from ``/proc`` (Linux) rather than psutil: the project does not depend on psutil,
and utime + stime of one pid is all a benchmark needs. kube-apiserver and etcd are each started
as the process itself (no shell in between), so their pid is the one that does the work.
``machine_cpu_seconds`` is the whole machine's busy time: what is left of it after our processes
is the load others put on the machine while we measured, which the benchmarks print, because
on a shared 2-core machine it moves the results more than any change we measure.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from tests.support.kubectl import kubectl_env
from tests.support.realcluster import DEFAULT_CACHE, RealApiServer, running_real_apiserver

ROOT = Path(__file__).resolve().parent.parent
KUBECTL = os.environ.get("KUBECTL", "kubectl")
# What scripts/build-kube-apiserver.sh writes into the cache's `recipe` once the binary carries
# the fix for empty strings in custom objects (without it, kube-apiserver refuses any custom
# object holding "" with 'Invalid value: "null": ... must be of type string': every Stage
# status write fails, as its conditions carry empty messages).
ZERO_VALUE_FIX = "openapi-zero-value"


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process, in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU seconds all processors have spent busy since boot (``/proc/stat``): idle and iowait
    excluded; steal included, as it is capacity someone else took (guest time is inside user)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_readers(real: RealApiServer) -> dict[str, Callable[[], float]]:
    """A CPU-seconds reader per server process, kube-apiserver first."""
    return {
        name: (lambda pid=real.processes[name].pid: cpu_seconds(pid))
        for name in ("kube-apiserver", "etcd")
    }


def warn_if_unfixed_binary() -> None:
    cache = Path(os.environ.get("LONGSHOREMAN_APISERVER_CACHE") or DEFAULT_CACHE)
    recipe = cache / "recipe"
    text = recipe.read_text() if recipe.is_file() else ""
    if ZERO_VALUE_FIX not in text:
        print(
            f"warning: {recipe} does not name {ZERO_VALUE_FIX!r}: this kube-apiserver may refuse "
            'custom objects holding "" (Invalid value: "null"); rebuild with '
            "scripts/build-kube-apiserver.sh",
            file=sys.stderr,
            flush=True,
        )


async def kubectl(real: RealApiServer, *args: str) -> None:
    env = kubectl_env(real.kubeconfig_path)
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        *args,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {err.decode()}")


@asynccontextmanager
async def real_apiserver(namespaces: Iterable[str]) -> AsyncIterator[RealApiServer]:
    """A running kube-apiserver + etcd with our CRDs and the Argo CD/Rollouts ones installed and
    Established, and ``namespaces`` created; both processes stop when the block ends."""
    warn_if_unfixed_binary()
    async with running_real_apiserver() as real:
        await kubectl(real, "apply", "-k", "deploy/crds")
        await kubectl(real, "apply", "-f", "deploy/third-party-crds")
        await kubectl(real, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        for namespace in namespaces:
            await kubectl(real, "create", "namespace", namespace)
        await settled(real)
        yield real


async def settled(
    real: RealApiServer, *, quiet: float = 0.05, within: float = 30.0, interval: float = 0.5
) -> None:
    """Wait (at most ``within`` seconds) until kube-apiserver is nearly idle.

    After CRDs change, kube-apiserver rebuilds its aggregated OpenAPI document and discovery in
    the background: several seconds of about half a core on this 2-core VM, which a benchmark
    starting at once would charge to its first Promotions (and its latencies would share a core
    with it). Idle means under ``quiet`` of a core over two ``interval``s in a row.
    """
    read = cpu_readers(real)["kube-apiserver"]
    deadline = time.monotonic() + within
    calm = 0
    while calm < 2 and time.monotonic() < deadline:
        before = read()
        await asyncio.sleep(interval)
        calm = calm + 1 if read() - before < quiet * interval else 0
