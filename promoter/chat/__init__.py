"""The chat core both front ends share: commands, their grammar, and what they show.

Here: ``chatops`` (the grammar, Freight resolution, authorization, status rows), ``commands``
(the one planner: a command plus the facts a front end gathered -> a decision) and ``views``
(one read model of a Promotion that check runs, Slack blocks and the pages all format).
``handlers/`` (GitHub) and ``slack/`` parse, gather facts and carry out the decision.

May import: :mod:`promoter.control` and everything below it.
"""
