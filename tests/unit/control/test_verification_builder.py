"""The AnalysisRun builder and the verification lifecycle helpers (Kargo's and Argo's rules).

Templates are our own, in Argo Rollouts' shapes (tests/fixtures/argo); variants a rule needs
(dryRun, conflicts, malformed specs) are derived from them in the test. Argo Rollouts' own
examples go through the same builder in tests/conformance/test_argo_rollouts_templates.py.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from promoter.control.verification import (
    ANALYSIS_TERMINAL,
    VerificationError,
    analysis_run_name,
    build_analysis_run,
    label_value,
    record_verification,
    verification_entry,
    verification_message,
    verification_phase,
)
from tests.support import objects
from tests.support.fixtures import analysis_template

ULID = "01j0000000000000000000000z"
FREIGHT = objects.freight(
    "abcdef0123456789abcdef0123456789abcdef01",
    namespace="demo",
    uid="uid-1",
    alias="fond-fox",
    warehouse="web",
    images=[{"repoURL": "ghcr.io/example/web", "tag": "1.2.3", "digest": "sha256:abc"}],
    commits=[{"repoURL": "https://github.com/example/web.git", "id": "c0ffee"}],
)
PROMOTION = "test.01hzzzzzzzzzzzzzzzzzzzzzzz.abcdef0"
SECRET_ARGS = {  # what analysis-secret-args needs from the Stage
    "failure-limit": "2",
    "inconclusive-limit": "2",
    "success-condition": "It worked!",
}


def tpl(name: str, kind: str = "AnalysisTemplate") -> dict[str, Any]:
    return analysis_template(name, kind)


def ref(template: dict[str, Any]) -> dict[str, str]:
    return {"name": template["metadata"]["name"], "kind": template["kind"]}


def make_stage(
    templates: list[dict[str, Any]],
    args: dict[str, Any] | list[dict[str, Any]] | None = None,
    *,
    vars_: list[dict[str, Any]] | None = None,
    metadata: dict[str, Any] | None = None,
    name: str = "test",
) -> dict[str, Any]:
    """Stage ``name`` verifying with ``templates`` and ``args`` (a dict of plain values, or the
    Stage's own list of args as written)."""
    if isinstance(args, dict):
        args = [{"name": k, "value": v} for k, v in args.items()]
    return objects.stage(
        name,
        namespace="demo",
        verification=[ref(t) for t in templates],
        verification_args=args,
        analysis_run_metadata=metadata,
        **({"vars": vars_} if vars_ is not None else {}),
    )


def build(
    templates: list[dict[str, Any]],
    args: dict[str, Any] | list[dict[str, Any]] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    stage_kwargs = {k: kwargs.pop(k) for k in ("vars_", "metadata", "name") if k in kwargs}
    options: dict[str, Any] = {
        "freight": FREIGHT,
        "promotion": PROMOTION,
        "namespace": "demo",
        "ulid": ULID,
    }
    options.update(kwargs)
    return build_analysis_run(
        stage=make_stage(templates, args, **stage_kwargs), templates=templates, **options
    )


def args_of(run: dict[str, Any]) -> dict[str, Any]:
    return {a["name"]: a.get("value", a.get("valueFrom")) for a in run["spec"]["args"]}


def metric_names(run: dict[str, Any]) -> list[str]:
    return [m["name"] for m in run["spec"]["metrics"]]


# ---- the object ---------------------------------------------------------------------------------


def test_the_analysis_run_object() -> None:
    run = build([tpl("pass")], actor="alice")
    assert run["apiVersion"] == "argoproj.io/v1alpha1"
    assert run["kind"] == "AnalysisRun"
    assert run["metadata"] == {
        "name": f"test.{ULID}.abcdef0",
        "namespace": "demo",
        "labels": {
            "longshoreman.dev/stage": "test",
            "longshoreman.dev/freight": FREIGHT["metadata"]["name"],
            "longshoreman.dev/promotion": PROMOTION,
        },
        "annotations": {
            "longshoreman.dev/promotion": PROMOTION,
            "longshoreman.dev/actor": "alice",
        },
        "ownerReferences": [
            {
                "apiVersion": "kargo.akuity.io/v1alpha1",
                "kind": "Freight",
                "name": FREIGHT["metadata"]["name"],
                "uid": "uid-1",
                "blockOwnerDeletion": False,
            }
        ],
    }
    assert run["spec"] == {"metrics": tpl("pass")["spec"]["metrics"], "args": []}


def test_a_new_ulid_names_each_run() -> None:
    one = build([tpl("pass")], ulid=None)["metadata"]["name"]
    two = build([tpl("pass")], ulid=None)["metadata"]["name"]
    assert re.fullmatch(r"test\.[0-9a-z]{26}\.abcdef0", one)
    assert one != two


def test_without_promotion_or_actor() -> None:
    run = build([tpl("pass")], promotion=None)
    assert run["metadata"]["labels"]["longshoreman.dev/promotion"] == ""
    assert run["metadata"]["annotations"] == {}


@pytest.mark.parametrize(
    ("freight", "expected"),
    [
        pytest.param(
            {"metadata": {"name": "f1", "uid": "u"}},
            [
                {
                    "apiVersion": "longshoreman.dev/v1alpha1",
                    "kind": "Freight",
                    "name": "f1",
                    "uid": "u",
                    "blockOwnerDeletion": False,
                }
            ],
            id="default-apiVersion",
        ),
        pytest.param({"metadata": {"name": "f1"}}, None, id="no-uid-no-reference"),
    ],
)
def test_owner_reference(freight: dict[str, Any], expected: list[dict[str, Any]] | None) -> None:
    run = build([tpl("pass")], freight=freight)
    assert run["metadata"].get("ownerReferences") == expected


def test_user_metadata_is_merged_and_ours_win() -> None:
    run = build(
        [tpl("pass")],
        metadata={
            "labels": {"team": "web", "longshoreman.dev/stage": "spoofed"},
            "annotations": {"note": "hi", "longshoreman.dev/actor": "mallory"},
        },
        actor="alice",
    )
    assert run["metadata"]["labels"]["team"] == "web"
    assert run["metadata"]["labels"]["longshoreman.dev/stage"] == "test"
    assert run["metadata"]["annotations"]["note"] == "hi"
    assert run["metadata"]["annotations"]["longshoreman.dev/actor"] == "alice"


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"labels": {"team": "not valid!"}}, "analysisRunMetadata.labels.team"),
        ({"labels": {"team": 7}}, "analysisRunMetadata.labels.team: must be a string"),
        ({"annotations": ["x"]}, "analysisRunMetadata.annotations must be a map"),
    ],
)
def test_bad_user_metadata(metadata: dict[str, Any], message: str) -> None:
    with pytest.raises(VerificationError, match=re.escape(message)):
        build([tpl("pass")], metadata=metadata)


