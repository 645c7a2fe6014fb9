"""The Warehouse spec as Kargo defines it (``api/v1alpha1/warehouse_types.go``).

Parsed from the object's plain JSON into frozen dataclasses, with Kargo's defaults applied
(``pkg/subscription/*.ApplySubscriptionDefaults``: images SemVer, strict semvers on, a discovery
limit of 20; git NewestFromBranch, strict semvers on) and Kargo's refusals kept: the plain
``allowTags``/``ignoreTags`` fields fail discovery since Kargo v1.11 (use the ``*Regexes`` lists),
a Digest subscription needs a ``constraint`` (the mutable tag), a bad constraint or regular
expression is an error of the Warehouse, not a silent non-match.

A subscription has exactly one key naming its type, apart from an optional ``name``; a type
other than ``image``, ``chart`` or ``git`` is one of Kargo's generic subscriptions
(``{name: my-sub, s3: {config: {...}, discoveryLimit: 5}}``): opaque ``config`` (an object)
that only the subscriber registered for that type understands, a discovery limit (default 20,
1 to 100), and a name, which is required because it is all that identifies such a
subscription (Kargo's warehouse webhook: names are DNS labels, unique in the Warehouse).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promoter.expressions.regex import Regex
from promoter.urls import repo_url_problem
from promoter.warehouses.patterns import PathMatcher, compile_regexes, path_matcher
from promoter.warehouses.semver import Constraint, ConstraintError

__all__ = [
    "ChartSubscription",
    "GenericSubscription",
    "GitSubscription",
    "ImageSubscription",
    "SpecError",
    "Subscription",
    "WarehouseSpec",
    "parse_duration",
    "parse_spec",
    "repo_url_problems",
    "subscription_name_problems",
]

DEFAULT_INTERVAL = 300.0
DEFAULT_DISCOVERY_LIMIT = 20
MAX_DISCOVERY_LIMIT = 100

IMAGE_STRATEGIES = ("SemVer", "Lexical", "NewestBuild", "Digest")
COMMIT_STRATEGIES = ("NewestFromBranch", "SemVer", "Lexical", "NewestTag")

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


# Kargo's repository URL rules, per subscription type (pkg/subscription/image.go, chart.go and
# git.go; git's is also the CRD's pattern). Go compiles them with RE2, and so do we (the RE2
# port): they judge the URL a Warehouse's author writes, and on Python's backtracking ``re`` the
# chart rule's ``(/.*)*$`` is exponential (``https://h`` + 22 slashes + a newline: 0.2 s, and
# twice as long for every slash more). RE2's ``\w`` and ``\d`` are ASCII, as Go's are.
_IMAGE_REPO_URL = Regex(r"^(\w+([\.-]\w+)*(:[\d]+)?/)?(\w+([\.-]\w+)*)(/\w+([\.-]\w+)*)*$")
_GIT_REPO_URL = Regex(
    r"(?:^(ssh|https?)://(?:([\w-]+)(:(.+))?@)?([\w-]+(?:\.[\w-]+)*)(?::(\d{1,5}))?(/.*)$)"
    r"|(?:^([\w-]+)@([\w+]+(?:\.[\w-]+)*):(/?.*))"
)
_CHART_REPO_URL = Regex(r"^(((https?)|(oci))://)([\w\d\.\-]+)(:[\d]+)?(/.*)*$")


def repo_url_problems(kind: str, url: str) -> list[str]:
    """What Kargo refuses in a ``kind`` (image, git, chart) subscription's ``repoURL``, each a
    sentence for the field; empty when it is fine. An image reference is also refused in
    upper case: the registry API's repository names are lower case, so Docker's reference
    grammar (and every registry) refuses it later, at discovery."""
    if not url:
        return ["must not be empty"]
    if kind == "image":
        problems = []
        if not _IMAGE_REPO_URL.search(url):
            hint = " (no scheme: a registry host and path)" if "://" in url else ""
            problems.append(f"must be a valid image repository URL{hint}")
        if url != url.lower():
            problems.append("must be lower case")
        return problems
    if kind == "git" and not _GIT_REPO_URL.search(url):
        return ["must be a valid Git repository URL"]
    if kind == "chart" and not _CHART_REPO_URL.search(url):
        return ["must be a valid Helm repository URL"]
    return []


class SpecError(ValueError):
    """A Warehouse spec that Kargo would refuse to discover with; the message names the field."""


def parse_duration(text: str) -> float:
    """A Go ``time.Duration`` string (``5m0s``, ``1h30m``, ``90s``) in seconds."""
    text = text.strip()
    if not text:
        raise SpecError("interval: empty duration")
    if text == "0":
        return 0.0
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise SpecError(f"interval: invalid duration {text!r}")
    return total


@dataclass(frozen=True, slots=True)
class _Base:
    repo_url: str
    name: str = ""  # the subscription's optional name (recorded on what it discovers)
    discovery_limit: int = DEFAULT_DISCOVERY_LIMIT
    insecure_skip_tls_verify: bool = False


@dataclass(frozen=True, slots=True)
class ImageSubscription(_Base):
    strategy: str = "SemVer"
    constraint: str = ""
    semver_constraint: Constraint | None = None
    allow_tags: tuple[Regex, ...] = ()
    ignore_tags: tuple[Regex, ...] = ()
    strict_semvers: bool = True
    platform: tuple[str, str, str] | None = None  # os, arch, variant
    cache_by_tag: bool = False

    kind = "image"


@dataclass(frozen=True, slots=True)
class ChartSubscription(_Base):
    chart_name: str = ""
    semver_constraint: Constraint | None = None

    kind = "chart"

    @property
    def is_oci(self) -> bool:
        return self.repo_url.startswith("oci://")


@dataclass(frozen=True, slots=True)
class GitSubscription(_Base):
    branch: str = ""
    strategy: str = "NewestFromBranch"
    semver_constraint: Constraint | None = None
    allow_tags: tuple[Regex, ...] = ()
    ignore_tags: tuple[Regex, ...] = ()
    include_paths: PathMatcher | None = None
    exclude_paths: PathMatcher | None = None
    strict_semvers: bool = True
    expression_filter: str = ""

    kind = "git"

    @property
    def tag_based(self) -> bool:
        return self.strategy != "NewestFromBranch"

    @property
    def filters_paths(self) -> bool:
        return self.include_paths is not None or self.exclude_paths is not None


@dataclass(frozen=True, slots=True)
class GenericSubscription:
    """Kargo's ``Subscription``: the type is the key it was written under."""

    subscription_type: str
    name: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)
    discovery_limit: int = DEFAULT_DISCOVERY_LIMIT

    kind = "generic"


