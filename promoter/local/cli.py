"""Command line of the local runner: ``python -m promoter run|demo`` (also ``longshoreman``).

Exit codes: 0 the Promotion Succeeded; 1 it Failed, Errored or was Aborted (the message names the
step and why); 2 the input is invalid (YAML, kind, missing Stage/Freight/var, expression syntax),
naming the file and field. With ``--output json`` the final Promotion object is the only thing on
stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from promoter.errors import InvalidInput
from promoter.local.runner import RunOptions, run_local
from promoter.resources.manifests import load
from promoter.resources.model import Promotion, Var
from promoter.steps.base import GitSettings, HttpSettings, StepServices

# The local runner runs a developer's own manifests on their own machine, where the services a
# promotion talks to (and the examples' fakes) are often on loopback; the server allows none.
LOCAL_HTTP_ALLOW = ("127.0.0.0/8", "::1", "localhost")
DEFAULT_HTTP_ALLOW = ",".join(LOCAL_HTTP_ALLOW)

EXIT_OK = 0
EXIT_PROMOTION_FAILED = 1
EXIT_INVALID_INPUT = 2


def parse_var(text: str) -> Var:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise InvalidInput(f"{text!r} is not of the form NAME=VALUE", field="--var")
    return Var(name.strip(), value)


@dataclass(frozen=True, slots=True)
class RunArgs:
    """The ``run`` command's arguments, as its parser gives them."""

    manifests: str
    stage: str
    freight: str
    namespace: str | None = None
    var: Sequence[str] = ()
    work_dir: Path | None = None
    output: str = "text"
    git_config: Path | None = None
    http_allow: str = DEFAULT_HTTP_ALLOW
    ui_base_url: str = ""

    @classmethod
    def of(cls, args: argparse.Namespace) -> RunArgs:
        return cls(
            manifests=args.manifests,
            stage=args.stage,
            freight=args.freight,
            namespace=args.namespace,
            var=args.var,
            work_dir=args.work_dir,
            output=args.output,
            git_config=args.git_config,
            http_allow=args.http_allow,
            ui_base_url=args.ui_base_url,
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="longshoreman",
        description="Run Kargo-compatible promotions locally (no cluster needed).",
        epilog="Against a cluster, through your kubeconfig: longshoreman promote | approve | "
        "abort | verify | status | get (each with --help).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="promote a Freight into a Stage from manifests on disk",
        description="Inflate the Stage's promotion template for the Freight and run its steps to "
        "a terminal phase. Exit 0 Succeeded, 1 Failed/Errored/Aborted, 2 invalid input.",
    )
    run.add_argument(
        "--manifests",
        required=True,
        metavar="PATH",
        help="a YAML file (multi-document) or a directory of them: the Stage, the "
        "Freight and any (Cluster)PromotionTasks",
    )
    run.add_argument(
        "--stage",
        required=True,
        metavar="NAME",
        help="the Stage to promote into (in the manifests)",
    )
    run.add_argument("--freight", required=True, metavar="NAME", help="Freight name or alias")
    run.add_argument(
        "--namespace",
        metavar="NS",
        help="project namespace (default: the Stage manifest's, else 'default')",
    )
    run.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Promotion-level var (repeatable); later ones win",
    )
    run.add_argument(
        "--work-dir",
        type=Path,
        metavar="DIR",
        help="keep the Promotion's working files here (default: a temporary dir)",
    )
    run.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text for people (the default) or json for scripts: the Promotion's final status",
    )
    run.add_argument(
        "--git-config",
        type=Path,
        metavar="FILE",
        help="a gitconfig for git steps (credential helpers, url.<base>.insteadOf "
        "rules); credentials never go in manifests",
    )
    run.add_argument(
        "--http-allow",
        default=DEFAULT_HTTP_ALLOW,
        metavar="HOSTS",
        help="hosts the http step may reach besides public ones: comma-separated names, "
        "*.suffix, IPs or CIDRs (default: loopback, for services on this machine; the server "
        "allows none unless LONGSHOREMAN_HTTP_ALLOW says so)",
    )
    run.add_argument(
        "--ui-base-url",
        default="",
        metavar="URL",
        help="ctx.uiBaseUrl in expressions: where people reach your Longshoreman server (what "
        "its LONGSHOREMAN_PUBLIC_URL says); default empty",
    )
    sub.add_parser(
        "demo",
        help="promote the example manifests into a throwaway local git remote",
        description="Creates a local bare git repository standing in for the example GitOps "
        "repo, then runs the example Stage's promotion against it.",
    )
    return parser


