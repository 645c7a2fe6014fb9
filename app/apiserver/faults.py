"""Deterministic fault injection for the API server emulator.

Controllers must survive a flaky API server: 500s, write conflicts, throttling and connections
that drop before (or after!) a write lands. ``FaultInjector`` decides, per resource request,
whether to inject one of those. Random faults draw from a seeded ``random.Random`` so a test
run is reproducible; targeted rules fire on matching requests a fixed number of times.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

FaultKind = Literal["error", "conflict", "throttle", "drop", "drop_after"]
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class RequestInfo:
    """What the injector sees of a request."""

    method: str
    path: str
    is_watch: bool

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS


@dataclass
class FaultRule:
    """Inject ``kind`` into matching requests, at most ``times`` times (None = forever).

    ``drop`` closes the connection before the request is handled; ``drop_after`` handles it
    (the write lands) and then closes the connection without answering. ``conflict`` only
    applies to writes.
    """

    kind: FaultKind
    methods: frozenset[str] | None = None
    path_pattern: str | None = None
    times: int | None = 1
    rate: float = 1.0
    fired: int = 0

    def matches(self, request: RequestInfo) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if self.methods is not None and request.method not in self.methods:
            return False
        if self.kind == "conflict" and not request.is_write:
            return False
        return self.path_pattern is None or re.search(self.path_pattern, request.path) is not None


@dataclass(frozen=True)
class InjectedFault:
    kind: FaultKind
    method: str
    path: str


@dataclass
class FaultInjector:
    """Decides which requests fail. Rates are fractions of resource requests in [0, 1].

    Watches are exempt from the random rates unless ``include_watches`` is set (a dropped watch
    is better simulated with ``ApiServer.close_watches``).
    """

    seed: int = 0
    error_rate: float = 0.0
    conflict_rate: float = 0.0
    drop_rate: float = 0.0
    throttle_rate: float = 0.0
    include_watches: bool = False
    hook: Callable[[RequestInfo], FaultKind | None] | None = None
    rules: list[FaultRule] = field(default_factory=list)
    injected: list[InjectedFault] = field(default_factory=list)
    _random: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def add(
        self,
        kind: FaultKind,
        *,
        methods: str | frozenset[str] | None = None,
        path_pattern: str | None = None,
        times: int | None = 1,
        rate: float = 1.0,
    ) -> FaultRule:
        """Add a targeted rule.

        Example: ``add("conflict", methods="PATCH", path_pattern="/status$")``.
        """
        if isinstance(methods, str):
            methods = frozenset({methods.upper()})
        rule = FaultRule(kind, methods, path_pattern, times, rate)
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove rules and zero the random rates."""
        self.rules.clear()
        self.error_rate = self.conflict_rate = self.drop_rate = self.throttle_rate = 0.0
        self.hook = None

    def decide(self, request: RequestInfo) -> FaultKind | None:
        kind = self._decide(request)
        if kind is not None:
            self.injected.append(InjectedFault(kind, request.method, request.path))
        return kind

    def _decide(self, request: RequestInfo) -> FaultKind | None:
        if self.hook is not None:
            hooked = self.hook(request)
            if hooked is not None:
                return hooked
        for rule in self.rules:
            if rule.matches(request) and (rule.rate >= 1.0 or self._random.random() < rule.rate):
                rule.fired += 1
                return rule.kind
        if request.is_watch and not self.include_watches:
            return None
        if not (self.error_rate or self.conflict_rate or self.drop_rate or self.throttle_rate):
            return None
        # One draw per request keeps the sequence reproducible whatever the rates are.
        draw = self._random.random()
        threshold = self.error_rate
        if draw < threshold:
            return "error"
        threshold += self.conflict_rate
        if draw < threshold:
            return "conflict" if request.is_write else None
        threshold += self.drop_rate
        if draw < threshold:
            return "drop"
        threshold += self.throttle_rate
        if draw < threshold:
            return "throttle"
        return None
