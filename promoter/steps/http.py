"""The ``http`` step: make one HTTP/S request and judge the response with expressions.

Follows Kargo's ``http`` step (docs/.../30-promotion-steps/http.md and its config schema
``pkg/promotion/runner/builtin/schemas/http-config.json``):

- ``failureExpression`` true: the step fails for good (``Failed``); ``errorExpression`` may add a
  message taken from the response. Failure wins when both expressions are true.
- ``successExpression`` true: the step succeeds and ``outputs`` are extracted.
- neither expression defined: a 2xx status succeeds, any other status is a failure that is
  retried (we raise a non-terminal :class:`StepError`, counted against ``retry.errorThreshold``).
- anything else: ``Running``, asked again after ``pollInterval`` (default 30s, at least 10s).

``response`` in expressions is ``{status, headers, header, body}``: ``headers`` maps each
canonical header name (``Content-Type``) to the list of its values, as Go's ``http.Header`` does;
``header(name)`` returns the first value of a header in any case, or ``""``; ``body`` is the
parsed JSON or YAML, the text for ``text/plain``, and ``{}`` when empty or not understood.

This module is an edge adapter: it is the only place in ``promoter/`` that imports aiohttp, and it
turns every aiohttp exception into a :class:`StepError`. Deciding (config parsing, response
parsing, the outcome) is done by pure functions; :func:`_send` is the one function doing I/O.
Messages never contain request header or query values: they often carry tokens.

Which hosts may be reached is the operator's :class:`HostPolicy` (``HttpSettings.allow_hosts``
and ``deny_hosts``): by default any public host, and no private, loopback, link-local (cloud
metadata) or unique-local address. It is enforced where connections are made (a resolver that
drops refused addresses and a socket factory), so names resolving to refused addresses, DNS
rebinding and redirects are all covered. The ``http-download`` step
(:mod:`promoter.steps.download`) sends its requests through :func:`download` here, so it gets the
same policy, config checks and redaction.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import ipaddress
import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import aiohttp
import yaml
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError, evaluate_expression
from promoter.expressions.errors import ExpressionSyntaxError
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    HttpSettings,
    Step,
    StepContext,
    StepResult,
    failed,
    running,
    succeeded,
)

KIND = "http"

# Kargo's schema only allows these methods (``^(DELETE|GET|HEAD|PATCH|POST|PUT)$``).
_METHODS = frozenset({"DELETE", "GET", "HEAD", "PATCH", "POST", "PUT"})
_CONTENT_TYPES = frozenset({"application/json", "application/yaml", "text/plain"})
_YAML_TYPES = frozenset({"application/yaml", "text/yaml", "application/x-yaml"})
_KNOWN_KEYS = frozenset(
    {
        "method",
        "url",
        "headers",
        "queryParams",
        "body",
        "insecureSkipTLSVerify",
        "proxy",
        "timeout",
        "pollInterval",
        "responseContentType",
        "successExpression",
        "failureExpression",
        "errorExpression",
        "outputs",
    }
)

DEFAULT_POLL_INTERVAL_SECONDS = 30.0
# Kargo enforces this lower bound so a misconfigured step cannot hammer a service.
MIN_POLL_INTERVAL_SECONDS = 10.0

# Secrets shorter than this are not redacted: replacing "1" or "on" everywhere would garble
# messages, and such values protect nothing.
_MIN_SECRET_LENGTH = 4

# More values than a 2 MiB response could spell out without YAML aliases.
_MAX_YAML_VALUES = 1_000_000

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    # Go accepts both the micro sign and the Greek mu.
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


@dataclass(frozen=True, slots=True)
class HttpRequestSpec:
    """A validated request: what to send and how to judge the answer."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    query_params: tuple[tuple[str, str], ...]
    body: str
    insecure_skip_tls_verify: bool
    proxy: str | None
    timeout_seconds: float
    poll_interval_seconds: float
    response_content_type: str | None
    success_expression: str | None
    failure_expression: str | None
    error_expression: str | None
    outputs: tuple[tuple[str, str], ...]

    def secrets(self) -> list[str]:
        """Values that must never appear in a message: header and query values, URL password."""
        found: list[str] = []
        for _, value in self.headers:
            found.append(value)
            # "Bearer <token>": also hide the token alone, should a library quote only it.
            found.extend(part for part in value.split() if len(part) >= 8)
        found.extend(value for _, value in self.query_params)
        parts = urlsplit(self.url)
        if parts.password:
            found.append(parts.password)
        found.extend(value for _, value in parse_qsl(parts.query))
        return found

    def safe_url(self) -> str:
        """The URL without credentials or query string, fit for messages."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """What came back: status, headers in arrival order, and the body bytes."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def parse_duration(text: str) -> float:
    """Parse a Go duration string (``"10s"``, ``"1m30s"``, ``"1.5h"``, ``"300ms"``) to seconds.

    Kargo reads durations with Go's ``time.ParseDuration``; this accepts the same non-negative
    forms, so a manifest written for Kargo means the same here.
    """
    value = text.strip()
    if value == "0":
        return 0.0
    if not value:
        raise ValueError("empty duration")
    total = 0.0
    position = 0
    while position < len(value):
        match = _DURATION_PART.match(value, position)
        if match is None:
            raise ValueError(f"invalid duration {text!r}")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    return total


