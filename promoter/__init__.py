"""Longshoreman's domain and promotion engine.

The core (model, builder, expressions, engine) decides on plain data and imports no web, GitHub,
Slack or Kubernetes library; steps that do I/O sit in ``promoter.steps`` behind small ports.
"""