Subscription = ImageSubscription | ChartSubscription | GitSubscription | GenericSubscription


@dataclass(frozen=True, slots=True)
class WarehouseSpec:
    subscriptions: tuple[Subscription, ...]
    interval: float = DEFAULT_INTERVAL
    freight_creation_policy: str = "Automatic"
    freight_creation_expression: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def automatic(self) -> bool:
        return self.freight_creation_policy in ("", "Automatic")


def _limit(value: Any, where: str) -> int:
    if value in (None, 0):
        return DEFAULT_DISCOVERY_LIMIT
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(f"{where}.discoveryLimit: must be an integer")
    if value < 1:
        raise SpecError(f"{where}.discoveryLimit: must be >= 1")
    if value > MAX_DISCOVERY_LIMIT:
        raise SpecError(f"{where}.discoveryLimit: must be <= {MAX_DISCOVERY_LIMIT}")
    return value


def _constraint(text: str, where: str) -> Constraint | None:
    if not text:
        return None
    try:
        return Constraint.parse(text)
    except ConstraintError as err:
        raise SpecError(f"{where}: error parsing semver constraint {text!r}: {err}") from None


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: must be a list of strings")
    return list(value)


def _bool(value: Any, default: bool) -> bool:
    return default if value is None else bool(value)


def _platform(text: str, where: str) -> tuple[str, str, str] | None:
    if not text:
        return None
    tokens = text.split("/", 2)
    if len(tokens) < 2:
        raise SpecError(f"{where}.platform: must be in format <os>/<arch>")
    return tokens[0], tokens[1], tokens[2] if len(tokens) == 3 else ""


def _regexes(body: Mapping[str, Any], where: str) -> tuple[tuple[Regex, ...], tuple[Regex, ...]]:
    if body.get("allowTags"):
        raise SpecError(
            f"{where}: AllowTags is deprecated and unsupported as of v1.11.0; "
            "use AllowTagsRegexes instead"
        )
    if body.get("ignoreTags"):
        raise SpecError(
            f"{where}: IgnoreTags is deprecated and unsupported as of v1.11.0; "
            "use IgnoreTagsRegexes instead"
        )
    try:
        allow = compile_regexes(_strings(body.get("allowTagsRegexes"), where), where)
        ignore = compile_regexes(_strings(body.get("ignoreTagsRegexes"), where), where)
    except ValueError as err:
        raise SpecError(str(err)) from None
    return allow, ignore


