"""Maps ``uses:`` kinds to step objects. A built-in kind is one line in ``BUILTIN_KINDS`` (and
its module one loader in ``MODULES``); an adapter registers its own with
:meth:`StepRegistry.register`.

Built-in kinds are known by name up front and their modules imported on first use: a step
module brings its libraries along (aiohttp for ``http``, ruamel for the YAML steps, tomlkit for
the TOML ones), and a git-only Promotion run from the command line should pay for none of them.
Listing kinds, ``kind in registry`` and the unknown-kind error need no import;
``registry[kind]`` calls the loader of the module that defines ``kind`` and registers all of its
steps. The loaders are plain ``import`` statements, not ``importlib`` lookups by name, so the
import graph (and import-linter's contracts) sees every step module.
``tests/integration/test_runner_imports.py`` checks that the tables match each module's ``STEPS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from promoter.steps.base import Step

# kind -> the module whose STEPS defines it, in the order kinds are listed.
BUILTIN_KINDS: Mapping[str, str] = {
    "compose-output": "promoter.steps.basic",
    "fail": "promoter.steps.basic",
    "git-clone": "promoter.steps.git_clone",
    "git-clear": "promoter.steps.git_clear",
    "git-commit": "promoter.steps.git_commit",
    "git-tag": "promoter.steps.git_tag",
    "git-push": "promoter.steps.git_push",
    "yaml-update": "promoter.steps.workdir.yaml_update",
    "json-update": "promoter.steps.workdir.json_update",
    "yaml-parse": "promoter.steps.workdir.parse",
    "json-parse": "promoter.steps.workdir.parse",
    "kustomize-set-image": "promoter.steps.workdir.kustomize_set_image",
    "helm-update-chart": "promoter.steps.workdir.helm_update_chart",
    # Renders with Helm's Go SDK (helm-python-sdk, the optional `helm` extra; the image ships
    # it). Without it the step says how to install it.
    "helm-template": "promoter.steps.helm_template",
    "copy": "promoter.steps.workdir.file_copy",
    "delete": "promoter.steps.workdir.file_delete",
    "file-write": "promoter.steps.workdir.file_write",
    "yaml-merge": "promoter.steps.workdir.yaml_merge",
    # Runs `kubectl kustomize` (the image ships kubectl).
    "kustomize-build": "promoter.steps.workdir.kustomize_build",
    "toml-parse": "promoter.steps.workdir.tomlfiles",
    "toml-update": "promoter.steps.workdir.tomlfiles",
    "http": "promoter.steps.http",
    "http-download": "promoter.steps.download",
    "untar": "promoter.steps.workdir.untar",
    "tar": "promoter.steps.workdir.tar",
    # Need the registry port (StepServices.oci), which the server provides.
    "oci-download": "promoter.steps.oci",
    "oci-push": "promoter.steps.oci",
    # Needs the metadata port (StepServices.extra["metadata"]), which the server and the local
    # runner provide.
    "set-metadata": "promoter.steps.metadata",
    # Needs the Freight alias port (StepServices.extra["freight-aliases"]), which the server and
    # the local runner provide.
    "set-freight-alias": "promoter.steps.freight_alias",
    # Need the Argo CD port (StepServices.extra["argocd"]), which the server provides; in the
    # local runner they error with a message saying so.
    "argocd-update": "promoter.steps.argocd",
    "argocd-wait": "promoter.steps.argocd",
    # Need the GitHub port (StepServices.extra["github"]), set when the GitHub App is configured.
    "git-open-pr": "promoter.steps.github",
    "git-wait-for-pr": "promoter.steps.github",
    "git-merge-pr": "promoter.steps.github",
    # Needs the GitHub App's git database port (StepServices.extra["github-git"]).
    "github-push": "promoter.steps.github_push",
}


# The loaders: each imports its module when first called (function-level imports on purpose).
def _basic() -> Mapping[str, Step]:
    from promoter.steps import basic

    return basic.STEPS


def _git_clone() -> Mapping[str, Step]:
    from promoter.steps import git_clone

    return git_clone.STEPS


def _git_clear() -> Mapping[str, Step]:
    from promoter.steps import git_clear

    return git_clear.STEPS


def _git_commit() -> Mapping[str, Step]:
    from promoter.steps import git_commit

    return git_commit.STEPS


def _git_tag() -> Mapping[str, Step]:
    from promoter.steps import git_tag

    return git_tag.STEPS


def _git_push() -> Mapping[str, Step]:
    from promoter.steps import git_push

    return git_push.STEPS


def _yaml_update() -> Mapping[str, Step]:
    from promoter.steps.workdir import yaml_update

    return yaml_update.STEPS


def _json_update() -> Mapping[str, Step]:
    from promoter.steps.workdir import json_update

    return json_update.STEPS


def _parse() -> Mapping[str, Step]:
    from promoter.steps.workdir import parse

    return parse.STEPS


def _kustomize_set_image() -> Mapping[str, Step]:
    from promoter.steps.workdir import kustomize_set_image

    return kustomize_set_image.STEPS


def _helm_update_chart() -> Mapping[str, Step]:
    from promoter.steps.workdir import helm_update_chart

    return helm_update_chart.STEPS


def _helm_template() -> Mapping[str, Step]:
    from promoter.steps import helm_template

    return helm_template.STEPS


def _file_copy() -> Mapping[str, Step]:
    from promoter.steps.workdir import file_copy

    return file_copy.STEPS


def _file_delete() -> Mapping[str, Step]:
    from promoter.steps.workdir import file_delete

    return file_delete.STEPS


def _file_write() -> Mapping[str, Step]:
    from promoter.steps.workdir import file_write

    return file_write.STEPS


def _yaml_merge() -> Mapping[str, Step]:
    from promoter.steps.workdir import yaml_merge

    return yaml_merge.STEPS


def _kustomize_build() -> Mapping[str, Step]:
    from promoter.steps.workdir import kustomize_build

    return kustomize_build.STEPS


def _tomlfiles() -> Mapping[str, Step]:
    from promoter.steps.workdir import tomlfiles

    return tomlfiles.STEPS


def _http() -> Mapping[str, Step]:
    from promoter.steps import http

    return http.STEPS


def _download() -> Mapping[str, Step]:
    from promoter.steps import download

    return download.STEPS


def _untar() -> Mapping[str, Step]:
    from promoter.steps.workdir import untar

    return untar.STEPS


def _tar() -> Mapping[str, Step]:
    from promoter.steps.workdir import tar

    return tar.STEPS


def _oci() -> Mapping[str, Step]:
    from promoter.steps import oci

    return oci.STEPS


def _metadata() -> Mapping[str, Step]:
    from promoter.steps import metadata

    return metadata.STEPS


def _freight_alias() -> Mapping[str, Step]:
    from promoter.steps import freight_alias

    return freight_alias.STEPS


def _argocd() -> Mapping[str, Step]:
    from promoter.steps import argocd

    return argocd.STEPS


def _github() -> Mapping[str, Step]:
    from promoter.steps import github

    return github.STEPS


def _github_push() -> Mapping[str, Step]:
    from promoter.steps import github_push

    return github_push.STEPS


MODULES: Mapping[str, Callable[[], Mapping[str, Step]]] = {
    "promoter.steps.basic": _basic,
    "promoter.steps.git_clone": _git_clone,
    "promoter.steps.git_clear": _git_clear,
    "promoter.steps.git_commit": _git_commit,
    "promoter.steps.git_tag": _git_tag,
    "promoter.steps.git_push": _git_push,
    "promoter.steps.workdir.yaml_update": _yaml_update,
    "promoter.steps.workdir.json_update": _json_update,
    "promoter.steps.workdir.parse": _parse,
    "promoter.steps.workdir.kustomize_set_image": _kustomize_set_image,
    "promoter.steps.workdir.helm_update_chart": _helm_update_chart,
    "promoter.steps.helm_template": _helm_template,
    "promoter.steps.workdir.file_copy": _file_copy,
    "promoter.steps.workdir.file_delete": _file_delete,
    "promoter.steps.workdir.file_write": _file_write,
    "promoter.steps.workdir.yaml_merge": _yaml_merge,
    "promoter.steps.workdir.kustomize_build": _kustomize_build,
    "promoter.steps.workdir.tomlfiles": _tomlfiles,
    "promoter.steps.http": _http,
    "promoter.steps.download": _download,
    "promoter.steps.workdir.untar": _untar,
    "promoter.steps.workdir.tar": _tar,
    "promoter.steps.oci": _oci,
    "promoter.steps.metadata": _metadata,
    "promoter.steps.freight_alias": _freight_alias,
    "promoter.steps.argocd": _argocd,
    "promoter.steps.github": _github,
    "promoter.steps.github_push": _github_push,
}


@dataclass(frozen=True, slots=True)
class _NotImported:
    """A built-in kind whose module has not been imported yet."""

    module: str


class StepRegistry(Mapping[str, Step]):
    """A read-mostly mapping of step kinds, extended by adapters (Argo CD, GitHub) at wiring."""

    def __init__(self, steps: Mapping[str, Step] | None = None) -> None:
        self._steps: dict[str, Step | _NotImported] = dict(steps or {})

    def register(self, kind: str, step: Step) -> None:
        self._steps[kind] = step

    def register_module(self, kind: str, module: str) -> None:
        """Know ``kind`` by name; load ``module`` (one of ``MODULES``, whose ``STEPS`` has it)
        on first use."""
        if module not in MODULES:
            raise LookupError(f"no loader for step module {module}")
        self._steps[kind] = _NotImported(module)

    def __getitem__(self, kind: str) -> Step:
        step = self._steps[kind]
        if isinstance(step, _NotImported):
            step = self._import(kind, step.module)
        return step

    def _import(self, kind: str, module_name: str) -> Step:
        steps = MODULES[module_name]()
        # Every kind of that module still waiting for it, not only the one asked for; a kind
        # registered explicitly since (an adapter's replacement) stays as registered.
        for name, entry in self._steps.items():
            if isinstance(entry, _NotImported) and entry.module == module_name and name in steps:
                self._steps[name] = steps[name]
        found = self._steps[kind]
        if isinstance(found, _NotImported):
            raise LookupError(f"{module_name} defines no step {kind!r}")
        return found

    def __contains__(self, kind: object) -> bool:
        # Mapping's default would call __getitem__ and import the step's module.
        return kind in self._steps

    def __iter__(self) -> Iterator[str]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)


def builtin_registry() -> StepRegistry:
    """Every built-in step that needs no cluster or GitHub API, imported when first used."""
    registry = StepRegistry()
    for kind, module in BUILTIN_KINDS.items():
        registry.register_module(kind, module)
    return registry
