"""The resource model: Kargo's v1alpha1 objects as small typed values, and the facts about them.

Here: ``model`` (Promotions, Stages, Freight, steps and vars, parsed at the edge), ``annotations``
(every annotation we read or write), ``stages`` (pure facts about a Stage: its queue, its
Freight, its status), ``manifests`` and ``yamlio`` (loading manifests from YAML files).

May import: :mod:`promoter.errors` and the standard library (and PyYAML for loading). Nothing
here does I/O beyond reading the manifest files it is given.
"""
