"""The ``longshoreman`` command: Kargo's CLI shape for acting on a cluster, beside the local
runner's ``run`` and ``demo`` (:mod:`promoter.local.cli`, which this hands those to).

::

    longshoreman promote FREIGHT --to STAGE --project NS
    longshoreman approve FREIGHT --for STAGE --project NS
    longshoreman abort PROMOTION --project NS
    longshoreman verify STAGE --project NS
    longshoreman freeze STAGE|PROJECT [--for 2h | --until 18:00] [--reason TEXT] --project NS
    longshoreman unfreeze STAGE|PROJECT --project NS
    longshoreman status --project NS
    longshoreman get stages|freight|promotions --project NS

Every command talks to the API server through the user's kubeconfig (``--kubeconfig``, else
``$KUBECONFIG``, else ``~/.kube/config``, as kubectl does) with the user's own credentials, so
Kubernetes RBAC decides what they may do: a Promotion is created, a Freight approved, an abort
or a re-verification requested as that user, and the cluster's refusal is shown in its own
words. What a command means is decided by the chat core, as for a comment: the same grammar
of Freight references (a name, an alias, a unique prefix, a commit, an image, ``latest``), the
same planner (availability, promotion windows, what ``abort`` aborts), the same words.

It works against the embedded cluster of ``python -m app serve`` (its first log line prints the
kubeconfig), so a newcomer can see a command's effect without a GitHub or Slack app.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

CLUSTER_COMMANDS = ("promote", "approve", "abort", "verify", "freeze", "unfreeze", "status", "get")
KINDS = ("stages", "freight", "promotions")
EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def _common(parser: argparse.ArgumentParser, *, project_required: bool = True) -> None:
    parser.add_argument(
        "--project",
        required=project_required,
        metavar="NS",
        help="the project: the namespace its Stages, Freight and Promotions live in"
        + ("" if project_required else " (default: default)"),
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="the kubeconfig to act with (default: $KUBECONFIG, else ~/.kube/config, as kubectl)",
    )
    parser.add_argument(
        "--context", metavar="NAME", help="the kubeconfig context (default: its current one)"
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="text for people (the default) or json for scripts",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="longshoreman",
        description="Act on a Longshoreman cluster through your kubeconfig, as Kargo's CLI does "
        "(`longshoreman run --help` and `longshoreman demo --help` run promotions locally).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    promote = sub.add_parser(
        "promote",
        help="promote a Freight into a Stage",
        description="Create a Promotion of FREIGHT into STAGE, as you (RBAC decides).",
    )
    promote.add_argument(
        "freight",
        metavar="FREIGHT",
        help="an alias, a name or a unique prefix of it, a commit SHA prefix, an image it holds, "
        "or `latest` (the newest available to the Stage)",
    )
    promote.add_argument("--to", required=True, metavar="STAGE", help="the Stage to promote to")
    _common(promote)
    approve = sub.add_parser(
        "approve",
        help="approve a Freight for a Stage",
        description="Record that FREIGHT may be promoted to STAGE without its verification "
        "upstream (status.approvedFor), as you.",
    )
    approve.add_argument("freight", metavar="FREIGHT", help="the Freight's alias or name")
    approve.add_argument(
        "--for", dest="stage", required=True, metavar="STAGE", help="the Stage to approve it for"
    )
    _common(approve)
    abort = sub.add_parser(
        "abort",
        help="abort a running or queued Promotion",
        description="Ask the controller to abort PROMOTION (a Stage's name aborts its running "
        "one), as you.",
    )
    abort.add_argument("promotion", metavar="PROMOTION", help="the Promotion (or a Stage)")
    _common(abort)
    verify = sub.add_parser(
        "verify",
        help="re-verify the Freight a Stage holds",
        description="Ask the controller to verify STAGE's current Freight again, as you.",
    )
    verify.add_argument("stage", metavar="STAGE", help="the Stage to re-verify")
    _common(verify)
    freeze = sub.add_parser(
        "freeze",
        help="stop promotions to a Stage or a whole project, for a while",
        description="Freeze TARGET (a Stage, or the project by its name) as /freeze does in "
        "chat: Promotions to it wait, auto-promotion included, until the end or an unfreeze. "
        "Recorded as you, on the Stage or the project's ProjectConfig.",
    )
    freeze.add_argument("target", metavar="STAGE|PROJECT", help="the Stage, or the project")
    until = freeze.add_mutually_exclusive_group()
    until.add_argument("--for", dest="duration", metavar="DURATION", help="30m, 2h, 1h30m, 3d")
    until.add_argument("--until", metavar="TIME", help="18:00 (UTC) or 2026-12-04T09:00Z")
    freeze.add_argument("--reason", default="", metavar="TEXT", help="why, shown to everyone")
    _common(freeze)
    unfreeze = sub.add_parser(
        "unfreeze",
        help="lift a freeze; held Promotions start",
        description="Lift the freeze of TARGET, as /unfreeze does in chat.",
    )
    unfreeze.add_argument("target", metavar="STAGE|PROJECT", help="the Stage, or the project")
    _common(unfreeze)
    status = sub.add_parser(
        "status",
        help="each Stage: its Freight, health, verification and what runs",
        description="The project's Stages, as /status shows them in chat.",
    )
    status.add_argument("stage", nargs="?", metavar="STAGE", help="only this Stage")
    _common(status, project_required=False)
    get = sub.add_parser(
        "get",
        help="list the project's Stages, Freight or Promotions",
        description="List the project's objects of one kind.",
    )
    get.add_argument("kind", choices=KINDS, help="what to list")
    _common(get, project_required=False)
    return parser


@dataclass(frozen=True, slots=True)
class Outcome:
    code: int
    text: str
    data: Any = None


def _actor(kubeconfig: str | None, context: str | None) -> str:
    """Who acts, for the record: the kubeconfig context's user (the API server's audit log and
    RBAC know the real identity; this names it on the objects, as chat's ``github:LOGIN``)."""
    from app.controller import kube as k

    user = k.kubeconfig_user(kubeconfig, context)
    return f"kubernetes:{user}" if user else "kubernetes"


