"""Warehouse discovery adapters and the Warehouse reconciler.

The rules are in :mod:`promoter.warehouses`; this package gathers the facts they decide on
(container registries over the OCI distribution API, Helm chart repositories, git remotes) and
applies the decisions to the cluster (Warehouse status, Freight).
"""