def sha8(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:8]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("test", "test"),
        ("", ""),
        ("a" * 63, "a" * 63),
        # Kargo's ShortenLabelValue: 54 leading characters, "-", 8 hex digits of the SHA-256.
        ("a" * 70, "a" * 54 + "-" + sha8("a" * 70)),
        ("a" * 53 + "-" * 10, "a" * 53 + "-" + sha8("a" * 53 + "-" * 10)),
        ("not valid!", "not-valid-" + sha8("not valid!")),
        ("-leading", "leading-" + sha8("-leading")),
        ("!!!", sha8("!!!")),
    ],
)
def test_label_value(value: str, expected: str) -> None:
    result = label_value(value)
    assert result == expected
    assert len(result) <= 63
    assert re.fullmatch(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?", result)


def test_long_names_are_shortened_and_kept_in_annotations() -> None:
    stage_name = "s" * 80
    promotion = f"{stage_name}.{ULID}.abcdef0"
    run = build([tpl("pass")], name=stage_name, promotion=promotion)
    labels, annotations = run["metadata"]["labels"], run["metadata"]["annotations"]
    assert labels["longshoreman.dev/stage"] == label_value(stage_name)
    assert labels["longshoreman.dev/promotion"] == label_value(promotion)
    assert annotations["longshoreman.dev/stage"] == stage_name
    assert annotations["longshoreman.dev/promotion"] == promotion
    assert run["metadata"]["name"] == f"{stage_name}.{ULID}.abcdef0"


def test_run_name_stays_within_253_characters() -> None:
    name = analysis_run_name("x" * 253, "abcdef0123", ULID)
    assert len(name) == 253
    assert name.endswith(f".{ULID}.abcdef0")
    assert name == analysis_run_name("x" * 253, "abcdef0123", ULID)


# ---- combining templates ------------------------------------------------------------------------


def test_metrics_and_args_of_several_templates_in_stage_order() -> None:
    multiple, web = tpl("multiple-job"), tpl("web-background")
    run = build([web, multiple])
    assert metric_names(run) == ["web", "sleep-job", "sleep-job-rep"]
    assert args_of(run) == {
        "url-val": "https://kubernetes.default.svc/version",
        "duration": "0s",
        "exit-code": "0",
        "count": "1",
    }
    assert metric_names(build([multiple, web])) == ["sleep-job", "sleep-job-rep", "web"]


def test_cluster_template() -> None:
    cluster = tpl("always-pass", "ClusterAnalysisTemplate")
    run = build([tpl("web-background"), cluster])
    assert metric_names(run) == ["web", "pass"]
    assert run["spec"]["metrics"][1] == cluster["spec"]["metrics"][0]


def test_duplicate_metric_names_both_templates() -> None:
    with pytest.raises(VerificationError) as e:
        build([tpl("pass"), tpl("always-pass", "ClusterAnalysisTemplate")])
    assert str(e.value) == (
        "duplicate metric name 'pass': in AnalysisTemplate 'pass' and "
        "ClusterAnalysisTemplate 'always-pass'"
    )


def with_spec(template: dict[str, Any], **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(template)
    out["spec"].update(fields)
    return out


def renamed(template: dict[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(template)
    out["metadata"]["name"] = name
    return out


def test_dry_run_and_measurement_retention_are_concatenated() -> None:
    # An Experiment can mark "test.*" as dry-run; the same list can live in the template.
    dry = with_spec(
        tpl("dry-run-job"),
        dryRun=[{"metricName": "test.*"}],
        measurementRetention=[{"metricName": "test-1", "limit": 20}],
    )
    web = with_spec(
        tpl("web-background"),
        dryRun=[{"metricName": "web"}],
        measurementRetention=[{"metricName": "web", "limit": 5}],
    )
    run = build([dry, web])
    assert run["spec"]["dryRun"] == [{"metricName": "test.*"}, {"metricName": "web"}]
    assert run["spec"]["measurementRetention"] == [
        {"metricName": "test-1", "limit": 20},
        {"metricName": "web", "limit": 5},
    ]
    assert "dryRun" not in build([tpl("dry-run-job")])["spec"]


@pytest.mark.parametrize("field", ["dryRun", "measurementRetention"])
def test_duplicate_dry_run_or_retention_metric(field: str) -> None:
    one = with_spec(tpl("dry-run-job"), **{field: [{"metricName": "test-1"}]})
    two = with_spec(tpl("web-background"), **{field: [{"metricName": "test-1"}]})
    with pytest.raises(VerificationError) as e:
        build([one, two])
    assert str(e.value) == (
        f"duplicate {field} metricName 'test-1': in AnalysisTemplate 'dry-run-job' and "
        "AnalysisTemplate 'web-background'"
    )


def test_other_spec_fields_are_kept_first_template_wins() -> None:
    first = with_spec(tpl("pass"), ttlStrategy={"secondsAfterCompletion": 60})
    second = with_spec(
        tpl("web-background"), ttlStrategy={"secondsAfterCompletion": 1}, extra={"x": 1}
    )
    spec = build([first, second])["spec"]
    assert spec["ttlStrategy"] == {"secondsAfterCompletion": 60}
    assert spec["extra"] == {"x": 1}


def test_inputs_are_not_modified() -> None:
    templates = [tpl("analysis-secret-args"), tpl("multiple-job")]
    before = copy.deepcopy(templates)
    run = build(templates, {**SECRET_ARGS, "secret-url": "https://example.com"})
    run["spec"]["metrics"][0]["name"] = "changed"
    assert templates == before


# ---- args ---------------------------------------------------------------------------------------


def arg_template(name: str, *args: dict[str, Any]) -> dict[str, Any]:
    out = renamed(tpl("web-background"), name)
    out["spec"]["metrics"][0]["name"] = f"web-{name}"
    out["spec"]["args"] = list(args)
    return out


SECRET = {"secretKeyRef": {"name": "s", "key": "k"}}
OTHER_SECRET = {"secretKeyRef": {"name": "s", "key": "other"}}
URL = {"name": "url-val", "value": "https://a"}


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param([URL], [URL], {"url-val": "https://a"}, id="identical-once"),
        pytest.param(
            [URL, {"name": "x"}], [{"name": "x", "value": "1"}],
            {"url-val": "https://a", "x": "1"}, id="declaration-takes-value",
        ),
        pytest.param(
            [URL, {"name": "x", "value": "1"}], [{"name": "x"}],
            {"url-val": "https://a", "x": "1"}, id="value-then-declaration",
        ),
        pytest.param(
            [URL, {"name": "x", "valueFrom": SECRET}], [{"name": "x", "valueFrom": SECRET}],
            {"url-val": "https://a", "x": SECRET}, id="identical-valueFrom",
        ),
    ],
)  # fmt: skip
def test_template_args_merge(
    first: list[dict[str, Any]], second: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    run = build([arg_template("one", *first), arg_template("two", *second)])
    assert args_of(run) == expected


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (
            {"name": "url-val", "value": "https://b"},
            "conflicting definitions of arg 'url-val': AnalysisTemplate 'one' has value "
            "'https://a', AnalysisTemplate 'two' has value 'https://b'",
        ),
        (
            {"name": "url-val", "valueFrom": SECRET},
            "conflicting definitions of arg 'url-val': AnalysisTemplate 'one' has value "
            "'https://a', AnalysisTemplate 'two' has valueFrom",
        ),
    ],
)
def test_conflicting_template_args(second: dict[str, Any], message: str) -> None:
    with pytest.raises(VerificationError) as e:
        build([arg_template("one", URL), arg_template("two", second)])
    assert str(e.value).startswith(message)


def test_conflicting_value_from() -> None:
    one = arg_template("one", {"name": "url-val", "valueFrom": SECRET})
    two = arg_template("two", {"name": "url-val", "valueFrom": OTHER_SECRET})
    with pytest.raises(VerificationError, match="conflicting definitions of arg 'url-val'"):
        build([one, two])


def test_secret_args_template_keeps_value_from_and_defaults() -> None:
    run = build([tpl("analysis-secret-args")], SECRET_ARGS)
    assert run["spec"]["args"] == [
        {"name": "analysis-interval", "value": "100s"},
        {"name": "analysis-runs", "value": "10"},
        {"name": "failure-limit", "value": "2"},
        {"name": "inconclusive-limit", "value": "2"},
        {"name": "success-condition", "value": "It worked!"},
        {
            "name": "secret-url",
            "valueFrom": {"secretKeyRef": {"name": "example-secret", "key": "secretUrl"}},
        },
    ]
    # {{args.x}} placeholders are Argo Rollouts' to resolve: the metric is copied as written.
    assert run["spec"]["metrics"] == tpl("analysis-secret-args")["spec"]["metrics"]


def test_args_without_default_need_stage_args() -> None:
    with pytest.raises(VerificationError) as e:
        build([tpl("analysis-secret-args")])
    assert str(e.value) == (
        "arg 'failure-limit' of AnalysisTemplate 'analysis-secret-args' has no value: set it in "
        "the Stage's spec.verification.args"
    )


def test_multiple_job_defaults() -> None:
    assert args_of(build([tpl("multiple-job")])) == {
        "duration": "0s",
        "exit-code": "0",
        "count": "1",
    }


STAGE_ARG_CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], dict[str, Any]]] = [
    ("plain-override", [{"name": "exit-code", "value": "1"}], {}, {"exit-code": "1"}),
    ("empty-value-keeps-default", [{"name": "exit-code", "value": ""}], {}, {"exit-code": "0"}),
    ("missing-value-keeps-default", [{"name": "exit-code"}], {}, {"exit-code": "0"}),
    ("last-wins", [{"name": "count", "value": "2"}, {"name": "count", "value": "3"}], {},
     {"count": "3"}),
    ("undeclared-ignored", [{"name": "nope", "value": "x"}], {}, {"duration": "0s"}),
    ("ctx", [{"name": "duration",
              "value": "${{ ctx.project }}/${{ ctx.stage }}/${{ ctx.promotion }}"}], {},
     {"duration": f"demo/test/{PROMOTION}"}),
    ("target-freight", [{"name": "duration", "value":
        "${{ ctx.targetFreight.name }} ${{ ctx.targetFreight.alias }} "
        "${{ ctx.targetFreight.origin.kind }}/${{ ctx.targetFreight.origin.name }}"}], {},
     {"duration": f"{FREIGHT['metadata']['name']} fond-fox Warehouse/web"}),
    ("number-becomes-text", [{"name": "count", "value": "${{ 40 + 2 }}"}], {}, {"count": "42"}),
    ("bool-becomes-text", [{"name": "count", "value": "${{ 1 == 1 }}"}], {}, {"count": "true"}),
    ("quoted", [{"name": "count", "value": "${{ quote(7) }}"}], {}, {"count": "7"}),
    ("stage-vars-in-order", [{"name": "count", "value": "${{ vars.b }}"}],
     {"vars_": [{"name": "a", "value": "${{ ctx.stage }}"},
                {"name": "b", "value": "${{ vars.a }}-2"}]}, {"count": "test-2"}),
    ("given-stage-vars", [{"name": "count", "value": "${{ vars.b }}"}],
     {"stage_vars": {"b": "given"},
      "vars_": [{"name": "b", "value": "${{ nope( }}"}]}, {"count": "given"}),
    ("image-from", [{"name": "duration",
                     "value": "${{ imageFrom('ghcr.io/example/web').Tag }}"}], {},
     {"duration": "1.2.3"}),
    ("commit-from", [{"name": "duration",
                      "value": "${{ commitFrom('https://github.com/example/web.git').ID }}"}],
     {}, {"duration": "c0ffee"}),
    ("warehouse", [{"name": "duration", "value":
        "${{ imageFrom('ghcr.io/example/web', warehouse('web')).Digest }}"}], {},
     {"duration": "sha256:abc"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "options", "expected"),
    [pytest.param(a, o, e, id=i) for i, a, o, e in STAGE_ARG_CASES],
)
def test_stage_args(
    args: list[dict[str, Any]], options: dict[str, Any], expected: dict[str, Any]
) -> None:
    run = build([tpl("multiple-job")], args, **options)
    got = args_of(run)
    assert list(got) == ["duration", "exit-code", "count"]  # only declared args, template order
    for name, value in expected.items():
        assert got[name] == value


def test_freight_functions_search_the_given_freights() -> None:
    other = objects.freight(
        "other", warehouse="api", images=[{"repoURL": "ghcr.io/example/api", "tag": "9.9.9"}]
    )
    run = build(
        [tpl("multiple-job")],
        [{"name": "duration", "value": "${{ imageFrom('ghcr.io/example/api').Tag }}"}],
        freights=[FREIGHT, other],
    )
    assert args_of(run)["duration"] == "9.9.9"


def test_stage_value_replaces_value_from() -> None:
    run = build([tpl("analysis-secret-args")], {**SECRET_ARGS, "secret-url": "https://x"})
    assert {"name": "secret-url", "value": "https://x"} in run["spec"]["args"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [{"name": "count", "value": "${{ nil }}"}],
            "Stage 'test': spec.verification.args[0] (count): evaluated to null",
        ),
        (
            [{"name": "count", "value": "${{ 1 + }}"}],
            "Stage 'test': spec.verification.args[0] (count)",
        ),
        (
            [{"name": "count", "value": "${{ vars.missing.field }}"}],
            "Stage 'test': spec.verification.args[0] (count)",
        ),
        ([{"value": "x"}], "Stage 'test': spec.verification.args[0] must be a map with a name"),
        ("not-a-list", "Stage 'test': spec.verification.args must be a list"),
    ],
)
def test_bad_stage_args(args: Any, message: str) -> None:
    with pytest.raises(VerificationError) as e:
        build([tpl("multiple-job")], args)
    assert str(e.value).startswith(message)


