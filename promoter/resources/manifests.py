"""Loading Kargo / Longshoreman manifests from YAML files, with errors that name file and field.

Used by the local runner and by the embedded server to seed its cluster. Accepts both
``longshoreman.dev/v1alpha1`` and ``kargo.akuity.io/v1alpha1`` for our kinds, plus the few
third-party objects a promotion setup keeps beside them (Argo CD Applications, Argo Rollouts
AnalysisTemplates, ConfigMaps, Secrets), which are carried along untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promoter.errors import InvalidInput
from promoter.resources.freight_refs import freight_in
from promoter.resources.model import (
    ACCEPTED_API_VERSIONS,
    API_VERSION,
    CLUSTER_SCOPED_KINDS,
    KINDS,
    StageSpec,
    TaskRef,
    TaskSpec,
    name_of,
    namespace_of,
    parse_stage,
    parse_task,
)
from promoter.resources.yamlio import LOADER, yaml

# Third-party kinds we know and keep, by apiVersion prefix.
_CARRIED = {
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Namespace"),
    ("argoproj.io/v1alpha1", "Application"),
    ("argoproj.io/v1alpha1", "AnalysisTemplate"),
    ("argoproj.io/v1alpha1", "ClusterAnalysisTemplate"),
}


@dataclass(frozen=True, slots=True)
class Loaded:
    obj: dict[str, Any]
    source: str  # "path/to/file.yaml#2" (document index from 1 when a file holds several)

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind"))

    @property
    def name(self) -> str:
        return name_of(self.obj)

    @property
    def namespace(self) -> str | None:
        return namespace_of(self.obj)


@dataclass
class ManifestSet:
    """Objects loaded from files, indexed by kind, namespace and name."""

    objects: list[Loaded] = field(default_factory=list)

    def __iter__(self) -> Iterator[Loaded]:
        return iter(self.objects)

    def of_kind(self, kind: str) -> list[Loaded]:
        return [o for o in self.objects if o.kind == kind]

    def find(self, kind: str, name: str, namespace: str | None) -> Loaded | None:
        for o in self.objects:
            if o.kind != kind or o.name != name:
                continue
            if (
                kind in CLUSTER_SCOPED_KINDS
                or namespace is None
                or (o.namespace or namespace) == namespace
            ):
                return o
        return None

    def stage(self, name: str, namespace: str | None) -> tuple[StageSpec, Loaded]:
        found = self.find("Stage", name, namespace)
        if found is None:
            known = ", ".join(sorted({o.name for o in self.of_kind("Stage")})) or "none"
            raise InvalidInput(
                f"Stage {name!r} not found (Stages in the manifests: {known})", field="--stage"
            )
        spec = parse_stage(found.obj, source=found.source)
        if namespace and not found.namespace:
            spec = StageSpec(
                name=spec.name,
                namespace=namespace,
                vars=spec.vars,
                template_vars=spec.template_vars,
                steps=spec.steps,
                requested_origins=spec.requested_origins,
            )
        return spec, found

    def freight(self, ref: str, namespace: str | None) -> Loaded:
        """A Freight by name or alias (:mod:`promoter.resources.freight_refs`' rule)."""
        candidates = [
            o
            for o in self.of_kind("Freight")
            if (namespace is None or o.namespace in (None, namespace))
        ]
        found = freight_in(ref, (o.obj for o in candidates))
        for o in candidates:
            if o.obj is found:
                return o
        known = (
            ", ".join(
                sorted(
                    f"{o.name} ({o.obj.get('alias')})" if o.obj.get("alias") else o.name
                    for o in candidates
                )
            )
            or "none"
        )
        raise InvalidInput(
            f"Freight {ref!r} not found by name or alias (Freight in the manifests: {known})",
            field="--freight",
        )

    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        found = self.find(ref.kind, ref.name, namespace)
        if found is None:
            return None
        return parse_task(found.obj, source=found.source)


def _check_object(obj: Any, source: str) -> dict[str, Any] | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise InvalidInput(f"a manifest must be a map, got {type(obj).__name__}", source=source)
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not api_version:
        raise InvalidInput("missing apiVersion", source=source, field="apiVersion")
    if not kind:
        raise InvalidInput("missing kind", source=source, field="kind")
    if api_version in ACCEPTED_API_VERSIONS:
        if kind not in KINDS:
            raise InvalidInput(
                f"unknown kind {kind!r} for {api_version}; known kinds: {', '.join(KINDS)}",
                source=source,
                field="kind",
            )
    elif (api_version, kind) not in _CARRIED:
        raise InvalidInput(
            f"unknown kind {kind!r} with apiVersion {api_version!r}; expected {API_VERSION} or "
            "kargo.akuity.io/v1alpha1 kinds (" + ", ".join(KINDS) + ")",
            source=source,
            field="apiVersion",
        )
    metadata = obj.get("metadata")
    if (
        not isinstance(metadata, dict)
        or not isinstance(metadata.get("name"), str)
        or not metadata["name"]
    ):
        raise InvalidInput("missing metadata.name", source=source, field="metadata.name")
    if kind == "Freight":
        for key in ("commits", "images", "charts", "artifacts"):
            if obj.get(key) is not None and not isinstance(obj[key], list):
                raise InvalidInput("must be a list", source=source, field=key)
    return obj


def load_file(path: Path) -> list[Loaded]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read: {e.strerror}", source=str(path)) from None
    try:
        # libyaml when PyYAML has it: the same documents, ten times faster to read.
        documents = list(yaml.load_all(text, Loader=LOADER))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise InvalidInput(f"not valid YAML{where}: {problem}", source=str(path)) from None
    out = []
    many = len(documents) > 1
    for i, doc in enumerate(documents, start=1):
        source = f"{path}#{i}" if many else str(path)
        if (
            isinstance(doc, dict)
            and doc.get("kind", "").endswith("List")
            and isinstance(doc.get("items"), list)
        ):
            for j, item in enumerate(doc["items"]):
                checked = _check_object(item, f"{source} items[{j}]")
                if checked is not None:
                    out.append(Loaded(checked, f"{source} items[{j}]"))
            continue
        checked = _check_object(doc, source)
        if checked is not None:
            out.append(Loaded(checked, source))
    return out


def load(path: str | Path) -> ManifestSet:
    """Load a YAML file (multi-document) or every ``*.yaml``/``*.yml`` file under a directory."""
    root = Path(path)
    if not root.exists():
        raise InvalidInput("no such file or directory", source=str(root), field="--manifests")
    files = (
        [root]
        if root.is_file()
        else sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml"))
    )
    if not files:
        raise InvalidInput("no .yaml or .yml files found", source=str(root), field="--manifests")
    manifests = ManifestSet()
    for f in files:
        manifests.objects.extend(load_file(f))
    seen: dict[tuple[str, str | None, str], str] = {}
    for o in manifests.objects:
        key = (o.kind, None if o.kind in CLUSTER_SCOPED_KINDS else o.namespace, o.name)
        if key in seen:
            raise InvalidInput(
                f"{o.kind} {o.name!r} is defined twice (also in {seen[key]})",
                source=o.source,
                field="metadata.name",
            )
        seen[key] = o.source
    return manifests
