"""The port to Helm: render a chart, build and update its dependencies, parse ``--set``.

Helm is not a binary here. PyPI's ``helm-python-sdk`` binds Helm's own Go SDK (v4) through
ctypes, so ``helm-template`` renders with Helm's template engine, sprig and ``.Capabilities``
exactly, and dependency builds use Helm's downloader (classic repositories and OCI). It is an
alpha of one author and a 75 MB wheel, so it is optional (``pip install 'longshoreman[helm]'``;
the image and ``make test`` install it) and stays behind this one small port: :func:`load` gives
the SDK's adapter or raises :class:`HelmMissing`, a terminal StepError saying how to install it.

The SDK is blocking (cgo calls): the steps call it through ``StepServices.io.call``, off the
event loop. Its errors become StepErrors (terminal: a chart, values or lock that is wrong stays
wrong; a repository that did not answer is retried). Credentials reach it per call and never
appear in messages.

The SDK's Python wrappers stop short of options its native calls take (render's
``kube_version`` and ``api_versions``, dependency builds' username and password), so
:class:`SdkHelm` calls those two native functions itself; that is why the dependency is pinned
(``helm-python-sdk==0.2.2``) and tests/unit/steps/test_helm_template.py holds its order against
the SDK's own install action.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from promoter.errors import StepError
from promoter.ports.oci import plain_http_host

__all__ = [
    "Helm",
    "HelmMissing",
    "RenderOptions",
    "RenderedChart",
    "RepositoryAccess",
    "load",
    "plain_http_host",
]

INSTALL_HINT = (
    "Helm's SDK for Python (helm-python-sdk) is not installed here: install it with "
    "`pip install 'longshoreman[helm]'` (or `pip install helm-python-sdk==0.2.2`); the "
    "Longshoreman container image ships it"
)


class HelmMissing(StepError):
    """helm-python-sdk cannot be imported: the step says how to install it."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"{kind}: {INSTALL_HINT}", terminal=True)


@dataclass(frozen=True, slots=True)
class RenderOptions:
    release_name: str
    namespace: str
    kube_version: str = ""
    api_versions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RenderedChart:
    """What Helm's engine rendered: template path (``<chart>/templates/x.yaml``) -> text, and
    the chart's CRDs (subcharts' included) as (file name, text), as Helm lists them."""

    name: str
    templates: Mapping[str, str]
    crds: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RepositoryAccess:
    """How the dependency manager reaches the chart's repositories: one username and password
    (Helm's downloader takes one pair for a build) and plain HTTP for OCI registries."""

    username: str = ""
    password: str = field(default="", repr=False)
    plain_http: bool = False


class Helm(Protocol):
    """Blocking calls; StepErrors only."""

    def render(
        self, chart: Path, values: Mapping[str, Any], options: RenderOptions
    ) -> RenderedChart:
        """Load the chart at ``chart`` and render it offline (``lookup`` finds nothing)."""
        ...

    def parse_set(self, expression: str, *, literal: bool) -> dict[str, Any]:
        """``--set`` (types inferred) or ``--set-literal`` (the value verbatim)."""
        ...

    def missing_dependencies(self, chart: Path) -> list[str]:
        """Dependencies declared in Chart.yaml that ``charts/`` does not satisfy, as
        ``name (status)``."""
        ...

    def build_dependencies(self, chart: Path, access: RepositoryAccess) -> None:
        """``helm dependency build``: ``charts/`` from Chart.lock."""
        ...

    def update_dependencies(self, chart: Path, access: RepositoryAccess) -> None:
        """``helm dependency update``: resolve Chart.yaml's ranges, refresh ``charts/`` and
        write Chart.lock."""
        ...


def load(kind: str) -> Helm:
    """The SDK's adapter, or :class:`HelmMissing` when helm-python-sdk is not installed (or its
    native library does not load on this machine)."""
    try:
        import helm_python  # noqa: F401  (imported here: optional, and 85 MB of native code)
    except (ImportError, OSError):
        raise HelmMissing(kind) from None
    return SdkHelm(kind)


class SdkHelm:
    """:class:`Helm` over helm-python-sdk."""

    def __init__(self, kind: str) -> None:
        import helm_python

        self._sdk = helm_python
        self._kind = kind

    def _error(self, what: str, error: Exception, *, secrets: Sequence[str] = ()) -> StepError:
        message = str(error)
        for secret in secrets:
            if secret:
                message = message.replace(secret, "***")
        # A repository or registry that did not answer may answer later; the rest will not.
        transient = isinstance(error, self._sdk.HelmRepoError | self._sdk.HelmRegistryError) and (
            "connection refused" in message or "timeout" in message or " 5" in message[-40:]
        )
        return StepError(f"{self._kind}: {what}: {message}", terminal=not transient)

    def render(
        self, chart: Path, values: Mapping[str, Any], options: RenderOptions
    ) -> RenderedChart:
        import json

        from helm_python import _native

        try:
            loaded = self._sdk.Chart.load(chart)
        except self._sdk.HelmError as e:
            raise self._error(f"failed to load chart from {chart.name!r}", e) from None
        with loaded:
            if loaded.metadata.get("type") == "library":
                # Helm's install action (what `helm template` runs) refuses them so.
                raise StepError(
                    f"{self._kind}: failed to render chart: library charts are not installable",
                    terminal=True,
                )
            opts: dict[str, Any] = {"name": options.release_name, "namespace": options.namespace}
            if options.kube_version:
                opts["kube_version"] = options.kube_version
            if options.api_versions:
                opts["api_versions"] = list(options.api_versions)
            try:
                # Chart.render's keyword arguments stop short of the engine's own options
                # (kube_version, api_versions), which the native call takes: hand them over.
                rendered = _native.call_string(
                    "helm_render", loaded._raw(), json.dumps(dict(values)), json.dumps(opts)
                )
                crds = loaded.crds
                name = loaded.name
            except self._sdk.HelmError as e:
                raise self._error("failed to render chart", e) from None
        templates = json.loads(rendered)
        return RenderedChart(
            name, templates, tuple((str(c["filename"]), str(c["data"])) for c in crds)
        )

    def parse_set(self, expression: str, *, literal: bool) -> dict[str, Any]:
        parse = self._sdk.parse_set_literal if literal else self._sdk.parse_set_string
        try:
            return parse(expression)
        except self._sdk.HelmError as e:
            raise self._error(f"failed parsing --set data {expression!r}", e) from None

    def missing_dependencies(self, chart: Path) -> list[str]:
        try:
            listed = self._sdk.dependency_list(chart)
        except self._sdk.HelmError as e:
            raise self._error("failed to list chart dependencies", e) from None
        return [f"{d.get('name')} ({d.get('status')})" for d in listed if d.get("status") != "ok"]

    def _dependencies(self, action: str, chart: Path, access: RepositoryAccess) -> None:
        import json

        from helm_python import _native

        # The wrappers of dependency build and update stop short of the credentials the native
        # calls take (one username and password for the repositories): hand them over.
        options: dict[str, Any] = {}
        if access.plain_http:
            options["plain_http"] = True
        if access.username or access.password:
            options.update(username=access.username, password=access.password)
        try:
            _native.call_status(f"helm_dependency_{action}", str(chart), json.dumps(options))
        except self._sdk.HelmError as e:
            raise self._error(
                f"failed to {action} chart dependencies", e, secrets=(access.password,)
            ) from None

    def build_dependencies(self, chart: Path, access: RepositoryAccess) -> None:
        self._dependencies("build", chart, access)

    def update_dependencies(self, chart: Path, access: RepositoryAccess) -> None:
        self._dependencies("update", chart, access)