class Progress:
    """Prints one line per step transition as the engine reports them."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._printed: dict[int, str] = {}

    def step(self, promotion: Promotion, index: int) -> None:
        steps = promotion.status.steps
        if index >= len(steps):
            return
        ex = steps[index]
        key = f"{ex.status}|{ex.message}"
        if self._printed.get(index) == key:
            return
        self._printed[index] = key
        spec = promotion.steps[index]
        line = f"[{index + 1}/{len(promotion.steps)}] {ex.alias} ({spec.uses}): {ex.status}"
        if ex.message:
            line += f" - {ex.message}"
        print(line, file=self.stream, flush=True)

    def wait(self, promotion: Promotion, seconds: float) -> None:
        print(f"    waiting {seconds:.1f}s before checking again", file=self.stream, flush=True)


def _services(git_config: Path | None, http_allow: str = "", ui_base_url: str = "") -> StepServices:
    env = {}
    if git_config is not None:
        if not git_config.is_file():
            raise InvalidInput("no such file", field="--git-config", source=str(git_config))
        env["GIT_CONFIG_GLOBAL"] = str(git_config.resolve())
    allow = tuple(h.strip() for h in http_allow.split(",") if h.strip())
    if allow and allow != LOCAL_HTTP_ALLOW:
        # The rules live with the http step, which imports aiohttp; the default list is known
        # to parse, so only a list given on the command line pays for that import here.
        from promoter.steps.http import HostRules

        try:
            HostRules.parse(allow)
        except ValueError as e:
            raise InvalidInput(str(e), field="--http-allow") from None
    # With an allow list, only what it lists is reachable; "*" keeps every public host open.
    if allow:
        allow = ("*", *allow)
    return StepServices(
        git=GitSettings(env=env),
        http=HttpSettings(allow_hosts=allow),
        ui_base_url=ui_base_url,
    )


def cmd_run(args: RunArgs, stdout: TextIO, stderr: TextIO) -> int:
    progress_stream = stderr if args.output == "json" else stdout
    progress = Progress(progress_stream)
    try:
        manifests = load(args.manifests)
        options = RunOptions(
            stage=args.stage,
            freight=args.freight,
            namespace=args.namespace,
            vars=[parse_var(v) for v in args.var],
            work_dir=args.work_dir,
            services=_services(args.git_config, args.http_allow, args.ui_base_url),
        )
        promotion = run_local(manifests, options, observer=progress.step, on_wait=progress.wait)
    except InvalidInput as e:
        print(f"error: {e}", file=stderr)
        return EXIT_INVALID_INPUT
    return report(promotion, args.output, stdout, progress_stream)


def report(promotion: Promotion, output: str, stdout: TextIO, progress_stream: TextIO) -> int:
    status = promotion.status
    summary = f"Promotion {promotion.namespace}/{promotion.name}: {status.phase.value}"
    if status.message:
        summary += f" - {status.message}"
    print(summary, file=progress_stream, flush=True)
    if output == "json":
        json.dump(promotion.to_object(), stdout, indent=2, sort_keys=False, default=str)
        stdout.write("\n")
    return EXIT_OK if status.phase.value == "Succeeded" else EXIT_PROMOTION_FAILED


def main(
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return cmd_run(RunArgs.of(args), stdout, stderr)
    from promoter.local.demo import run_demo

    return run_demo(stdout, stderr)
