"""The one Settings object: read from the environment once, validated, failing fast.

Nothing else in the product reads ``os.environ``. Every problem names the variable, so an
operator who mistyped a value sees which one at start, not a stack trace later.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from app.receivers.settings import ReceiverSettings, ReceiverSettingsError
from app.ui.settings import RENAMED as UI_RENAMED
from app.ui.settings import UiSettings, UiSettingsError
from handlers.settings import RENAMED as GITHUB_RENAMED
from handlers.settings import GitHubSettings, GitHubSettingsError
from promoter.control.garbage import DEFAULT_MAX_RETAINED, DEFAULT_MIN_DELETION_AGE, Retention
from promoter.control.policies import PolicyError
from promoter.control.projects import ProjectSelection
from promoter.control.shards import NO_SHARD, Shard
from promoter.environment import renamed_in_use, with_new_names
from promoter.errors import InvalidInput
from promoter.ports.clusterdata import DEFAULT_SHARED_NAMESPACE
from promoter.resources.annotations import GROUP, KARGO_GROUP
from promoter.resources.model import parse_duration
from promoter.rules.limits import DEFAULT_LIMITS, Limits
from promoter.steps.base import PUSH_INTEGRATION_POLICIES
from promoter.steps.http import HostRules
from slack.settings import RENAMED as SLACK_RENAMED
from slack.settings import SlackSettings, SlackSettingsError


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


# Read under these names before they took the LONGSHOREMAN_ prefix: still read, and logged at
# start as deprecated (promoter.environment).
RENAMED = (
    "DEFAULT_REQUEUE_SECONDS",
    "EMBEDDED_KUBECONFIG",
    "EMBEDDED_SEED",
    "EMBEDDED_STATE_FILE",
    "HEALTH_CHECK_INTERVAL_SECONDS",
    "HOST",
    "IN_CLUSTER",
    "LEADER_ELECTION",
    "LEASE_DURATION",
    "LEASE_NAME",
    "LEASE_NAMESPACE",
    "LOG_FORMAT",
    "LOG_LEVEL",
    "MAX_CONCURRENT_RECONCILES",
    "MIN_REQUEUE_SECONDS",
    "PORT",
    "RENEW_DEADLINE",
    "RETRY_PERIOD",
    "WAREHOUSE_DISCOVERY",
    "WATCH_NAMESPACE",
    "WORK_DIR",
)


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name}={raw!r} is not a boolean (use true or false)")


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum:g}")
    return value


def _path(env: Mapping[str, str], name: str, *, must_exist: bool = False) -> Path | None:
    raw = env.get(name)
    if not raw:
        return None
    path = Path(raw).expanduser()
    if must_exist and not path.exists():
        raise SettingsError(f"{name}={raw!r}: no such file")
    return path


# A Kubernetes namespace name (RFC 1123 label).
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _namespace(env: Mapping[str, str], name: str, default: str) -> str:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if not _NAMESPACE.match(raw):
        raise SettingsError(
            f"{name}={raw!r} is not a namespace name (lower-case letters, digits and '-', "
            "at most 63)"
        )
    return raw


def _global_credentials(env: Mapping[str, str], shared: str) -> str | None:
    """LONGSHOREMAN_GLOBAL_CREDENTIALS_NAMESPACE: unset -> the shared resources namespace (as
    Kargo 1.9 merged the two); set empty -> no global credentials at all."""
    name = "LONGSHOREMAN_GLOBAL_CREDENTIALS_NAMESPACE"
    if name not in env:
        return shared
    return _namespace(env, name, "") or None


def _registry_auth(env: Mapping[str, str], name: str) -> Path | None:
    path = _path(env, name, must_exist=True)
    if path is not None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SettingsError(
                f"{name}: {path} is not a readable docker config.json ({type(e).__name__})"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("auths"), dict):
            raise SettingsError(f"{name}: {path} has no 'auths' map")
    return path


def _duration(env: Mapping[str, str], name: str, default: float) -> float:
    """A Go duration (``336h``, ``90m``, ``1h30m``, ``0s``) in seconds, as Kargo reads them."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse_duration(raw, field_name=name)
    except InvalidInput:
        raise SettingsError(f"{name}={raw!r} is not a duration such as 30s, 90m or 336h") from None


