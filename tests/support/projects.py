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
images: [{{repoURL: example.com/app, tag: 1.0.0}}]
---
"""


_DIRECT = "requestedFreight: [{origin: {kind: Warehouse, name: w}, sources: {direct: true}}]"


def limits_project(namespace: str) -> str:
    """The prelude, a PromotionTask ``hundred`` of 100 ``compose-output`` steps, Stage
    ``small`` (one step whose two outputs are ``vars.size`` characters each, 10 by default),
    Stage ``tasks`` (``hundred`` six times: 600 steps once inflated) and Stage ``limit``
    (five times: 500 steps). For the limits' tests and benchmark (issue 34)."""
    task_steps = "".join(
        f"  - {{uses: compose-output, as: s{i}, config: {{n: '{i}'}}}}\n" for i in range(100)
    )
    return (
        project_prelude(namespace)
        + f"""\
apiVersion: kargo.akuity.io/v1alpha1
kind: PromotionTask
metadata: {{name: hundred, namespace: {namespace}}}
spec:
  steps:
{task_steps}---
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {{name: small, namespace: {namespace}}}
spec:
  {_DIRECT}
  promotionTemplate:
    spec:
      vars: [{{name: size, value: "10"}}]
      steps:
      - uses: compose-output
        as: out
        config:
          a: "${{{{ repeat('x', int(vars.size)) }}}}"
          b: "${{{{ repeat('y', int(vars.size)) }}}}"
"""
        + "".join(
            _stage_of_tasks(namespace, name, refs) for name, refs in (("tasks", 6), ("limit", 5))
        )
    )


def _stage_of_tasks(namespace: str, name: str, refs: int) -> str:
    steps = "".join(f"      - {{task: {{name: hundred}}, as: t{i}}}\n" for i in range(refs))
    return f"""\
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  {_DIRECT}
  promotionTemplate:
    spec:
      steps:
{steps}"""
