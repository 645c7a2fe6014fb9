"""What the controller decides about a Stage, purely: its queue, its status, its verification.

Here: ``stage_planner`` (what the controller should do next for one Stage, from its objects) and
``verification`` (the AnalysisRun to create, and what its status means for the Freight).
``app/controller`` gathers the objects and applies the decisions.

May import: :mod:`promoter.engine` and everything below it.
"""