def test_bad_stage_var() -> None:
    with pytest.raises(VerificationError, match=r"Stage 'test': spec\.vars\.a"):
        build([tpl("multiple-job")], vars_=[{"name": "a", "value": "${{ 1 + }}"}])


# ---- malformed templates ------------------------------------------------------------------------


def test_malformed_template_names_template_metric_container_and_field() -> None:
    with pytest.raises(VerificationError) as e:
        build([tpl("malformed-analysis")])
    assert str(e.value) == (
        "AnalysisTemplate 'malformed-analysis': metric 'test': job container 'sleep': "
        "resources.requests.memory: 'invalid' is not a valid Kubernetes quantity (such as "
        "128Mi, 1Gi, 0.5 or 100m)"
    )


def _resources(template: dict[str, Any], resources: Any) -> dict[str, Any]:
    out = copy.deepcopy(template)
    pod = out["spec"]["metrics"][0]["provider"]["job"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = resources
    return out


QUANTITIES: list[tuple[Any, bool]] = [
    ("128Mi", True), ("1Gi", True), ("0.5", True), ("100m", True), ("1e3", True),
    (".5", True), ("2", True), (1, True), (0.25, True), ("1.5Ki", True), ("500u", True),
    ("invalid", False), ("1 Gi", False), ("1GB", False), ("-1", False), ("Mi", False),
    ("", False), (True, False),
]  # fmt: skip


@pytest.mark.parametrize(("quantity", "valid"), QUANTITIES)
def test_job_container_quantities(quantity: Any, valid: bool) -> None:
    template = _resources(tpl("pass"), {"limits": {"cpu": quantity}})
    if valid:
        build([template])
    else:
        with pytest.raises(VerificationError, match=r"container 'sleep': resources\.limits\.cpu"):
            build([template])


def test_quantities_from_args_are_checked_after_substitution() -> None:
    template = _resources(tpl("pass"), {"requests": {"memory": "{{args.mem}}"}})
    template["spec"]["args"] = [{"name": "mem"}]
    build([template], {"mem": "64Mi"})
    with pytest.raises(VerificationError, match=r"'lots' is not a valid Kubernetes quantity"):
        build([template], {"mem": "lots"})
    # A Secret's value is unknown until Argo Rollouts reads it: nothing to check.
    template["spec"]["args"] = [{"name": "mem", "valueFrom": SECRET}]
    build([template])


def test_init_containers_are_checked() -> None:
    template = tpl("pass")
    pod = template["spec"]["metrics"][0]["provider"]["job"]["spec"]["template"]["spec"]
    pod["initContainers"] = [{"name": "setup", "resources": {"requests": {"cpu": "x"}}}]
    with pytest.raises(VerificationError, match="job initContainer 'setup'"):
        build([template])


def _mutate(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    template = tpl("web-background")
    change(template["spec"])
    return template


MALFORMED: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("no-metrics", lambda s: s.pop("metrics"),
     "AnalysisTemplate 'web-background': spec.metrics is empty; a template needs a metric"),
    ("metrics-not-list", lambda s: s.update(metrics={"web": {}}),
     "AnalysisTemplate 'web-background': spec.metrics must be a list"),
    ("metric-not-map", lambda s: s.update(metrics=["web"]),
     "AnalysisTemplate 'web-background': spec.metrics[0] must be a map"),
    ("metric-without-name", lambda s: s["metrics"][0].pop("name"),
     "AnalysisTemplate 'web-background': spec.metrics[0] has no name"),
    ("metric-without-provider", lambda s: s["metrics"][0].pop("provider"),
     "AnalysisTemplate 'web-background': metric 'web' has no provider"),
    ("two-providers", lambda s: s["metrics"][0]["provider"].update(job={}),
     "AnalysisTemplate 'web-background': metric 'web' names 2 providers (job, web)"),
    ("duplicate-in-one", lambda s: s["metrics"].append(copy.deepcopy(s["metrics"][0])),
     "duplicate metric name 'web': twice in AnalysisTemplate 'web-background'"),
    ("nested-templates", lambda s: s.update(templates=[{"templateName": "x"}]),
     "AnalysisTemplate 'web-background': spec.templates (nested templates)"),
    ("arg-not-string", lambda s: s["args"].append({"name": "n", "value": 5}),
     "AnalysisTemplate 'web-background': arg 'n': value must be a string"),
    ("arg-without-name", lambda s: s["args"].append({"value": "5"}),
     "AnalysisTemplate 'web-background': spec.args[1] has no name"),
    ("value-and-valueFrom", lambda s: s["args"][0].update(valueFrom=SECRET),
     "AnalysisTemplate 'web-background': arg 'url-val' has both value and valueFrom"),
    ("fieldRef", lambda s: s["args"][0].update(
        value=None, valueFrom={"fieldRef": {"fieldPath": "metadata.name"}}),
     "arg 'url-val' of AnalysisTemplate 'web-background': valueFrom.fieldRef is only resolved"),
    ("secret-without-key", lambda s: s["args"][0].update(
        value=None, valueFrom={"secretKeyRef": {"name": "s"}}),
     "arg 'url-val' of AnalysisTemplate 'web-background': valueFrom needs secretKeyRef"),
    ("undeclared-arg-reference", lambda s: s["metrics"][0]["provider"]["web"].update(
        url="{{args.nope}}"),
     "AnalysisTemplate 'web-background': metric 'web' uses {{args.nope}}, but no template "
     "declares arg 'nope'"),
    ("dry-run-without-metric-name", lambda s: s.update(dryRun=[{"name": "web"}]),
     "AnalysisTemplate 'web-background': spec.dryRun[0] needs a metricName"),
    ("empty-metrics", lambda s: s.update(metrics=[]),
     "AnalysisTemplate 'web-background': spec.metrics is empty"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), [pytest.param(c, m, id=i) for i, c, m in MALFORMED])
def test_malformed_templates(change: Callable[[dict[str, Any]], None], message: str) -> None:
    with pytest.raises(VerificationError) as e:
        build([_mutate(change)])
    assert str(e.value).startswith(message)


def test_stage_value_rescues_a_field_ref_arg() -> None:
    template = _mutate(lambda s: s["args"][0].update(value=None, valueFrom={"fieldRef": {}}))
    run = build([template], {"url-val": "https://x"})
    assert run["spec"]["args"] == [{"name": "url-val", "value": "https://x"}]


@pytest.mark.parametrize(
    ("stage_change", "templates", "message"),
    [
        (lambda s: s["spec"].pop("verification"), None, "no spec.verification"),
        (
            lambda s: s["spec"]["verification"].update(analysisTemplates=[]),
            None,
            "spec.verification.analysisTemplates is empty",
        ),
        (
            lambda s: s["spec"]["verification"]["analysisTemplates"].append({"name": "gone"}),
            None,
            "Stage 'test': AnalysisTemplate 'gone' was not found",
        ),
        (
            lambda s: s["spec"]["verification"]["analysisTemplates"][0].update(
                kind="ClusterAnalysisTemplate"
            ),
            None,
            "Stage 'test': ClusterAnalysisTemplate 'pass' was not found",
        ),
        (
            lambda s: None,
            [tpl("pass"), tpl("web-background")],
            "Stage 'test': AnalysisTemplate 'web-background' is not listed",
        ),
        (
            lambda s: s["spec"]["verification"]["analysisTemplates"][0].update(kind="Rollout"),
            None,
            "kind 'Rollout' must be AnalysisTemplate or ClusterAnalysisTemplate",
        ),
    ],
)
def test_stage_and_template_mismatch(
    stage_change: Callable[[dict[str, Any]], Any],
    templates: list[dict[str, Any]] | None,
    message: str,
) -> None:
    stage = make_stage([tpl("pass")])
    stage_change(stage)
    with pytest.raises(VerificationError, match=re.escape(message)):
        build_analysis_run(
            stage=stage,
            freight=FREIGHT,
            templates=templates or [tpl("pass")],
            promotion=None,
            namespace="demo",
        )


def test_a_template_listed_twice_is_used_once() -> None:
    stage = make_stage([tpl("pass"), tpl("pass")])
    run = build_analysis_run(
        stage=stage, freight=FREIGHT, templates=[tpl("pass")], promotion=None, namespace="demo"
    )
    assert metric_names(run) == ["pass"]


def test_verification_error_is_a_value_error() -> None:
    assert issubclass(VerificationError, ValueError)


# ---- lifecycle ----------------------------------------------------------------------------------


def run_with(status: dict[str, Any] | None) -> dict[str, Any]:
    run: dict[str, Any] = {"metadata": {"name": "test.x.abcdef0", "namespace": "demo"}}
    if status is not None:
        run["status"] = status
    return run


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        (None, ""),
        ({}, ""),
        ({"phase": "Pending"}, "Pending"),
        ({"phase": "Running"}, "Running"),
        ({"phase": "Successful"}, "Successful"),
        ({"phase": "Failed"}, "Failed"),
        ({"phase": "Error"}, "Error"),
        ({"phase": "Inconclusive"}, "Inconclusive"),
        ({"phase": "Weird"}, ""),
    ],
)
def test_verification_phase(status: dict[str, Any] | None, phase: str) -> None:
    assert verification_phase(run_with(status)) == phase


