"""Projects as Kargo marks them, and which of them this install serves.

Kargo's unit of tenancy is the project, a namespace labelled ``kargo.akuity.io/project: "true"``
(ours, ``longshoreman.dev/project``, counts too). One install serves every project of an
organisation, or the ones the operator names: a list of names (``LONGSHOREMAN_PROJECTS``) or a
label selector over the namespaces' labels (``LONGSHOREMAN_PROJECT_SELECTOR``, kubectl's
syntax). With neither, every namespace is served as before (labelled or not), so an install
that predates projects keeps working; the projects chat can reach are then the labelled ones.

A project carries its routing with it, as annotations on its namespace: the Slack channels its
commands come from and its announcements go to, and the GitHub repositories whose comments act
on it. :func:`project_of` reads them; the chat core decides with them
(``promoter.chat.projects``). A Warehouse's git subscription does not make a repository the
project's: a project subscribes to repositories it deploys (libraries, other teams' services),
and whoever may write to one of them must not thereby act on the project (issue 34, finding 4).
Only the namespace's annotation, written by whoever controls the namespace, or the operator's
map grants that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from promoter.control.policies import LabelSelector, PolicyError, Requirement
from promoter.resources import annotations as ann
from promoter.resources.model import name_of

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# One requirement of kubectl's selector syntax: "k", "!k", "k=v", "k==v", "k!=v",
# "k in (a,b)", "k notin (a,b)".
_REQUIREMENT = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<absent>[^\s=!(),]+)"
    r"|(?P<key>[^\s=!(),]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s=!(),]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?)\s*$"
)


@dataclass(frozen=True, slots=True)
class Project:
    """A project: its name (the namespace), labels, and the routing its namespace declares."""

    name: str
    labels: Mapping[str, str]
    slack_channels: tuple[str, ...] = ()
    github_repositories: tuple[str, ...] = ()  # owner/repo, lower case
    # Who may act in the project's Stages that list nobody themselves (Slack user and
    # user-group IDs; longshoreman.dev/slack-promoters on the namespace).
    slack_promoters: tuple[str, ...] = ()


def repository_of_url(url: str) -> str | None:
    """``owner/repo`` (lower case) of a GitHub-style git URL (https, ssh or scp-like), else None."""
    url = url.strip()
    if url.startswith("git@") and ":" in url:
        path = url.split(":", 1)[1]
    else:
        parts = urlsplit(url)
        if not parts.netloc:
            return None
        path = parts.path
    segments = [s for s in path.strip("/").removesuffix(".git").split("/") if s]
    if len(segments) != 2:
        return None
    return "/".join(segments).lower()


def project_of(namespace: Mapping[str, Any]) -> Project:
    """The project a Namespace object is, with the routing its annotations declare."""
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    repositories = [r.lower() for r in ann.listed(namespace, ann.PROJECT_GITHUB_REPOSITORIES)]
    return Project(
        name=name_of(namespace),
        labels={str(k): str(v) for k, v in labels.items()},
        slack_channels=ann.listed(namespace, ann.PROJECT_SLACK_CHANNELS),
        github_repositories=tuple(dict.fromkeys(repositories)),
        slack_promoters=ann.listed(namespace, ann.SLACK_PROMOTERS),
    )


def parse_label_selector(text: str, where: str) -> LabelSelector:
    """A label selector in kubectl's syntax (``team in (a,b),tier!=legacy``)."""
    terms: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    match_labels: list[tuple[str, str]] = []
    requirements: list[Requirement] = []
    for term in terms:
        m = _REQUIREMENT.match(term)
        if m is None or not term.strip():
            raise PolicyError(f"{where}: {term.strip()!r} is not a label selector requirement")
        if m["absent"]:
            requirements.append(Requirement(m["absent"], "DoesNotExist"))
        elif m["op"] in ("=", "=="):
            match_labels.append((m["key"], m["value"]))
        elif m["op"] == "!=":
            requirements.append(Requirement(m["key"], "NotIn", (m["value"],)))
        elif m["set"]:
            values = tuple(v.strip() for v in m["values"].split(",") if v.strip())
            if not values:
                raise PolicyError(f"{where}: {term.strip()!r} names no values")
            requirements.append(
                Requirement(m["key"], "In" if m["set"] == "in" else "NotIn", values)
            )
        else:
            requirements.append(Requirement(m["key"], "Exists"))
    return LabelSelector(tuple(sorted(match_labels)), tuple(requirements))


@dataclass(frozen=True, slots=True)
class ProjectSelection:
    """Which projects this install serves: every one, a list of names, or a label selector."""

    names: frozenset[str] | None = None
    selector: LabelSelector | None = None
    text: str = ""  # as the operator wrote it, for messages

    @property
    def everything(self) -> bool:
        return self.names is None and self.selector is None

    @classmethod
    def parse(cls, names: str = "", selector: str = "") -> ProjectSelection:
        """From ``LONGSHOREMAN_PROJECTS`` and ``LONGSHOREMAN_PROJECT_SELECTOR`` (at most one)."""
        names, selector = names.strip(), selector.strip()
        if names and selector:
            raise PolicyError(
                "LONGSHOREMAN_PROJECTS and LONGSHOREMAN_PROJECT_SELECTOR are both set; choose one"
            )
        if selector:
            parsed = parse_label_selector(selector, "LONGSHOREMAN_PROJECT_SELECTOR")
            return cls(selector=parsed, text=selector)
        if names:
            listed = frozenset(n.strip() for n in names.split(",") if n.strip())
            for name in sorted(listed):
                if not _NAMESPACE.match(name):
                    raise PolicyError(f"LONGSHOREMAN_PROJECTS: {name!r} is not a namespace name")
            return cls(names=listed, text=names)
        return cls()

    def serves_namespace(self, name: str, namespace: Mapping[str, Any] | None) -> bool:
        """Whether the controller reconciles this namespace (its Namespace object, if known).

        Every namespace when nothing is selected; a listed name whether labelled or not (the
        operator named it); otherwise a labelled project whose labels match the selector.
        """
        if self.everything:
            return True
        if self.names is not None:
            return name in self.names
        if namespace is None or not ann.is_project(namespace):
            return False
        assert self.selector is not None
        labels = (namespace.get("metadata") or {}).get("labels") or {}
        return self.selector.matches({str(k): str(v) for k, v in labels.items()})

    def reachable(self, namespace: Mapping[str, Any]) -> bool:
        """Whether chat reaches this namespace as a project: a labelled project that is
        served, or a namespace the list names."""
        name = name_of(namespace)
        if self.names is not None:
            return name in self.names
        return ann.is_project(namespace) and self.serves_namespace(name, namespace)
