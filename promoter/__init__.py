"""Longshoreman's domain and promotion engine: decides on plain data, imports no web, GitHub,
Slack or Kubernetes library (the http step's aiohttp is the one edge adapter here).

The rooms, each over the ones below it (the layers contract in pyproject.toml holds them):

- ``local/``: the local runner's command line (``python -m promoter``, ``longshoreman``);
- ``chat/``: the chat core both front ends share (commands, grammar, the Promotion view);
- ``control/``: what the controller decides about a Stage (its queue, status, verification);
- ``engine/``: the builder, the step loop and the replay;
- ``steps/`` and ``rules/``: the step kinds, and the pure rules of those that reach other
  objects (Argo CD, metadata, Freight aliases);
- ``resources/``, ``ports/`` and ``warehouses/``: the resource model and manifests; the ports the
  engine and steps reach the world through; Warehouse discovery's pure decisions;
- ``expressions/``: Kargo's ``${{ }}`` expression language;
- ``errors`` and ``clock``: kinds of errors, and time as a dependency, for every layer.
"""