def _cluster_decides(stage: Mapping[str, Any] | None) -> Any:
    from promoter.chat.planner import Decision

    return Decision(True, "the cluster's RBAC decides, as the user")


async def _snapshot(kube: Any, namespace: str) -> Any:
    from app.controller import kube as k
    from promoter.chat.port import Snapshot
    from promoter.control.policies import PolicyError, cluster_config, project_config, schedule_for
    from promoter.resources.model import name_of

    async def items(rt: k.ResourceType, ns: str | None) -> list[dict[str, Any]]:
        try:
            found, _ = await kube.list(rt, ns)
        except k.NotFound:  # a kind this cluster does not serve (no Warehouses CRD)
            return []
        return list(found)

    stages = await items(k.STAGES, namespace)
    configs = await items(k.PROJECT_CONFIGS, namespace)
    clusters = await items(k.CLUSTER_CONFIGS, None)
    try:
        project = project_config(configs[0]) if configs else None
        cluster = cluster_config(clusters[0]) if clusters else None
    except PolicyError:
        project = cluster = None  # the controller reports a bad config on the object
    return Snapshot(
        namespace,
        stages=list(stages),
        freight=list(await items(k.FREIGHT, namespace)),
        promotions=list(await items(k.PROMOTIONS, namespace)),
        warehouses=list(await items(k.WAREHOUSES, namespace)),
        schedules={name_of(s): schedule_for(s, project, cluster) for s in stages},
        project_config=project,
        cluster_config=cluster,
    )


class _ClusterTasks:
    """The builder's TaskSource over (Cluster)PromotionTasks read once from the cluster."""

    def __init__(self, tasks: Sequence[Mapping[str, Any]], cluster: Sequence[Mapping[str, Any]]):
        self.tasks = {str((t.get("metadata") or {}).get("name")): t for t in tasks}
        self.cluster = {str((t.get("metadata") or {}).get("name")): t for t in cluster}

    def get_task(self, ref: Any, namespace: str) -> Any:
        from promoter.resources.model import parse_task

        found = (self.cluster if ref.kind == "ClusterPromotionTask" else self.tasks).get(ref.name)
        return parse_task(found) if found is not None else None


