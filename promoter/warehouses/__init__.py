"""Warehouses: Kargo's artifact discovery, decided purely.

A Warehouse subscribes to container image repositories, Helm chart repositories and git
repositories; discovery lists what each holds, each subscription's selection strategy picks and
orders the versions it accepts, and the newest of every subscription together make one Freight,
named by a hash of those artifacts (Kargo's ``GenerateFreightID``). This package holds the rules
only (the spec model, the strategies, the Freight ID and object, the status and conditions); the
registry, chart and git adapters that gather the facts live in ``app/controller/warehouses``.
"""
