"""Server-rendered status pages: projects, Stages and Promotions, live over server-sent events.

:mod:`app.ui.views` decides what to show (pure), :mod:`app.ui.html` renders it, and
:mod:`app.ui.pages` serves it; :mod:`app.ui.auth` decides who may look, and
:mod:`app.ui.settings` reads the configuration. See docs/status-pages.md.
"""