async def act(args: argparse.Namespace, now: datetime | None = None) -> Outcome:
    """Carry out one cluster command; never raises for the user's or the cluster's refusal."""
    from app.controller import kube as k
    from promoter.chat.grammar import CommandError, parse_command, reason_of
    from promoter.chat.planner import (
        AlreadyApproved,
        DoAbort,
        DoApprove,
        DoFreeze,
        DoPromote,
        DoReverify,
        DoUnfreeze,
        Facts,
        Refusal,
        ShowStatus,
        plan,
    )
    from promoter.resources.annotations import KARGO_GROUP
    from promoter.resources.model import name_of

    namespace = args.project or "default"
    now = now or datetime.now(UTC)
    words: dict[str, Callable[[], str]] = {
        "promote": lambda: f"{args.freight} to {args.to}",
        "approve": lambda: f"{args.freight} for {args.stage}",
        "abort": lambda: args.promotion,
        "verify": lambda: args.stage,
        "status": lambda: args.stage or "",
        "freeze": lambda: " ".join(
            [args.target]
            + ([f"for {args.duration}"] if args.duration else [])
            + ([f"until {args.until}"] if args.until else [])
            + ([args.reason] if args.reason else [])
        ),
        "unfreeze": lambda: args.target,
    }
    try:
        kube = await k.load_kube(args.kubeconfig, context=args.context)
    except Exception as e:  # a missing or broken kubeconfig: the library's words
        return Outcome(EXIT_USAGE, f"error: cannot use the kubeconfig: {e}")
    actor = _actor(args.kubeconfig, args.context)
    try:
        # A user's command line has no server settings: it asks the cluster which group its
        # CRDs are in (ours unless only Kargo's is served, as with deploy/kargo-group).
        if not await kube.serves(k.OUR_GROUP) and await kube.serves(KARGO_GROUP):
            kube.api_group = KARGO_GROUP
        if args.command == "get":
            return await _get(kube, namespace, args.kind)
        try:
            command = parse_command(args.command, words[args.command]())
        except CommandError as e:
            return Outcome(EXIT_USAGE, f"error: {reason_of(e)}")
        snapshot = await _snapshot(kube, namespace)
        # Who may act is the cluster's to say (RBAC, as the user): the planner decides the rest.
        decision = plan(command, Facts(snapshot, _cluster_decides, now=now, actor=actor))
        if isinstance(decision, Refusal):
            return Outcome(EXIT_REFUSED, f"refused: {decision.reason}. Nothing was changed.")
        if isinstance(decision, DoPromote):
            from app.controller.creation import create_promotion

            stage = snapshot.stage(decision.stage)
            freight = decision.create or next(
                f for f in snapshot.freight if name_of(f) == decision.freight
            )
            if decision.create is not None:
                await kube.create(k.FREIGHT, dict(decision.create))
            tasks, _ = await kube.list(k.PROMOTION_TASKS, namespace)
            cluster_tasks, _ = await kube.list(k.CLUSTER_PROMOTION_TASKS, None)
            assert stage is not None
            created = await create_promotion(
                kube, stage, freight, _ClusterTasks(tasks, cluster_tasks), actor=actor, now=now
            )
            name = str(created["metadata"]["name"])
            return Outcome(
                EXIT_OK,
                f"Promotion {name} of Freight {decision.label.short} to Stage "
                f"{decision.stage} created (follow it: longshoreman get promotions "
                f"--project {namespace})",
                created,
            )
        if isinstance(decision, DoApprove):
            from promoter.resources.stages import approval_patch

            patch = approval_patch(decision.stage, actor, now)["status"]
            patched = await kube.patch_status(
                k.FREIGHT, namespace, decision.freight, patch, resource_version=None
            )
            return Outcome(
                EXIT_OK,
                f"Freight {decision.label.short} approved for Stage {decision.stage}",
                patched,
            )
        if isinstance(decision, AlreadyApproved):
            by = decision.approval.approved_by
            return Outcome(
                EXIT_OK,
                f"Freight {decision.label.short} was already approved for Stage "
                f"{decision.stage}" + (f" by {by}" if by else "") + ". Nothing was changed.",
            )
        if isinstance(decision, DoAbort):
            from promoter.resources import annotations as ann

            for name in decision.promotions:
                await kube.patch(
                    k.PROMOTIONS, namespace, name, {"metadata": {"annotations": ann.abort(actor)}}
                )
            return Outcome(EXIT_OK, f"abort requested for {', '.join(decision.promotions)}")
        if isinstance(decision, DoReverify):
            from promoter.resources import annotations as ann

            await kube.patch(
                k.STAGES,
                namespace,
                decision.stage,
                {"metadata": {"annotations": ann.reverify(actor, now)}},
            )
            return Outcome(
                EXIT_OK,
                f"verification of the current Freight in Stage {decision.stage} requested",
            )
        if isinstance(decision, DoFreeze | DoUnfreeze):
            from app.controller.promotions import write_freeze

            value = decision.freeze.to_annotation() if isinstance(decision, DoFreeze) else None
            await write_freeze(kube, namespace, decision.stage, value)
            said = (
                decision.said(namespace, now)
                if isinstance(decision, DoFreeze)
                else decision.said(namespace)
            )
            return Outcome(EXIT_OK, said.replace("`", ""))
        if isinstance(decision, ShowStatus):
            return _status(decision)
        return Outcome(EXIT_USAGE, f"error: {args.command} is not a cluster command")
    except k.KubeError as e:
        # RBAC, admission or validation: the server's own words.
        return Outcome(EXIT_REFUSED, f"refused by the cluster: {e.server_message}")
    finally:
        await kube.close()


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines
    )


