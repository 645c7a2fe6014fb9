"""deploy/kargo-group's generated files: current, and our CRDs and rules with only the group moved.

The component installs our kinds in Kargo's group (``LONGSHOREMAN_API_GROUP=kargo.akuity.io``).
Its CRDs and RBAC patch are generated from deploy/crds and deploy/base/rbac.yaml by
``python -m app.kargo_group``; these tests fail when someone edits ours and forgets to
regenerate, or edits the generated files by hand. The rendered component (with kustomize) is
checked in tests/integration/test_deploy_kargo_group.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from app.kargo_group import COMPONENT, SOURCE_CRDS, SOURCE_RBAC, generated, main

KARGO_GROUP = "kargo.akuity.io"


def documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def test_the_generated_files_are_current_and_nothing_else_is_in_crds() -> None:
    assert main(["--check"]) == 0, "run: python -m app.kargo_group"
    files = generated()
    on_disk = {p for p in (COMPONENT / "crds").iterdir()}
    assert on_disk == {p for p in files if p.parent == COMPONENT / "crds"}


def test_each_kargo_group_crd_is_ours_with_only_its_name_and_group_changed() -> None:
    ours = {
        d["spec"]["names"]["kind"]: d
        for p in SOURCE_CRDS.glob("*.longshoreman.dev.yaml")
        for d in documents(p)
    }
    theirs = [d for p in (COMPONENT / "crds").glob("*.kargo.akuity.io.yaml") for d in documents(p)]
    assert sorted(d["spec"]["names"]["kind"] for d in theirs) == sorted(ours)
    for crd in theirs:
        kind = crd["spec"]["names"]["kind"]
        assert crd["spec"]["group"] == KARGO_GROUP
        assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{KARGO_GROUP}"
        expected = copy.deepcopy(ours[kind])
        expected["spec"]["group"] = KARGO_GROUP
        expected["metadata"]["name"] = crd["metadata"]["name"]
        assert crd == expected, kind


def apply(document: Any, operations: list[dict[str, Any]]) -> Any:
    """The ``test`` and ``replace`` operations of a JSON patch (RFC 6902), all the file uses."""
    patched = copy.deepcopy(document)
    for operation in operations:
        *parents, last = operation["path"].lstrip("/").split("/")
        holder = patched
        for part in parents:
            holder = holder[int(part)] if isinstance(holder, list) else holder[part]
        key: Any = int(last) if isinstance(holder, list) else last
        if operation["op"] == "test":
            assert holder[key] == operation["value"], operation
        else:
            assert operation["op"] == "replace", operation
            holder[key] = operation["value"]
    return patched


def test_the_rbac_patch_moves_every_rule_on_our_group_and_touches_nothing_else() -> None:
    role = next(
        d
        for d in documents(SOURCE_RBAC)
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "longshoreman"
    )
    (operations,) = documents(COMPONENT / "rbac-patch.yaml")
    moved = apply(role, operations)
    assert moved["metadata"] == role["metadata"]
    assert len(moved["rules"]) == len(role["rules"])
    for before, after in zip(role["rules"], moved["rules"], strict=True):
        groups = [KARGO_GROUP if g == "longshoreman.dev" else g for g in before["apiGroups"]]
        assert after == {**before, "apiGroups": groups}
    assert any(KARGO_GROUP in rule["apiGroups"] for rule in moved["rules"])