def test_terminal_phases() -> None:
    assert {"Successful", "Failed", "Error", "Inconclusive"} == ANALYSIS_TERMINAL


FAILED_WEB = {"name": "web", "phase": "Failed", "message": "got 500"}


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (None, ""),
        ({"phase": "Successful"}, ""),
        ({"phase": "Failed", "message": "Metric \"web\" assessed Failed"},
         "Metric \"web\" assessed Failed"),
        ({"phase": "Failed", "metricResults": [{"name": "ok", "phase": "Successful"},
                                                FAILED_WEB]},
         "metric 'web' assessed Failed: got 500"),
        ({"phase": "Error", "metricResults": [
            {"name": "job", "phase": "Error",
             "measurements": [{"phase": "Error", "message": "first"},
                              {"phase": "Error", "message": "pod failed"}]}]},
         "metric 'job' assessed Error: pod failed"),
        ({"phase": "Inconclusive", "metricResults": [{"name": "q", "phase": "Inconclusive"}]},
         "metric 'q' assessed Inconclusive"),
        ({"phase": "Successful", "metricResults": [{**FAILED_WEB, "dryRun": True}]}, ""),
    ],
)  # fmt: skip
def test_verification_message(status: dict[str, Any] | None, message: str) -> None:
    assert verification_message(run_with(status)) == message


START = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
FINISH = datetime(2024, 5, 1, 12, 5, 0, tzinfo=UTC)


def test_verification_entry_shapes() -> None:
    assert verification_entry(
        id="v1", actor=None, start=START, analysis_run=None, phase="Pending"
    ) == {"id": "v1", "startTime": "2024-05-01T12:00:00Z", "phase": "Pending"}
    assert verification_entry(
        id="v1",
        actor="alice",
        start=START,
        analysis_run=run_with({"phase": "Failed"}),
        phase="Failed",
        message="nope",
        finish=FINISH,
    ) == {
        "id": "v1",
        "actor": "alice",
        "startTime": "2024-05-01T12:00:00Z",
        "finishTime": "2024-05-01T12:05:00Z",
        "phase": "Failed",
        "message": "nope",
        "analysisRun": {"name": "test.x.abcdef0", "namespace": "demo", "phase": "Failed"},
    }
    fresh = verification_entry(
        id="v2", actor=None, start=START, analysis_run=run_with(None), phase="Pending"
    )
    assert fresh["analysisRun"] == {"name": "test.x.abcdef0", "namespace": "demo", "phase": ""}


def entries(*ids: str) -> list[dict[str, Any]]:
    return [{"id": i, "phase": "Successful"} for i in ids]


@pytest.mark.parametrize(
    ("history", "entry", "limit", "expected"),
    [
        ([], {"id": "a", "phase": "Pending"}, 10, [("a", "Pending")]),
        (entries("b", "a"), {"id": "c", "phase": "Pending"}, 10,
         [("c", "Pending"), ("b", "Successful"), ("a", "Successful")]),
        # Replaced where it stands, as Kargo's UpdateOrPush does.
        (entries("c", "b", "a"), {"id": "b", "phase": "Failed"}, 10,
         [("c", "Successful"), ("b", "Failed"), ("a", "Successful")]),
        (entries("c", "b", "a"), {"id": "d", "phase": "Running"}, 3,
         [("d", "Running"), ("c", "Successful"), ("b", "Successful")]),
        (entries(*[str(i) for i in range(10, 0, -1)]), {"id": "11", "phase": "Pending"}, 10,
         [("11", "Pending")] + [(str(i), "Successful") for i in range(10, 1, -1)]),
    ],
)  # fmt: skip
def test_record_verification(
    history: list[dict[str, Any]],
    entry: dict[str, Any],
    limit: int,
    expected: list[tuple[str, str]],
) -> None:
    before = copy.deepcopy(history)
    out = record_verification(history, entry, limit=limit)
    assert [(e["id"], e["phase"]) for e in out] == expected
    assert history == before


def test_template_spec_must_be_a_map() -> None:
    template = tpl("pass")
    template["spec"] = ["metrics"]
    with pytest.raises(VerificationError, match="AnalysisTemplate 'pass': spec must be a map"):
        build([template])
