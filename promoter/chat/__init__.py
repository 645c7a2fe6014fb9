"""The chat core both front ends share: commands, their grammar, and what they show.

Here, one module per kind of thing:

- ``grammar``: the words of a command, parsed from a PR comment or a Slack slash command;
- ``freight_refs``: which Freight a person means (name or alias by Kargo's rule, then a prefix,
  a commit, an image or ``latest``);
- ``planner``: the one planner (a command plus the facts a front end gathered -> a decision),
  with the rules it applies (availability, what ``/abort`` aborts, the shared pieces of who may
  act);
- ``port``: what the front ends may do to the cluster (``PromotionService``, the ``Snapshot``);
- ``views``: one read model of a Promotion and of a Stage that check runs, Slack blocks and the
  pages all format; ``shown``: write a rendered message only when it changed.

``handlers/`` (GitHub) and ``slack/`` parse, gather facts, carry out the decision and hold what
only one of them needs (GitHub's permission rule and Markdown, Slack's user groups and
announcements).

May import: :mod:`promoter.control` and everything below it.
"""
