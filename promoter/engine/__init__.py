"""The engine: turns a Stage and a Freight into a Promotion and runs its steps, resumably.

Here: ``builder`` (the Stage's template and PromotionTasks -> a Promotion's steps and vars),
``engine`` (Kargo's step loop: one step at a time, retries, timeouts, outputs, aborts) and
``replay`` (rebuilding a Promotion's work directory on a replica that did not build it).

May import: :mod:`promoter.steps`, :mod:`promoter.rules`, :mod:`promoter.resources`,
:mod:`promoter.ports`, :mod:`promoter.expressions`. Never a web, GitHub, Slack or Kubernetes
library: the controller in ``app/controller`` calls the engine and writes what it returns.
"""
