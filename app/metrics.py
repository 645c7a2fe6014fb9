"""Prometheus metrics of the server process (served on ``/metrics``).

One registry per server (not the library's global one), so tests can run several servers in
one process without metrics leaking between them.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    exposition,
    generate_latest,
)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.promotions_finished = Counter(
            "longshoreman_promotions_finished_total",
            "Promotions that reached a terminal phase, by phase and Stage.",
            ["phase", "namespace", "stage"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "longshoreman_reconcile_duration_seconds",
            "Time spent in one Stage reconcile.",
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120),
        )
        self.queue_depth = Gauge(
            "longshoreman_work_queue_depth",
            "Stages waiting to be reconciled.",
            registry=self.registry,
        )
        self.api_requests = Counter(
            "longshoreman_kubernetes_requests_total",
            "Requests to the Kubernetes API server, by method, resource and status code.",
            ["method", "resource", "code"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "longshoreman_leader",
            "1 while this replica holds the leader lease.",
            registry=self.registry,
        )

    def on_kube_request(self, method: str, resource: str, status: int | None) -> None:
        self.api_requests.labels(method, resource, str(status) if status else "error").inc()

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), exposition.CONTENT_TYPE_LATEST