def _image(body: Mapping[str, Any], name: str, where: str) -> ImageSubscription:
    repo = str(body.get("repoURL") or "").strip()
    if not repo:
        raise SpecError(f"{where}.repoURL: required")
    if "@" in repo or ":" in repo.rsplit("/", 1)[-1]:
        raise SpecError(f"{where}.repoURL: must not include a tag or digest")
    strategy = str(body.get("imageSelectionStrategy") or "SemVer")
    if strategy not in IMAGE_STRATEGIES:
        raise SpecError(
            f"{where}.imageSelectionStrategy: {strategy!r} is not one of {IMAGE_STRATEGIES}"
        )
    constraint = str(body.get("constraint") or "")
    if strategy == "Digest" and not constraint:
        raise SpecError(f"{where}.constraint: must be set when imageSelectionStrategy is Digest")
    allow, ignore = _regexes(body, where)
    return ImageSubscription(
        repo_url=repo,
        name=name,
        discovery_limit=_limit(body.get("discoveryLimit"), where),
        insecure_skip_tls_verify=bool(body.get("insecureSkipTLSVerify")),
        strategy=strategy,
        constraint=constraint,
        semver_constraint=_constraint(constraint, f"{where}.constraint")
        if strategy == "SemVer"
        else None,
        allow_tags=allow,
        ignore_tags=ignore,
        strict_semvers=_bool(body.get("strictSemvers"), True),
        platform=_platform(str(body.get("platform") or ""), where),
        cache_by_tag=bool(body.get("cacheByTag")),
    )


def _chart(body: Mapping[str, Any], name: str, where: str) -> ChartSubscription:
    repo = str(body.get("repoURL") or "").strip()
    if not repo:
        raise SpecError(f"{where}.repoURL: required")
    chart = str(body.get("name") or "")
    if repo.startswith("oci://"):
        if chart:
            raise SpecError(f"{where}.name: must be empty for an oci:// repository")
    elif repo.startswith(("http://", "https://")):
        if not chart:
            raise SpecError(f"{where}.name: required for a classic chart repository")
    else:
        raise SpecError(f"{where}.repoURL: must start with oci://, https:// or http://")
    constraint = str(body.get("semverConstraint") or "")
    return ChartSubscription(
        repo_url=repo,
        name=name,
        discovery_limit=_limit(body.get("discoveryLimit"), where),
        insecure_skip_tls_verify=bool(body.get("insecureSkipTLSVerify")),
        chart_name=chart,
        semver_constraint=_constraint(constraint, f"{where}.semverConstraint"),
    )


def _git(body: Mapping[str, Any], name: str, where: str) -> GitSubscription:
    repo = str(body.get("repoURL") or "").strip()
    if not repo:
        raise SpecError(f"{where}.repoURL: required")
    # The git steps' rule: no local paths or file:// (another project's mirror is a path).
    problem = repo_url_problem(repo)
    if problem:
        raise SpecError(f"{where}.repoURL: {problem}")
    strategy = str(body.get("commitSelectionStrategy") or "NewestFromBranch")
    if strategy not in COMMIT_STRATEGIES:
        raise SpecError(
            f"{where}.commitSelectionStrategy: {strategy!r} is not one of {COMMIT_STRATEGIES}"
        )
    branch = str(body.get("branch") or "")
    if branch and not re.fullmatch(r"[a-zA-Z0-9]([a-zA-Z0-9._/-]*[a-zA-Z0-9_-])?", branch):
        raise SpecError(f"{where}.branch: must be a valid branch name")
    allow, ignore = _regexes(body, where)
    try:
        include = path_matcher(_strings(body.get("includePaths"), where), f"{where}.includePaths")
        exclude = path_matcher(_strings(body.get("excludePaths"), where), f"{where}.excludePaths")
    except ValueError as err:
        raise SpecError(str(err)) from None
    constraint = str(body.get("semverConstraint") or "")
    return GitSubscription(
        repo_url=repo,
        name=name,
        discovery_limit=_limit(body.get("discoveryLimit"), where),
        insecure_skip_tls_verify=bool(body.get("insecureSkipTLSVerify")),
        branch=branch,
        strategy=strategy,
        semver_constraint=_constraint(constraint, f"{where}.semverConstraint"),
        allow_tags=allow,
        ignore_tags=ignore,
        include_paths=include,
        exclude_paths=exclude,
        strict_semvers=_bool(body.get("strictSemvers"), True),
        expression_filter=str(body.get("expressionFilter") or ""),
    )


