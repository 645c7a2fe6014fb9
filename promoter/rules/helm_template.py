"""What ``helm template`` writes, decided purely: Kargo's ``helm-template`` step's output rules.

Helm's Go SDK (through :mod:`promoter.ports.helm`) only renders: it hands back each template's
text by path. Turning that into what ``helm template`` prints is Helm's own code, ported here so
the output is ordered and separated byte for byte as Helm 4 writes it:

* ``split_manifests`` is ``releaseutil.SplitManifests``: a template's text split on ``---``
  lines, each document trimmed, empty ones dropped.
* ``sort_release`` is ``releaseutil.SortManifests`` plus the install action's aggregation:
  partials (``_*``) and ``NOTES.txt`` are not manifests; a document annotated ``helm.sh/hook``
  is a hook (with its events), any other a manifest; both are sorted by kind in Helm's
  ``InstallOrder`` (stable: same-kind documents keep their file and document order; unknown
  kinds go last, alphabetically). Files are visited in sorted path order, as Helm does.
* ``plan_output`` is Kargo's ``writeOutput`` (pkg/promotion/runner/builtin/
  helm_template_runner.go) with Helm's ``writeToFile``: one file (``outPath`` ending in
  ``.yaml``/``.yml``), Helm's directory layout (``<outPath>[/<release>]/<chart>/templates/...``,
  a file written twice in one run is appended to, a hook file that exists is appended to) or
  Kargo's flat layout (one file per resource, ``[group-]kind[-namespace]-name.yaml``).

Nothing here touches the file system: ``plan_output`` returns the writes and the step carries
them out.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

# helm.sh/helm/v4 pkg/release/v1/util/kind_sorter.go InstallOrder.
INSTALL_ORDER: tuple[str, ...] = (
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
)  # fmt: skip
_RANK = {kind: i for i, kind in enumerate(INSTALL_ORDER)}

HOOK_ANNOTATION = "helm.sh/hook"
# Helm's hook events (pkg/release/v1/hook.go); an unknown one makes Helm skip the document.
HOOK_EVENTS = frozenset(
    {
        "pre-install", "post-install", "pre-delete", "post-delete", "pre-upgrade",
        "post-upgrade", "pre-rollback", "post-rollback", "test", "test-success",
    }
)  # fmt: skip
TEST_EVENTS = frozenset({"test", "test-success"})

LAYOUTS = ("helm", "flat")

# releaseutil's separator: a line of ``---`` with whatever whitespace surrounds it.
_SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")
# The k8s YAML reader Kargo's flat layout splits with: a line that is exactly ``---``.
_DOCUMENT_LINE = re.compile(r"^---\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Document:
    """One rendered document and the template (``<chart>/templates/x.yaml``) it came from."""

    source: str
    content: str
    kind: str = ""


@dataclass(frozen=True, slots=True)
class Hook:
    source: str
    content: str
    kind: str
    events: tuple[str, ...]

    @property
    def is_test(self) -> bool:
        return any(event in TEST_EVENTS for event in self.events)


@dataclass(frozen=True, slots=True)
class Release:
    """What Helm's install action in client-only dry-run mode produces: the CRDs (only when
    asked for), the manifests, and the hooks, each in the order Helm writes them."""

    crds: tuple[Document, ...] = ()
    manifests: tuple[Document, ...] = ()
    hooks: tuple[Hook, ...] = ()

    @property
    def manifest(self) -> str:
        """``Release.Manifest``: every CRD and manifest as ``---\\n# Source: ...\\n...\\n``."""
        return "".join(_sourced(d.source, d.content) for d in (*self.crds, *self.manifests))


@dataclass(frozen=True, slots=True)
class Write:
    """One file to write under the work directory. ``append``: add to the file if it exists
    (otherwise create it); else replace it."""

    path: str
    content: str
    append: bool = False


@dataclass(frozen=True, slots=True)
class OutputOptions:
    out_path: str
    layout: str = "helm"
    release_name: str = ""
    use_release_name: bool = False
    disable_hooks: bool = False
    skip_tests: bool = False

    @property
    def is_file(self) -> bool:
        return posixpath.splitext(self.out_path)[1] in (".yaml", ".yml")


class UnsafeFilename(ValueError):
    """A flat-layout file name from a resource's metadata that is not a plain file name."""


def split_manifests(text: str) -> list[str]:
    return [doc.strip() for doc in _SEPARATOR.split(text.strip()) if doc != ""]


def _head(document: str) -> Mapping[str, Any]:
    try:
        head = yaml.safe_load(document)
    except yaml.YAMLError as e:
        raise ValueError(f"YAML parse error: {e}") from None
    return head if isinstance(head, Mapping) else {}


def _rank(kind: str) -> tuple[int, str]:
    # Known kinds by InstallOrder; unknown kinds after them, alphabetically.
    return (_RANK[kind], "") if kind in _RANK else (len(INSTALL_ORDER), kind)


def sort_release(
    templates: Mapping[str, str],
    crds: Sequence[tuple[str, str]] = (),
    *,
    include_crds: bool = False,
) -> Release:
    """Rendered templates (path -> text) and the chart's CRDs (file name, text) -> the
    release ``helm template`` writes. A document that is not YAML raises ValueError naming
    its template."""
    manifests: list[Document] = []
    hooks: list[Hook] = []
    for path in sorted(templates):
        name = posixpath.basename(path)
        if name.startswith("_") or name.endswith("NOTES.txt") or not templates[path].strip():
            continue
        for content in split_manifests(templates[path]):
            try:
                head = _head(content)
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
            kind = str(head.get("kind") or "")
            metadata = head.get("metadata")
            annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
            hook = annotations.get(HOOK_ANNOTATION) if isinstance(annotations, Mapping) else None
            if hook is None:
                manifests.append(Document(path, content, kind))
                continue
            events = tuple(e.strip().lower() for e in str(hook).split(","))
            if all(event in HOOK_EVENTS for event in events):
                hooks.append(Hook(path, content, kind, events))
    crd_documents = tuple(Document(name, text, "") for name, text in crds) if include_crds else ()
    return Release(
        crds=crd_documents,
        manifests=tuple(sorted(manifests, key=lambda d: _rank(d.kind))),
        hooks=tuple(sorted(hooks, key=lambda h: _rank(h.kind))),
    )


