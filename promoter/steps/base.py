"""The one interface every promotion step implements, and the helpers steps share.

A step receives its configuration already rendered (every ``${{ }}`` evaluated) and a
:class:`StepContext`, does its work, and returns a :class:`StepResult`. It never touches the
Promotion object: the engine records the result. Steps that do slow or external work return
``Running`` with a ``retry_after`` and are entered again later, possibly in another process, so a
step must discover its own earlier work (``ctx.previous_output`` and the world itself) instead of
trusting in-memory state.

Every step also says what it changes (:class:`Effect`), which decides what a replica that did not
run it does when it continues the Promotion in a work directory of its own
(:mod:`promoter.engine.replay`): a ``LOCAL`` step is run again from its recorded inputs, an
``EXTERNAL``
one never is (its recorded output stands, and its optional ``verify`` hook checks that the effect
is still there). A step that does not say is ``EXTERNAL``: repeating an effect is the one mistake
a replay must never make.

Errors have kinds (see :mod:`promoter.errors`): a step raises :class:`StepError` for a technical
problem that may go away (counted against ``retry.errorThreshold``), ``StepError(terminal=True)``
for one that will not (refused by policy, a missing object; the step ends ``Errored``),
:class:`ConfigRefused` for a config it refuses (ends ``Failed``, as in Kargo), and returns
``Failed`` for a business failure (``fail`` step, a closed pull request, an HTTP
``failureExpression``).
"""

from __future__ import annotations

import builtins
import enum
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from promoter.errors import ConfigRefused
from promoter.ports.clusterdata import DEFAULT_SHARED_NAMESPACE, ClusterData
from promoter.ports.credentials import Credential, Credentials
from promoter.ports.gitcmd import DEFAULT_AUTHOR_EMAIL, DEFAULT_AUTHOR_NAME
from promoter.ports.io_port import LOOP_IO, IoPort
from promoter.ports.telemetry import NO_TELEMETRY, Telemetry

if TYPE_CHECKING:  # a type only: the oci module loads with the oci steps
    from promoter.ports.oci import OCIRegistry

# A directory inside every work directory for the engine's own files (the git clone cache).
PRIVATE_DIR = ".longshoreman"


class StepStatus(enum.StrEnum):
    """Status of one step, with Kargo's names."""

    SUCCEEDED = "Succeeded"
    SKIPPED = "Skipped"
    RUNNING = "Running"
    ABORTED = "Aborted"
    FAILED = "Failed"
    ERRORED = "Errored"
    PENDING = "Pending"

    @property
    def severity(self) -> int:
        """Order used to compute a Promotion's final phase: the worst status wins."""
        return _SEVERITY[self]


_SEVERITY = {
    StepStatus.PENDING: -1,
    StepStatus.SUCCEEDED: 0,
    StepStatus.SKIPPED: 1,
    StepStatus.RUNNING: 2,
    StepStatus.ABORTED: 3,
    StepStatus.FAILED: 4,
    StepStatus.ERRORED: 5,
}