def parse_subscription(entry: Any, index: int) -> Subscription:
    """One entry of ``spec.subscriptions``."""
    where = f"spec.subscriptions[{index}]"
    if not isinstance(entry, Mapping):
        raise SpecError(f"{where}: must be an object")
    types = [key for key in entry if key != "name"]
    if len(types) != 1:
        raise SpecError(
            f"{where}: must have exactly one top-level field naming its type, apart from an "
            f"optional 'name' field, but has {len(types)}"
        )
    kind = types[0]
    body = entry[kind]
    if not isinstance(body, Mapping):
        raise SpecError(f"{where}.{kind}: must be an object")
    name = str(entry.get("name") or "")
    if kind == "image":
        return _image(body, name, f"{where}.image")
    if kind == "chart":
        return _chart(body, name, f"{where}.chart")
    if kind == "git":
        return _git(body, name, f"{where}.git")
    return _generic(kind, body, name, f"{where}.{kind}")


def _generic(kind: str, body: Mapping[str, Any], name: str, where: str) -> GenericSubscription:
    # Other keys of the body are ignored, as Go's json.Unmarshal ignores them.
    config = body.get("config")
    if config is not None and not isinstance(config, Mapping):
        raise SpecError(f"{where}.config: must be an object")
    return GenericSubscription(
        subscription_type=kind,
        name=name,
        config=dict(config or {}),
        discovery_limit=_limit(body.get("discoveryLimit"), where),
    )


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_LABEL_PROBLEM = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def subscription_name_problems(entries: Sequence[Any]) -> list[tuple[str, str | None, str]]:
    """``(field, bad value, problem)`` for the subscriptions' names, as Kargo's warehouse webhook
    (``validateSubs``) finds them: a generic subscription needs a name (the value None: a
    required value); a name is a DNS label (``IsDNS1123Label``) used by one subscription only."""
    problems: list[tuple[str, str | None, str]] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            continue
        where = f"spec.subscriptions[{index}].name"
        name = entry.get("name")
        if not name:
            types = [key for key in entry if key != "name"]
            if len(types) == 1 and types[0] not in ("image", "chart", "git"):
                problems.append((where, None, "a name is required for subscriptions of this type"))
            continue
        text = str(name)
        if len(text) > 63:
            problems.append((where, text, "must be no more than 63 characters"))
        if not _DNS_LABEL.fullmatch(text):
            problems.append((where, text, _DNS_LABEL_PROBLEM))
        if text in seen:
            used = f'subscription name "{text}" already used at "{seen[text]}"'
            problems.append((where, text, used))
        else:
            seen[text] = where
    return problems


def parse_spec(spec: Mapping[str, Any]) -> WarehouseSpec:
    """A Warehouse's ``spec``; :class:`SpecError` names the first field Kargo would refuse."""
    entries = spec.get("subscriptions") or []
    if not isinstance(entries, list) or not entries:
        raise SpecError("spec.subscriptions: at least one subscription is required")
    subscriptions = tuple(parse_subscription(e, i) for i, e in enumerate(entries))
    for where, value, problem in subscription_name_problems(entries):
        kind = "Required value" if value is None else f"Invalid value: {value!r}"
        raise SpecError(f"{where}: {kind}: {problem}")
    policy = str(spec.get("freightCreationPolicy") or "Automatic")
    if policy not in ("Automatic", "Manual"):
        raise SpecError(f"spec.freightCreationPolicy: {policy!r} is not Automatic or Manual")
    criteria = spec.get("freightCreationCriteria") or {}
    interval = str(spec.get("interval") or "5m0s")
    return WarehouseSpec(
        subscriptions=subscriptions,
        interval=parse_duration(interval),
        freight_creation_policy=policy,
        freight_creation_expression=str(criteria.get("expression") or "").strip()
        if isinstance(criteria, Mapping)
        else "",
        raw=spec,
    )
