"""The local runner: ``python -m promoter`` / ``longshoreman``, without a cluster.

Here: ``cli`` (the command line), ``runner`` (load manifests, build the Promotion, run the engine
to a terminal phase) and ``demo`` (the example Promotion against a throwaway git remote).

May import: all of :mod:`promoter`; never the server's packages (aiohttp, kubernetes, slack,
gidgethub): ``tests/integration/test_runner_imports.py`` holds that line.
"""
