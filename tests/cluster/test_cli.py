"""The ``longshoreman`` command line against a cluster, as a user with a kubeconfig: it promotes,
approves, aborts and re-verifies with that user's rights, and where RBAC refuses it says so in
the API server's own words and changes nothing.

The user here is the controller's ServiceAccount of deploy/overlays/example (its RBAC, on the
real API server; evaluated by the authorizing proxy in front of the emulator). No controller
runs: what the commands write is what is checked.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from app.cli import main
from app.controller import kube as k
from app.embedded import seed
from promoter.resources import annotations as ann
from tests.cluster.support import ROOT, Cluster, rbac_objects
from tests.cluster.test_chat_refusals import without_promotion_create

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"


async def longshoreman(kubeconfig: Path, *argv: str) -> tuple[int, str, str]:
    """Run the command line (it runs its own event loop: in a thread, as a process would)."""
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(main, [*argv, "--kubeconfig", str(kubeconfig)], out, err)
    return code, out.getvalue(), err.getvalue()


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


async def test_the_cli_promotes_approves_aborts_and_reverifies_as_the_user(
    cluster: Cluster,
) -> None:
    await cluster.install_crds()
    kube = cluster.kube()
    await seed(kube, [PROJECT])
    await kube.patch(
        k.STAGES, NS, "test", {"spec": {"verification": {"analysisTemplates": [{"name": "smoke"}]}}}
    )
    async with cluster.controller_access() as access:
        config = access.kubeconfig_path
        code, out, err = await longshoreman(
            config, "promote", "frozen-tauntaun", "--to", "test", "--project", NS
        )
        assert code == 0, err
        assert out.startswith("Promotion test.") and "Freight frozen-tauntaun to Stage test" in out
        name = out.split()[1]
        promotion = await kube.get(k.PROMOTIONS, NS, name)
        assert promotion["spec"]["stage"] == "test"
        assert ann.created_by(promotion) and ann.created_by(promotion).startswith("kubernetes")

        code, out, err = await longshoreman(
            config, "approve", "frozen-tauntaun", "--for", "uat", "--project", NS
        )
        assert (code, out.strip()) == (0, "Freight frozen-tauntaun approved for Stage uat"), err
        freight = await kube.get(k.FREIGHT, NS, "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b")
        assert "uat" in freight["status"]["approvedFor"]

        code, out, err = await longshoreman(config, "abort", name, "--project", NS)
        assert (code, out.strip()) == (0, f"abort requested for {name}"), err
        assert set(ann.ABORT_ANNOTATIONS) & set(annotations(await kube.get(k.PROMOTIONS, NS, name)))

        code, out, err = await longshoreman(config, "verify", "test", "--project", NS)
        assert code == 0, err
        assert out.strip() == "verification of the current Freight in Stage test requested"
        assert set(ann.REVERIFY_ANNOTATIONS) & set(
            annotations(await kube.get(k.STAGES, NS, "test"))
        )

        code, out, _ = await longshoreman(config, "get", "promotions", "--project", NS)
        assert code == 0 and name in out and "NAME" in out.splitlines()[0]

        # The same planner as chat: a Stage that does not follow, refused before any write.
        code, _, err = await longshoreman(
            config, "promote", "frozen-tauntaun", "--to", "nowhere", "--project", NS
        )
        assert code == 1
        assert err.strip() == (
            "refused: there is no Stage `nowhere` in project `kargo-demo`. Nothing was changed."
        )


async def test_the_cli_says_what_rbac_refuses_in_the_servers_words(cluster: Cluster) -> None:
    await cluster.install_crds()
    kube = cluster.kube()
    await seed(kube, [PROJECT])
    async with cluster.controller_access(without_promotion_create(rbac_objects())) as access:
        code, out, err = await longshoreman(
            access.kubeconfig_path, "promote", "frozen-tauntaun", "--to", "test", "--project", NS
        )
    assert (code, out) == (1, "")
    assert err.startswith("refused by the cluster: ")
    assert (
        'cannot create resource "promotions" in API group "longshoreman.dev" in the namespace '
        '"kargo-demo"'
    ) in err
    items, _ = await kube.list(k.PROMOTIONS, NS)
    assert items == []


async def test_the_cli_freezes_a_stage_and_the_project_as_the_controller_may(
    cluster: Cluster,
) -> None:
    await cluster.install_crds()
    kube = cluster.kube()
    await seed(kube, [PROJECT])
    async with cluster.controller_access() as access:
        config = access.kubeconfig_path
        code, out, err = await longshoreman(
            config, "freeze", "test", "--for", "2h", "--reason", "incident 4711", "--project", NS
        )
        assert code == 0 and "Stage test is frozen until" in out, err
        assert ann.FREEZE in annotations(await kube.get(k.STAGES, NS, "test"))
        # The project: the real API server accepts the ProjectConfig made for it, empty.
        code, out, err = await longshoreman(config, "freeze", NS, "--project", NS)
        assert code == 0 and "until someone unfreezes it" in out, err
        made = await kube.get(k.PROJECT_CONFIGS, NS, NS)
        assert ann.FREEZE in annotations(made)
        for target in ("test", NS):
            code, out, err = await longshoreman(config, "unfreeze", target, "--project", NS)
            assert code == 0 and "is unfrozen" in out, err
        assert ann.FREEZE not in annotations(await kube.get(k.PROJECT_CONFIGS, NS, NS))
