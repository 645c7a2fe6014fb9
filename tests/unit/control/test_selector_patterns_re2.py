"""Policy and window name selectors go through the RE2 port: a runaway pattern answers.

A ProjectConfig's ``stageSelector`` and a ClusterConfig window's ``stageSelector`` and
``projectSelector`` take ``regex:``/``regexp:`` and ``glob:`` names (Kargo's ``pkg/pattern``),
which Go matches with RE2. Each is fed the runaway pattern against a name that makes Python's
``re`` backtrack, through the configs as the controller reads them.
"""

from __future__ import annotations

from typing import Any

import pytest

from promoter.control.policies import cluster_config, policy_for, project_config, schedule_for
from tests.support import objects as o
from tests.support.runaway import RUNAWAY_PATTERN, RUNAWAY_TEXT, comes_back

# Stage names are short in a cluster, but the selector sees whatever name it is given.
LONG_STAGE = o.stage(RUNAWAY_TEXT, namespace="fake-project")
SELECTORS = [f"regex:{RUNAWAY_PATTERN}", f"regexp:{RUNAWAY_PATTERN}", "glob:" + "*" * 40 + "!?"]


def window(**selectors: Any) -> dict[str, Any]:
    return {
        "name": "freeze",
        "kind": "Deny",
        "dtstart": "20260101T000000Z",
        "dtend": "20260102T000000Z",
        **selectors,
    }


@pytest.mark.parametrize("name", SELECTORS)
def test_a_promotion_policy_selector_answers_a_runaway_pattern(name: str) -> None:
    config = project_config(
        o.project_config("fake-project", policies=[{"stageSelector": {"name": name}}])
    )
    with comes_back(f"a promotion policy's stageSelector {name[:12]}..."):
        assert policy_for(LONG_STAGE, config) is None


@pytest.mark.parametrize("name", SELECTORS)
def test_window_selectors_answer_a_runaway_pattern(name: str) -> None:
    project = project_config(
        o.project_config("fake-project", windows=[window(stageSelector={"name": name})])
    )
    with comes_back(f"a ProjectConfig window's stageSelector {name[:12]}..."):
        assert not schedule_for(LONG_STAGE, project, None)
    cluster = cluster_config(o.cluster_config(windows=[window(projectSelector={"name": name})]))
    long_project = o.stage("prod", namespace=RUNAWAY_TEXT)
    with comes_back(f"a ClusterConfig window's projectSelector {name[:12]}..."):
        assert not schedule_for(long_project, None, cluster)


def test_a_selector_go_refuses_is_reported_in_go_s_words() -> None:
    config = project_config(
        o.project_config("fake-project", policies=[{"stageSelector": {"name": "regex:(?<=a)"}}])
    )
    assert config is not None
    assert any("error parsing regexp: invalid" in problem for problem in config.problems)
