"""ProjectConfig's promotion policies, decided purely: Kargo's matching tables, ported.

The tables follow Kargo's ``pkg/api/auto_promotion_test.go`` (``findMatchingPromotionPolicy``,
``IsAutoPromotionEnabled``), ``pkg/pattern/matcher_test.go`` (``ParseNamePattern``) and the
ProjectConfig admission tests (``pkg/webhook/kubernetes/projectconfig/webhook_test.go``), whose
refusals Longshoreman reports on the ProjectConfig instead. The ProjectConfigs of Kargo's
"Working with Projects" guide load and decide what the guide says.
"""

from __future__ import annotations

from typing import Any

import pytest

from promoter.control.policies import (
    auto_promotion,
    auto_rollback,
    in_force,
    policy_for,
    project_config,
)
from promoter.resources.annotations import AUTO_PROMOTE
from tests.support import objects as o
from tests.support.fixtures import kargo_documents

FAKE_STAGE = o.stage("fake-stage", namespace="fake-project", labels={"tier": "prod"})


def config(*policies: dict[str, Any]) -> dict[str, Any]:
    return o.project_config("fake-project", policies=policies)


def selector(name: str = "", **labels: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name} if name else {}
    return {**out, **labels}


# ---- findMatchingPromotionPolicy --------------------------------------------------------------

