"""The recording fake of :class:`promoter.ports.telemetry.Telemetry`: what tests and benchmarks
count.

Product classes keep no counters that only tests read; they report through the Telemetry port
(the app's Prometheus metrics in production), and a test hands them this fake instead and asks
it: how many git subprocesses ran, which deliveries were handled (by id), how many requests
GitHub answered 304.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from promoter.ports.telemetry import current_log_context


@dataclass
class Delivery:
    source: str
    event: str
    outcome: str
    delivery_id: str


@dataclass
class RecordingTelemetry:
    api_calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    rate_limits: list[tuple[str, float]] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    git_calls: Counter[str] = field(default_factory=Counter)
    git_seconds: float = 0.0
    reconciles: int = 0
    warehouse_reconciles: int = 0

    def api_call(self, api: str, operation: str, outcome: str) -> None:
        self.api_calls[(api, operation, outcome)] += 1

    def rate_limited(self, api: str, seconds: float) -> None:
        self.rate_limits.append((api, seconds))

    def webhook_delivery(self, source: str, event: str, outcome: str) -> None:
        delivery_id = current_log_context().get("delivery_id", "")
        self.deliveries.append(Delivery(source, event, outcome, delivery_id))

    def git_call(self, command: str, seconds: float) -> None:
        self.git_calls[command] += 1
        self.git_seconds += seconds

    def on_reconcile(self, seconds: float) -> None:
        """For ``Controller(on_reconcile=...)``, as ``app.metrics.Metrics.on_reconcile``."""
        self.reconciles += 1

    def on_warehouse_reconcile(self, seconds: float) -> None:
        """For ``WarehouseController(on_reconcile=...)``, as ``Metrics.on_warehouse_reconcile``."""
        self.warehouse_reconciles += 1

    # ---- what tests ask -------------------------------------------------------------------------

    def handled(self, source: str = "github") -> list[str]:
        """The ids of the deliveries whose handlers ran (succeeded or failed), in order."""
        return [
            d.delivery_id
            for d in self.deliveries
            if d.source == source and d.outcome in ("handled", "failed")
        ]

    def failed(self, source: str = "github") -> int:
        """Deliveries one of whose handlers raised."""
        return sum(1 for d in self.deliveries if d.source == source and d.outcome == "failed")

    def requests(self, api: str) -> int:
        return sum(n for (a, _, _), n in self.api_calls.items() if a == api)

    def answered(self, api: str, outcome: str) -> int:
        return sum(n for (a, _, o), n in self.api_calls.items() if a == api and o == outcome)

    def reset(self) -> None:
        self.api_calls.clear()
        self.rate_limits.clear()
        self.deliveries.clear()
        self.git_calls.clear()
        self.git_seconds = 0.0
        self.reconciles = 0
        self.warehouse_reconciles = 0
