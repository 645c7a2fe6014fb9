"""The ports: how the engine and the steps reach the world, as small protocols and plain data.

Here: ``telemetry`` (metrics and log context), ``io_port`` (child processes, blocking calls,
pauses, locks), ``gitcmd`` (how every git process is started), ``oci`` (OCI registries),
``clusterdata`` (Kargo's ``secret()`` and ``configMap()``) and ``credentials`` (repository
credentials for a project, asked by Warehouse discovery, the git steps and the oci steps).
Time is :mod:`promoter.clock`.

May import: :mod:`promoter.errors`, :mod:`promoter.expressions` and the standard library. The
adapters that implement these ports for a real cluster or registry live in ``app/``.
"""
