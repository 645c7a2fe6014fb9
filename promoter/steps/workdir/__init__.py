"""Steps that read and write only the Promotion's work directory (``Effect.LOCAL``).

Here: ``files`` (yaml-update, json-update, yaml/json-parse, helm-update-chart, copy, delete,
file-write, yaml-merge), ``yamledit`` and ``yamlsplice`` (editing YAML while keeping its comments
and layout), ``tomlfiles`` (toml-parse, toml-update), ``kustomize`` (kustomize-set-image,
kustomize-build) and ``archive`` (tar, untar). A replay runs them again.

May import: :mod:`promoter.steps.base` and what it may import.
"""
