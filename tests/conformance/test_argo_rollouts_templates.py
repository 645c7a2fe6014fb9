"""Argo Rollouts' own analysis templates, through our AnalysisRun builder.

The examples and end-to-end manifests of Argo Rollouts (``argo/`` in the conformance folder) are
what users copy into a Stage's verification. Every AnalysisTemplate and ClusterAnalysisTemplate
there builds an AnalysisRun with :func:`promoter.control.verification.build_analysis_run`, given
the args
Argo's own Rollouts pass it; the malformed one is refused with a message naming the field. Our
templates in tests/fixtures/argo keep the metrics, args and providers of Argo's namesakes, so
the suite's verification tests stand for Argo's templates too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from promoter.control.verification import VerificationError, build_analysis_run
from tests.support import conformance
from tests.support.fixtures import analysis_templates

TEMPLATE_KINDS = ("AnalysisTemplate", "ClusterAnalysisTemplate")
# Argo's deliberately malformed e2e template, and what our builder says about it.
MALFORMED = {
    "malformed-analysis": "AnalysisTemplate 'malformed-analysis': metric 'test': job container "
    "'sleep': resources.requests.memory: 'invalid' is not a valid Kubernetes quantity"
}
FREIGHT = {
    "metadata": {"name": "abcdef0123456789abcdef0123456789abcdef01"},
    "origin": {"kind": "Warehouse", "name": "web"},
}


def _documents() -> list[dict[str, Any]]:
    return [
        doc
        for path in conformance.files("argo", "*.yaml")
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict)
    ]


DOCUMENTS = _documents()
ARGO_TEMPLATES = conformance.cases(
    (d for d in DOCUMENTS if d.get("kind") in TEMPLATE_KINDS), "analysis templates in argo/"
)


def _analysis_steps(document: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The ``analysis`` blocks of a Rollout's canary steps."""
    for step in (((document.get("spec") or {}).get("strategy") or {}).get("canary") or {}).get(
        "steps"
    ) or ():
        if isinstance(step, Mapping) and isinstance(step.get("analysis"), Mapping):
            yield step["analysis"]


def rollout_args(template: str) -> list[dict[str, Any]]:
    """The args Argo's own Rollouts pass to ``template`` (a Stage's verification.args)."""
    return [
        dict(arg)
        for document in DOCUMENTS
        if document.get("kind") == "Rollout"
        for analysis in _analysis_steps(document)
        if any(t.get("templateName") == template for t in analysis.get("templates") or ())
        for arg in analysis.get("args") or ()
    ]


def build(template: Mapping[str, Any], args: list[dict[str, Any]]) -> dict[str, Any]:
    ref = {"name": template["metadata"]["name"], "kind": template["kind"]}
    stage = {
        "metadata": {"name": "test", "namespace": "demo"},
        "spec": {"verification": {"analysisTemplates": [ref], "args": args}},
    }
    return build_analysis_run(
        stage=stage, freight=FREIGHT, templates=[template], promotion=None, namespace="demo"
    )


@pytest.mark.parametrize(
    "template", ARGO_TEMPLATES, ids=lambda t: f"{t['kind']}/{t['metadata']['name']}"
)
def test_argo_template_builds_an_analysis_run(template: dict[str, Any]) -> None:
    name = template["metadata"]["name"]
    args = rollout_args(name)
    if name in MALFORMED:
        with pytest.raises(VerificationError) as caught:
            build(template, args)
        assert str(caught.value).startswith(MALFORMED[name])
        return
    run = build(template, args)
    assert [m["name"] for m in run["spec"]["metrics"]] == [
        m["name"] for m in template["spec"]["metrics"]
    ]
    declared = [a["name"] for a in template["spec"].get("args") or ()]
    assert [a["name"] for a in run["spec"]["args"]] == declared
    for arg in args:  # the Rollout's values win over the template's defaults
        if arg["name"] in declared:
            assert {"name": arg["name"], "value": arg["value"]} in run["spec"]["args"]


def test_the_experiments_dry_run_list_carries_over() -> None:
    experiment = next(
        d for d in DOCUMENTS if d.get("kind") == "Experiment" and d["spec"].get("dryRun")
    )
    [analysis] = experiment["spec"]["analyses"]
    template = next(t for t in ARGO_TEMPLATES if t["metadata"]["name"] == analysis["templateName"])
    # The Experiment's dryRun list, moved into the template (where a Stage's verification reads it).
    run = build(
        {**template, "spec": {**template["spec"], "dryRun": experiment["spec"]["dryRun"]}}, []
    )
    assert run["spec"]["dryRun"] == experiment["spec"]["dryRun"]


def _outline(template: Mapping[str, Any]) -> dict[str, Any]:
    spec = template["spec"]
    return {
        "args": [(a["name"], "valueFrom" in a) for a in spec.get("args") or ()],
        "metrics": [(m["name"], sorted(m["provider"])) for m in spec["metrics"]],
    }


@pytest.mark.parametrize(
    "ours", list(analysis_templates()), ids=lambda t: f"{t['kind']}/{t['metadata']['name']}"
)
def test_our_template_outlines_argos_namesake(ours: dict[str, Any]) -> None:
    key = (ours["kind"], ours["metadata"]["name"])
    argo = {(t["kind"], t["metadata"]["name"]): t for t in ARGO_TEMPLATES}
    assert key in argo, f"Argo Rollouts has no {key[0]} {key[1]!r}"
    assert _outline(ours) == _outline(argo[key])
