"""A real kube-apiserver with etcd on 127.0.0.1, for the cluster suite and the benchmarks.

    # the binary comes from scripts/build-kube-apiserver.sh
    async with running_real_apiserver() as cluster:
        api = cluster.api_client()              # kubernetes.aio, as cluster-admin
        cluster.kubeconfig_path                 # the same identity, for kubectl and servers
        cluster.kubeconfig_for(CONTROLLER)      # the controller's ServiceAccount, under RBAC
        await cluster.compact()                 # compact etcd at its current revision

Both processes run in their own process group on random free ports, with their data in a
temporary directory; leaving the block (a failure, Ctrl-C, a cancelled test) stops both and
waits for them, so nothing is left running. ``python -m tests.support.realcluster -- CMD ...``
runs one command with ``KUBECONFIG`` set, for poking at the server by hand.

Authentication is a static token file: an admin in ``system:masters`` (RBAC's superuser group)
and, for the RBAC checks, a token whose user is the controller's ServiceAccount name with its
groups. kube-controller-manager is not run, so no ServiceAccount token is ever minted; RBAC
authorises by user name and groups alone, which is what a pod's token carries too. The server's
self-signed serving certificate is not verified (``insecure-skip-tls-verify``): the tests
check the API's behaviour, not TLS set-up.

Requests on Secrets are audited (``--audit-policy-file``: Metadata level for ``secrets``, nothing
else) to ``audit.log``, so a test can check on the server's side what was asked for Secrets, by
whom and with which query (``RealApiServer.audit_events``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes.aio import client as aio_client
from kubernetes.aio import config as aio_config

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-kube-apiserver.sh"
DEFAULT_CACHE = REPO_ROOT / ".cache" / "apiserver"


@dataclass(frozen=True)
class User:
    """A static-token identity: what RBAC sees of a request."""

    name: str
    groups: tuple[str, ...] = ()


ADMIN = User("longshoreman-test-admin", ("system:masters",))
# The controller's ServiceAccount as deploy/base names it (namespace longshoreman).
CONTROLLER = User(
    "system:serviceaccount:longshoreman:longshoreman",
    ("system:serviceaccounts", "system:serviceaccounts:longshoreman", "system:authenticated"),
)


# Who asked for which Secrets, with the request's URI (its labelSelector): Metadata level, never
# the Secrets' contents; the same for Argo's Applications, AnalysisRuns and AnalysisTemplates;
# every other request is not audited.
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "resources": [{"group": "", "resources": ["secrets"]}]},
        # Argo's objects, which the controller must read only where it serves (issue 36).
        {
            "level": "Metadata",
            "resources": [
                {
                    "group": "argoproj.io",
                    "resources": ["applications", "analysisruns", "analysistemplates"],
                }
            ],
        },
        {"level": "None"},
    ],
}


def apiserver_binary() -> Path | None:
    """The cached kube-apiserver, if it has been built (LONGSHOREMAN_APISERVER_CACHE moves it)."""
    cache = Path(os.environ.get("LONGSHOREMAN_APISERVER_CACHE") or DEFAULT_CACHE)
    binary = cache / "kube-apiserver"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def etcd_binary() -> Path | None:
    cache = Path(os.environ.get("LONGSHOREMAN_APISERVER_CACHE") or DEFAULT_CACHE)
    for candidate in (cache / "etcd", Path("/usr/bin/etcd")):
        if candidate.exists() and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kubeconfig(url: str, token: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url, "insecure-skip-tls-verify": True}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "preferences": {},
    }


@dataclass
class RealApiServer:
    """A started kube-apiserver + etcd: where they are and how to reach them."""

    url: str
    etcd_url: str
    kubeconfig_path: Path
    directory: Path
    tokens: dict[User, str]
    processes: dict[str, subprocess.Popen[bytes]]
    apiserver_argv: list[str] = field(default_factory=list)
    _clients: list[aio_client.ApiClient] = field(default_factory=list)

    kind = "real"

    def kubeconfig_for(self, user: User) -> Path:
        """A kubeconfig (mode 0600) that authenticates as ``user``."""
        path = self.directory / f"kubeconfig-{user.name.replace(':', '-')}"
        if not path.exists():
            text = yaml.safe_dump(_kubeconfig(self.url, self.tokens[user], "real-apiserver"))
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
        return path

    def configuration(self, user: User = ADMIN) -> aio_client.Configuration:
        configuration = aio_client.Configuration(host=self.url)
        configuration.api_key = {"authorization": f"Bearer {self.tokens[user]}"}
        configuration.verify_ssl = False
        return configuration

    def api_client(self, user: User = ADMIN) -> aio_client.ApiClient:
        """A fresh ``kubernetes.aio`` ApiClient, closed when the server stops."""
        api = aio_client.ApiClient(configuration=self.configuration(user))
        self._clients.append(api)
        return api

    async def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd (a rolling
        upgrade, in small): open watches break and its watch cache starts afresh."""
        _stop(self.processes["kube-apiserver"])
        log = self.directory / "kube-apiserver.log"
        self.processes["kube-apiserver"] = _start(self.apiserver_argv, log, append=True)
        await _wait_ready(self.url, self.tokens[ADMIN], self.processes["kube-apiserver"], log)

    async def compact(self) -> int:
        """Compact etcd at its current revision (what kube-apiserver does every 5 minutes);
        returns the revision. Older resourceVersions then answer 410 Gone from etcd."""
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{self.etcd_url}/v3/kv/range", json={"key": "AA=="}) as r:
                revision = int((await r.json())["header"]["revision"])
            async with http.post(
                f"{self.etcd_url}/v3/kv/compaction", json={"revision": revision, "physical": True}
            ) as r:
                r.raise_for_status()
        return revision

    def log(self, process: str) -> str:
        return (self.directory / f"{process}.log").read_text(errors="replace")

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log's events so far (requests on Secrets and Argo's objects, once each:
        ResponseComplete)."""
        path = self.directory / "audit.log"
        if not path.exists():
            return []
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [e for e in events if e.get("stage") == "ResponseComplete"]


def _openssl_key(path: Path) -> None:
    subprocess.run(
        ["openssl", "genrsa", "-out", str(path), "2048"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _start(argv: Sequence[str], log: Path, *, append: bool = False) -> subprocess.Popen[bytes]:
    with log.open("ab" if append else "wb") as handle:
        # Own process group: stopping the group leaves nothing behind, and a Ctrl-C at the
        # terminal reaches us first, so we stop them in order.
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes], *, within: float = 10.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(within)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


async def _wait_ready(url: str, token: str, process: subprocess.Popen[bytes], log: Path) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"kube-apiserver exited ({process.returncode}):\n" + _tail(log))
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(f"{url}/readyz", ssl=context) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError("kube-apiserver was not ready within 60s:\n" + _tail(log))


def _tail(log: Path) -> str:
    # Only read when the server failed to start: blocking is fine at that point.
    return log.read_text(errors="replace")[-4000:]


@asynccontextmanager
async def running_real_apiserver(
    *, binary: Path | None = None, extra_args: Sequence[str] = ()
) -> AsyncIterator[RealApiServer]:
    """Start etcd and kube-apiserver on free 127.0.0.1 ports; stop both when the block ends."""
    apiserver = binary or apiserver_binary()
    etcd = etcd_binary()
    if apiserver is None or etcd is None:
        raise RuntimeError(
            "no kube-apiserver/etcd: run scripts/build-kube-apiserver.sh (or `make test-cluster`)"
        )
    # etcd fsyncs every write; on tmpfs that costs nothing, as a test server should.
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="real-apiserver-", dir=base) as scratch:
        directory = Path(scratch)
        tokens = {user: secrets.token_hex(16) for user in (ADMIN, CONTROLLER)}
        with (directory / "tokens.csv").open("w") as handle:
            for i, (user, token) in enumerate(tokens.items()):
                handle.write(f'{token},{user.name},uid-{i},"{",".join(user.groups)}"\n')
        _openssl_key(directory / "sa.key")
        (directory / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        processes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            client_port, peer_port, secure_port = free_port(), free_port(), free_port()
            etcd_url = f"http://127.0.0.1:{client_port}"
            peer_url = f"http://127.0.0.1:{peer_port}"
            processes["etcd"] = _start(
                [
                    str(etcd),
                    "--name=default",
                    f"--data-dir={directory / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=default={peer_url}",
                    "--log-level=warn",
                ],
                directory / "etcd.log",
            )
            url = f"https://127.0.0.1:{secure_port}"
            apiserver_argv = [
                str(apiserver),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={secure_port}",
                "--insecure-port=0",
                f"--cert-dir={directory / 'certs'}",
                f"--token-auth-file={directory / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={directory / 'sa.key'}",
                f"--service-account-signing-key-file={directory / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--endpoint-reconciler-type=none",
                f"--audit-policy-file={directory / 'audit-policy.yaml'}",
                f"--audit-log-path={directory / 'audit.log'}",
                "--audit-log-format=json",
                # Written as requests complete, so a test reads what it just caused.
                "--audit-log-mode=blocking",
                "--v=0",
                *extra_args,
            ]
            processes["kube-apiserver"] = _start(apiserver_argv, directory / "kube-apiserver.log")
            await _wait_ready(
                url, tokens[ADMIN], processes["kube-apiserver"], directory / "kube-apiserver.log"
            )
            cluster = RealApiServer(
                url=url,
                etcd_url=etcd_url,
                kubeconfig_path=directory / "kubeconfig",
                directory=directory,
                tokens=tokens,
                processes=processes,
                apiserver_argv=apiserver_argv,
            )
            cluster.kubeconfig_path = cluster.kubeconfig_for(ADMIN)
            try:
                yield cluster
            finally:
                for api in cluster._clients:
                    await api.close()  # type: ignore[no-untyped-call]
        finally:
            for name in ("kube-apiserver", "etcd"):
                if name in processes:
                    _stop(processes[name])


async def load_client(kubeconfig: Path) -> aio_client.ApiClient:
    """An ApiClient from a kubeconfig, as the server builds its own."""
    configuration = aio_client.Configuration()
    await aio_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=configuration, persist_config=False
    )
    return aio_client.ApiClient(configuration=configuration)


async def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.realcluster",
        description="Start etcd + kube-apiserver on 127.0.0.1, run COMMAND with KUBECONFIG set, "
        "then stop both (also on Ctrl-C).",
    )
    parser.add_argument("command", nargs="+", help="e.g. -- kubectl get ns")
    args = parser.parse_args(argv)
    async with running_real_apiserver() as cluster:
        print(f"kube-apiserver on {cluster.url}; KUBECONFIG={cluster.kubeconfig_path}", flush=True)
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)}
        child = await asyncio.create_subprocess_exec(*args.command, env=env)
        return await child.wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(sys.argv[1:])))
