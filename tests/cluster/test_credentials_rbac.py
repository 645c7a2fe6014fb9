"""Issue 27's cluster "done when": under deploy/'s RBAC the controller reads the labelled
credential Secrets of the namespaces it serves, is refused those of a namespace it does not,
and every Secret request it makes carries the label selector, checked where the request
arrived (the real kube-apiserver's audit log; in front of the emulator, the RBAC proxy).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs

import pytest

from app.controller import kube as k
from app.controller.credentials import ClusterCredentials
from promoter.ports.credentials import CredentialsError, CredentialType
from tests.cluster.support import Cluster

PROJECT, SHARED, STRANGER = "kargo-demo", "kargo-shared-resources", "other-team"
GIT_URL = "https://git.example.com/team/app.git"


def credential(name: str, namespace: str, user: str, *, labelled: bool = True) -> dict[str, Any]:
    data = {"repoURL": GIT_URL, "username": user, "password": f"{user}-password"}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labelled:
        metadata["labels"] = {"kargo.akuity.io/cred-type": "git"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "data": {key: base64.b64encode(v.encode()).decode() for key, v in data.items()},
    }


async def test_the_controller_reads_labelled_secrets_only_where_it_serves(
    cluster: Cluster,
) -> None:
    await cluster.kubectl("create", "namespace", PROJECT)
    await cluster.kubectl("create", "namespace", STRANGER)
    admin = cluster.kube()
    async with cluster.controller_access() as access:
        await admin.create(k.SECRETS, credential("shared-git", SHARED, "shared"))
        await admin.create(k.SECRETS, credential("stranger-git", STRANGER, "stranger"))
        await admin.create(k.SECRETS, credential("unlabelled", PROJECT, "nobody", labelled=False))
        kube = k.Kube(access.api_client())
        credentials = ClusterCredentials(kube, global_namespace=SHARED)

        # The project has no Secret of its own: the shared one answers.
        found = await credentials.get(PROJECT, CredentialType.GIT, GIT_URL)
        assert found is not None and found.username == "shared"
        await admin.create(k.SECRETS, credential("project-git", PROJECT, "project"))
        found = await credentials.get(PROJECT, CredentialType.GIT, GIT_URL)
        assert found is not None and found.username == "project"

        # A namespace the RBAC does not grant: refused by the server, said plainly.
        with pytest.raises(CredentialsError) as refused:
            await credentials.get(STRANGER, CredentialType.GIT, GIT_URL)
        assert f"in namespace '{STRANGER}': 403" in str(refused.value)
        assert "stranger-password" not in str(refused.value)

        requests = access.secret_requests()
    assert requests, "the server saw the controller's Secret requests"
    # Lists only (no get, no watch), each of one namespace and with the cred-type selector.
    assert {r.verb for r in requests} == {"list"}
    for request in requests:
        selector = parse_qs(request.query).get("labelSelector", [""])[0]
        assert selector in (
            "kargo.akuity.io/cred-type=git",
            "longshoreman.dev/cred-type=git",
        ), request
    served = {(r.namespace, r.code) for r in requests}
    assert {(PROJECT, 200), (SHARED, 200), (STRANGER, 403)} <= served
    assert {ns for ns, code in served if code == 403} == {STRANGER}
