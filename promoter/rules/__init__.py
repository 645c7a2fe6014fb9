"""Pure rules of the steps that reach other objects: Argo CD, metadata, Freight aliases.

Here: ``argocd`` (what ``argocd-update`` and ``argocd-wait`` decide, and Argo CD health),
``metadata`` (``set-metadata`` and the metadata expression functions), ``freight_alias``
(``set-freight-alias``), ``credentials`` (Kargo's credential Secrets: format, matching, the
lookup order). The steps in :mod:`promoter.steps` apply them, and the controller's
planner reads them too.

May import: :mod:`promoter.resources`, :mod:`promoter.ports`, :mod:`promoter.warehouses` (URL
normalization), :mod:`promoter.expressions` and the
steps' base module (config reading) — the rules and the steps are siblings in one layer.
"""
