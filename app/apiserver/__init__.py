"""A Kubernetes API server emulator: an aiohttp app on 127.0.0.1 that the real ``kubernetes``
client (sync and ``kubernetes.aio``) and kubectl talk to as if it were kube-apiserver.

It serves CRDs loaded from YAML (or created through the API) plus the built-ins Longshoreman
uses (Namespaces, ConfigMaps, Secrets, Events, Leases), with real write semantics (global
resourceVersion, conflicts, generation, finalizers, status subresource, pruning), selectors,
watches with bookmarks and 410 Expired, the Table and PartialObjectMetadata representations
(``kubectl get`` prints a CRD's printer columns), deterministic fault injection and optional
persistence.

    app = create_apiserver_app(crd_dirs=["deploy/crds", "deploy/third-party-crds"])
    async with serve_apiserver(app) as url:
        write_kubeconfig(tmp_path / "kubeconfig", url)
"""

from app.apiserver.errors import StatusError
from app.apiserver.faults import FaultInjector, FaultRule, InjectedFault, RequestInfo
from app.apiserver.kubeconfig import kubeconfig_dict, write_kubeconfig
from app.apiserver.server import (
    ApiServer,
    RequestRecord,
    apiserver_of,
    create_apiserver_app,
    load_crd_manifests,
    serve_apiserver,
)
from app.apiserver.store import Store

__all__ = [
    "ApiServer",
    "FaultInjector",
    "FaultRule",
    "InjectedFault",
    "RequestInfo",
    "RequestRecord",
    "StatusError",
    "Store",
    "apiserver_of",
    "create_apiserver_app",
    "kubeconfig_dict",
    "load_crd_manifests",
    "serve_apiserver",
    "write_kubeconfig",
]
