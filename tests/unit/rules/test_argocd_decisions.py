"""Table tests of the pure Argo CD rules in :mod:`promoter.rules.argocd`.

Configs are written here (Kargo's documentation examples of both steps go through the same rules
in tests/conformance/test_kargo_docs_argocd.py); Application shapes follow Argo CD's
(``status.operationState{phase, message, operation{initiatedBy, info, sync}, syncResult}``,
``status.sync``, ``status.health``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from promoter.errors import StepError
from promoter.resources import annotations as ann
from promoter.rules.argocd import (
    MAX_SYNC_ATTEMPTS,
    REFRESH_ANNOTATION,
    Action,
    AppUpdate,
    app_health,
    authorization_problem,
    decide,
    desired_revisions,
    desired_sources,
    health_check,
    health_check_keys,
    health_of,
    merge_health,
    owns_operation,
    parse_update_config,
    parse_wait_config,
    sync_patch,
    terminate_patch,
    wait_readiness,
)

PROMO = "test.01j000000000000000000000.abc1234"
REPO = "https://github.com/example/repo.git"
CHART_REPO = "https://charts.example.com"
T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def ts(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def app(
    name: str = "web",
    *,
    annotations: Mapping[str, str] | None = None,
    source: Mapping[str, Any] | None = None,
    sources: list[Mapping[str, Any]] | None = None,
    status: Mapping[str, Any] | None = None,
    operation: Mapping[str, Any] | None = None,
    spec_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = dict(spec_extra or {})
    if sources is not None:
        spec["sources"] = sources
    else:
        spec["source"] = dict(source or {"repoURL": REPO, "targetRevision": "main", "path": "."})
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "argocd",
            "resourceVersion": "7",
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": dict(status or {}),
    }
    if operation is not None:
        obj["operation"] = operation
    return obj


def op(promotion: str | None = PROMO, *, user: str = "tester", key: str = ann.PROMOTION_INFO):
    info = [{"name": "Reason", "value": "x"}]
    if promotion is not None:
        info.append({"name": key, "value": promotion})
    return {"initiatedBy": {"username": user}, "info": info, "sync": {"revision": "main"}}


def state(
    phase: str,
    operation: Mapping[str, Any],
    *,
    revision: str | None = None,
    revisions: list[str] | None = None,
    message: str = "",
    finished: datetime | None = T0,
) -> dict[str, Any]:
    s: dict[str, Any] = {"phase": phase, "operation": operation, "message": message}
    if phase in ("Succeeded", "Failed", "Error") and finished is not None:
        s["finishedAt"] = ts(finished)
    if revisions is not None:
        s["syncResult"] = {"revisions": revisions}
    elif revision is not None:
        s["syncResult"] = {"revision": revision}
    return s


def update(config: Mapping[str, Any]) -> AppUpdate:
    return parse_update_config({"apps": [config]})[0]


# ---- config -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"team": "platform", "env": "prod"}}, "env=prod,team=platform"),
        (
            {"matchExpressions": [{"key": "env", "operator": "In", "values": ["qa", "prod"]}]},
            "env in (qa,prod)",
        ),
        (
            {
                "matchLabels": {"team": "platform"},
                "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["qa", "prod"]},
                    {"key": "owner", "operator": "NotIn", "values": ["legacy"]},
                ],
            },
            "team=platform,env in (qa,prod),owner notin (legacy)",
        ),
    ],
)
def test_selectors_become_label_selector_strings(
    selector: Mapping[str, Any], expected: str
) -> None:
    ref = update({"selector": selector}).ref
    assert ref.selector is not None and ref.selector.to_label_selector() == expected


def test_exists_operators() -> None:
    ref = update(
        {
            "selector": {
                "matchExpressions": [
                    {"key": "a", "operator": "Exists"},
                    {"key": "b", "operator": "DoesNotExist", "values": []},
                ]
            }
        }
    ).ref
    assert ref.selector is not None and ref.selector.to_label_selector() == "a,!b"


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"apps": []}, "at least one app"),
        ({}, "config.apps is required"),
        ({"apps": [{"namespace": "argocd"}]}, "needs a name or a selector"),
        (
            {"apps": [{"name": "a", "selector": {"matchLabels": {"x": "y"}}}]},
            "mutually exclusive",
        ),
        ({"apps": [{"selector": {}}]}, "must have matchLabels or matchExpressions"),
        (
            {"apps": [{"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]},
            "values must not be empty for In",
        ),
        (
            {
                "apps": [
                    {
                        "selector": {
                            "matchExpressions": [
                                {"key": "a", "operator": "Exists", "values": ["x"]}
                            ]
                        }
                    }
                ]
            },
            "values must be empty for Exists",
        ),
        (
            {"apps": [{"selector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}]},
            "must be one of In, NotIn, Exists, DoesNotExist",
        ),
        (
            {"apps": [{"selector": {"matchLabels": {"a": "x,b=y"}}}]},
            "invalid label",
        ),
        ({"apps": [{"name": "a", "sources": [{"chart": "c"}]}]}, "repoURL is required"),
        (
            {"apps": [{"name": "a", "sources": [{"repoURL": REPO, "updateTargetRevision": True}]}]},
            "updateTargetRevision needs desiredRevision",
        ),
        (
            {
                "apps": [
                    {
                        "name": "a",
                        "sources": [
                            {"repoURL": REPO, "kustomize": {"images": [{"repoURL": "img"}]}}
                        ],
                    }
                ]
            },
            "exactly one of tag and digest",
        ),
        (
            {
                "apps": [
                    {
                        "name": "a",
                        "sources": [
                            {
                                "repoURL": REPO,
                                "kustomize": {
                                    "images": [{"repoURL": "img", "tag": "1", "digest": "sha256:x"}]
                                },
                            }
                        ],
                    }
                ]
            },
            "exactly one of tag and digest",
        ),
        (
            {
                "apps": [
                    {
                        "name": "a",
                        "sources": [
                            {
                                "repoURL": REPO,
                                "kustomize": {"images": [{"repoURL": "img", "useDigest": True}]},
                            }
                        ],
                    }
                ]
            },
            "useDigest is no longer supported",
        ),
        ({"apps": [{"name": "a", "bogus": 1}]}, "unknown field(s) bogus"),
        (
            {
                "apps": [
                    {
                        "name": "a",
                        "sources": [
                            {"repoURL": REPO, "desiredRevision": "a", "desiredCommit": "b"}
                        ],
                    }
                ]
            },
            "desiredCommit is the deprecated name",
        ),
    ],
)
def test_update_config_errors_are_terminal_and_name_the_field(
    config: Mapping[str, Any], problem: str
) -> None:
    with pytest.raises(StepError) as e:
        parse_update_config(config)
    assert e.value.terminal
    assert problem in e.value.message


def test_desired_commit_is_an_alias() -> None:
    source = update({"name": "a", "sources": [{"repoURL": REPO, "desiredCommit": "abc"}]}).sources
    assert source[0].desired_revision == "abc"


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"apps": [{"name": "a", "waitFor": ["healthy"]}]}, "'healthy' must be one of"),
        ({"apps": [{"name": "a", "waitFor": ["sync", "sync"]}]}, "lists a value twice"),
        ({"apps": [{"name": "a", "sources": []}]}, "unknown field(s) sources"),
    ],
)
def test_wait_config_errors(config: Mapping[str, Any], problem: str) -> None:
    with pytest.raises(StepError) as e:
        parse_wait_config(config)
    assert e.value.terminal and problem in e.value.message


# ---- authorization ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "allowed", "problem"),
    [
        ({ann.KARGO_AUTHORIZED_STAGE: "demo:test"}, True, ""),
        ({ann.AUTHORIZED_STAGE: "demo:test"}, True, ""),
        ({ann.AUTHORIZED_STAGE: " demo:test "}, True, ""),
        (
            {
                ann.AUTHORIZED_STAGE: "demo:prod",
                ann.KARGO_AUTHORIZED_STAGE: "demo:test",
            },
            True,
            "",
        ),
        ({}, False, "it has no authorization annotation"),
        (
            {ann.KARGO_AUTHORIZED_STAGE: "demo:prod"},
            False,
            f"its annotation {ann.KARGO_AUTHORIZED_STAGE} authorizes 'demo:prod'",
        ),
        ({ann.KARGO_AUTHORIZED_STAGE: "other:test"}, False, "authorizes 'other:test'"),
        ({ann.KARGO_AUTHORIZED_STAGE: "demo:*"}, False, "uses a glob"),
        ({ann.AUTHORIZED_STAGE: "*:*"}, False, "uses a glob"),
        ({ann.KARGO_AUTHORIZED_STAGE: "demo-test"}, False, "is not <project>:<stage>"),
        # Kargo takes one value, not a list: "test,demo:prod" is not the Stage "test".
        ({ann.KARGO_AUTHORIZED_STAGE: "demo:test,demo:prod"}, False, "authorizes"),
        ({"unrelated": "demo:test"}, False, "no authorization annotation"),
    ],
)
def test_authorization(annotations: Mapping[str, str], allowed: bool, problem: str) -> None:
    found = authorization_problem(app(annotations=annotations), "demo", "test")
    if allowed:
        assert found is None
        return
    assert found is not None
    assert problem in found
    # The denial says how to fix it: the annotation and the exact expected value.
    assert f"{ann.AUTHORIZED_STAGE}: 'demo:test'" in found
    assert "'web' in namespace 'argocd'" in found


# ---- desired revisions and sources ---------------------------------------------------------------

MULTI = [
    {"repoURL": "https://github.com/example/repo", "targetRevision": "main", "path": "app"},
    {"repoURL": CHART_REPO, "chart": "web", "targetRevision": "1.0.0"},
    {"repoURL": "https://github.com/example/values.git", "targetRevision": "main", "ref": "v"},
]


@pytest.mark.parametrize(
    ("sources_config", "target", "expected"),
    [
        ([{"repoURL": REPO, "desiredRevision": "abc"}], None, ["abc"]),
        ([], None, [""]),
        ([{"repoURL": "https://github.com/other/repo.git", "desiredRevision": "x"}], None, [""]),
        # Git URLs compare normalized: case, ".git" and a trailing slash do not matter.
        ([{"repoURL": "https://GitHub.com/example/repo/", "desiredRevision": "n"}], None, ["n"]),
        (
            [
                {"repoURL": "https://github.com/example/repo.git", "desiredRevision": "sha1"},
                {"repoURL": CHART_REPO, "chart": "web", "desiredRevision": "1.2.3"},
            ],
            MULTI,
            ["sha1", "1.2.3", ""],
        ),
        # A chart source matches only with the same chart name.
        ([{"repoURL": CHART_REPO, "chart": "api", "desiredRevision": "9"}], MULTI, ["", "", ""]),
        # Chart repository URLs compare exactly.
        (
            [{"repoURL": CHART_REPO + "/", "chart": "web", "desiredRevision": "9"}],
            MULTI,
            ["", "", ""],
        ),
    ],
)
def test_desired_revisions(
    sources_config: list[dict[str, Any]], target: list[dict[str, Any]] | None, expected: list[str]
) -> None:
    a = app(sources=target) if target else app()
    assert desired_revisions(update({"name": "web", "sources": sources_config}), a) == expected


def test_desired_revisions_of_an_app_without_sources() -> None:
    a = app()
    del a["spec"]["source"]
    assert desired_revisions(update({"name": "web"}), a) == []


def test_update_target_revision_and_image_updates() -> None:
    a = app(
        sources=[
            {
                "repoURL": CHART_REPO,
                "chart": "web",
                "targetRevision": "1.0.0",
                "helm": {
                    "parameters": [
                        {"name": "image.tag", "value": "old"},
                        {"name": "x", "value": "1"},
                    ]
                },
            },
            {
                "repoURL": REPO,
                "targetRevision": "main",
                "kustomize": {"images": ["other/img:1"], "namePrefix": "p-"},
            },
            {"repoURL": REPO, "targetRevision": "main", "path": "second"},
        ]
    )
    u = update(
        {
            "name": "web",
            "sources": [
                {
                    "repoURL": CHART_REPO,
                    "chart": "web",
                    "desiredRevision": "2.0.0",
                    "updateTargetRevision": True,
                    "helm": {
                        "images": [
                            {"key": "image.tag", "value": "v2"},
                            {"key": "image.repo", "value": "ghcr.io/x"},
                        ]
                    },
                },
                {
                    "repoURL": REPO,
                    "desiredRevision": "abc",
                    "kustomize": {
                        "images": [
                            {"repoURL": "ghcr.io/x/web", "tag": "v2"},
                            {
                                "repoURL": "ghcr.io/x/api",
                                "digest": "sha256:d",
                                "newName": "ecr/api",
                            },
                        ]
                    },
                },
            ],
        }
    )
    chart, git, second = desired_sources(u, a)
    assert chart["targetRevision"] == "2.0.0"
    assert chart["helm"]["parameters"] == [
        {"name": "image.tag", "value": "v2"},
        {"name": "x", "value": "1"},
        {"name": "image.repo", "value": "ghcr.io/x"},
    ]
    # Without updateTargetRevision the git source keeps tracking its branch.
    assert git["targetRevision"] == "main"
    # Kargo replaces the image list (and leaves the rest of kustomize alone).
    assert git["kustomize"] == {
        "images": ["ghcr.io/x/web:v2", "ghcr.io/x/api=ecr/api@sha256:d"],
        "namePrefix": "p-",
    }
    # An update goes to the first source it targets only.
    assert second == a["spec"]["sources"][2]
    # The Application itself is not modified.
    assert a["spec"]["sources"][0]["targetRevision"] == "1.0.0"


def test_an_update_that_targets_no_source_is_terminal() -> None:
    u = update({"name": "web", "sources": [{"repoURL": CHART_REPO, "chart": "api"}]})
    with pytest.raises(StepError) as e:
        desired_sources(u, app())
    assert e.value.terminal
    assert e.value.message == (
        "no source of Argo CD Application 'web' in namespace 'argocd' matched update for source "
        f"with repoURL {CHART_REPO} and chart 'api'"
    )


# ---- decide -------------------------------------------------------------------------------------

DONE_OURS = state("Succeeded", op(), revision="abc", message="successfully synced")


@pytest.mark.parametrize(
    ("case", "status", "operation", "desired", "syncs", "action", "reason"),
    [
        ("never synced", {}, None, ["abc"], 0, Action.SYNC, "no operation"),
        ("our request not picked up", {}, op(), ["abc"], 1, Action.WAIT, "this Promotion"),
        (
            "someone's request not picked up",
            {"operationState": state("Succeeded", op(None, user="admin"), revision="x")},
            op(None, user="admin"),
            ["abc"],
            0,
            Action.WAIT,
            "requested by admin",
        ),
        (
            "someone else's running",
            {"operationState": state("Running", op(None, user="admin"))},
            op(None, user="admin"),
            ["abc"],
            0,
            Action.WAIT,
            "initiated by 'admin' is Running",
        ),
        (
            "someone else's done",
            {"operationState": state("Succeeded", op(None, user="admin"), revision="abc")},
            None,
            ["abc"],
            0,
            Action.SYNC,
            "initiated by 'admin'",
        ),
        (
            "another Promotion's running (Kargo's key)",
            {"operationState": state("Running", op("older", key=ann.KARGO_PROMOTION_INFO))},
            None,
            ["abc"],
            0,
            Action.WAIT,
            "Promotion 'older' is Running",
        ),
        (
            "another Promotion's done",
            {"operationState": state("Failed", op("older"), revision="abc")},
            None,
            ["abc"],
            0,
            Action.SYNC,
            "for Promotion 'older'",
        ),
        (
            "ours running",
            {"operationState": state("Running", op())},
            op(),
            ["abc"],
            1,
            Action.WAIT,
            "sync is Running",
        ),
        (
            "ours terminating",
            {"operationState": state("Terminating", op())},
            op(),
            ["abc"],
            1,
            Action.WAIT,
            "Terminating",
        ),
        (
            "ours done at desired",
            {"operationState": DONE_OURS},
            None,
            ["abc"],
            1,
            Action.SUCCEEDED,
            "successfully synced",
        ),
        (
            "ours done at desired, started by Kargo",
            {
                "operationState": state(
                    "Succeeded", op(key=ann.KARGO_PROMOTION_INFO), revision="abc"
                )
            },
            None,
            ["abc"],
            0,
            Action.SUCCEEDED,
            "",
        ),
        (
            "ours done, nothing desired",
            {"operationState": DONE_OURS},
            None,
            [""],
            1,
            Action.SUCCEEDED,
            "",
        ),
        (
            "ours done elsewhere",
            {"operationState": DONE_OURS},
            None,
            ["def"],
            1,
            Action.SYNC,
            "do not match desired revisions ['def']",
        ),
        (
            "ours done elsewhere, too often",
            {"operationState": DONE_OURS},
            None,
            ["def"],
            MAX_SYNC_ATTEMPTS,
            Action.FAILED,
            f"after {MAX_SYNC_ATTEMPTS} sync(s)",
        ),
        (
            "ours failed at desired",
            {
                "operationState": state(
                    "Failed", op(), revision="abc", message="one or more objects failed to apply"
                )
            },
            None,
            ["abc"],
            1,
            Action.FAILED,
            "one or more objects failed to apply",
        ),
        (
            "ours errored without a result",
            {"operationState": state("Error", op(), message="Manifest generation error")},
            None,
            ["abc"],
            1,
            Action.FAILED,
            "Manifest generation error",
        ),
        (
            "ours succeeded without a result",
            {"operationState": state("Succeeded", op())},
            None,
            ["abc"],
            1,
            Action.SYNC,
            "without a sync result",
        ),
        (
            "multi-source, unknown revisions ignored",
            {"operationState": state("Succeeded", op(), revisions=["a", "zzz", "c"])},
            None,
            ["a", "", "c"],
            1,
            Action.SUCCEEDED,
            "",
        ),
        (
            "multi-source, one differs",
            {"operationState": state("Succeeded", op(), revisions=["a", "b", "x"])},
            None,
            ["a", "", "c"],
            1,
            Action.SYNC,
            "do not match",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_decide(
    case: str,
    status: Mapping[str, Any],
    operation: Mapping[str, Any] | None,
    desired: list[str],
    syncs: int,
    action: Action,
    reason: str,
) -> None:
    decision = decide(app(status=status, operation=operation), desired, PROMO, syncs_started=syncs)
    assert decision.action is action, decision.reason
    assert reason in decision.reason


def test_ownership_needs_the_promotion_not_the_user() -> None:
    assert owns_operation(op(user="someone"), PROMO)
    assert owns_operation(op(key=ann.KARGO_PROMOTION_INFO), PROMO)
    assert not owns_operation(op("other"), PROMO)
    assert not owns_operation(op(None), PROMO)
    assert not owns_operation(None, PROMO)


# ---- the sync patch -----------------------------------------------------------------------------


def test_sync_patch_single_source() -> None:
    a = app(
        source={"repoURL": CHART_REPO, "chart": "web", "targetRevision": "1.0.0"},
        spec_extra={
            "syncPolicy": {
                "syncOptions": ["CreateNamespace=true"],
                "retry": {"limit": 2},
                "automated": {},
            }
        },
        status={"operationState": DONE_OURS},
    )
    u = update(
        {
            "name": "web",
            "sources": [
                {
                    "repoURL": CHART_REPO,
                    "chart": "web",
                    "desiredRevision": "2.0.0",
                    "updateTargetRevision": True,
                }
            ],
        }
    )
    patch = sync_patch(a, u, promotion=PROMO, actor="alice")
    assert patch == {
        "metadata": {"annotations": {REFRESH_ANNOTATION: "hard"}},
        "spec": {"source": {"repoURL": CHART_REPO, "chart": "web", "targetRevision": "2.0.0"}},
        "operation": {
            "initiatedBy": {"username": "alice", "automated": False},
            "info": [
                {
                    "name": "Reason",
                    "value": "Promotion triggered a sync of this Application resource.",
                },
                {"name": ann.PROMOTION_INFO, "value": PROMO},
            ],
            "sync": {"revision": "2.0.0", "syncOptions": ["CreateNamespace=true"]},
            "retry": {"limit": 2},
        },
        "status": {"operationState": None},
    }


def test_sync_patch_multi_source_and_default_actor() -> None:
    a = app(sources=MULTI)
    u = update(
        {
            "name": "web",
            "sources": [
                {
                    "repoURL": CHART_REPO,
                    "chart": "web",
                    "desiredRevision": "2.0.0",
                    "updateTargetRevision": True,
                }
            ],
        }
    )
    patch = sync_patch(a, u, promotion=PROMO, actor="")
    assert patch["spec"]["sources"][1]["targetRevision"] == "2.0.0"
    assert len(patch["spec"]["sources"]) == 3  # a merge patch replaces lists whole
    assert patch["operation"]["sync"] == {"revisions": ["main", "2.0.0", "main"]}
    assert patch["operation"]["initiatedBy"] == {"username": "longshoreman", "automated": False}


def test_sync_patch_without_source_updates_leaves_spec_alone() -> None:
    patch = sync_patch(app(), update({"name": "web"}), promotion=PROMO, actor="bob")
    assert "spec" not in patch
    assert patch["operation"]["sync"] == {"revision": "main"}


# ---- terminate ----------------------------------------------------------------------------------

TERMINATE = {"status": {"operationState": {"phase": "Terminating"}}}


@pytest.mark.parametrize(
    ("status", "operation", "expected"),
    [
        ({"operationState": state("Running", op())}, op(), TERMINATE),
        ({"operationState": state("Running", op(None, user="admin"))}, op(None), None),
        ({"operationState": state("Running", op("other"))}, op("other"), None),
        ({"operationState": state("Terminating", op())}, op(), None),
        ({"operationState": DONE_OURS}, None, None),
        ({}, op(), {"operation": None}),
        ({"operationState": DONE_OURS}, op(), {"operation": None}),
        ({}, op(None, user="admin"), None),
        ({}, None, None),
    ],
)
def test_terminate_only_our_operation(
    status: Mapping[str, Any], operation: Mapping[str, Any] | None, expected: Any
) -> None:
    assert terminate_patch(app(status=status, operation=operation), PROMO) == expected


# ---- health -------------------------------------------------------------------------------------


def healthy_status(**overrides: Any) -> dict[str, Any]:
    status: dict[str, Any] = {
        "health": {"status": "Healthy"},
        "sync": {"status": "Synced", "revision": "abc"},
        "operationState": DONE_OURS,
        # Argo CD assessed health after the operation finished (at T0).
        "reconciledAt": ts(T0),
    }
    status.update(overrides)
    return status


@pytest.mark.parametrize(
    ("case", "status", "operation", "desired", "expected", "why"),
    [
        ("healthy at desired", healthy_status(), None, ["abc"], "Healthy", "desired revisions"),
        ("healthy, nothing desired", healthy_status(), None, [""], "Healthy", "Synced"),
        (
            "never synced by an operation",
            {"health": {"status": "Healthy"}, "sync": {"status": "Synced", "revision": "abc"}},
            None,
            [],
            "Healthy",
            "",
        ),
        (
            "drifted",
            healthy_status(sync={"status": "OutOfSync", "revision": "abc"}),
            None,
            ["abc"],
            "Unhealthy",
            "OutOfSync",
        ),
        (
            "drifted, nothing desired",
            healthy_status(sync={"status": "OutOfSync"}),
            None,
            [],
            "Unhealthy",
            "drifted",
        ),
        (
            "other revision",
            healthy_status(sync={"status": "Synced", "revision": "old"}),
            None,
            ["abc"],
            "Unhealthy",
            "synced to 'old', not the desired revision 'abc'",
        ),
        (
            "operation running",
            healthy_status(operationState=state("Running", op())),
            op(),
            ["abc"],
            "Unknown",
            "has status 'Running'",
        ),
        (
            "operation failed",
            healthy_status(operationState=state("Failed", op(), revision="abc")),
            None,
            ["abc"],
            "Unknown",
            "'Failed'",
        ),
        ("sync requested", healthy_status(), op(), ["abc"], "Unknown", "is being synced"),
        (
            "progressing",
            healthy_status(health={"status": "Progressing"}),
            None,
            ["abc"],
            "Progressing",
            "is progressing",
        ),
        ("no health yet", healthy_status(health={}), None, ["abc"], "Progressing", ""),
        (
            "suspended",
            healthy_status(health={"status": "Suspended"}),
            None,
            ["abc"],
            "Progressing",
            "suspended",
        ),
        (
            "degraded",
            healthy_status(health={"status": "Degraded"}),
            None,
            ["abc"],
            "Unhealthy",
            "'Degraded'",
        ),
        ("missing", healthy_status(health={"status": "Missing"}), None, [], "Unhealthy", ""),
        (
            "comparison error",
            healthy_status(conditions=[{"type": "ComparisonError", "message": "repo gone"}]),
            None,
            ["abc"],
            "Unhealthy",
            "'ComparisonError' condition: repo gone",
        ),
        (
            "warning condition is fine",
            healthy_status(conditions=[{"type": "SyncError"}]),
            None,
            ["abc"],
            "Healthy",
            "",
        ),
        (
            "sync unknown",
            healthy_status(sync={"status": "Unknown"}),
            None,
            ["abc"],
            "Unknown",
            "sync status 'Unknown'",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_app_health(
    case: str,
    status: dict[str, Any],
    operation: Mapping[str, Any] | None,
    desired: list[str],
    expected: str,
    why: str,
) -> None:
    got, message = app_health(app(status=status, operation=operation), desired)
    assert got == expected, message
    assert why in message


def test_app_health_multi_source() -> None:
    status = healthy_status(
        sync={"status": "Synced", "revisions": ["a", "b", "c"]},
        operationState=state("Succeeded", op(), revisions=["a", "b", "c"]),
    )
    a = app(sources=MULTI, status=status)
    assert app_health(a, ["a", "", "c"])[0] == "Healthy"
    got, message = app_health(a, ["a", "", "z"])
    assert got == "Unhealthy" and "source 2" in message
    assert app_health(a, ["a", "z"])[0] == "Unknown"  # not one desired revision per source


@pytest.mark.parametrize(
    ("reconciled", "expected"),
    [
        # Kargo's argocd_test.go: health assessed before the operation finished (or never) is
        # not trusted; at or after finishedAt (the same second included) it is.
        (None, "Unknown"),
        (T0 - timedelta(seconds=1), "Unknown"),
        (T0, "Healthy"),
        (T0 + timedelta(seconds=1), "Healthy"),
    ],
)
def test_health_is_trusted_once_argo_cd_reconciled_after_the_operation(
    reconciled: datetime | None, expected: str
) -> None:
    status = healthy_status()
    if reconciled is None:
        del status["reconciledAt"]
    else:
        status["reconciledAt"] = ts(reconciled)
    got, message = app_health(app(status=status), ["abc"])
    assert got == expected, message
    if expected == "Unknown":
        assert "not reconciled after its most recent operation completed" in message


def test_health_of_merges_the_worst() -> None:
    check = health_check([(("argocd", "a"), ["abc"]), (("argocd", "b"), []), (("team", "c"), [""])])
    assert check["uses"] == "argocd-update"
    config = check["config"]
    assert health_check_keys(config) == [("argocd", "a"), ("argocd", "b"), ("team", "c")]
    good = app("a", status=healthy_status())
    progressing = app("b", status=healthy_status(health={"status": "Progressing"}))
    drifted = app("c", status=healthy_status(sync={"status": "OutOfSync"}))
    assert (
        health_of(config, {("argocd", "a"): good, ("argocd", "b"): good, ("team", "c"): good})[0]
        == "Healthy"
    )
    status, message = health_of(
        config, {("argocd", "a"): good, ("argocd", "b"): progressing, ("team", "c"): drifted}
    )
    assert status == "Unhealthy"
    assert "progressing" in message and "OutOfSync" in message
    status, message = health_of(config, {("argocd", "a"): good, ("argocd", "b"): progressing})
    assert status == "Unknown" and "unable to find Argo CD Application 'c' in namespace 'team'" in (
        message
    )
    assert health_of({"apps": []}, {})[0] == "Unknown"


@pytest.mark.parametrize(
    ("a", "b", "worst"),
    [
        ("Healthy", "Progressing", "Progressing"),
        ("Unknown", "Progressing", "Unknown"),
        ("Unknown", "Unhealthy", "Unhealthy"),
        ("Healthy", "Healthy", "Healthy"),
    ],
)
def test_merge_health(a: str, b: str, worst: str) -> None:
    assert merge_health(a, b) == worst == merge_health(b, a)


# ---- argocd-wait readiness ----------------------------------------------------------------------

IDLE = {
    "health": {"status": "Healthy"},
    "sync": {"status": "Synced"},
    "operationState": DONE_OURS,
    "reconciledAt": ts(T0 + timedelta(seconds=1)),
}
DEFAULT = ("health", "sync", "operation")


@pytest.mark.parametrize(
    ("case", "status", "operation", "wait_for", "previous", "ready", "failure"),
    [
        ("idle, healthy, synced", IDLE, None, DEFAULT, "", True, None),
        ("operation requested", IDLE, op(), DEFAULT, "", False, None),
        (
            "operation running",
            {**IDLE, "operationState": state("Running", op())},
            None,
            DEFAULT,
            "",
            False,
            None,
        ),
        (
            "operation only, app degraded",
            {**IDLE, "health": {"status": "Degraded"}},
            None,
            ("operation",),
            "Healthy",
            True,
            None,
        ),
        (
            "not reconciled since the operation",
            {**IDLE, "reconciledAt": ts(T0 - timedelta(1))},
            None,
            DEFAULT,
            "",
            False,
            None,
        ),
        (
            "never reconciled",
            {k: v for k, v in IDLE.items() if k != "reconciledAt"},
            None,
            ("health",),
            "",
            False,
            None,
        ),
        ("out of sync", {**IDLE, "sync": {"status": "OutOfSync"}}, None, DEFAULT, "", False, None),
        (
            "sync not asked",
            {**IDLE, "sync": {"status": "OutOfSync"}},
            None,
            ("health",),
            "",
            True,
            None,
        ),
        (
            "progressing",
            {**IDLE, "health": {"status": "Progressing"}},
            None,
            DEFAULT,
            "",
            False,
            None,
        ),
        (
            "suspended wanted",
            {**IDLE, "health": {"status": "Suspended"}},
            None,
            ("suspended",),
            "",
            True,
            None,
        ),
        (
            "health or degraded",
            {**IDLE, "health": {"status": "Degraded"}},
            None,
            ("health", "degraded"),
            "",
            True,
            None,
        ),
        (
            "regressed from Healthy",
            {**IDLE, "health": {"status": "Degraded"}},
            None,
            DEFAULT,
            "Healthy",
            False,
            "regressed from Healthy to Degraded",
        ),
        (
            "regressed from Progressing",
            {**IDLE, "health": {"status": "Degraded"}},
            None,
            DEFAULT,
            "Progressing",
            False,
            "regressed",
        ),
        (
            "degraded from Unknown is not a regression",
            {**IDLE, "health": {"status": "Degraded"}},
            None,
            DEFAULT,
            "Unknown",
            False,
            None,
        ),
        (
            "degraded from the start",
            {**IDLE, "health": {"status": "Degraded"}},
            None,
            DEFAULT,
            "",
            False,
            None,
        ),
        (
            "invalid spec",
            {**IDLE, "conditions": [{"type": "InvalidSpecError", "message": "no such project"}]},
            None,
            DEFAULT,
            "",
            False,
            "'InvalidSpecError' condition: no such project",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_wait_readiness(
    case: str,
    status: Mapping[str, Any],
    operation: Mapping[str, Any] | None,
    wait_for: tuple[str, ...],
    previous: str,
    ready: bool,
    failure: str | None,
) -> None:
    readiness = wait_readiness(app(status=status, operation=operation), wait_for, previous)
    assert readiness.ready is ready, readiness.reason
    if failure is None:
        assert readiness.failure is None
    else:
        assert readiness.failure is not None and failure in readiness.failure