def _status(decision: Any) -> Outcome:
    rows = [
        (r.stage, r.freight, r.health, r.verification, r.running, str(r.queued), r.window)
        for r in decision.rows
    ]
    if not rows:
        return Outcome(EXIT_OK, f"project {decision.namespace} has no Stages")
    headers = ("STAGE", "FREIGHT", "HEALTH", "VERIFICATION", "RUNNING", "QUEUED", "WINDOW")
    data = [dict(zip([h.lower() for h in headers], r, strict=True)) for r in rows]
    return Outcome(EXIT_OK, _table(headers, rows), data)


async def _get(kube: Any, namespace: str, kind: str) -> Outcome:
    from app.controller import kube as k
    from promoter.resources.model import name_of

    rt = {"stages": k.STAGES, "freight": k.FREIGHT, "promotions": k.PROMOTIONS}[kind]
    items, _ = await kube.list(rt, namespace)
    rows: list[tuple[str, ...]]
    if kind == "stages":
        headers: tuple[str, ...] = ("NAME", "FREIGHT", "HEALTH", "LAST PROMOTION")
        rows = []
        for s in items:
            status = s.get("status") or {}
            history = status.get("freightHistory") or [{}]
            current = ", ".join(
                str(v.get("name") or "")[:12] for v in (history[0].get("items") or {}).values()
            )
            health = str((status.get("health") or {}).get("status") or "")
            last = str((status.get("lastPromotion") or {}).get("name") or "")
            rows.append((name_of(s), current or "-", health or "-", last or "-"))
    elif kind == "freight":
        headers = ("NAME", "ALIAS", "ORIGIN", "VERIFIED IN", "APPROVED FOR")
        rows = [
            (
                name_of(f),
                str(f.get("alias") or ""),
                str((f.get("origin") or {}).get("name") or ""),
                ",".join(sorted((f.get("status") or {}).get("verifiedIn") or {})) or "-",
                ",".join(sorted((f.get("status") or {}).get("approvedFor") or {})) or "-",
            )
            for f in items
        ]
    else:
        headers = ("NAME", "STAGE", "FREIGHT", "PHASE")
        rows = [
            (
                name_of(p),
                str((p.get("spec") or {}).get("stage") or ""),
                str((p.get("spec") or {}).get("freight") or "")[:12],
                str((p.get("status") or {}).get("phase") or "Pending"),
            )
            for p in items
        ]
    if not rows:
        return Outcome(EXIT_OK, f"No {kind} in project {namespace}.", [])
    return Outcome(EXIT_OK, _table(headers, rows), items)


def main(
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if not argv or (argv[0] not in CLUSTER_COMMANDS and argv[0] not in ("-h", "--help")):
        # The local runner's commands (run, demo), with their own parser and help.
        from promoter.local.cli import main as local_main

        return local_main(argv, stdout, stderr)
    args = build_parser().parse_args(argv)
    outcome = asyncio.run(act(args))
    stream = stdout if outcome.code == EXIT_OK else stderr
    if args.output == "json" and outcome.code == EXIT_OK:
        json.dump(outcome.data, stream, indent=2, default=str)
        stream.write("\n")
    else:
        print(outcome.text, file=stream)
    return outcome.code


def run() -> None:
    """The ``longshoreman`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    run()
