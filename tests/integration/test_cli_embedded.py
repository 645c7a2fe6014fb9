"""The ``longshoreman`` command line against the embedded cluster of ``python -m app serve``,
with the kubeconfig its first log line names: a newcomer's first ``promote`` runs to the end,
and ``status`` and ``get`` show it; ``approve``, ``abort`` and ``verify`` are carried out by the
running controller. And ``--help`` describes every flag of every command."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import CLUSTER_COMMANDS, build_parser, main
from app.controller import kube as k
from promoter.local.cli import build_parser as local_parser
from promoter.resources.stages import phase_of
from tests.integration.test_pages import NS, serving
from tests.support import objects
from tests.support.controller import wait_for_object

pytestmark = pytest.mark.integration


async def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(main, list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


async def test_promote_status_and_get_against_the_embedded_cluster(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_, state):
        assert state.kube is not None
        config = str(tmp_path / "work" / "kubeconfig")
        code, out, err = await run_cli(
            "promote", "frozen-tauntaun", "--to", "test", "--project", NS, "--kubeconfig", config
        )
        assert code == 0, err
        name = out.split()[1]
        await wait_for_object(
            state.kube,
            k.PROMOTIONS,
            NS,
            name,
            lambda p: bool((p.get("status") or {}).get("phase")),
        )
        code, out, err = await run_cli("status", "--project", NS, "--kubeconfig", config)
        assert code == 0, err
        header, *rows = out.splitlines()
        assert header.split()[:3] == ["STAGE", "FREIGHT", "HEALTH"]
        assert any(r.split()[0] == "test" for r in rows)

        code, out, err = await run_cli(
            "get", "freight", "--project", NS, "--kubeconfig", config, "-o", "json"
        )
        assert code == 0, err
        assert [f["alias"] for f in json.loads(out)] == ["frozen-tauntaun"]

        # A Freight the planner cannot find: the chat core's words, and nothing created.
        code, _, err = await run_cli(
            "promote", "no-such-thing", "--to", "test", "--project", NS, "--kubeconfig", config
        )
        assert code == 1 and err.startswith("refused: ") and "no-such-thing" in err


async def test_approve_abort_and_verify_against_the_embedded_cluster(tmp_path: Path) -> None:
    """The other three actions, each carried out by the running controller: the approval lets
    the Freight into uat, the abort stops a Promotion waiting at a gate, the re-verification
    starts a new verification of the Freight in a Stage that verifies."""
    async with serving(tmp_path) as (_, state):
        assert state.kube is not None
        kube = state.kube
        config = ("--project", NS, "--kubeconfig", str(tmp_path / "work" / "kubeconfig"))

        async def add_stage(name: str, step: dict[str, Any], verification: list[str]) -> None:
            stage = objects.stage(
                name, namespace=NS, warehouse="kargo-demo", steps=[step], verification=verification
            )
            await kube.create(k.STAGES, stage)

        await add_stage("held", {"uses": "gate", "as": "wait", "config": {"name": "never"}}, [])
        code, out, err = await run_cli("promote", "frozen-tauntaun", "--to", "held", *config)
        assert code == 0, err
        held = out.split()[1]
        await wait_for_object(
            kube, k.PROMOTIONS, NS, held, lambda p: phase_of(p).value == "Running"
        )
        code, out, err = await run_cli("abort", held, *config)
        assert (code, out.strip()) == (0, f"abort requested for {held}"), err
        await wait_for_object(
            kube, k.PROMOTIONS, NS, held, lambda p: phase_of(p).value == "Aborted"
        )

        code, out, err = await run_cli("approve", "frozen-tauntaun", "--for", "uat", *config)
        assert (code, out.strip()) == (0, "Freight frozen-tauntaun approved for Stage uat"), err
        freights, _ = await kube.list(k.FREIGHT, NS)
        approval = freights[0]["status"]["approvedFor"]["uat"]
        assert approval["approvedBy"].startswith("kubernetes:")  # the kubeconfig's user

        # A Stage that verifies; its first verification has nothing to run (no template here).
        done = {"uses": "compose-output", "as": "out", "config": {"done": "yes"}}
        await add_stage("checked", done, ["smoke"])
        code, out, err = await run_cli("promote", "frozen-tauntaun", "--to", "checked", *config)
        assert code == 0, err

        def verifications(stage: dict[str, Any]) -> list[Any]:
            history = (stage.get("status") or {}).get("freightHistory") or [{}]
            return list(history[0].get("verificationHistory") or [])

        await wait_for_object(kube, k.STAGES, NS, "checked", lambda s: len(verifications(s)) == 1)
        code, out, err = await run_cli("verify", "checked", *config)
        assert code == 0, err
        assert out.strip() == "verification of the current Freight in Stage checked requested"
        stage = await wait_for_object(
            kube, k.STAGES, NS, "checked", lambda s: len(verifications(s)) == 2
        )
        assert str(verifications(stage)[0].get("actor") or "").startswith("kubernetes:")


def test_help_describes_every_flag_of_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == set(CLUSTER_COMMANDS)
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            assert action.help, f"longshoreman {name}: {action.option_strings or action.dest}"
        text = sub.format_help()
        assert "--kubeconfig" in text and "--project" in text and "--output" in text
    # The local runner's commands stay where they were, every flag described too.
    with pytest.raises(SystemExit) as exited:
        main(["run", "--help"])
    assert exited.value.code == 0 and "--manifests" in capsys.readouterr().out
    local = local_parser()
    local_subparsers = next(a for a in local._actions if isinstance(a, argparse._SubParsersAction))
    assert set(local_subparsers.choices) == {"run", "demo"}
    for name, sub in local_subparsers.choices.items():
        for action in sub._actions:
            assert action.help, f"longshoreman {name}: {action.option_strings or action.dest}"


async def test_freeze_and_unfreeze_a_stage_and_the_project(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_, state):
        assert state.kube is not None
        config = str(tmp_path / "work" / "kubeconfig")
        common = ("--project", NS, "--kubeconfig", config)
        code, out, err = await run_cli(
            "freeze", "test", "--for", "2h", "--reason", "incident 4711", *common
        )
        assert code == 0, err
        assert out.startswith("Stage test is frozen until ") and ": incident 4711." in out
        # The planner sees the freeze: promoting is refused with the reason.
        code, _, err = await run_cli("promote", "frozen-tauntaun", "--to", "test", *common)
        assert code == 1 and "frozen until" in err and "incident 4711" in err
        code, out, err = await run_cli("unfreeze", "test", *common)
        assert code == 0 and "Stage test is unfrozen" in out, err
        # The whole project: recorded on its ProjectConfig (made when it has none).
        code, out, err = await run_cli("freeze", NS, *common)
        assert code == 0 and "until someone unfreezes it" in out, err
        frozen = await state.kube.get(k.PROJECT_CONFIGS, NS, NS)
        assert "longshoreman.dev/freeze" in frozen["metadata"]["annotations"]
        code, _, err = await run_cli("promote", "frozen-tauntaun", "--to", "test", *common)
        assert code == 1 and "frozen until unfrozen" in err
        code, out, err = await run_cli("unfreeze", NS, *common)
        assert code == 0 and f"project {NS} is unfrozen" in out, err
        code, _, err = await run_cli("unfreeze", NS, *common)
        assert code == 1 and "is not frozen from chat" in err
