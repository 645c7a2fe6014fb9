"""The ``longshoreman`` command line against the embedded cluster of ``python -m app serve``,
with the kubeconfig its first log line names: a newcomer's first ``promote`` runs to the end,
and ``status`` and ``get`` show it. And ``--help`` describes every flag of every command."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from pathlib import Path

import pytest

from app.cli import CLUSTER_COMMANDS, build_parser, main
from app.controller import kube as k
from tests.integration.test_pages import NS, serving
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


def test_help_describes_every_flag_of_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == set(CLUSTER_COMMANDS)
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            assert action.help, f"longshoreman {name}: {action.option_strings or action.dest}"
        text = sub.format_help()
        assert "--kubeconfig" in text and "--project" in text and "--output" in text
    # The local runner's commands stay where they were.
    with pytest.raises(SystemExit) as exited:
        main(["run", "--help"])
    assert exited.value.code == 0 and "--manifests" in capsys.readouterr().out


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