def _sourced(source: str, content: str) -> str:
    return f"---\n# Source: {source}\n{content}\n"


def plan_output(options: OutputOptions, release: Release) -> list[Write]:
    """Kargo's writeOutput: the files to write, relative to the work directory."""
    out = options.out_path
    hooks = [] if options.disable_hooks else list(release.hooks)
    hooks = [h for h in hooks if not (options.skip_tests and h.is_test)]
    if options.is_file:
        text = release.manifest.strip() + "\n"
        text += "".join(_sourced(h.source, h.content) for h in hooks)
        return [Write(out, text)]
    if options.layout == "flat":
        writes = flat_writes(out, release.manifest)
        for hook in hooks:
            writes += flat_writes(out, hook.content)
        return writes
    base = posixpath.join(out, options.release_name) if options.use_release_name else out
    writes = []
    written: set[str] = set()
    # helm's install action: CRDs under outPath itself, the manifests under the release's
    # directory; a file written twice in this run gets the second document appended.
    for directory, documents in ((out, release.crds), (base, release.manifests)):
        for doc in documents:
            path = posixpath.join(directory, doc.source)
            writes.append(Write(path, _sourced(doc.source, doc.content), append=path in written))
            written.add(path)
    # Kargo's hooks: appended to a file that exists (from this run or before it).
    writes += [
        Write(posixpath.join(base, h.source), _sourced(h.source, h.content), append=True)
        for h in hooks
    ]
    return writes


def flat_writes(out_path: str, manifest: str) -> list[Write]:
    """One file per resource in ``out_path`` (Kargo's writeResourcesFlat). A resource without
    kind or name is ``resource-0.yaml`` (Kargo's counter never moves)."""
    writes = []
    for document in _DOCUMENT_LINE.split(manifest):
        resource = document.strip()
        if not resource:
            continue
        name = resource_filename(resource) or "resource-0.yaml"
        check_filename(name)
        writes.append(Write(posixpath.join(out_path, name), resource))
    return writes


def object_metadata(resource: str) -> tuple[str, str, str, str]:
    """Kargo's extractObjectMetadata: (group, kind, namespace, name), empty when unreadable."""
    try:
        head = yaml.safe_load(resource)
    except yaml.YAMLError:
        return "", "", "", ""
    if not isinstance(head, Mapping):
        return "", "", "", ""
    api_version = str(head.get("apiVersion") or "")
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    metadata = head.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return (
        group,
        str(head.get("kind") or ""),
        str(metadata.get("namespace") or ""),
        str(metadata.get("name") or ""),
    )


def resource_filename(resource: str) -> str:
    """Kargo's generateResourceFilename: ``[group-]kind[-namespace]-name.yaml``, lower case,
    dots of the group as underscores; empty without kind or name."""
    group, kind, namespace, name = object_metadata(resource)
    if not kind or not name:
        return ""
    parts = [group.replace(".", "_")] if group else []
    parts += [kind] + ([namespace] if namespace else []) + [name]
    return ("-".join(parts) + ".yaml").lower()


def check_filename(name: str) -> None:
    """Kargo's validateGeneratedResourceFilename: names come from rendered metadata, which is
    untrusted, so only a plain file name is written."""
    if not name:
        raise UnsafeFilename("generated resource filename is empty")
    if (
        name in (".", "..")
        or name.startswith("/")
        or "/" in name
        or "\\" in name
        or posixpath.normpath(name) != name
    ):
        raise UnsafeFilename(f"unsafe generated resource filename {name!r}")


@dataclass(frozen=True, slots=True)
class SetValue:
    key: str
    value: str
    literal: bool = False

    @property
    def expression(self) -> str:
        return f"{self.key}={self.value}"


@dataclass(frozen=True, slots=True)
class ValuesPlan:
    """The values files to read (in order) and the ``--set``/``--set-literal`` expressions to
    apply after them, as Helm's ``values.Options.MergeValues`` composes them."""

    files: tuple[str, ...] = ()
    sets: tuple[SetValue, ...] = field(default_factory=tuple)


def merge_values(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's ``mergeMaps``: maps merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_values(dict(out[key]), value)
        else:
            out[key] = value
    return out


def merge_all(documents: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for document in documents:
        merged = merge_values(merged, document)
    return merged


def lock_changes(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """Kargo's compareChartVersions over two Chart.lock dependency lists: name -> ``old ->
    new`` for a changed version, the version for an added dependency, ``""`` for a removed one."""
    old = {str(d.get("name")): str(d.get("version") or "") for d in before}
    changes = {}
    for dep in after:
        name, version = str(dep.get("name")), str(dep.get("version") or "")
        if name in old:
            previous = old.pop(name)
            if previous != version:
                changes[name] = f"{previous} -> {version}"
        else:
            changes[name] = version
    changes.update({name: "" for name in old})
    return changes


def commit_message(chart_path: str, changes: Mapping[str, str]) -> str:
    """Kargo's generateCommitMessage (names sorted: Go's map order is random)."""
    if not changes:
        return ""
    lines = "".join(
        f"\n- {name}: {change or 'removed'}" for name, change in sorted(changes.items())
    )
    return f"Updated chart dependencies for {chart_path}\n{lines}"
