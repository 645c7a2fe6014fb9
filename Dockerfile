# syntax=docker/dockerfile:1
# Longshoreman's image: a virtualenv with the dependencies, built in a builder stage, and the
# source tree run as-is (`python -m app serve`) in a slim runtime with git, kubectl (for
# kustomize-build) and no build tools.
#
# The source tree is not pip-installed: our top-level `slack/` package would clash with
# slack-sdk's legacy top-level `slack` package in site-packages (see pyproject.toml), so only
# the dependencies go into the venv and /app is the working directory.
#
#   docker build -t longshoreman .
#   docker run --rm -p 8080:8080 longshoreman serve --demo --keep-running

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml ./
# The dependency list comes from pyproject.toml, the one place it is written down.
# The helm extra too: helm-template renders charts with Helm's Go SDK (helm-python-sdk).
RUN python -m venv /opt/venv \
 && python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['helm']))" > requirements.txt \
 && /opt/venv/bin/pip install --upgrade pip \
 && /opt/venv/bin/pip install -r requirements.txt

# kubectl for the kustomize-build step (it runs `kubectl kustomize`, kustomize v5 built into
# kubectl; Debian's kubernetes-client is 1.20, far older). The official binary, checked
# against the SHA-256 the Kubernetes release publishes next to it.
FROM ${PYTHON_IMAGE} AS kubectl
ARG KUBECTL_VERSION=v1.32.4
ARG TARGETARCH=amd64
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl ca-certificates \
 && curl -fsSLo /kubectl "https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/${TARGETARCH}/kubectl" \
 && echo "$(curl -fsSL "https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/${TARGETARCH}/kubectl.sha256")  /kubectl" | sha256sum -c - \
 && chmod 0755 /kubectl

FROM ${PYTHON_IMAGE} AS runtime
# git: the git-* steps run the git CLI. ca-certificates: HTTPS to GitHub, Slack, the API server.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=builder /opt/venv /opt/venv
COPY --from=kubectl /kubectl /usr/local/bin/kubectl
WORKDIR /app
COPY app ./app
COPY handlers ./handlers
COPY promoter ./promoter
COPY slack ./slack
# The embedded cluster (no KUBECONFIG/IN_CLUSTER: `serve --demo`) loads these.
COPY deploy/crds ./deploy/crds
COPY deploy/third-party-crds ./deploy/third-party-crds
COPY examples ./examples
# Byte-compile now: the root filesystem is read-only in the cluster.
RUN /opt/venv/bin/python -m compileall -q app handlers promoter slack
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    LONGSHOREMAN_HOST=0.0.0.0 \
    LONGSHOREMAN_PORT=8080 \
    LONGSHOREMAN_WORK_DIR=/tmp/longshoreman-work
# A numeric, non-root user, so runAsNonRoot can verify it without a passwd lookup.
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["python", "-m", "app"]
CMD ["serve"]