def parse_config(config: Mapping[str, Any], default_timeout_seconds: float) -> HttpRequestSpec:
    """Validate the rendered config like Kargo's JSON schema does; every problem is terminal."""
    cfg = Config(KIND, config)
    cfg.only(_KNOWN_KEYS)

    method = cfg.str("method", "GET")
    if method not in _METHODS:
        raise ConfigRefused(
            f"{KIND}: config.method {method!r} is not one of {', '.join(sorted(_METHODS))}"
        )
    url = cfg.str("url")
    check_http_url(url, "url")

    headers = tuple(name_value_pairs(cfg, "headers"))
    for name, value in headers:
        # aiohttp would refuse these too, but with a message quoting the value (a token, maybe).
        if any(c in name or c in value for c in "\r\n\0"):
            raise ConfigRefused(
                f"{KIND}: config.headers {name!r} contains a line break or NUL character"
            )
    query_params = tuple(name_value_pairs(cfg, "queryParams"))

    proxy = cfg.opt_str("proxy")
    if proxy is not None:
        check_http_url(proxy, "proxy")

    timeout = duration(cfg, "timeout", default_timeout_seconds)
    poll_interval = max(
        duration(cfg, "pollInterval", DEFAULT_POLL_INTERVAL_SECONDS), MIN_POLL_INTERVAL_SECONDS
    )

    content_type = cfg.opt_str("responseContentType")
    if content_type is not None and content_type not in _CONTENT_TYPES:
        raise ConfigRefused(
            f"{KIND}: config.responseContentType {content_type!r} is not one of "
            f"{', '.join(sorted(_CONTENT_TYPES))}"
        )

    outputs: list[tuple[str, str]] = []
    for item in cfg.items("outputs"):
        name = item.str("name")
        expression = item.str("fromExpression")
        if not name or not expression:
            raise StepError(
                f"{KIND}: {item.prefix} needs a non-empty name and fromExpression", terminal=True
            )
        outputs.append((name, expression))

    return HttpRequestSpec(
        method=method,
        url=url,
        headers=headers,
        query_params=query_params,
        body=cfg.str("body", ""),
        insecure_skip_tls_verify=cfg.bool("insecureSkipTLSVerify"),
        proxy=proxy,
        timeout_seconds=timeout,
        poll_interval_seconds=poll_interval,
        response_content_type=content_type,
        success_expression=cfg.opt_str("successExpression"),
        failure_expression=cfg.opt_str("failureExpression"),
        error_expression=cfg.opt_str("errorExpression"),
        outputs=tuple(outputs),
    )


def check_http_url(url: str, field_name: str, kind: str = KIND) -> None:
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        # Never echo the URL itself: it may hold credentials or a token in its query.
        raise ConfigRefused(
            f"{kind}: config.{field_name} must be an absolute http:// or https:// URL"
        )


def name_value_pairs(cfg: Config, key: str) -> list[tuple[str, str]]:
    pairs = []
    for item in cfg.items(key):
        name = item.str("name")
        value = item.str("value")
        # Kargo's schema requires both to be non-empty (minLength: 1).
        if not name or not value:
            raise StepError(
                f"{cfg.kind}: {item.prefix} needs a non-empty name and value", terminal=True
            )
        pairs.append((name, value))
    return pairs


