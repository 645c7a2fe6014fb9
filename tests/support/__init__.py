"""Shared test helpers (local git remotes, hand-built step contexts, fakes), defined once here so
that no test file grows its own copy."""