class Effect(enum.StrEnum):
    """What a step changes, and so what a replay of the Promotion does with it."""

    # Changes nothing but the Promotion's work directory (or nothing at all): running it again
    # with the same inputs rebuilds what it built. git-clone, file edits, git-commit, parsing.
    LOCAL = "local"
    # Changes (or depends on) something outside the work directory: a remote, a pull request,
    # an Argo CD Application, an HTTP endpoint, cluster objects. Never run twice.
    EXTERNAL = "external"


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step reports back to the engine."""

    status: StepStatus
    message: str = ""
    output: Mapping[str, Any] = field(default_factory=dict)
    # A health check for the Stage to run after the Promotion succeeds ({"uses", "config"}).
    health_check: Mapping[str, Any] | None = None
    # For Running: when to enter the step again if no event wakes it earlier (seconds).
    retry_after: float | None = None
    # What a later replay of this step needs that neither its config nor its output says
    # (git-commit's dates and tree), recorded in the Promotion's status. Strings only, nothing
    # secret: the status is readable by anyone who may read the Promotion.
    replay_data: Mapping[str, str] | None = None
    # Only in a replay: the output differs from the recorded one and replaces it (git-commit
    # committing again a commit that was never pushed, so nothing outside has seen its ID).
    replaces_output: bool = False


# What the git steps are given for a remote, and who gives it: the one credentials port
# (promoter/ports/credentials.py). The steps ask ``get(ctx.project, "git", repoURL)`` before each
# git command that reaches the remote (clone, fetch, push, ls-remote); None means "nothing to
# add": git then uses whatever ``GitSettings.env`` configures. Lookup failures are
# ``CredentialsError``s, which the steps turn into StepErrors.
GitCredential = Credential
GitCredentials = Credentials

# Kargo's push integration policies (GIT_PUSH_INTEGRATION_POLICY there): how a push brings in
# what others pushed to the branch meanwhile. ``github-push`` follows the operator's choice;
# Kargo's default, AlwaysRebase, is git-push's only way.
PUSH_INTEGRATION_POLICIES = ("AlwaysRebase", "RebaseOrMerge", "RebaseOrFail", "AlwaysMerge")


@dataclass(frozen=True, slots=True)
class GitSettings:
    """How git steps reach remotes. Credentials come from here, never from manifest text.

    ``env`` is added to every git subprocess (e.g. ``GIT_CONFIG_GLOBAL`` pointing at a file with
    ``url.<base>.insteadOf`` rules or a credential helper, or ``GIT_ASKPASS``). ``credentials``,
    when set, is asked for each remote a step talks to (the project's credential Secrets, the
    GitHub App's installation tokens).
    """

    author_name: str = DEFAULT_AUTHOR_NAME
    author_email: str = DEFAULT_AUTHOR_EMAIL
    env: Mapping[str, str] = field(default_factory=dict)
    # Values that must never appear in messages (tokens); steps pass their text through redact().
    secrets: Sequence[str] = ()
    credentials: GitCredentials | None = field(default=None, repr=False, compare=False)
    # How long one git process may run before it is killed (a clone over a slow link can take
    # a while; a stalled remote must not hold the step forever).
    timeout_seconds: float = 600.0
    # github-push (Kargo's operator settings of the same meaning): one of
    # PUSH_INTEGRATION_POLICIES; the most commits one push replays through GitHub's API; and
    # whether commits Longshoreman did not make are replayed as the App too (verified by
    # GitHub's key, a Co-authored-by trailer keeping their author) instead of with their own
    # author and committer (unverified).
    push_integration_policy: str = "AlwaysRebase"
    github_push_max_revisions: int = 10
    github_push_verify_untrusted: bool = False


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """Limits for the ``http`` and ``http-download`` steps, and which hosts they may reach.

    ``allow_hosts`` and ``deny_hosts`` are host rules (``example.com``, ``*.example.com``, ``*``,
    ``10.1.2.3``, ``10.0.0.0/8``, ``fd00::/8``); see :class:`promoter.steps.http.HostPolicy`.
    Deny wins; a non-empty allow list admits only what it matches; private, loopback,
    link-local and unique-local addresses are refused unless an allow rule admits them.
    """

    default_timeout_seconds: float = 10.0
    max_response_bytes: int = 2 * 1024 * 1024
    # The largest file ``http-download`` writes (Kargo's limit: 100 MiB).
    max_download_bytes: int = 100 * 1024 * 1024
    allow_hosts: tuple[str, ...] = ()
    deny_hosts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StepServices:
    """Ports to the outside world that steps may use. Adapters fill them in at the edge."""

    git: GitSettings = field(default_factory=GitSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    # Where people reach this server (LONGSHOREMAN_PUBLIC_URL): ctx.uiBaseUrl in expressions.
    ui_base_url: str = ""
    # Secrets and ConfigMaps for secret(), configMap() and their shared forms (None: refused),
    # and the namespace the shared forms read.
    cluster_data: ClusterData | None = None
    shared_namespace: str = DEFAULT_SHARED_NAMESPACE
    # OCI registries for oci-download and oci-push (None: refused, as in the local runner).
    oci: OCIRegistry | None = None
    # Extra ports for steps that need them (Argo CD, GitHub, ...), keyed by name.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Where steps report what they ran (git subprocesses); the app puts its metrics here.
    telemetry: Telemetry = NO_TELEMETRY
    # How steps run processes, blocking calls and pauses (promoter.ports.io_port): on the event
    # loop,
    # or in place when the local runner drives a Promotion without one.
    io: IoPort = LOOP_IO


@dataclass(frozen=True, slots=True)
class Replaying:
    """Set on :attr:`StepContext.replay` while a replica rebuilds the work directory.

    A ``LOCAL`` step then reproduces what it did before (git-clone checks out the recorded
    commits, not the branches' new tips; git-commit uses the recorded dates) and must not reach
    anything outside the work directory it has not read before. An ``EXTERNAL`` step's ``verify``
    hook gets the same, to check its recorded effect.
    """

    # The output recorded when the step ran.
    output: Mapping[str, Any]
    # What the step recorded for its replay (StepResult.replay_data); empty if nothing was.
    data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StepContext:
    """Everything a step may know about the Promotion it runs in."""

    project: str
    stage: str
    promotion: str
    alias: str
    actor: str
    work_dir: Path
    # Target Freight of the Promotion (a Kargo Freight object as a dict).
    freight: Mapping[str, Any]
    # Outputs of the steps so far, by alias.
    state: Mapping[str, Any]
    # This step's own output from an earlier attempt (empty the first time). Lets a step that
    # returned Running, or that crashed half-way, pick up where it was.
    previous_output: Mapping[str, Any]
    services: StepServices
    now: datetime
    # When the step first started (for retry.timeout and for steps that wait).
    started_at: datetime | None = None
    # Set while the step is replayed to rebuild the work directory (see Replaying).
    replay: Replaying | None = None
    # The Freight collection (the target first, then what the Stage holds from other origins)
    # and the Stage's requested Warehouses by name (None: not known), for steps that pick
    # artifacts by themselves (kustomize-set-image without images), as Kargo's do.
    freights: Sequence[Mapping[str, Any]] = ()
    warehouses: Mapping[str, Mapping[str, Any] | None] | None = None
    # Secret values the step's expressions read (secret()): never in its messages.
    secret_values: Sequence[str] = ()

    def path(self, relative: str, *, field_name: str = "path") -> Path:
        """Resolve a config path inside the work directory, refusing any way out of it.

        Absolute paths, ``..`` and symlinks that lead outside the work directory are refused:
        a manifest must not be able to read or write the host's files.
        """
        if not isinstance(relative, str) or relative == "":
            raise ConfigRefused(f"config.{field_name} must be a non-empty path")
        if os.path.isabs(relative):
            raise ConfigRefused(
                f"config.{field_name} {relative!r} is absolute; paths are relative to the "
                "Promotion's work directory"
            )
        root = self.work_dir.resolve()
        candidate = (root / relative).resolve()
        if candidate != root and root not in candidate.parents:
            raise ConfigRefused(
                f"config.{field_name} {relative!r} leads outside the Promotion's work directory"
            )
        private = root / PRIVATE_DIR
        if candidate == private or private in candidate.parents:
            # The git steps keep their clone cache (and its config) here; letting a file step
            # write there would let a manifest make git run commands.
            raise ConfigRefused(
                f"config.{field_name} {relative!r} is inside {PRIVATE_DIR}/, which is reserved for "
                "Longshoreman's own files"
            )
        return candidate

    def redact(self, text: str) -> str:
        """Remove every configured secret from a text meant for messages."""
        for secret in (*self.services.git.secrets, *self.secret_values):
            if secret:
                text = text.replace(secret, "***")
        return text


class Step(Protocol):
    """A promotion step kind (``uses: <kind>``).

    Optionally also ``effect: Effect`` (see :func:`effect_of`), ``uses_work_dir: bool`` (see
    :func:`uses_work_dir_of`), and, for an
    ``EXTERNAL`` step, ``async verify(ctx, config) -> None`` (see :data:`VerifyFunction`).
    """

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult: ...


StepFunction = Callable[[StepContext, Mapping[str, Any]], Awaitable[StepResult]]
# ``verify(ctx, config)`` of an EXTERNAL step, called in a replay instead of running it again,
# with ``ctx.replay`` set: check that the recorded effect is there (raise a terminal StepError
# saying what is missing; a non-terminal one when it cannot be checked right now) and bring the
# work directory in line with it (git-push: the worktree at the pushed commit). Never repeats
# the effect.
VerifyFunction = Callable[[StepContext, Mapping[str, Any]], Awaitable[None]]


def effect_of(step: object) -> Effect:
    """A step's declared :class:`Effect`; ``EXTERNAL`` for a step that declares none."""
    effect = getattr(step, "effect", None)
    return effect if isinstance(effect, Effect) else Effect.EXTERNAL


def uses_work_dir_of(step: object) -> bool:
    """Whether a step reads or writes the Promotion's work directory (True unless it says not).

    A Promotion whose steps never do (``compose-output``, ``http``, ``argocd-update``...) has
    nothing to rebuild, and a ``LOCAL`` step that does not is not replayed: its recorded output
    is all it left.
    """
    return getattr(step, "uses_work_dir", True) is not False


def verifier_of(step: object) -> VerifyFunction | None:
    """An ``EXTERNAL`` step's ``verify`` hook, if it has one."""
    if effect_of(step) is not Effect.EXTERNAL:
        return None
    hook = getattr(step, "verify", None)
    return hook if callable(hook) else None


class FunctionStep:
    """Adapts a plain ``async def step(ctx, config)`` function to :class:`Step`."""

    def __init__(
        self,
        fn: StepFunction,
        *,
        effect: Effect = Effect.EXTERNAL,
        verify: VerifyFunction | None = None,
        uses_work_dir: bool = True,
    ) -> None:
        self._fn = fn
        self.effect = effect
        self.verify = verify
        self.uses_work_dir = uses_work_dir

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        return await self._fn(ctx, config)


class Config:
    """Typed reads of a step's rendered config, with errors that name the field.

    Every read error is a :class:`ConfigRefused`: retrying a step with bad config cannot help,
    and the step ends ``Failed``.
    """

    def __init__(
        self,
        kind: builtins.str,
        data: Mapping[builtins.str, Any] | None,
        prefix: builtins.str = "config",
    ) -> None:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ConfigRefused(f"{kind}: {prefix} must be a map, got {type(data).__name__}")
        self.kind = kind
        self.data = data
        self.prefix = prefix

    def _err(self, key: builtins.str, problem: builtins.str) -> ConfigRefused:
        return ConfigRefused(f"{self.kind}: {self.prefix}.{key} {problem}")

    def has(self, key: builtins.str) -> builtins.bool:
        return self.data.get(key) is not None

    def only(self, known: Iterable[builtins.str]) -> None:
        """Refuse fields the step does not know, as Kargo's JSON schemas do."""
        known = set(known)
        unknown = sorted(set(self.data) - known)
        if unknown:
            raise ConfigRefused(
                f"{self.kind}: unknown config field(s) {', '.join(unknown)}; known fields are "
                f"{', '.join(sorted(known))}"
            )

    def str(self, key: builtins.str, default: builtins.str | None = None) -> builtins.str:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self._err(key, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self._err(key, f"must be a string, got {type(value).__name__}")
        return builtins.str(value)

    def opt_str(self, key: builtins.str) -> builtins.str | None:
        return self.str(key, "") or None if self.data.get(key) is not None else None

    def bool(self, key: builtins.str, default: builtins.bool = False) -> builtins.bool:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise self._err(key, f"must be true or false, got {value!r}")

    def int(self, key: builtins.str, default: builtins.int | None = None) -> builtins.int:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self._err(key, "is required")
            return default
        if isinstance(value, bool):
            raise self._err(key, f"must be a whole number, got {value!r}")
        try:
            return builtins.int(value)
        except (TypeError, ValueError):
            raise self._err(key, f"must be a whole number, got {value!r}") from None

    def list(self, key: builtins.str, *, required: builtins.bool = False) -> builtins.list[Any]:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self._err(key, "is required")
            return []
        if not isinstance(value, list):
            raise self._err(key, f"must be a list, got {type(value).__name__}")
        return value

    def map(self, key: builtins.str, *, required: builtins.bool = False) -> dict[builtins.str, Any]:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self._err(key, "is required")
            return {}
        if not isinstance(value, Mapping):
            raise self._err(key, f"must be a map, got {type(value).__name__}")
        return dict(value)

    def items(self, key: builtins.str, *, required: builtins.bool = False) -> builtins.list[Config]:
        """A list of maps, each wrapped so its own fields are named ``key[i].field``."""
        out = []
        for i, item in enumerate(self.list(key, required=required)):
            if not isinstance(item, Mapping):
                raise self._err(f"{key}[{i}]", f"must be a map, got {type(item).__name__}")
            out.append(Config(self.kind, item, f"{self.prefix}.{key}[{i}]"))
        return out


def succeeded(output: Mapping[str, Any] | None = None, message: str = "") -> StepResult:
    return StepResult(StepStatus.SUCCEEDED, message=message, output=dict(output or {}))


def failed(message: str, output: Mapping[str, Any] | None = None) -> StepResult:
    return StepResult(StepStatus.FAILED, message=message, output=dict(output or {}))


def running(
    message: str, retry_after: float, output: Mapping[str, Any] | None = None
) -> StepResult:
    return StepResult(
        StepStatus.RUNNING, message=message, output=dict(output or {}), retry_after=retry_after
    )


def skipped(message: str, output: Mapping[str, Any] | None = None) -> StepResult:
    return StepResult(StepStatus.SKIPPED, message=message, output=dict(output or {}))
