"""Render a kustomization in Python: the small subset of kustomize that deploy/ uses.

The kustomize binary is not installed here (and PyPI's ``kustomize`` is an unrelated DSL), so the
tests build deploy/base and deploy/overlays/* with this. It implements what our kustomizations
use, the way kustomize v5 does it, and refuses anything else (an unknown key raises), so it can
never silently render something different from ``kubectl apply -k``:

- ``resources``: YAML files (multi-document) and directories holding a kustomization.yaml;
- ``namespace``: set on namespaced objects, and on RoleBinding/ClusterRoleBinding subjects that
  are ServiceAccounts in ``default`` or no namespace (kustomize's ``defaultOnly``);
- ``images``: ``newName``/``newTag``/``digest`` for matching containers and init containers;
- ``patches``: strategic merge patches (``path`` or inline ``patch``) with a kind/name target;
  lists of named objects (containers, env, volumes, ports, ...) merge by ``name``;
- ``secretGenerator``: ``envs``, ``files``, ``literals``, ``type``, ``options``; the name gets a
  content-hash suffix (unless ``disableNameSuffixHash``) and pod specs' references follow it.

    objects = build(Path("deploy/overlays/example"))
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

# Kinds kustomize leaves without a namespace (the cluster-scoped ones we can meet).
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
        "IngressClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        # Our own and Argo's cluster-scoped kinds.
        "ClusterPromotionTask",
        "ClusterAnalysisTemplate",
    }
)
SUPPORTED_KEYS = frozenset(
    {"apiVersion", "kind", "namespace", "resources", "images", "patches", "secretGenerator"}
)
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job"})


class KustomizeError(ValueError):
    """The kustomization uses something this subset does not implement, or is wrong."""


def load_documents(path: Path) -> list[Obj]:
    """Every non-empty YAML document of a file."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def build(directory: Path) -> list[Obj]:
    """The objects ``kustomize build directory`` prints (order: resources, then generated)."""
    kfile = directory / "kustomization.yaml"
    if not kfile.is_file():
        raise KustomizeError(f"{directory}: no kustomization.yaml")
    spec = yaml.safe_load(kfile.read_text()) or {}
    unknown = set(spec) - SUPPORTED_KEYS
    if unknown:
        raise KustomizeError(f"{kfile}: unsupported keys {sorted(unknown)}")
    objects: list[Obj] = []
    for entry in spec.get("resources") or ():
        target = (directory / entry).resolve()
        if target.is_dir():
            objects.extend(build(target))
        elif target.is_file():
            objects.extend(load_documents(target))
        else:
            raise KustomizeError(f"{kfile}: resource {entry!r} not found")
    renames: dict[str, str] = {}
    for generator in spec.get("secretGenerator") or ():
        secret = _generate_secret(directory, generator)
        renames[generator["name"]] = secret["metadata"]["name"]
        objects.append(secret)
    for patch in spec.get("patches") or ():
        _apply_patch(directory, objects, patch)
    if renames:
        for obj in objects:
            for pod in _pod_specs(obj):
                _rename_secret_refs(pod, renames)
    for image in spec.get("images") or ():
        for obj in objects:
            for pod in _pod_specs(obj):
                _set_image(pod, image)
    namespace = spec.get("namespace")
    if namespace:
        for obj in objects:
            _set_namespace(obj, namespace)
    return objects


# ----------------------------------------------------------------------------- generators


def _env_file(path: Path) -> dict[str, str]:
    data: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key:
            raise KustomizeError(f"{path}:{number}: expected KEY=VALUE")
        data[key] = value
    return data


def _generate_secret(directory: Path, generator: Mapping[str, Any]) -> Obj:
    unknown = set(generator) - {"name", "envs", "files", "literals", "type", "options"}
    if unknown:
        raise KustomizeError(f"secretGenerator: unsupported keys {sorted(unknown)}")
    data: dict[str, str] = {}
    for env in generator.get("envs") or ():
        data.update(_env_file(directory / env))
    for entry in generator.get("files") or ():
        key, sep, file = str(entry).partition("=")
        path = directory / (file if sep else key)
        data[key if sep else path.name] = path.read_text()
    for literal in generator.get("literals") or ():
        key, _, value = str(literal).partition("=")
        data[key] = value
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    name = str(generator["name"])
    secret_type = str(generator.get("type") or "Opaque")
    options = generator.get("options") or {}
    if not options.get("disableNameSuffixHash"):
        name = f"{name}-{_content_hash(name, secret_type, encoded)}"
    metadata: Obj = {"name": name}
    for field in ("labels", "annotations"):
        if options.get(field):
            metadata[field] = dict(options[field])
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": secret_type,
        "data": encoded,
    }


