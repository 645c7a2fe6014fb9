"""Wiring: settings, the HTTP server and the reconciler runtime."""
