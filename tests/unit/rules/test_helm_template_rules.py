"""The pure rules of helm-template (promoter/rules/helm_template.py): Kargo's filename,
metadata, layout and hook tables (helm_template_runner_test.go), and Helm's manifest split."""

from __future__ import annotations

import pytest

from promoter.rules.helm_template import (
    Hook,
    OutputOptions,
    UnsafeFilename,
    check_filename,
    commit_message,
    lock_changes,
    object_metadata,
    resource_filename,
    sort_release,
    split_manifests,
)


@pytest.mark.parametrize(
    ("resource", "name"),
    [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: test-config\n  namespace: default",
            "configmap-default-test-config.yaml",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: test-app\n"
            "  namespace: production",
            "apps-deployment-production-test-app.yaml",
        ),
        (
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n"
            "  name: test-role",
            "rbac_authorization_k8s_io-clusterrole-test-role.yaml",
        ),
        (
            "apiVersion: networking.istio.io/v1beta1\nkind: VirtualService\nmetadata:\n"
            "  name: test-vs\n  namespace: istio-system",
            "networking_istio_io-virtualservice-istio-system-test-vs.yaml",
        ),
        ("invalid: yaml: content: [", ""),
        ("apiVersion: v1\nmetadata:\n  name: test", ""),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: default", ""),
    ],
)
def test_generate_resource_filename(resource: str, name: str) -> None:
    assert resource_filename(resource) == name


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: my-service\n  namespace: my-ns",
            ("", "Service", "my-ns", "my-service"),
        ),
        (
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: my-ingress\n"
            "  namespace: web",
            ("networking.k8s.io", "Ingress", "web", "my-ingress"),
        ),
        (
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: my-namespace",
            ("", "Namespace", "", "my-namespace"),
        ),
        ("invalid: yaml: [", ("", "", "", "")),
    ],
)
def test_extract_object_metadata(resource: str, expected: tuple[str, str, str, str]) -> None:
    assert object_metadata(resource) == expected


@pytest.mark.parametrize(
    ("out_path", "is_file"),
    [
        ("output.yaml", True),
        ("output.yml", True),
        ("output/", False),
        ("output", False),
        ("output.json", False),
    ],
)
def test_out_path_is_file(out_path: str, is_file: bool) -> None:
    assert OutputOptions(out_path).is_file is is_file


@pytest.mark.parametrize(
    ("events", "is_test"),
    [
        (("test",), True),
        (("pre-install",), False),
        (("pre-install", "test"), True),
        ((), False),
    ],
)
def test_is_test_hook(events: tuple[str, ...], is_test: bool) -> None:
    assert Hook("h.yaml", "", "Pod", events).is_test is is_test


@pytest.mark.parametrize("name", ["", ".", "..", "../x.yaml", "/abs.yaml", "a\\b.yaml", "a/b"])
def test_unsafe_generated_filenames_are_refused(name: str) -> None:
    with pytest.raises(UnsafeFilename):
        check_filename(name)


def test_split_manifests_trims_documents_as_helm_3_does() -> None:
    text = "\n---\napiVersion: v1\nkind: A\n  \n---   \n\n\nkind: B\n\n\n"
    assert split_manifests(text) == ["apiVersion: v1\nkind: A", "kind: B"]
    # Two separators in a row leave a document of "---", as Helm's regexp split does (Helm 4's
    # own install action shows the same).
    assert split_manifests("kind: A\n---\n---\nkind: B") == ["kind: A", "---\nkind: B"]


def test_unknown_hook_events_and_partials_are_left_out() -> None:
    release = sort_release(
        {
            "c/templates/_helpers.tpl": "kind: Secret",
            "c/templates/NOTES.txt": "thanks",
            "c/templates/odd.yaml": (
                "kind: Job\nmetadata:\n  annotations:\n    helm.sh/hook: sometime\n"
            ),
            "c/templates/ok.yaml": (
                "kind: Job\nmetadata:\n  annotations:\n    helm.sh/hook: Pre-Install, test\n"
            ),
        }
    )
    assert release.manifests == ()
    assert [(h.source, h.events) for h in release.hooks] == [
        ("c/templates/ok.yaml", ("pre-install", "test"))
    ]


def deps(**versions: str) -> list[dict[str, str]]:
    return [{"name": name, "version": version} for name, version in versions.items()]


@pytest.mark.parametrize(
    ("before", "after", "changes"),
    [
        (deps(), deps(), {}),
        (deps(a="1.0.0"), deps(a="1.0.0"), {}),
        (deps(a="1.0.0"), deps(a="1.1.0"), {"a": "1.0.0 -> 1.1.0"}),
        (deps(a="1.0.0"), deps(), {"a": ""}),
        (deps(), deps(b="2.0.0"), {"b": "2.0.0"}),
        (
            deps(a="1.0.0", gone="3.0.0"),
            deps(a="1.1.0", new="0.1.0"),
            {"a": "1.0.0 -> 1.1.0", "gone": "", "new": "0.1.0"},
        ),
    ],
)
def test_lock_changes(
    before: list[dict[str, str]], after: list[dict[str, str]], changes: dict[str, str]
) -> None:
    assert lock_changes(before, after) == changes


HEAD = "Updated chart dependencies for p\n"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({}, ""),
        ({"chart1": "1.0.0 -> 1.1.0"}, HEAD + "\n- chart1: 1.0.0 -> 1.1.0"),
        (
            {"chart2": "2.0.0 -> 2.1.0", "chart1": "1.0.0 -> 1.1.0"},
            HEAD + "\n- chart1: 1.0.0 -> 1.1.0\n- chart2: 2.0.0 -> 2.1.0",
        ),
        ({"chart1": "", "chart2": ""}, HEAD + "\n- chart1: removed\n- chart2: removed"),
        ({"chart3": "3.0.0"}, HEAD + "\n- chart3: 3.0.0"),
    ],
)
def test_commit_message(changes: dict[str, str], message: str) -> None:
    assert commit_message("p", changes) == message
