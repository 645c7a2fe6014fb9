"""Steps that read and write only the Promotion's work directory (``Effect.LOCAL``).

One module per step: ``yaml_update``, ``json_update``, ``parse`` (yaml-parse, json-parse),
``helm_update_chart``, ``file_copy`` (copy), ``file_delete`` (delete), ``file_write``,
``yaml_merge``, ``tomlfiles`` (toml-parse, toml-update), ``kustomize_set_image``,
``kustomize_build``, ``untar`` and ``tar``. What they share is public in ``files`` (reading and
atomically writing a file a config names, running file I/O off the event loop), ``updates``
(the key syntax and ``updates`` list of yaml-update and json-update), ``ignore`` (the
.gitignore subset of ``copy``, ``tar`` and ``untar``), ``yamledit`` and ``yamlsplice``
(editing YAML while keeping its comments and layout). A replay runs them again.

May import: :mod:`promoter.steps.base` and what it may import.
"""
