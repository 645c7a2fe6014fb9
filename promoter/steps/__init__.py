"""Built-in promotion steps (``uses:`` kinds) and the registry that maps kinds to them.

One module per step, as Kargo's ``pkg/promotion/runner/builtin`` keeps one file per step (or per
small family of steps that share their parsing: ``basic``, ``argocd``, ``github``, ``oci``,
``workdir.parse``, ``workdir.tomlfiles``). Each step module defines ``STEPS`` (its kinds) and
names ``registry.BUILTIN_KINDS`` lists; helpers that several steps use are public names of a
shared module of the package, never a ``_private`` name imported from a sibling.

Here: ``base`` (the step protocol, its context and services, config reading), ``registry``
(kinds to modules, imported on first use); the git steps ``git_clone``, ``git_clear``,
``git_commit``, ``git_tag``, ``git_push`` over ``git`` (the safe git runner, the work
directory's layout, URL and ref checks), and ``github_push`` (the same push through GitHub's
API); ``github`` (the pull-request steps), ``argocd``, ``http``, ``download``
(``http-download``), ``oci``, ``metadata``, ``freight_alias``, ``basic`` (``compose-output``,
``fail``); and ``workdir/``, the steps that only edit the work directory.

May import: :mod:`promoter.rules`, :mod:`promoter.resources`, :mod:`promoter.ports`,
:mod:`promoter.warehouses`, :mod:`promoter.expressions`, :mod:`promoter.errors`,
:mod:`promoter.clock`. No web, GitHub, Slack or Kubernetes library, except aiohttp in ``http``,
the one edge adapter here.
"""
