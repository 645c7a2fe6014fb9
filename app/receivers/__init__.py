"""Registry webhook receivers: Docker Hub, Quay, Harbor, GitLab, Artifactory and a generic one.

Each authenticates its sender the way that sender can (a token in the URL, a shared header, an
HMAC of the body), reduces the payload to repositories and tags (:mod:`app.receivers.senders`),
and refreshes only the Warehouses that subscribe (:mod:`promoter.warehouses.refresh`).
"""