def _content_hash(name: str, secret_type: str, data: Mapping[str, str]) -> str:
    """kustomize's suffix: sha256 of the Secret's JSON, 10 hex digits, some letters swapped so
    the suffix never reads as a number or a word (api/hasher/hash.go)."""
    text = json.dumps(
        {"data": dict(data), "kind": "Secret", "name": name, "type": secret_type},
        sort_keys=True,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


# -------------------------------------------------------------------------------- patches


def _apply_patch(directory: Path, objects: list[Obj], patch: Mapping[str, Any]) -> None:
    unknown = set(patch) - {"path", "patch", "target"}
    if unknown:
        raise KustomizeError(f"patches: unsupported keys {sorted(unknown)}")
    if "path" in patch:
        docs = load_documents(directory / patch["path"])
    else:
        docs = [doc for doc in yaml.safe_load_all(str(patch.get("patch") or "")) if doc]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise KustomizeError("patches: only single-document strategic merge patches")
    body = docs[0]
    target = dict(patch.get("target") or {})
    if not target:
        target = {"kind": body.get("kind"), "name": (body.get("metadata") or {}).get("name")}
    matched = [o for o in objects if _matches(o, target)]
    if not matched:
        raise KustomizeError(f"patches: no object matches target {target}")
    for obj in matched:
        merged = strategic_merge(obj, body)
        # A patch never renames its target (kustomize keeps the target's identity).
        merged["metadata"]["name"] = obj["metadata"]["name"]
        obj.clear()
        obj.update(merged)


def _matches(obj: Mapping[str, Any], target: Mapping[str, Any]) -> bool:
    unknown = set(target) - {"kind", "name"}
    if unknown:
        raise KustomizeError(f"patches: unsupported target keys {sorted(unknown)}")
    if target.get("kind") and obj.get("kind") != target["kind"]:
        return False
    return not target.get("name") or (obj.get("metadata") or {}).get("name") == target["name"]


def strategic_merge(base: Any, patch: Any) -> Any:
    """Maps merge key by key; lists of named maps merge by ``name``; other lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)  # "key: null" deletes, as in a strategic merge patch
            elif key in out:
                out[key] = strategic_merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        out_list = copy.deepcopy(base)
        index = {item["name"]: i for i, item in enumerate(out_list)}
        for item in patch:
            if item["name"] in index:
                i = index[item["name"]]
                out_list[i] = strategic_merge(out_list[i], item)
            else:
                out_list.append(copy.deepcopy(item))
        return out_list
    return copy.deepcopy(patch)


def _named(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(i, dict) and "name" in i for i in items)


# ---------------------------------------------------------------------------- transformers


def _pod_specs(obj: Mapping[str, Any]) -> Iterator[Obj]:
    if obj.get("kind") in WORKLOAD_KINDS:
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec")
        if isinstance(pod, dict):
            yield pod
    elif obj.get("kind") == "Pod" and isinstance(obj.get("spec"), dict):
        yield obj["spec"]


def _containers(pod: Mapping[str, Any]) -> Iterator[Obj]:
    for field in ("initContainers", "containers"):
        yield from pod.get(field) or ()


def _rename_secret_refs(pod: Obj, renames: Mapping[str, str]) -> None:
    def rename(holder: Obj, key: str) -> None:
        if holder.get(key) in renames:
            holder[key] = renames[holder[key]]

    for container in _containers(pod):
        for source in container.get("envFrom") or ():
            if isinstance(source.get("secretRef"), dict):
                rename(source["secretRef"], "name")
        for env in container.get("env") or ():
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if isinstance(ref, dict):
                rename(ref, "name")
    for volume in pod.get("volumes") or ():
        if isinstance(volume.get("secret"), dict):
            rename(volume["secret"], "secretName")
    for pull in pod.get("imagePullSecrets") or ():
        rename(pull, "name")


def image_name(image: str) -> str:
    """``registry:5000/app:1.0@sha256:..`` -> ``registry:5000/app``."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def _set_image(pod: Obj, image: Mapping[str, Any]) -> None:
    for container in _containers(pod):
        current = str(container.get("image") or "")
        if image_name(current) != image["name"]:
            continue
        name = str(image.get("newName") or image["name"])
        if image.get("digest"):
            container["image"] = f"{name}@{image['digest']}"
        elif image.get("newTag"):
            container["image"] = f"{name}:{image['newTag']}"
        else:
            container["image"] = name + current[len(image_name(current)) :]


def _set_namespace(obj: Obj, namespace: str) -> None:
    kind = obj.get("kind")
    if kind not in CLUSTER_SCOPED:
        obj.setdefault("metadata", {})["namespace"] = namespace
    if kind in ("RoleBinding", "ClusterRoleBinding"):
        for subject in obj.get("subjects") or ():
            if subject.get("kind") == "ServiceAccount" and subject.get("namespace") in (
                None,
                "",
                "default",
            ):
                subject["namespace"] = namespace