def _gc_interval(env: Mapping[str, str], default: float) -> float:
    seconds = _duration(env, "LONGSHOREMAN_GC_INTERVAL", default)
    if seconds <= 0:
        raise SettingsError(
            f"LONGSHOREMAN_GC_INTERVAL={env['LONGSHOREMAN_GC_INTERVAL']!r} must be more than 0 "
            "(LONGSHOREMAN_GC_ENABLED=false switches the collector off)"
        )
    return seconds


# A label value (the shard's name goes into the kargo.akuity.io/shard label).
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _shard(env: Mapping[str, str]) -> Shard:
    name = env.get("LONGSHOREMAN_SHARD_NAME") or ""
    if not _LABEL_VALUE.match(name):
        raise SettingsError(
            f"LONGSHOREMAN_SHARD_NAME={name!r} is not a label value (letters, digits, '-', '_' "
            "and '.', at most 63, starting and ending with a letter or digit)"
        )
    return Shard(name, _bool(env, "LONGSHOREMAN_IS_DEFAULT_CONTROLLER", False))


def _hosts(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    entries = tuple(e.strip() for e in (env.get(name) or "").split(",") if e.strip())
    try:
        HostRules.parse(entries)
    except ValueError as e:
        raise SettingsError(f"{name}: {e}") from None
    return entries


def _subscribers(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``LONGSHOREMAN_SUBSCRIBERS``: ``type=url`` pairs, comma-separated (a generic
    subscription type and the HTTP service that discovers it)."""
    name = "LONGSHOREMAN_SUBSCRIBERS"
    pairs: dict[str, str] = {}
    for entry in (env.get(name) or "").split(","):
        if not entry.strip():
            continue
        kind, sep, url = (part.strip() for part in entry.partition("="))
        if not sep or not kind or not url.startswith(("http://", "https://")):
            raise SettingsError(
                f"{name}: {entry.strip()!r} is not <subscription type>=<http(s) URL>"
            )
        if kind in ("image", "chart", "git", "name"):
            raise SettingsError(f"{name}: {kind!r} is not a generic subscription type")
        if kind in pairs:
            raise SettingsError(f"{name}: {kind!r} is given twice")
        pairs[kind] = url
    return tuple(pairs.items())


def _api_group(env: Mapping[str, str]) -> str:
    group = env.get("LONGSHOREMAN_API_GROUP") or GROUP
    if group not in (GROUP, KARGO_GROUP):
        raise SettingsError(f"LONGSHOREMAN_API_GROUP={group!r} must be {GROUP} or {KARGO_GROUP}")
    return group


def _projects(env: Mapping[str, str]) -> ProjectSelection:
    try:
        return ProjectSelection.parse(
            env.get("LONGSHOREMAN_PROJECTS") or "", env.get("LONGSHOREMAN_PROJECT_SELECTOR") or ""
        )
    except PolicyError as e:
        raise SettingsError(str(e)) from None


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the server process is configured with."""

    host: str = "127.0.0.1"
    port: int = 8080
    # The admission webhooks' HTTPS listener (the API server calls webhooks over TLS only):
    # a directory holding tls.crt and tls.key (cert-manager's or the operator's Secret).
    webhook_cert_dir: Path | None = None
    webhook_port: int = 9443
    # Cluster access: a kubeconfig, the in-cluster service account, or (neither) the embedded
    # API server on 127.0.0.1.
    kubeconfig: Path | None = None
    in_cluster: bool = False
    # The API group the cluster's CRDs are in: ours, or Kargo's (deploy/kargo-group installs
    # them there). Every read, watch and write of our kinds goes to it. The embedded cluster
    # serves both, so there it changes nothing a user sees.
    api_group: str = GROUP
    embedded_kubeconfig: Path | None = None
    embedded_state_file: Path | None = None
    # Load these manifests into the embedded cluster at start (the examples by default).
    embedded_seed: tuple[Path, ...] = ()
    # Only watch this namespace (empty: all namespaces).
    watch_namespace: str | None = None
    # Which projects are served: every one, a list of names, or a label selector over the
    # namespaces' labels (promoter.control.projects).
    projects: ProjectSelection = field(default_factory=ProjectSelection)
    # Where sharedSecret() and sharedConfigMap() read (Kargo's SHARED_RESOURCES_NAMESPACE).
    shared_resources_namespace: str = DEFAULT_SHARED_NAMESPACE
    # Repository credentials every project may use, after its own (Kargo's
    # --global-credentials-namespace; since Kargo 1.9 its shared resources namespace, which is
    # the default here too). Empty: none.
    global_credentials_namespace: str | None = DEFAULT_SHARED_NAMESPACE
    # Kargo's ALLOW_CREDENTIALS_OVER_HTTP: credential Secrets are never used for http:// URLs
    # unless this is on.
    allow_credentials_over_http: bool = False
    leader_election: bool = False
    # Warehouses discover artifacts (poll their registries and repositories, and on refresh).
    # Off: Freight comes only from kubectl and chat; `--demo` turns it off so nothing leaves
    # the machine.
    warehouse_discovery: bool = True
    lease_namespace: str = "default"
    lease_name: str = "longshoreman-controller"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    max_concurrent_reconciles: int = 16
    # Who Longshoreman itself writes as: the mutating admission webhook leaves its writes be
    # (it records the real actor itself) and stamps everyone else's as Kargo does.
    control_plane_users: tuple[str, ...] = ("system:serviceaccount:longshoreman:longshoreman",)
    # Requeue a Running step after this long when nothing wakes it earlier (Kargo: 5 minutes).
    default_requeue: float = 300.0
    min_requeue: float = 10.0
    health_check_interval: float = 30.0
    work_dir: Path = field(default_factory=lambda: Path("/tmp/longshoreman-work"))
    git_config: Path | None = None
    git_author_name: str = "Longshoreman"
    git_author_email: str = "longshoreman@localhost"
    # github-push (Kargo's GIT_PUSH_INTEGRATION_POLICY, GITHUB_PUSH_MAX_REVISIONS and
    # GITHUB_PUSH_VERIFY_UNTRUSTED_COMMITS, with our prefix): see promoter.steps.github_push.
    git_push_integration_policy: str = "AlwaysRebase"
    github_push_max_revisions: int = 10
    github_push_verify_untrusted: bool = False
    log_level: str = "INFO"
    log_format: str = "text"
    # Hosts the http step may / may not reach (see promoter.steps.http.HostPolicy); private,
    # loopback and link-local addresses are refused unless allowed here.
    http_allow: tuple[str, ...] = ()
    http_deny: tuple[str, ...] = ()
    # The largest body http-download writes (Kargo: 100 MiB).
    http_max_download_bytes: int = 100 * 1024 * 1024
    # What one Promotion may ask for: steps after inflation, bytes of JSON, and whether one may
    # bring steps of its own instead of its Stage's template (promoter/rules/limits.py).
    limits: Limits = DEFAULT_LIMITS
    # The chat front ends: each on when its credentials are set.
    github: GitHubSettings | None = None
    slack: SlackSettings | None = None
    # The status pages (app/ui): public URL, access control.
    ui: UiSettings = field(default_factory=UiSettings)
    # A docker config.json with registry credentials (auths by host): Warehouse discovery,
    # oci-download and oci-push. Checked at start, re-read when the Secret rotates.
    registry_auth_file: Path | None = None
    # The registry webhook receivers (app/receivers): each on when its secret is set.
    receivers: ReceiverSettings = field(default_factory=ReceiverSettings)
    # The garbage collector (Kargo's pkg/garbage, promoter.control.garbage): what it keeps, and
    # how often the leader runs it (Kargo's chart: hourly). Off: nothing is ever deleted.
    gc_enabled: bool = True
    gc_interval: float = 3600.0
    retention: Retention = field(default_factory=Retention)
    # This controller's shard (Kargo's SHARD_NAME and IS_DEFAULT_CONTROLLER): which Stages,
    # Warehouses and Promotions it caches and runs, and whose Lease it elects its leader with.
    shard: Shard = NO_SHARD
    # Argo CD's cluster when it is not the control plane's (a shard running next to it): the
    # Applications are read and written there, everything else in the control plane.
    argocd_kubeconfig: Path | None = None
    # Generic Warehouse subscriptions: the HTTP service discovering each type
    # (app/controller/warehouses/subscribers.py), and the bearer token sent to them.
    subscribers: tuple[tuple[str, str], ...] = ()
    subscriber_token: str | None = field(default=None, repr=False)
    # Old names still set, each with its new name: read, and logged once logging is set up (the
    # receivers' names carried the prefix from the start, so they have none).
    renamed: tuple[tuple[str, str], ...] = ()

    @property
    def embedded(self) -> bool:
        return self.kubeconfig is None and not self.in_cluster

    def secrets(self) -> tuple[str, ...]:
        """Configured values that must never appear in logs (see app.logs)."""
        values: list[str | None] = []
        if self.github is not None:
            values += [self.github.webhook_secret, self.github.private_key]
        if self.slack is not None:
            values += [self.slack.bot_token, self.slack.signing_secret]
        values += [self.ui.github_client_secret, self.ui.session_secret]
        values += list(self.receivers.secrets.values())
        values += list(self.receivers.path_tokens().values())
        values.append(self.subscriber_token)
        return tuple(v for v in values if v)

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        given = os.environ if env is None else env
        every_renamed = RENAMED + GITHUB_RENAMED + SLACK_RENAMED + UI_RENAMED
        env = with_new_names(given, every_renamed)
        defaults = cls()
        kubeconfig = _path(env, "KUBECONFIG", must_exist=True)
        in_cluster = _bool(env, "LONGSHOREMAN_IN_CLUSTER", False)
        if kubeconfig and in_cluster:
            raise SettingsError(
                "KUBECONFIG and LONGSHOREMAN_IN_CLUSTER=true are both set: choose one"
            )
        log_level = env.get("LONGSHOREMAN_LOG_LEVEL", defaults.log_level).upper()
        if log_level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise SettingsError(
                f"LONGSHOREMAN_LOG_LEVEL={log_level!r} must be DEBUG, INFO, WARNING or ERROR"
            )
        log_format = env.get("LONGSHOREMAN_LOG_FORMAT", defaults.log_format).lower()
        if log_format not in ("text", "json"):
            raise SettingsError(f"LONGSHOREMAN_LOG_FORMAT={log_format!r} must be text or json")
        policy = env.get(
            "LONGSHOREMAN_GIT_PUSH_INTEGRATION_POLICY", defaults.git_push_integration_policy
        )
        if policy not in PUSH_INTEGRATION_POLICIES:
            raise SettingsError(
                f"LONGSHOREMAN_GIT_PUSH_INTEGRATION_POLICY={policy!r} must be one of "
                f"{', '.join(PUSH_INTEGRATION_POLICIES)}"
            )
        lease_duration = _float(
            env, "LONGSHOREMAN_LEASE_DURATION", defaults.lease_duration, minimum=1.0
        )
        renew_deadline = _float(
            env, "LONGSHOREMAN_RENEW_DEADLINE", defaults.renew_deadline, minimum=0.5
        )
        retry_period = _float(env, "LONGSHOREMAN_RETRY_PERIOD", defaults.retry_period, minimum=0.1)
        if not retry_period < renew_deadline < lease_duration:
            raise SettingsError(
                "LONGSHOREMAN_RETRY_PERIOD < LONGSHOREMAN_RENEW_DEADLINE < "
                "LONGSHOREMAN_LEASE_DURATION must hold "
                f"(got {retry_period:g} < {renew_deadline:g} < {lease_duration:g})"
            )
        seed = env.get("LONGSHOREMAN_EMBEDDED_SEED")
        shared = _namespace(
            env, "LONGSHOREMAN_SHARED_RESOURCES_NAMESPACE", DEFAULT_SHARED_NAMESPACE
        )
        try:
            github = GitHubSettings.from_env(env)
            slack = SlackSettings.optional_from_env(env)
            ui = UiSettings.from_env(env, github_api_url=github.api_url, github_app=github.enabled)
            receivers = ReceiverSettings.from_env(env)
        except (
            GitHubSettingsError,
            SlackSettingsError,
            UiSettingsError,
            ReceiverSettingsError,
        ) as e:
            raise SettingsError(str(e)) from None
        # With a public URL, check runs and Slack messages link to the Promotion's status page
        # (an explicit LONGSHOREMAN_GITHUB_PROMOTION_URL still wins).
        if ui.promotion_url_template and github.promotion_url is None:
            github = replace(github, promotion_url=ui.promotion_url_template)
        if ui.promotion_url_template and slack is not None and slack.promotion_url is None:
            slack = replace(slack, promotion_url=ui.promotion_url_template)
        # And to the Freight's page.
        github = replace(github, freight_url=ui.freight_url_template)
        if slack is not None:
            slack = replace(slack, freight_url=ui.freight_url_template)
        return cls(
            github=github if github.enabled else None,
            slack=slack,
            ui=ui,
            receivers=receivers,
            renamed=tuple(renamed_in_use(given, every_renamed)),
            host=env.get("LONGSHOREMAN_HOST", defaults.host),
            port=_int(env, "LONGSHOREMAN_PORT", defaults.port, minimum=0),
            webhook_cert_dir=_path(env, "LONGSHOREMAN_WEBHOOK_CERT_DIR", must_exist=True),
            webhook_port=_int(env, "LONGSHOREMAN_WEBHOOK_PORT", defaults.webhook_port, minimum=0),
            kubeconfig=kubeconfig,
            in_cluster=in_cluster,
            api_group=_api_group(env),
            embedded_kubeconfig=_path(env, "LONGSHOREMAN_EMBEDDED_KUBECONFIG"),
            embedded_state_file=_path(env, "LONGSHOREMAN_EMBEDDED_STATE_FILE"),
            embedded_seed=tuple(Path(p) for p in seed.split(os.pathsep) if p) if seed else (),
            watch_namespace=env.get("LONGSHOREMAN_WATCH_NAMESPACE") or None,
            projects=_projects(env),
            shared_resources_namespace=shared,
            global_credentials_namespace=_global_credentials(env, shared),
            allow_credentials_over_http=_bool(
                env, "LONGSHOREMAN_ALLOW_CREDENTIALS_OVER_HTTP", False
            ),
            leader_election=_bool(env, "LONGSHOREMAN_LEADER_ELECTION", defaults.leader_election),
            warehouse_discovery=_bool(
                env, "LONGSHOREMAN_WAREHOUSE_DISCOVERY", defaults.warehouse_discovery
            ),
            lease_namespace=env.get("LONGSHOREMAN_LEASE_NAMESPACE", defaults.lease_namespace),
            lease_name=env.get("LONGSHOREMAN_LEASE_NAME", defaults.lease_name),
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            identity=env.get("POD_NAME") or defaults.identity,
            control_plane_users=tuple(
                u.strip()
                for u in env.get(
                    "LONGSHOREMAN_CONTROL_PLANE_USERS", ",".join(defaults.control_plane_users)
                ).split(",")
                if u.strip()
            ),
            max_concurrent_reconciles=_int(
                env,
                "LONGSHOREMAN_MAX_CONCURRENT_RECONCILES",
                defaults.max_concurrent_reconciles,
                minimum=1,
            ),
            default_requeue=_float(
                env, "LONGSHOREMAN_DEFAULT_REQUEUE_SECONDS", defaults.default_requeue, minimum=1
            ),
            min_requeue=_float(
                env, "LONGSHOREMAN_MIN_REQUEUE_SECONDS", defaults.min_requeue, minimum=0
            ),
            health_check_interval=_float(
                env,
                "LONGSHOREMAN_HEALTH_CHECK_INTERVAL_SECONDS",
                defaults.health_check_interval,
                minimum=1,
            ),
            work_dir=_path(env, "LONGSHOREMAN_WORK_DIR") or defaults.work_dir,
            git_config=_path(env, "LONGSHOREMAN_GIT_CONFIG", must_exist=True),
            registry_auth_file=_registry_auth(env, "LONGSHOREMAN_REGISTRY_AUTH_FILE"),
            git_author_name=env.get("GIT_AUTHOR_NAME", defaults.git_author_name),
            git_author_email=env.get("GIT_AUTHOR_EMAIL", defaults.git_author_email),
            git_push_integration_policy=policy,
            github_push_max_revisions=_int(
                env,
                "LONGSHOREMAN_GITHUB_PUSH_MAX_REVISIONS",
                defaults.github_push_max_revisions,
                minimum=1,
            ),
            github_push_verify_untrusted=_bool(
                env,
                "LONGSHOREMAN_GITHUB_PUSH_VERIFY_UNTRUSTED_COMMITS",
                defaults.github_push_verify_untrusted,
            ),
            log_level=log_level,
            log_format=log_format,
            gc_enabled=_bool(env, "LONGSHOREMAN_GC_ENABLED", defaults.gc_enabled),
            gc_interval=_gc_interval(env, defaults.gc_interval),
            retention=Retention(
                max_promotions=_int(
                    env, "LONGSHOREMAN_MAX_RETAINED_PROMOTIONS", DEFAULT_MAX_RETAINED
                ),
                min_promotion_age=timedelta(
                    seconds=_duration(
                        env,
                        "LONGSHOREMAN_MIN_PROMOTION_DELETION_AGE",
                        DEFAULT_MIN_DELETION_AGE.total_seconds(),
                    )
                ),
                max_freight=_int(env, "LONGSHOREMAN_MAX_RETAINED_FREIGHT", DEFAULT_MAX_RETAINED),
                min_freight_age=timedelta(
                    seconds=_duration(
                        env,
                        "LONGSHOREMAN_MIN_FREIGHT_DELETION_AGE",
                        DEFAULT_MIN_DELETION_AGE.total_seconds(),
                    )
                ),
            ),
            shard=_shard(env),
            argocd_kubeconfig=_path(env, "LONGSHOREMAN_ARGOCD_KUBECONFIG", must_exist=True),
            subscribers=_subscribers(env),
            subscriber_token=env.get("LONGSHOREMAN_SUBSCRIBER_TOKEN") or None,
            http_allow=_hosts(env, "LONGSHOREMAN_HTTP_ALLOW"),
            http_deny=_hosts(env, "LONGSHOREMAN_HTTP_DENY"),
            http_max_download_bytes=_int(
                env,
                "LONGSHOREMAN_HTTP_MAX_DOWNLOAD_BYTES",
                defaults.http_max_download_bytes,
                minimum=1,
            ),
            limits=Limits(
                max_steps=_int(
                    env,
                    "LONGSHOREMAN_MAX_PROMOTION_STEPS",
                    defaults.limits.max_steps,
                    minimum=1,
                ),
                max_object_bytes=_int(
                    env,
                    "LONGSHOREMAN_MAX_OBJECT_BYTES",
                    defaults.limits.max_object_bytes,
                    minimum=1024,
                ),
                allow_own_steps=_bool(
                    env, "LONGSHOREMAN_ALLOW_PROMOTION_STEPS", defaults.limits.allow_own_steps
                ),
            ),
        )
