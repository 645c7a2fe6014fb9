"""The Slack app (slash commands, interactivity, live messages)."""
