"""A minimal Kargo project as manifests: a namespace, a Warehouse and one Freight.

Tests that seed a server's embedded cluster append the Stages they need to this prelude.
"""

from __future__ import annotations

FREIGHT = "f0123456789abcdef0123456789abcdef0123456"


def project_prelude(namespace: str) -> str:
    """Namespace ``namespace``, Warehouse ``w`` and Freight :data:`FREIGHT` (alias ``first``)."""
    return f"""\
apiVersion: v1
kind: Namespace
metadata: {{name: {namespace}}}
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Warehouse
metadata: {{name: w, namespace: {namespace}}}
spec:
  subscriptions:
  - image: {{repoURL: example.com/app, semverConstraint: ^1.0.0}}
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Freight
metadata: {{name: {FREIGHT}, namespace: {namespace}}}
alias: first
origin: {{kind: Warehouse, name: w}}
---
"""
