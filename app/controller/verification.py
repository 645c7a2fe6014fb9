"""Freight verification and Freight flow: AnalysisRuns after a Promotion, then auto-promotion.

After a Promotion succeeds and the Stage is healthy, the Stage's ``spec.verification`` becomes an
Argo Rollouts AnalysisRun (built as a plain dict by :mod:`promoter.control.verification`); an
informer
follows it to a terminal phase, which is recorded on the Stage (``freightHistory[0]
.verificationHistory``, condition ``Verified``) and, on success, on the Freight
(``status.verifiedIn[<stage>]``). Verified Freight becomes available to downstream Stages (after
their ``requiredSoakTime``), and Stages that opt in with the ``longshoreman.dev/auto-promote``
annotation promote the newest available Freight through the one builder.

Runs inside the Controller's per-Stage reconcile, so it shares its one-at-a-time guarantee.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from app.controller import kube as k
from app.controller.informer import Informer
from promoter.clock import SYSTEM, Clock
from promoter.control import selection
from promoter.control.freight_events import FreightEvent, verification_event
from promoter.control.verification import (
    ANALYSIS_TERMINAL,
    VerificationError,
    build_analysis_run,
    label_value,
    record_verification,
    verification_entry,
    verification_message,
    verification_phase,
)
from promoter.resources import annotations as ann
from promoter.resources.model import (
    GROUP,
    Phase,
    format_time,
    meta,
    name_of,
    namespace_of,
    parse_time,
)
from promoter.resources.stages import (
    Condition,
    available_at,
    freight_created,
    get_condition,
    phase_of,
    set_condition,
)

log = logging.getLogger(__name__)

AUTO_PROMOTION_ACTOR = "longshoreman:auto-promotion"
AUTO_ROLLBACK_ACTOR = "longshoreman:auto-rollback"
STAGE_LABEL = f"{GROUP}/stage"
CRD_MISSING = (
    "cannot verify: the AnalysisRun CRD (analysisruns.argoproj.io) is not installed in this "
    "cluster; install Argo Rollouts' CRDs"
)


def _actor_of(request: str) -> str:
    try:
        data = json.loads(request)
    except ValueError:
        return "unknown"
    if isinstance(data, Mapping):
        return str(data.get("actor") or "unknown")
    return "unknown"


def auto_promote_enabled(stage: Mapping[str, Any]) -> bool:
    """The Stage's own setting (its annotation); a ProjectConfig policy may overrule it
    (:mod:`app.controller.policies`)."""
    return ann.auto_promotes(stage)


class Verifier:
    """Verification and auto-promotion for the Controller's Stages."""

    def __init__(
        self,
        kube: k.Kube,
        *,
        clock: Clock = SYSTEM,
        enqueue: Callable[[str, str], None],
        create_promotion: Callable[[Mapping[str, Any], Mapping[str, Any]], Any],
        auto_promotes: Callable[[Mapping[str, Any]], bool] = auto_promote_enabled,
        namespace: str | None = None,
        stage_of: Callable[[str, str], Mapping[str, Any] | None] = lambda _ns, _name: None,
    ) -> None:
        self.kube = kube
        # AnalysisRuns and AnalysisTemplates live in the project's namespace: with one
        # namespace watched, nothing of theirs is listed or watched outside it.
        self.namespace = namespace
        # Another Stage of the project as the caches hold it (MatchUpstream follows its upstream).
        self.stage_of = stage_of
        # Whether a Stage auto-promotes: its ProjectConfig's first matching policy, else its
        # annotation.
        self.auto_promotes = auto_promotes
        self.clock = clock
        self.enqueue = enqueue
        self.create_promotion = create_promotion
        self.runs = Informer(kube, k.ANALYSIS_RUNS, namespace=namespace, on_event=self._on_run)
        self.templates = Informer(kube, k.ANALYSIS_TEMPLATES, namespace=namespace)
        self.cluster_templates = Informer(kube, k.CLUSTER_ANALYSIS_TEMPLATES)
        self.crds_missing = False

    async def probe(self) -> None:
        """Find out once whether Argo Rollouts' CRDs are installed (and say so in the log)."""
        try:
            await self.kube.list(k.ANALYSIS_RUNS, self.namespace)
        except k.NotFound:
            self.crds_missing = True
            log.warning("%s; verifications will end in phase Error until then", CRD_MISSING)

    @property
    def informers(self) -> tuple[Informer, ...]:
        return () if self.crds_missing else (self.runs, self.templates, self.cluster_templates)

    def _on_run(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        stage = (meta(obj).get("labels") or {}).get(STAGE_LABEL)
        if stage:
            self.enqueue(namespace_of(obj) or "default", stage)

    # ---- queries ----------------------------------------------------------------------------

    # ---- the reconcile ----------------------------------------------------------------------

    async def reconcile(
        self,
        stage: Mapping[str, Any],
        promotions: Sequence[Mapping[str, Any]],
        freight: Callable[[str, str], Mapping[str, Any] | None],
    ) -> dict[str, Any]:
        """Move the Stage's verification along; returns the status fields that change.

        ``stage`` carries the status the Controller is about to write (its Promotions' outcome
        and health), so a Promotion that has just succeeded starts its verification in the
        same status write. Starting an AnalysisRun or recording a Freight as verified happens
        here; the Stage's status is the caller's to write.
        """
        status = dict(stage.get("status") or {})
        history = [dict(h) for h in status.get("freightHistory") or []]
        now = self.clock.now()
        changed: dict[str, Any] = {}
        if history:
            current = history[0]
            entries = list(current.get("verificationHistory") or [])
            latest = dict(entries[0]) if entries else None
            entries, latest, handled = await self._requests(stage, status, entries, latest, now)
            changed.update(handled)
            pending = (
                latest.get("request") if latest and latest.get("phase") == "Requested" else None
            )
            entries, latest = await self._start_if_due(
                stage, status, promotions, entries, latest, freight, now
            )
            if pending and (latest is None or latest.get("phase") != "Requested"):
                changed["lastHandledReverify"] = pending
            entries, latest = await self._follow(stage, entries, latest, freight, now)
            if entries != list(current.get("verificationHistory") or []):
                current = {**current, "verificationHistory": entries}
                history[0] = current
                changed["freightHistory"] = history
            verified = self._verified_condition(latest, status)
            conditions = set_condition(
                status.get("conditions") or [], verified, now, meta(stage).get("generation")
            )
            if _strip(conditions) != _strip(status.get("conditions") or []):
                changed["conditions"] = conditions
        enabled = self.auto_promotes(stage)
        if status.get("autoPromotionEnabled") != enabled:
            changed["autoPromotionEnabled"] = enabled
        return changed

    async def _requests(
        self,
        stage: Mapping[str, Any],
        status: Mapping[str, Any],
        entries: list[Any],
        latest: dict[str, Any] | None,
        now: datetime,
    ) -> tuple[list[Any], dict[str, Any] | None, dict[str, Any]]:
        handled: dict[str, Any] = {}
        abort = ann.first(stage, ann.ABORT_VERIFICATION_ANNOTATIONS)
        if abort and abort != status.get("lastHandledAbortVerification"):
            handled["lastHandledAbortVerification"] = abort
            if latest is not None and latest.get("phase") in ("Pending", "Running"):
                actor = _actor_of(abort)
                run = latest.get("analysisRun") or {}
                if run.get("name"):
                    try:
                        await self.kube.patch(
                            k.ANALYSIS_RUNS,
                            run.get("namespace"),
                            run["name"],
                            {"spec": {"terminate": True}},
                        )
                    except k.KubeError as e:
                        log.warning("terminating AnalysisRun %s: %s", run["name"], e)
                latest = {
                    **latest,
                    "phase": "Failed",
                    "message": f"aborted by {actor}",
                    "finishTime": format_time(now),
                }
                entries = record_verification(entries, latest)
        reverify = ann.reverify_request(stage)
        if reverify and reverify != status.get("lastHandledReverify"):
            # Start a new verification on the next step, whatever the last one said. The
            # request counts as handled only once that verification starts (see reconcile):
            # until then the annotation itself keeps it, e.g. while the Stage is unhealthy.
            latest = {
                "id": "",
                "phase": "Requested",
                "actor": _actor_of(reverify),
                "request": reverify,
            }
        return entries, latest, handled

    async def _start_if_due(
        self,
        stage: Mapping[str, Any],
        status: Mapping[str, Any],
        promotions: Sequence[Mapping[str, Any]],
        entries: list[Any],
        latest: dict[str, Any] | None,
        freight: Callable[[str, str], Mapping[str, Any] | None],
        now: datetime,
    ) -> tuple[list[Any], dict[str, Any] | None]:
        last = status.get("lastPromotion") or {}
        if (last.get("status") or {}).get("phase") != "Succeeded":
            return entries, latest
        requested = latest is not None and latest.get("phase") == "Requested"
        # A (re-)promotion of the Freight is verified again: entries remember their Promotion.
        new_promotion = latest is None or (
            latest.get("promotion") != last.get("name") and not requested
        )
        if not (requested or new_promotion):
            return entries, latest
        healthy = get_condition(status, "Healthy")
        if healthy is None or healthy.get("status") != "True":
            return entries, latest  # waits for health; the health loop wakes the Stage
        freight_name = (last.get("freight") or {}).get("name") or ""
        freight_obj = freight(namespace_of(stage) or "default", freight_name) or {
            "metadata": {"name": freight_name}
        }
        actor = (latest or {}).get("actor") if requested else None
        request = str((latest or {}).get("request") or "") if requested else ""
        entry = await self._start(stage, freight_obj, str(last.get("name")), actor, request, now)
        if entry.get("phase") in ANALYSIS_TERMINAL:
            await self._announce(stage, freight_obj, entry, now)
        return record_verification(entries, entry), entry

    async def _start(
        self,
        stage: Mapping[str, Any],
        freight: Mapping[str, Any],
        promotion: str,
        actor: str | None,
        request: str,
        now: datetime,
    ) -> dict[str, Any]:
        namespace = namespace_of(stage) or "default"
        spec = (stage.get("spec") or {}).get("verification") or {}
        refs = spec.get("analysisTemplates") or []
        entry_id = str(uuid.uuid4())

        def entry(
            phase: str, message: str = "", run: Mapping[str, Any] | None = None
        ) -> dict[str, Any]:
            finish = now if phase in ANALYSIS_TERMINAL else None
            made = verification_entry(
                id=entry_id, actor=actor, start=now, analysis_run=run, phase=phase,
                message=message, finish=finish,
            )  # fmt: skip
            return {**made, "promotion": promotion}

        if not refs:
            await self._mark_verified(stage, freight, now)
            return entry("Successful", "no verification configured: verified on promotion")
        if self.crds_missing:
            return entry("Error", CRD_MISSING)
        templates = []
        for ref in refs:
            name = str((ref or {}).get("name"))
            if (ref or {}).get("kind") == "ClusterAnalysisTemplate":
                found = self.cluster_templates.get(None, name)
            else:
                found = self.templates.get(namespace, name)
            if found is None:
                kind = (ref or {}).get("kind") or "AnalysisTemplate"
                return entry("Error", f"{kind} {name!r} not found in namespace {namespace!r}")
            templates.append(found)
        earlier = self._earlier_run(namespace, name_of(stage), promotion, request)
        if earlier is not None:
            # Started before a crash or a lost status write: adopt it rather than start twice.
            return entry(verification_phase(earlier) or "Pending", "", earlier)
        try:
            run = build_analysis_run(
                stage=stage,
                freight=freight,
                templates=templates,
                promotion=promotion,
                namespace=namespace,
                actor=actor,
                freights=[freight],
            )
        except VerificationError as e:
            return entry("Error", str(e))
        if request:
            run["metadata"].setdefault("annotations", {})[ann.VERIFICATION_REQUEST] = request
        try:
            created = await self.kube.create(k.ANALYSIS_RUNS, run)
        except k.NotFound:
            self.crds_missing = True
            return entry("Error", CRD_MISSING)
        except k.KubeError as e:
            return entry("Error", f"creating the AnalysisRun failed: {e}")
        self.runs.observe(created)
        return entry("Pending", "", created)

    def _earlier_run(
        self, namespace: str, stage: str, promotion: str, request: str
    ) -> Mapping[str, Any] | None:
        """The AnalysisRun this verification already created, if any (newest first)."""
        found = []
        for run in self.runs.items(namespace):
            labels = meta(run).get("labels") or {}
            annotations = meta(run).get("annotations") or {}
            if (
                labels.get(STAGE_LABEL) == label_value(stage)
                and labels.get(f"{GROUP}/promotion") == label_value(promotion)
                and str(annotations.get(ann.VERIFICATION_REQUEST) or "") == request
            ):
                found.append(run)
        if not found:
            return None
        return max(found, key=lambda r: (str(meta(r).get("creationTimestamp")), name_of(r)))

    async def _follow(
        self,
        stage: Mapping[str, Any],
        entries: list[Any],
        latest: dict[str, Any] | None,
        freight: Callable[[str, str], Mapping[str, Any] | None],
        now: datetime,
    ) -> tuple[list[Any], dict[str, Any] | None]:
        if latest is None or latest.get("phase") not in ("Pending", "Running"):
            return entries, latest
        ref = latest.get("analysisRun") or {}
        run = self.runs.get(ref.get("namespace"), str(ref.get("name")))
        if run is None:
            return entries, latest
        phase = verification_phase(run) or "Pending"
        if phase == latest.get("phase") and phase not in ANALYSIS_TERMINAL:
            return entries, latest
        updated = {
            **latest,
            "phase": phase,
            "analysisRun": {**ref, "phase": phase},
        }
        if phase in ANALYSIS_TERMINAL:
            updated["finishTime"] = format_time(now)
            updated["message"] = verification_message(run)
            freight_name = str((meta(run).get("labels") or {}).get(f"{GROUP}/freight") or "")
            freight_obj = freight(namespace_of(stage) or "default", freight_name)
            if freight_obj is not None:
                if phase == "Successful":
                    await self._mark_verified(stage, freight_obj, now)
                await self._announce(stage, freight_obj, updated, now)
        return record_verification(entries, updated), updated

    async def _announce(
        self,
        stage: Mapping[str, Any],
        freight: Mapping[str, Any],
        entry: Mapping[str, Any],
        now: datetime,
    ) -> None:
        """Kargo's FreightVerification* Event on the Freight for a verification that ended
        (promoter.control.freight_events)."""
        if not meta(freight).get("uid"):
            return  # not a Freight the cluster holds (a name only): nothing to record it on
        run = entry.get("analysisRun") or {}
        event = verification_event(
            freight,
            name_of(stage),
            str(entry.get("phase") or ""),
            message=str(entry.get("message") or ""),
            actor=str(entry.get("actor") or ""),
            started=parse_time(entry.get("startTime")) or now,
            finished=parse_time(entry.get("finishTime")) or now,
            analysis_run=str(run.get("name") or ""),
            promotion=str(entry.get("promotion") or "") if run.get("name") else "",
        )
        await record_event(self.kube, event)

    @staticmethod
    def _verified_condition(
        latest: Mapping[str, Any] | None, status: Mapping[str, Any]
    ) -> Condition:
        if latest is None or latest.get("phase") == "Requested":
            last = (status.get("lastPromotion") or {}).get("status") or {}
            if last.get("phase") == "Succeeded":
                healthy = get_condition(status, "Healthy")
                if healthy is None or healthy.get("status") != "True":
                    return Condition(
                        "Verified",
                        "Unknown",
                        "WaitingForHealth",
                        "verification starts once the Stage is healthy",
                    )
                return Condition("Verified", "Unknown", "Pending", "verification is about to start")
            return Condition(
                "Verified", "Unknown", "NoFreight", "no Freight has been promoted here yet"
            )
        phase = str(latest.get("phase"))
        message = str(latest.get("message") or "")
        if phase == "Successful":
            return Condition("Verified", "True", "Verified", message)
        if phase in ("Pending", "Running"):
            return Condition(
                "Verified",
                "Unknown",
                "Verifying",
                f"AnalysisRun {(latest.get('analysisRun') or {}).get('name', '')} is {phase}",
            )
        return Condition(
            "Verified",
            "False",
            "VerificationFailed" if phase != "Error" else "VerificationErrored",
            f"{phase}: {message}".rstrip(": "),
        )

    async def _mark_verified(
        self, stage: Mapping[str, Any], freight: Mapping[str, Any], now: datetime
    ) -> None:
        name = name_of(freight)
        if not name or not meta(freight).get("uid"):
            return
        try:
            await self.kube.patch_status(
                k.FREIGHT,
                namespace_of(freight),
                name,
                {"verifiedIn": {name_of(stage): {"verifiedAt": format_time(now)}}},
                resource_version=None,
            )
        except k.KubeError as e:
            log.warning("recording Freight %s verified in %s: %s", name, name_of(stage), e)
        # Downstream Stages notice through the Freight's watch event (Controller._on_freight).

    # ---- Freight flow -----------------------------------------------------------------------

    async def auto_promote(
        self,
        stage: Mapping[str, Any],
        promotions: Sequence[Mapping[str, Any]],
        freight: Sequence[Mapping[str, Any]],
    ) -> float | None:
        """Promote the Freight its selection policy picks (promoter.control.selection: the
        newest available, or with MatchUpstream what the upstream Stage has) to an
        auto-promoting Stage; returns when to look again (a soak ending), or None. ``freight``
        is the namespace's Freight (callers skip listing it for Stages that do not
        auto-promote)."""
        if not self.auto_promotes(stage):
            return None
        now = self.clock.now()
        if any(not phase_of(p).terminal for p in promotions):
            return None  # something is queued or running already
        current = _current_freight(stage, freight)
        current_created = freight_created(current) if current else ""
        soonest: datetime | None = None
        candidates = []
        for f in freight:
            when = available_at(stage, f)
            if when is None:
                continue
            if when > now:
                soonest = when if soonest is None else min(soonest, when)
                continue
            candidates.append(f)
        namespace = namespace_of(stage) or "default"
        picked = selection.candidates(
            stage, candidates, lambda upstream: current_names(self.stage_of(namespace, upstream))
        )
        follows = selection.matches_upstream(stage)
        ordered = sorted(picked.values(), key=lambda f: (freight_created(f), name_of(f)))
        for f in reversed(ordered[-1:]):
            if current is not None and name_of(f) == name_of(current):
                break
            # Never promote older Freight over newer (second precision: equal is "not older"),
            # unless the Stage follows its upstream (MatchUpstream), back to older Freight too.
            if not follows and current is not None and freight_created(f) < current_created:
                break
            if _promoted_before(f, promotions, follows):
                break
            await self.create_promotion(stage, f)
            return None
        if soonest is not None:
            return max(0.0, (soonest - now).total_seconds())
        return None


async def record_event(kube: k.Kube, event: FreightEvent) -> None:
    """Record one of Kargo's Freight Events (promoter.control.freight_events); best effort."""
    await kube.emit_event(
        dict(event.involved),
        reason=event.reason,
        message=event.message,
        type=event.type,
        annotations=event.annotations,
    )


def _promoted_before(
    freight: Mapping[str, Any], promotions: Sequence[Mapping[str, Any]], follows: bool
) -> bool:
    """Whether an earlier Promotion of this Freight stops auto-promoting it again: any, for
    NewestFreight (never the same Freight twice); for MatchUpstream only the newest one failing
    (Kargo: a Stage that left the Freight may follow its upstream back to it)."""
    mine = [p for p in promotions if (p.get("spec") or {}).get("freight") == name_of(freight)]
    if not follows:
        return bool(mine)
    if not mine:
        return False
    newest = max(mine, key=lambda p: str(meta(p).get("creationTimestamp") or ""))
    return phase_of(newest) is not Phase.SUCCEEDED


def current_names(stage: Mapping[str, Any] | None) -> set[str]:
    """The names of the Freight a Stage currently has (the head of its freightHistory)."""
    history = ((stage or {}).get("status") or {}).get("freightHistory") or []
    if not history:
        return set()
    return {str(v.get("name")) for v in (history[0].get("items") or {}).values()}


def _current_freight(
    stage: Mapping[str, Any], freight: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The Stage's current Freight object (the head of its freightHistory)."""
    history = (stage.get("status") or {}).get("freightHistory") or []
    if not history:
        return None
    names = {str(v.get("name")) for v in (history[0].get("items") or {}).values()}
    for f in freight:
        if name_of(f) in names:
            return f
    return None


def _strip(conditions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions]
