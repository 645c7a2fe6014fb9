"""The controller runtime: the Kubernetes client, informers, the work queue, leader election,
the reconcile loop with its one write path, and the adapters the front ends use to create and
abort Promotions.

Nothing here renders for people; the front ends (handlers/, slack/, app/ui/) reach the cluster
only through the ports in promoter/ that app/server.py wires to these adapters.
"""