def duration(cfg: Config, key: str, default: float) -> float:
    text = cfg.opt_str(key)
    if text is None:
        return default
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise ConfigRefused(
            f"{cfg.kind}: config.{key} {text!r} is not a duration such as 30s, 1m or 1h30m"
        ) from None
    # Go's http.Client reads a zero timeout as "wait forever"; a promotion must not hang.
    if seconds <= 0:
        raise ConfigRefused(f"{cfg.kind}: config.{key} must be longer than zero")
    return seconds


def canonical_header_name(name: str) -> str:
    """Go's ``textproto.CanonicalMIMEHeaderKey``: ``content-type`` -> ``Content-Type``.

    Names with characters outside the header token set are left as they are, like Go does.
    """
    if not name or any(not (c.isascii() and (c.isalnum() or c in "!#$%&'*+-.^_`|~")) for c in name):
        return name
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _charset(content_type: str) -> str:
    for param in content_type.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return "utf-8"


class _JsonLikeYamlLoader(yaml.SafeLoader):
    """YAML loader that keeps timestamps as strings.

    Kargo parses YAML with sigs.k8s.io/yaml, which goes through JSON: ``2024-01-01`` stays a
    string there. PyYAML's safe loader would make it a ``datetime``, which expressions compare
    differently and which cannot be stored in a Promotion's status.
    """


_JsonLikeYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _json_like(value: Any, budget: list[int]) -> Any:
    """Copy a parsed YAML value into JSON's shape: string keys, lists, no shared nodes.

    YAML aliases let a small document stand for a huge one ("billion laughs"); copying with a
    budget refuses that instead of expanding it here, in expressions, or in the status.
    """
    budget[0] -= 1
    if budget[0] < 0:
        raise StepError(f"{KIND}: YAML response expands to more than {_MAX_YAML_VALUES} values")
    if isinstance(value, dict):
        return {
            key if isinstance(key, str) else json.dumps(key, default=str): _json_like(item, budget)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple | set):
        return [_json_like(item, budget) for item in value]
    return value


def parse_body(body: bytes, content_type: str) -> Any:
    """Turn a response body into the ``response.body`` value, as Kargo does.

    ``content_type`` is the forced ``responseContentType`` or the response's ``Content-Type``.
    """
    if not body:
        return {}
    media_type = _media_type(content_type)
    if media_type in _YAML_TYPES:
        try:
            # Like Go's yaml.Unmarshal, only the first document counts.
            document = next(iter(yaml.load_all(body, Loader=_JsonLikeYamlLoader)), None)
        except yaml.YAMLError as exc:
            raise StepError(f"{KIND}: failed to parse YAML response: {exc}") from None
        return _json_like(document, [_MAX_YAML_VALUES])
    if media_type == "text/plain":
        return body.decode(_charset(content_type), errors="replace")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        if media_type == "application/json":
            raise StepError(f"{KIND}: failed to parse JSON response: {exc}") from None
        # Unknown content types are parsed as JSON when they are JSON, and ignored otherwise.
        return {}


def build_response_variables(
    response: HttpResponse, forced_content_type: str | None
) -> dict[str, Any]:
    """The ``response`` object that expressions see."""
    headers: dict[str, list[str]] = {}
    for name, value in response.headers:
        headers.setdefault(canonical_header_name(name), []).append(value)

    def header(name: str) -> str:
        values = headers.get(canonical_header_name(name))
        return values[0] if values else ""

    content_type = forced_content_type or header("Content-Type")
    return {
        "status": response.status,
        "headers": headers,
        "header": header,
        "body": parse_body(response.body, content_type),
    }


def _evaluate(source: str, variables: Mapping[str, Any], where: str) -> Any:
    try:
        return evaluate_expression(source, variables, where=where)
    except ExpressionSyntaxError as exc:
        # Kargo: an expression that does not compile is a config error; retrying cannot help.
        raise StepError(f"{KIND}: {exc}", terminal=True) from None
    except ExpressionError as exc:
        # Kargo: an evaluation error (the response is not shaped as expected) is retried.
        raise StepError(f"{KIND}: {exc}") from None


def _evaluate_bool(source: str | None, variables: Mapping[str, Any], where: str) -> bool | None:
    if source is None:
        return None
    value = _evaluate(source, variables, where)
    if not isinstance(value, bool):
        raise StepError(
            f"{KIND}: {where} {source!r} did not evaluate to a boolean (got {type(value).__name__})"
        )
    return value


