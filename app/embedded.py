"""The embedded default cluster: the API server emulator on 127.0.0.1, seeded and kubectl-ready.

When no cluster is configured, ``python -m app serve`` runs against this: it loads our CRDs and
the third-party ones we use, serves ours under Kargo's group ``kargo.akuity.io`` too (so
``kubectl apply`` takes Kargo's manifests unchanged), writes a kubeconfig (so ``kubectl`` and
scripts can look at everything), and seeds it with manifests (the examples by default).
"""

from __future__ import annotations

import contextlib
import getpass
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.admission import problems_of, step_kinds
from app.apiserver import create_apiserver_app, serve_apiserver, write_kubeconfig
from app.apiserver.admission import Admission, AdmissionRequest, AdmissionResponse
from app.apiserver.errors import FieldCause
from app.controller import kube as k
from promoter.admission.mutation import mutated_annotations
from promoter.clock import SYSTEM, Clock
from promoter.resources.freight_refs import aliases_of
from promoter.rules.limits import DEFAULT_LIMITS, Limits

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
CRD_DIRS = (ROOT / "deploy" / "crds", ROOT / "deploy" / "third-party-crds")
DEFAULT_SEED = (ROOT / "examples" / "kargo-demo",)
# Kargo's manifests apply unchanged: kargo.akuity.io/v1alpha1 serves the same objects as ours.
KARGO_GROUP_ALIAS = {"kargo.akuity.io": "longshoreman.dev"}

NAMESPACES = k.ResourceType(
    "", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=False
)
# apiVersion/kind -> resource type, for seeding. Kargo's apiVersion maps to ours.
_SEEDABLE: dict[str, k.ResourceType] = {
    "Warehouse": k.WAREHOUSES,
    "Freight": k.FREIGHT,
    "Stage": k.STAGES,
    "Promotion": k.PROMOTIONS,
    "PromotionTask": k.PROMOTION_TASKS,
    "ClusterPromotionTask": k.CLUSTER_PROMOTION_TASKS,
    "Application": k.APPLICATIONS,
    "AnalysisTemplate": k.ANALYSIS_TEMPLATES,
    "ClusterAnalysisTemplate": k.CLUSTER_ANALYSIS_TEMPLATES,
}


@dataclass(frozen=True, slots=True)
class EmbeddedCluster:
    url: str
    kubeconfig: Path


def admission(
    clock: Clock, limits: Limits = DEFAULT_LIMITS, kinds: frozenset[str] | None = None
) -> Admission:
    """Our kinds' admission (``app/admission.py``), in-process, as a real cluster's webhook
    configuration from deploy/ gets it over HTTP; ``kinds`` the step kinds the server runs (its
    registry: the webhook accepts the same), the built-in ones by default."""
    kinds = step_kinds() if kinds is None else kinds

    def admit(request: AdmissionRequest) -> AdmissionResponse:
        if request.group != k.STAGES.group:
            return AdmissionResponse()
        if request.stage == "mutate":
            # Anonymous writes are the server's own (its client sends no identity); kubectl
            # says who it acts as through the kubeconfig the cluster wrote.
            annotations = mutated_annotations(
                request.obj, request.old, request.user, control_plane=not request.user
            )
            if annotations is None:
                return AdmissionResponse()
            metadata = {**request.obj["metadata"], "annotations": annotations}
            return AdmissionResponse(obj={**request.obj, "metadata": metadata})

        def read(plural: str, namespace: str, name: str) -> dict[str, Any] | None:
            return request.lookup(k.STAGES.group, plural, namespace, name)

        def aliased(namespace: str, alias: str) -> list[dict[str, Any]]:
            every = request.list(k.FREIGHT.group, k.FREIGHT.plural, namespace)
            return [f for f in every if alias in aliases_of(f)]

        problems = problems_of(request.obj, request.old, read, kinds, clock.now(), aliased, limits)
        return AdmissionResponse(
            causes=[FieldCause(p.reason, p.message, p.field) for p in problems]
        )

    return admit


@contextlib.asynccontextmanager
async def embedded_cluster(
    kubeconfig_path: Path,
    *,
    state_file: Path | None = None,
    clock: Clock = SYSTEM,
    limits: Limits = DEFAULT_LIMITS,
    kinds: frozenset[str] | None = None,
) -> AsyncIterator[EmbeddedCluster]:
    """Start the emulator on 127.0.0.1 and write a kubeconfig pointing at it."""
    app = create_apiserver_app(
        crd_dirs=[d for d in CRD_DIRS if d.is_dir()],
        state_file=state_file,
        require_namespaces=True,
        namespaces=("default", "kube-system", "kube-public", "kube-node-lease", "argocd"),
        group_aliases=KARGO_GROUP_ALIAS,
        admission=admission(clock, limits, kinds),
    )
    async with serve_apiserver(app) as url:
        kubeconfig_path.parent.mkdir(parents=True, exist_ok=True)
        write_kubeconfig(kubeconfig_path, url, impersonate=_local_user())
        yield EmbeddedCluster(url=url, kubeconfig=kubeconfig_path)


def _local_user() -> str:
    """Who kubectl acts as on the embedded cluster: the local account, as Kargo records a
    Kubernetes user (``kubernetes:<name>``) on what they create."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return "kubectl"


def _documents(paths: Iterable[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for root in paths:
        files = [root] if root.is_file() else sorted(root.rglob("*.y*ml"))
        for f in files:
            docs.extend(d for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict))
    return docs


async def seed(kube: k.Kube, paths: Iterable[Path]) -> int:
    """Create the objects in ``paths`` (and their namespaces); existing ones are left alone."""
    created = 0
    docs = _documents(paths)
    namespaces = sorted({str(d["metadata"]["namespace"]) for d in docs if _namespace(d)})
    for ns in namespaces:
        with contextlib.suppress(k.Conflict):
            await kube.create(NAMESPACES, {"metadata": {"name": ns}})
    for doc in docs:
        rt = _SEEDABLE.get(str(doc.get("kind")))
        if rt is None:
            continue
        obj = {**doc, "apiVersion": rt.api_version}
        with contextlib.suppress(k.Conflict):
            await kube.create(rt, obj)
            created += 1
    return created


def _namespace(doc: Mapping[str, Any]) -> str | None:
    metadata = doc.get("metadata") or {}
    ns = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    return str(ns) if ns else None