MATCHING: list[tuple[str, dict[str, Any] | None, int | None]] = [
    ("nil without ProjectConfig", None, None),
    (
        "nil when no policy matches",
        config({"stageSelector": selector("other-stage")}),
        None,
    ),
    (
        "returns first matching policy even when a later one also matches",
        config(
            {"stageSelector": selector("other-stage"), "autoPromotionEnabled": False},
            {"stageSelector": selector("fake-stage"), "autoPromotionEnabled": True},
            {"stageSelector": selector("fake-stage"), "autoPromotionEnabled": False},
        ),
        1,
    ),
    ("matches by deprecated Stage field", config({"stage": "fake-stage"}), 0),
    (
        "a glob pattern matches the name",
        config({"stageSelector": selector("glob:fake-*")}),
        0,
    ),
    (
        "a regex pattern matches anywhere in the name (unanchored, Go's MatchString)",
        config({"stageSelector": selector("regex:stage")}),
        0,
    ),
    ("regexp: is regex: too", config({"stageSelector": selector("regexp:^fake-")}), 0),
    (
        "a name and labels are ANDed: the name matches, the labels do not",
        config({"stageSelector": selector("fake-stage", matchLabels={"tier": "dev"})}),
        None,
    ),
    (
        "a name and labels are ANDed: both match",
        config({"stageSelector": selector("glob:fake-*", matchLabels={"tier": "prod"})}),
        0,
    ),
    (
        "matchExpressions In",
        config(
            {
                "stageSelector": {
                    "matchExpressions": [
                        {"key": "tier", "operator": "In", "values": ["prod", "staging"]}
                    ]
                }
            }
        ),
        0,
    ),
    (
        "matchExpressions NotIn holds for other values",
        config(
            {
                "stageSelector": {
                    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["dev"]}]
                }
            }
        ),
        0,
    ),
    (
        "matchExpressions DoesNotExist fails on a present label",
        config(
            {"stageSelector": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}}
        ),
        None,
    ),
    (
        "matchExpressions Exists",
        config({"stageSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}}),
        0,
    ),
    (
        "a policy whose pattern does not compile matches nothing; the next one still can",
        config(
            {"stageSelector": selector("regex:fake-[unclosed")},
            {"stageSelector": selector("fake-stage")},
        ),
        1,
    ),
]


@pytest.mark.parametrize(
    ("cfg", "expected"), [m[1:] for m in MATCHING], ids=[m[0] for m in MATCHING]
)
def test_the_first_matching_policy_wins(cfg: dict[str, Any] | None, expected: int | None) -> None:
    policy = policy_for(FAKE_STAGE, project_config(cfg))
    assert (policy.index if policy is not None else None) == expected


# ---- IsAutoPromotionEnabled -------------------------------------------------------------------

ENABLED: list[tuple[str, dict[str, Any] | None, bool]] = [
    ("disabled without ProjectConfig", None, False),
    ("disabled with empty promotion policies", config(), False),
    (
        "enabled by deprecated Stage field",
        config({"stage": "fake-stage", "autoPromotionEnabled": True}),
        True,
    ),
    (
        "returns first matching policy for the Stage",
        config(
            {"stageSelector": selector("other-stage"), "autoPromotionEnabled": False},
            {"stageSelector": selector("fake-stage"), "autoPromotionEnabled": True},
            {"stageSelector": selector("fake-stage"), "autoPromotionEnabled": False},
        ),
        True,
    ),
    (
        "enabled by matching name selector",
        config({"stageSelector": selector("fake-stage"), "autoPromotionEnabled": True}),
        True,
    ),
    (
        "enabled by matching label selector",
        config({"stageSelector": {"matchLabels": {"tier": "prod"}}, "autoPromotionEnabled": True}),
        True,
    ),
    (
        "disabled by non-matching selector",
        config({"stageSelector": selector("other-stage"), "autoPromotionEnabled": True}),
        False,
    ),
]


@pytest.mark.parametrize(("cfg", "enabled"), [e[1:] for e in ENABLED], ids=[e[0] for e in ENABLED])
def test_is_auto_promotion_enabled(cfg: dict[str, Any] | None, enabled: bool) -> None:
    assert auto_promotion(FAKE_STAGE, project_config(cfg)).enabled is enabled


def test_a_matching_policy_wins_over_the_annotation_which_decides_otherwise() -> None:
    annotated = o.stage("fake-stage", namespace="fake-project", annotations={AUTO_PROMOTE: "true"})
    off = config({"stageSelector": selector("fake-stage"), "autoPromotionEnabled": False})
    decided = auto_promotion(annotated, project_config(off))
    assert (decided.enabled, decided.source) == (False, "ProjectConfig promotionPolicies[0]")
    other = config({"stageSelector": selector("other-stage"), "autoPromotionEnabled": False})
    decided = auto_promotion(annotated, project_config(other))
    assert (decided.enabled, decided.source) == (True, f"annotation {AUTO_PROMOTE}")


# ---- ParseNamePattern, and what Kargo's admission refuses --------------------------------------

REFUSED: list[tuple[str, list[dict[str, Any]], list[str]]] = [
    ("valid project config", [{"stage": "stage-1"}, {"stage": "stage-2"}], []),
    (
        "duplicate promotion policy stage",
        [{"stage": "stage-1"}, {"stage": "stage-1"}],
        ["spec.promotionPolicies[1]: stage name already defined at spec.promotionPolicies[0]"],
    ),
    (
        "invalid pattern identifier in stage selector",
        [{"stage": "stage-1"}, {"stageSelector": selector("badpattern:stage-*")}],
        [
            "spec.promotionPolicies[1].stageSelector.name: invalid pattern identifier "
            '"badpattern": must be "regex", "regexp" or "glob"'
        ],
    ),
    (
        "valid pattern in stage selector",
        [{"stage": "stage-1"}, {"stageSelector": selector("glob:stage-*")}],
        [],
    ),
    (
        "invalid regex pattern in stage selector",
        [{"stage": "stage-1"}, {"stageSelector": selector("regex:stage-[unclosed")}],
        ["spec.promotionPolicies[1].stageSelector.name: error parsing regexp"],
    ),
    ("glob pattern with invalid syntax", [{"stageSelector": selector("glob:[")}], ["syntax error"]),
    (
        "multiple duplicate stages",
        [
            {"stage": "stage-1"},
            {"stage": "stage-2"},
            {"stage": "stage-1"},
            {"stage": "stage-3"},
            {"stage": "stage-2"},
        ],
        [
            "spec.promotionPolicies[2]: stage name already defined at spec.promotionPolicies[0]",
            "spec.promotionPolicies[4]: stage name already defined at spec.promotionPolicies[1]",
        ],
    ),
    (
        "mix of deprecated Stage and StageSelector naming one Stage",
        [{"stage": "stage-1"}, {"stageSelector": selector("stage-1")}],
        ["spec.promotionPolicies[1]: stage name already defined at spec.promotionPolicies[0]"],
    ),
    (
        "exactly one of stage or stageSelector",
        [
            {"stage": "stage-1", "stageSelector": selector("stage-1")},
            {"autoPromotionEnabled": True},
        ],
        [
            "spec.promotionPolicies[0]: PromotionPolicy must have exactly one of stage or "
            "stageSelector set",
            "spec.promotionPolicies[1]: PromotionPolicy must have exactly one of stage or "
            "stageSelector set",
        ],
    ),
    (
        "autoRollback phases are Kargo's: Errored for Promotions, Error for verifications",
        [
            {
                "stage": "prod",
                "autoRollback": {"onPromotion": ["Error"], "onVerification": ["Errored"]},
            }
        ],
        [
            "spec.promotionPolicies[0].autoRollback.onVerification[0] must be Failed or Error",
            "spec.promotionPolicies[0].autoRollback.onPromotion[0] must be Failed or Errored",
        ],
    ),
]


@pytest.mark.parametrize(
    ("policies", "problems"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_what_kargo_s_admission_refuses_is_reported(
    policies: list[dict[str, Any]], problems: list[str]
) -> None:
    parsed = project_config(o.project_config("fake-project", policies=policies))
    assert parsed is not None
    assert len(parsed.problems) == len(problems), parsed.problems
    for said, expected in zip(parsed.problems, problems, strict=True):
        assert said.startswith(expected) or expected in said, (said, expected)


def test_a_project_config_must_be_named_after_its_project() -> None:
    parsed = project_config({**o.project_config("p"), "metadata": {"name": "x", "namespace": "p"}})
    assert parsed is not None
    assert parsed.problems == ("metadata.name: 'x' must match the project namespace 'p'",)


# ---- the guide's examples ---------------------------------------------------------------------

GUIDE = kargo_documents("project-configs.yaml")


def _stage(name: str, namespace: str = "example", **labels: str) -> dict[str, Any]:
    return o.stage(name, namespace=namespace, labels=labels or None)


@pytest.mark.parametrize(
    ("example", "stage", "enabled"),
    [
        (0, _stage("test"), True),
        (0, _stage("uat"), True),
        (0, _stage("prod"), False),
        (1, _stage("prod-east"), False),
        (1, _stage("test-1"), True),
        (1, _stage("dev-eu"), True),
        (1, _stage("prod-west"), False),
        (2, _stage("a", environment="development"), True),
        (2, _stage("b", environment="staging"), True),
        (2, _stage("c", environment="production"), False),
        # "applies to" - but the example leaves autoPromotionEnabled at its default, false.
        (3, _stage("prod-1", **{"example.org/allow-auto-promotion": "true"}), False),
    ],
)
def test_the_guide_s_promotion_policies_do_what_it_says(
    example: int, stage: dict[str, Any], enabled: bool
) -> None:
    parsed = project_config(GUIDE[example])
    assert parsed is not None and parsed.problems == ()
    assert auto_promotion(stage, parsed).enabled is enabled


def test_the_guide_s_combined_selector_applies_only_where_name_and_labels_both_match() -> None:
    parsed = project_config(GUIDE[3])
    labelled = {"example.org/allow-auto-promotion": "true"}
    assert policy_for(_stage("prod-1", **labelled), parsed) is not None
    assert policy_for(_stage("prod-1"), parsed) is None
    assert policy_for(_stage("dev-1", **labelled), parsed) is None


@pytest.mark.parametrize(
    ("example", "on_promotion", "on_verification"),
    [
        (4, (), ("Failed",)),  # autoRollback: {} -> Kargo's defaults
        (5, (), ("Failed", "Error")),
        (6, ("Failed", "Errored"), ("Failed",)),
    ],
)
def test_the_guide_s_auto_rollback_phases_and_defaults(
    example: int, on_promotion: tuple[str, ...], on_verification: tuple[str, ...]
) -> None:
    parsed = project_config(GUIDE[example])
    assert parsed is not None and parsed.problems == ()
    rollback = auto_rollback(_stage("prod", "my-project"), parsed)
    assert rollback is not None
    assert (rollback.on_promotion, rollback.on_verification) == (on_promotion, on_verification)
    assert auto_rollback(_stage("staging", "my-project"), parsed) is None


def test_what_is_in_force_names_the_stages_each_rule_holds() -> None:
    parsed = project_config(GUIDE[1])
    assert parsed is not None
    stages = [_stage(n) for n in ("prod-east", "test-a", "dev-x", "qa")]
    assert in_force(parsed, stages) == "auto-promotion: dev-x, test-a; auto-rollback: none"
