"""GitHub webhook handlers, one router per event family."""
