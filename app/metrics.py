"""Prometheus metrics of the server process (served on ``/metrics``).

One registry per server (not the library's global one), so tests can run several servers in
one process without metrics leaking between them.

Two kinds of series:

- **State, computed at scrape time** from the controller's informer cache by a custom collector:
  Promotions by phase and Stage, and the queue of Pending Promotions per Stage. Every replica
  keeps the cache warm, so every replica reports the same, right numbers, and a restart loses
  nothing (no counter to rebuild).
- **Events, counted or observed as they happen** in this process: promotion and step durations
  (observed by the leader's reconciler when a Promotion reaches a terminal phase, once, from
  the timings in its status), reconcile latency, webhook deliveries, calls to GitHub, Slack and
  Kubernetes and their errors, rate-limit waits. :class:`Metrics` implements
  :class:`promoter.ports.telemetry.Telemetry`, the port through which ``handlers/`` and ``slack/``
  report without importing this layer.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    exposition,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from promoter.resources.model import Phase, namespace_of, parse_time
from promoter.resources.stages import phase_of

# Promotions take seconds (a file edit and a push) to hours (waiting for a pull request).
PROMOTION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)
STEP_BUCKETS = (0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
RATE_LIMIT_BUCKETS = (0.5, 1, 5, 15, 30, 60, 120, 300, 900, 3600)


class PromotionCollector(Collector):
    """Promotions by phase and Stage, and the queue depth per Stage, from the informer cache."""

    def __init__(self, promotions: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        self._promotions = promotions

    def describe(self) -> Iterable[Any]:
        # Describing without collecting keeps registration free of a cache read.
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_phase: Tally[tuple[str, str, str]] = Tally()
        pending: Tally[tuple[str, str]] = Tally()
        stages: set[tuple[str, str]] = set()
        for obj in self._promotions():
            stage = str((obj.get("spec") or {}).get("stage") or "")
            namespace = namespace_of(obj) or "default"
            phase = phase_of(obj).value
            stages.add((namespace, stage))
            by_phase[(namespace, stage, phase)] += 1
            if phase == Phase.PENDING.value:
                pending[(namespace, stage)] += 1
        promotions = GaugeMetricFamily(
            "longshoreman_promotions",
            "Promotions in the cluster, by namespace, Stage and phase.",
            labels=["namespace", "stage", "phase"],
        )
        queue = GaugeMetricFamily(
            "longshoreman_stage_queue_depth",
            "Pending Promotions waiting for their Stage, by namespace and Stage.",
            labels=["namespace", "stage"],
        )
        for (namespace, stage), count in sorted(pending.items()):
            queue.add_metric([namespace, stage], count)
        for namespace, stage in sorted(stages):
            if (namespace, stage) not in pending:
                queue.add_metric([namespace, stage], 0)
        for (namespace, stage, phase), count in sorted(by_phase.items()):
            promotions.add_metric([namespace, stage, phase], count)
        yield promotions
        yield queue


class Metrics:
    """The server's registry and every metric in it (see the module docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._promotion_source: Callable[[], Iterable[Mapping[str, Any]]] = lambda: ()
        self.registry.register(PromotionCollector(lambda: self._promotion_source()))
        self.promotions_finished = Counter(
            "longshoreman_promotions_finished_total",
            "Promotions that reached a terminal phase in this process, by phase and Stage.",
            ["phase", "namespace", "stage"],
            registry=self.registry,
        )
        self.promotion_seconds = Histogram(
            "longshoreman_promotion_duration_seconds",
            "From a Promotion's start to its terminal phase, by namespace, Stage and phase.",
            ["namespace", "stage", "phase"],
            registry=self.registry,
            buckets=PROMOTION_BUCKETS,
        )
        self.step_seconds = Histogram(
            "longshoreman_step_duration_seconds",
            "Time a step took from its first start to its end (retries and waits included), "
            "by step kind and final status.",
            ["uses", "status"],
            registry=self.registry,
            buckets=STEP_BUCKETS,
        )
        self.reconcile_seconds = Histogram(
            "longshoreman_reconcile_duration_seconds",
            "Time spent in one Stage reconcile.",
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120),
        )
        self.warehouse_reconcile_seconds = Histogram(
            "longshoreman_warehouse_reconcile_duration_seconds",
            "Time spent in one Warehouse reconcile (discovery and Freight creation included).",
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
        self.github_requests = Counter(
            "longshoreman_github_requests_total",
            "Requests to the GitHub API, by HTTP method and status code ('error': no answer).",
            ["method", "code"],
            registry=self.registry,
        )
        self.slack_requests = Counter(
            "longshoreman_slack_requests_total",
            "Calls to Slack's Web API and response_urls, by method and outcome.",
            ["method", "outcome"],
            registry=self.registry,
        )
        self.api_errors = Counter(
            "longshoreman_api_errors_total",
            "Failed calls to GitHub, Slack or Kubernetes (no answer, 429 or 5xx; Slack: not ok).",
            ["api"],
            registry=self.registry,
        )
        self.rate_limit_seconds = Histogram(
            "longshoreman_rate_limit_wait_seconds",
            "Waits a rate limit asked for (GitHub's rate limits, Slack's 429 Retry-After).",
            ["api"],
            registry=self.registry,
            buckets=RATE_LIMIT_BUCKETS,
        )
        self.webhook_deliveries = Counter(
            "longshoreman_webhook_deliveries_total",
            "Inbound deliveries (GitHub webhooks, Slack commands and clicks) by event and outcome.",
            ["source", "event", "outcome"],
            registry=self.registry,
        )
        self.webhook_processed = Counter(
            "longshoreman_webhook_processed_total",
            "Accepted GitHub deliveries after their handlers ran, by event and outcome "
            "(handled, failed).",
            ["source", "event", "outcome"],
            registry=self.registry,
        )
        self.git_seconds = Histogram(
            "longshoreman_git_command_duration_seconds",
            "Time git subprocesses of the steps took, by git subcommand (clone, push...).",
            ["command"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120),
        )
        self.garbage_collected = Counter(
            "longshoreman_garbage_collected_total",
            "Promotions and Freight the garbage collector deleted, by kind.",
            ["kind"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "longshoreman_leader",
            "1 while this replica holds the leader lease.",
            registry=self.registry,
        )
        for api in ("github", "slack", "kubernetes"):
            self.api_errors.labels(api)
        for kind in ("Promotion", "Freight"):
            self.garbage_collected.labels(kind)

    def watch_promotions(self, source: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        """Where the scrape-time series read Promotions from (the controller's cache)."""
        self._promotion_source = source

    # ---- the Telemetry port ------------------------------------------------------------------

    def api_call(self, api: str, operation: str, outcome: str) -> None:
        if api == "github":
            self.github_requests.labels(operation, outcome).inc()
            failed = outcome == "error" or outcome == "429" or outcome.startswith("5")
        elif api == "slack":
            self.slack_requests.labels(operation, outcome).inc()
            failed = outcome != "ok"
        else:
            return
        if failed:
            self.api_errors.labels(api).inc()

    def rate_limited(self, api: str, seconds: float) -> None:
        self.rate_limit_seconds.labels(api).observe(max(0.0, seconds))

    def webhook_delivery(self, source: str, event: str, outcome: str) -> None:
        if outcome in ("handled", "failed"):
            self.webhook_processed.labels(source, event, outcome).inc()
        else:
            self.webhook_deliveries.labels(source, event, outcome).inc()

    def git_call(self, command: str, seconds: float) -> None:
        self.git_seconds.labels(command).observe(max(0.0, seconds))

    # ---- hooks the server wires --------------------------------------------------------------

    def on_kube_request(self, method: str, resource: str, status: int | None) -> None:
        self.api_requests.labels(method, resource, str(status) if status else "error").inc()
        if status is None or status == 429 or status >= 500:
            self.api_errors.labels("kubernetes").inc()

    def on_reconcile(self, seconds: float) -> None:
        self.reconcile_seconds.observe(seconds)

    def on_garbage_collected(self, kind: str) -> None:
        self.garbage_collected.labels(kind).inc()

    def on_warehouse_reconcile(self, seconds: float) -> None:
        self.warehouse_reconcile_seconds.observe(seconds)

    def on_promotion_finished(self, obj: Mapping[str, Any]) -> None:
        """A Promotion reached a terminal phase: count it and observe its timings."""
        stage = str((obj.get("spec") or {}).get("stage") or "")
        namespace = namespace_of(obj) or "default"
        phase = phase_of(obj).value
        self.promotions_finished.labels(phase, namespace, stage).inc()
        status = obj.get("status") or {}
        took = _seconds_between(status.get("startedAt"), status.get("finishedAt"))
        if took is not None:
            self.promotion_seconds.labels(namespace, stage, phase).observe(took)
        steps = (obj.get("spec") or {}).get("steps") or []
        for i, step in enumerate(status.get("stepExecutionMetadata") or []):
            took = _seconds_between(step.get("startedAt"), step.get("finishedAt"))
            if took is None:
                continue  # never started (skipped after a failure) or never finished
            uses = str((steps[i] if i < len(steps) else {}).get("uses") or "unknown")
            self.step_seconds.labels(uses, str(step.get("status") or "")).observe(took)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), exposition.CONTENT_TYPE_LATEST


def _seconds_between(start: Any, end: Any) -> float | None:
    started, finished = parse_time(start), parse_time(end)
    if started is None or finished is None:
        return None
    return max(0.0, (finished - started).total_seconds())


__all__ = ["Metrics", "PromotionCollector"]