def error_message(source: str | None, variables: Mapping[str, Any], kind: str = KIND) -> str:
    """Kargo's ``errorExpression``: best effort, any evaluation problem means "no message"."""
    if source is None:
        return ""
    try:
        value = evaluate_expression(source, variables, where="config.errorExpression")
    except ExpressionSyntaxError as exc:
        raise StepError(f"{kind}: {exc}", terminal=True) from None
    except ExpressionError:
        return ""
    return value if isinstance(value, str) else ""


def _outputs(spec: HttpRequestSpec, variables: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: _evaluate(expression, variables, f"config.outputs[{name!r}].fromExpression")
        for name, expression in spec.outputs
    }


def decide(spec: HttpRequestSpec, response: HttpResponse) -> StepResult:
    """Judge a response against the spec's expressions (pure; raises :class:`StepError`)."""
    variables = {"response": build_response_variables(response, spec.response_content_type)}
    success = _evaluate_bool(spec.success_expression, variables, "config.successExpression")
    failure = _evaluate_bool(spec.failure_expression, variables, "config.failureExpression")
    status = response.status

    if failure:
        detail = error_message(spec.error_expression, variables)
        message = f"HTTP ({status}) response met failure criteria"
        return failed(f"{message}: {json.dumps(detail)}" if detail else message)
    if success:
        return succeeded(
            _outputs(spec, variables), f"HTTP ({status}) response met success criteria"
        )
    if success is None and failure is None:
        if 200 <= status < 300:
            return succeeded(_outputs(spec, variables), f"HTTP ({status}) response")
        # Kargo: without criteria a non-2xx status "fails but will be retried".
        raise StepError(
            f"{KIND}: HTTP ({status}) response is not a success (2xx) and no successExpression "
            "or failureExpression is set"
        )
    return running(
        f"HTTP ({status}) response met neither success nor failure criteria; asking again in "
        f"{spec.poll_interval_seconds:g}s",
        retry_after=spec.poll_interval_seconds,
    )


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# AWS's IPv6 instance metadata endpoint; the IPv4 one (169.254.169.254) is link-local.
_METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254")})
_LABEL = r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?"
_HOST_NAME = re.compile(rf"^(\*|(\*\.)?{_LABEL}(\.{_LABEL})*)$")


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_metadata(address: Address) -> bool:
    return address.is_link_local or address in _METADATA_ADDRESSES


@dataclass(frozen=True, slots=True)
class HostRules:
    """A list of host rules: names (``example.com``), suffixes (``*.example.com``), everything
    (``*``), addresses and networks (``10.1.2.3``, ``10.0.0.0/8``, ``fd00::/8``)."""

    names: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, entries: Sequence[str]) -> HostRules:
        """Parse rules; raises ValueError naming the first entry that is none of the forms."""
        names: list[str] = []
        networks: list[Network] = []
        for raw in entries:
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            if entry.startswith("[") and entry.endswith("]"):
                entry = entry[1:-1]
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if not _HOST_NAME.match(entry) or entry.replace(".", "").isdigit():
                raise ValueError(
                    f"{raw!r} is not a host name, *.suffix, *, IP address or CIDR network"
                )
            names.append(entry)
        return cls(tuple(names), tuple(networks))

    def __bool__(self) -> bool:
        return bool(self.names or self.networks)

    def name_rule(self, host: str) -> str | None:
        """The rule that matches host name ``host``, if any."""
        host = host.lower().rstrip(".")
        for rule in self.names:
            if rule == "*" or rule == host:
                return rule
            if rule.startswith("*.") and host.endswith(rule[1:]):
                return rule
        return None

    def has_address(self, address: Address) -> bool:
        return any(address.version == n.version and address in n for n in self.networks)


