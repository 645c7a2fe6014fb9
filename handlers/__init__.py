"""GitHub webhook handlers, one router per event family, and the GitHub App's edge adapters.

Layout (bedevere's): ``pull_request``, ``issue_comment``, ``check_run`` and ``push`` each hold
one ``gidgethub.routing.Router``; :mod:`handlers.routing` composes them once and dispatches.
:mod:`handlers.webhook` serves ``POST /github/webhook`` (verify, deduplicate, queue, 202) and
:func:`handlers.webhook.setup_github` wires it into the app. :mod:`handlers.client` talks to
GitHub as the App; :mod:`handlers.pull_requests` is the pull-request steps' port over it;
:mod:`handlers.checks` (pure) and :mod:`handlers.progress` show Promotions as check runs and
edited replies. Settings come from :mod:`handlers.settings`. Nothing here imports ``app`` or
``slack``: the app layer wires this package.
"""