class HostRefused(OSError):
    """The host policy refused a host or an address (a policy decision, never retried)."""

    def __init__(self, reason: str) -> None:
        # With an errno, so that aiohttp's connection error message shows our text.
        super().__init__(errno.EACCES, reason)


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Which hosts the ``http`` step may reach (``HttpSettings.allow_hosts``/``deny_hosts``).

    - A deny rule that matches the host name or the address refuses, whatever else matches.
    - A non-empty allow list admits only a host whose name or address it matches.
    - Addresses that are not globally routable (private, loopback, link-local, unique-local,
      unspecified, shared and reserved ranges) are refused unless an allow rule admits them:
      an address or network rule covering them, or a rule naming the host (not ``*``).
      Link-local addresses (cloud metadata, 169.254.169.254) are admitted only by an address
      or network rule.

    Addresses are judged as connections are made, on the address actually connected to, so a
    name that resolves differently on a second lookup (DNS rebinding) and redirects are covered.
    """

    allow: HostRules = HostRules()
    deny: HostRules = HostRules()

    @classmethod
    def of(cls, allow: Sequence[str], deny: Sequence[str]) -> HostPolicy:
        return cls(HostRules.parse(allow), HostRules.parse(deny))

    def check_name(self, host: str) -> None:
        """Before connecting: refuse a host name (or literal address) the rules exclude."""
        address = _address(host)
        if address is not None:
            self.check_address(None, address)
            return
        if self.deny.name_rule(host):
            raise HostRefused(
                f"host {host} is denied by the HTTP host policy (LONGSHOREMAN_HTTP_DENY)"
            )
        if self.allow and not self.allow.name_rule(host) and not self.allow.networks:
            raise HostRefused(
                f"host {host} is not in the allowed hosts "
                "(LONGSHOREMAN_HTTP_ALLOW, or --http-allow locally)"
            )

    def check_address(self, host: str | None, address: Address) -> None:
        """At connect time: refuse ``address`` (reached for ``host``) unless the rules admit it."""
        if self.deny.has_address(address) or (host and self.deny.name_rule(host)):
            raise HostRefused(
                f"address {address} is denied by the HTTP host policy (LONGSHOREMAN_HTTP_DENY)"
            )
        by_address = self.allow.has_address(address)
        named = self.allow.name_rule(host) if host else None
        if self.allow and not (by_address or named):
            raise HostRefused(
                f"address {address} is not in the allowed hosts "
                "(LONGSHOREMAN_HTTP_ALLOW, or --http-allow locally)"
            )
        if address.is_global or by_address:
            return
        if _is_metadata(address):
            raise HostRefused(
                f"connections to link-local or cloud instance metadata addresses are not "
                f"permitted (address {address})"
            )
        if named is None or named == "*":
            raise HostRefused(
                f"connections to private, loopback or otherwise non-public addresses are not "
                f"permitted (address {address}); the operator may allow them"
            )


DEFAULT_POLICY = HostPolicy()


def policy_of(settings: HttpSettings) -> HostPolicy:
    try:
        return _policy_cached(settings.allow_hosts, settings.deny_hosts)
    except ValueError as exc:
        raise StepError(f"{KIND}: host policy: {exc}", terminal=True) from None


@functools.lru_cache(maxsize=64)
def _policy_cached(allow: tuple[str, ...], deny: tuple[str, ...]) -> HostPolicy:
    return HostPolicy.of(allow, deny)


AddrInfo = tuple[int, int, int, str, tuple[Any, ...]]


class _GuardedResolver(AbstractResolver):
    """Resolves names and keeps only the addresses the policy admits for that name.

    aiohttp connects to exactly the addresses returned here, so the address checked is the
    address used. Addresses admitted because of their *name* are remembered for the socket
    factory, which sees only addresses.
    """

    def __init__(self, policy: HostPolicy) -> None:
        self.policy = policy
        self.admitted: set[str] = set()
        self._resolver = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.policy.check_name(host)
        results = await self._resolver.resolve(host, port, family)
        refusal: HostRefused | None = None
        kept = []
        for result in results:
            address = _address(result["host"])
            if address is None:
                continue
            try:
                self.policy.check_address(host, address)
            except HostRefused as exc:
                refusal = refusal or exc
                continue
            self.admitted.add(str(address))
            kept.append(result)
        if not kept:
            raise refusal or HostRefused(
                f"host {host} has no address the HTTP host policy lets us reach"
            )
        return kept

    async def close(self) -> None:
        await self._resolver.close()


def _guarded_socket(resolver: _GuardedResolver, addr_info: AddrInfo) -> socket.socket:
    """Open a socket unless the policy refuses its address (the SSRF guard's last line).

    Literal IP hosts never reach the resolver, so they are judged here; names were judged by
    the resolver, whose admitted addresses pass.
    """
    family, sock_type, proto, _, sockaddr = addr_info
    address = _address(str(sockaddr[0]))
    if address is None:
        raise HostRefused(f"cannot judge address {sockaddr[0]!r}")
    if str(address) not in resolver.admitted:
        resolver.policy.check_address(None, address)
    return socket.socket(family=family, type=sock_type, proto=proto)


async def _read_limited(response: aiohttp.ClientResponse, limit: int) -> bytes:
    too_big = StepError(f"{KIND}: response body is larger than the limit of {limit} bytes")
    if response.content_length is not None and response.content_length > limit:
        raise too_big
    body = bytearray()
    async for chunk in response.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > limit:
            raise too_big
    return bytes(body)


async def _check_redirect(
    policy: HostPolicy,
    session: aiohttp.ClientSession,
    context: Any,
    params: aiohttp.TraceRequestRedirectParams,
) -> None:
    location = params.response.headers.get("Location") or params.response.headers.get("URI")
    if location:
        try:
            target = params.url.join(URL(location))
        except ValueError:
            return  # aiohttp refuses it next, with its own error
        policy.check_name(target.host or "")


def _guarded_session(policy: HostPolicy, timeout_seconds: float) -> aiohttp.ClientSession:
    """A session whose every connection (redirects included) the host policy judges.

    Shared by the ``http`` and ``http-download`` steps so both enforce the same policy the same
    way. Call it inside a running event loop and close the session (``async with``).
    """
    resolver = _GuardedResolver(policy)
    connector = aiohttp.TCPConnector(
        resolver=resolver,
        socket_factory=functools.partial(_guarded_socket, resolver),
        # Each hop (redirects included) connects afresh and is judged again.
        use_dns_cache=False,
    )
    # A redirect's target is judged like the first URL before it is requested: through a
    # proxy no connection to it is ever made here, so the resolver and socket guards never
    # see it (without a proxy they judge it again anyway).
    redirects = aiohttp.TraceConfig()
    redirects.on_request_redirect.append(functools.partial(_check_redirect, policy))
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=timeout_seconds),
        # Settings come from our Settings object, never from the process environment/.netrc.
        trust_env=False,
        trace_configs=[redirects],
    )


def _request_headers(spec: HttpRequestSpec) -> list[tuple[str, str]]:
    headers = list(spec.headers)
    if not any(name.lower() == "user-agent" for name, _ in headers):
        headers.append(("User-Agent", "Longshoreman"))
    return headers


@contextlib.asynccontextmanager
async def _opened(
    spec: HttpRequestSpec, policy: HostPolicy
) -> AsyncIterator[aiohttp.ClientResponse]:
    """Send ``spec`` through a session that enforces ``policy``; yields the response.

    Raises aiohttp's and asyncio's exceptions, and :class:`HostRefused` (possibly wrapped in a
    connection error) when the policy refuses.
    """
    # Through a proxy we never connect to the target: judge its name (or literal address) now;
    # the proxy itself is judged like any connection.
    policy.check_name(urlsplit(spec.url).hostname or "")
    async with (
        _guarded_session(policy, spec.timeout_seconds) as session,
        session.request(
            spec.method,
            spec.url,
            params=list(spec.query_params) or None,
            headers=_request_headers(spec),
            data=spec.body.encode() if spec.body else None,
            # Go sends the body with no Content-Type unless one is configured; so do we.
            skip_auto_headers=("Content-Type",),
            proxy=spec.proxy,
            ssl=not spec.insecure_skip_tls_verify,
        ) as response,
    ):
        yield response


async def _send(
    spec: HttpRequestSpec, max_response_bytes: int, policy: HostPolicy = DEFAULT_POLICY
) -> HttpResponse:
    """Send the request and read the response; raises what :func:`_opened` raises."""
    async with _opened(spec, policy) as response:
        body = await _read_limited(response, max_response_bytes)
        return HttpResponse(
            status=response.status, headers=tuple(response.headers.items()), body=body
        )


# Enough of a refused download's body to find an error message in.
_ERROR_BODY_BYTES = 64 * 1024


async def download(
    spec: HttpRequestSpec,
    max_bytes: int,
    policy: HostPolicy,
    sink: Callable[[bytes], Awaitable[object]],
) -> HttpResponse:
    """Send ``spec`` and stream a 2xx response's body into ``sink``, refusing more than
    ``max_bytes`` (a :class:`StepError` naming the limit, before or while reading).

    Returns the response; its ``body`` is empty for a 2xx and, otherwise, the first bytes of
    the error body. Raises what :func:`_opened` raises; see :func:`transport_error`.
    """
    async with _opened(spec, policy) as response:
        headers = tuple(response.headers.items())
        if not 200 <= response.status < 300:
            try:
                body = await _read_limited(response, _ERROR_BODY_BYTES)
            except StepError:
                body = b""
            return HttpResponse(status=response.status, headers=headers, body=body)
        too_big = StepError(
            f"download is larger than the limit of {max_bytes} bytes ({max_bytes / 2**20:g} MiB)",
            terminal=True,
        )
        if response.content_length is not None and response.content_length > max_bytes:
            raise too_big
        received = 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            received += len(chunk)
            if received > max_bytes:
                raise too_big
            await sink(chunk)
        return HttpResponse(status=response.status, headers=headers, body=b"")


def transport_error(kind: str, where: str, exc: BaseException, timeout_seconds: float) -> StepError:
    """Translate what :func:`_send` or :func:`download` raised into a :class:`StepError`.

    A policy refusal is terminal (retrying cannot change it); timeouts and connection trouble
    are retried. Callers redact the message (it may quote the URL's host, never its query).
    """
    if isinstance(exc, StepError):
        return StepError(f"{kind}: {exc.message} ({where})", terminal=exc.terminal)
    if isinstance(exc, HostRefused):
        return StepError(f"{kind}: {where} refused: {exc.strerror}", terminal=True)
    if isinstance(exc, TimeoutError):
        # aiohttp's own timeout errors subclass TimeoutError, so this must come first.
        return StepError(f"{kind}: {where} timed out after {timeout_seconds:g}s")
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, HostRefused):
        # A policy decision: retrying cannot change it.
        return StepError(f"{kind}: {where} refused: {exc.os_error.strerror}", terminal=True)
    return StepError(f"{kind}: {where} failed: {type(exc).__name__}: {exc}")


# What :func:`_send` and :func:`download` may raise besides StepError.
TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, ValueError, TimeoutError)


def redactor(ctx: StepContext, spec: HttpRequestSpec) -> Callable[[str], str]:
    secrets = sorted(
        {s for s in spec.secrets() if len(s) >= _MIN_SECRET_LENGTH}, key=len, reverse=True
    )

    def redact(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "***")
        return ctx.redact(text)

    return redact


def _redacted(result: StepResult, redact: Callable[[str], str]) -> StepResult:
    return StepResult(
        status=result.status,
        message=redact(result.message),
        output=result.output,
        health_check=result.health_check,
        retry_after=result.retry_after,
    )


async def http_step(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """Run the ``http`` step."""
    settings = ctx.services.http
    spec = parse_config(config, settings.default_timeout_seconds)
    redact = redactor(ctx, spec)
    where = f"{spec.method} {spec.safe_url()}"
    try:
        response = await _send(spec, settings.max_response_bytes, policy_of(settings))
    except StepError as exc:
        raise StepError(redact(f"{exc.message} ({where})"), terminal=exc.terminal) from None
    except TRANSPORT_ERRORS as exc:
        error = transport_error(KIND, where, exc, spec.timeout_seconds)
        raise StepError(redact(error.message), terminal=error.terminal) from None
    try:
        result = decide(spec, response)
    except StepError as exc:
        raise StepError(redact(exc.message), terminal=exc.terminal) from None
    return _redacted(result, redact)


# A request may change the world (a POST, a webhook that deploys): never sent twice. Its
# recorded outputs stand in a replay; there is nothing of its own to check.
STEPS: dict[str, Step] = {
    KIND: FunctionStep(http_step, effect=Effect.EXTERNAL, uses_work_dir=False)
}

__all__: Sequence[str] = (
    "STEPS",
    "TRANSPORT_ERRORS",
    "HostPolicy",
    "HostRefused",
    "HostRules",
    "HttpRequestSpec",
    "HttpResponse",
    "build_response_variables",
    "canonical_header_name",
    "check_http_url",
    "decide",
    "download",
    "duration",
    "error_message",
    "http_step",
    "name_value_pairs",
    "parse_body",
    "parse_config",
    "parse_duration",
    "policy_of",
    "redactor",
    "transport_error",
)
