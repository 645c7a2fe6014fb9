"""The documentation does not rot: what the code reads, registers and links is in the docs.

- every environment variable a settings module reads is in docs/operator-guide.md;
- every registered step kind and every ``longshoreman.dev/`` / ``kargo.akuity.io/`` annotation or
  label key the code uses is in docs/user-guide.md;
- relative links in README.md and docs/*.md point to files that exist;
- the README's quick-start commands are Makefile targets.

Settings and annotation keys are found by reading the source (a setting read only on some branch,
an annotation used only in one module, must still be documented); step kinds come from the
registry the server uses.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from promoter.steps.registry import builtin_registry

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
USER_GUIDE = DOCS / "user-guide.md"
OPERATOR_GUIDE = DOCS / "operator-guide.md"
PACKAGES = ("app", "promoter", "handlers", "slack")

_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")
_ENV_MAPPINGS = frozenset({"env", "environ"})
# `longshoreman.dev/<key>` as written, or `f"{GROUP}/<key>"` (GROUP is "longshoreman.dev").
_ANNOTATION = re.compile(
    r"(longshoreman\.dev|kargo\.akuity\.io|\{GROUP\})/([a-z][a-z0-9.-]*[a-z0-9])"
)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _is_env_mapping(node: ast.AST) -> bool:
    """``env``, ``environ`` or ``os.environ``: what settings modules read variables from."""
    if isinstance(node, ast.Name):
        return node.id in _ENV_MAPPINGS
    return isinstance(node, ast.Attribute) and node.attr in _ENV_MAPPINGS


def env_vars_read(path: Path) -> set[str]:
    """Variable names a module reads: ``env.get("X")``, ``env["X"]``, ``_int(env, "X", ...)``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        candidates: list[ast.expr] = []
        if isinstance(node, ast.Call):
            func = node.func
            reads_env = isinstance(func, ast.Attribute) and _is_env_mapping(func.value)
            passes_env = any(_is_env_mapping(arg) for arg in node.args)
            if reads_env or passes_env:
                candidates = list(node.args)
        elif isinstance(node, ast.Subscript) and _is_env_mapping(node.value):
            candidates = [node.slice]
        for arg in candidates:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if _ENV_NAME.match(arg.value):
                    found.add(arg.value)
    return found


def settings_modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("settings.py"))


def settings_env_vars() -> set[str]:
    names: set[str] = set()
    for path in settings_modules():
        names |= env_vars_read(path)
    return names


def annotation_keys() -> set[str]:
    """Every ``longshoreman.dev/...`` and ``kargo.akuity.io/...`` key in the product's source.

    API versions (``.../v1alpha1``) are not annotations; the API server emulator is a generic
    Kubernetes emulator and knows no annotations of ours.
    """
    keys: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "apiserver" in path.parts:
                continue
            for prefix, name in _ANNOTATION.findall(path.read_text(encoding="utf-8")):
                if name.startswith("v1"):
                    continue
                group = "longshoreman.dev" if prefix == "{GROUP}" else prefix
                keys.add(f"{group}/{name}")
    return keys


def documents() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _backticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", text))


# ---- the finders find what they should (a broken finder would pass everything) ---------------


def test_the_env_finder_sees_the_known_settings() -> None:
    found = settings_env_vars()
    for name in (
        "LONGSHOREMAN_HOST",
        "LONGSHOREMAN_PORT",
        "KUBECONFIG",
        "LONGSHOREMAN_LEADER_ELECTION",
        "LONGSHOREMAN_GITHUB_APP_ID",
        "LONGSHOREMAN_SLACK_BOT_TOKEN",
    ):
        assert name in found, f"{name} was not found in {[str(p) for p in settings_modules()]}"


def test_the_annotation_finder_sees_the_known_annotations() -> None:
    found = annotation_keys()
    for key in (
        "longshoreman.dev/abort",
        "kargo.akuity.io/abort",
        "longshoreman.dev/github-promoters",
        "longshoreman.dev/authorized-stage",
        "longshoreman.dev/slack-message",
    ):
        assert key in found
    assert not any(key.endswith("/v1alpha1") for key in found)


def test_the_env_finder_reads_every_form(tmp_path: Path) -> None:
    module = tmp_path / "settings.py"
    module.write_text(
        "import os\n"
        "def f(env):\n"
        "    a = env.get('ALPHA', 'x')\n"
        "    b = _int(env, 'BRAVO', 3)\n"
        "    c = os.environ['CHARLIE']\n"
        "    d = env.get('lowercase')\n"
        "    e = other.get('DELTA')\n",
        encoding="utf-8",
    )
    assert env_vars_read(module) == {"ALPHA", "BRAVO", "CHARLIE"}


def test_anchors_follow_githubs_rules(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Scaling: replicas and leader election\n"
        "## `git-clone`\n"
        "## Notes\n"
        "## Notes\n"
        "```sh\n"
        "# not a heading\n"
        "```\n",
        encoding="utf-8",
    )
    assert anchors(page) == {
        "scaling-replicas-and-leader-election",
        "git-clone",
        "notes",
        "notes-1",
    }


# ---- the docs ------------------------------------------------------------------------------


def test_every_setting_is_in_the_operator_guide() -> None:
    documented = _backticked(OPERATOR_GUIDE.read_text(encoding="utf-8"))
    missing = sorted(settings_env_vars() - documented)
    assert not missing, f"add these settings to docs/operator-guide.md: {missing}"


def test_every_registered_step_is_in_the_user_guide() -> None:
    guide = USER_GUIDE.read_text(encoding="utf-8")
    documented = _backticked(guide)
    headings = set(re.findall(r"^#+ (.+)$", guide, flags=re.MULTILINE))
    missing = sorted(kind for kind in builtin_registry() if kind not in documented)
    assert not missing, f"add these steps to docs/user-guide.md: {missing}"
    without_section = sorted(
        kind for kind in builtin_registry() if not any(kind in h.split() for h in headings)
    )
    assert not without_section, f"give these steps a section with an example: {without_section}"


def test_every_annotation_is_in_the_user_guide() -> None:
    documented = _backticked(USER_GUIDE.read_text(encoding="utf-8"))
    missing = sorted(key for key in annotation_keys() if key not in documented)
    assert not missing, f"add these annotations to docs/user-guide.md: {missing}"


def anchors(markdown: Path) -> set[str]:
    """The heading anchors GitHub makes: lower case, punctuation dropped, spaces to dashes,
    ``-1``, ``-2``... for repeats. Headings inside fenced code blocks are not headings."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_to_existing_files(document: Path) -> None:
    broken = []
    for target in _LINK.findall(document.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL (https:, mailto:)
        path, _, anchor = target.partition("#")
        linked = (document.parent / path) if path else document
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert not broken, f"{document.name} links to missing files or headings: {broken}"


def test_the_guides_are_linked_from_the_readme() -> None:
    readme = README.read_text(encoding="utf-8")
    linked = {target.split("#", 1)[0] for target in _LINK.findall(readme)}
    for page in (
        "docs/install.md",
        "docs/user-guide.md",
        "docs/operator-guide.md",
        "docs/architecture.md",
        "docs/status-pages.md",
        "bench/README.md",
    ):
        assert page in linked, f"README.md does not link {page}"


def test_the_quick_start_commands_are_makefile_targets() -> None:
    readme = README.read_text(encoding="utf-8")
    targets = set(
        re.findall(
            r"^([A-Za-z0-9_.-]+)\s*:(?!=)",
            (ROOT / "Makefile").read_text(encoding="utf-8"),
            flags=re.MULTILINE,
        )
    )
    commands = re.findall(r"^make ([A-Za-z0-9_.-]+)", readme, flags=re.MULTILINE)
    assert {"demo", "test"} <= set(commands), "the quick start shows `make demo` and `make test`"
    missing = sorted(set(commands) - targets)
    assert not missing, f"README.md runs make targets the Makefile lacks: {missing}"


def test_every_metric_is_in_the_operator_guide() -> None:
    """Each family a server's registry exposes (events and scrape-time state) is documented."""
    from app.metrics import Metrics

    metrics = Metrics()
    metrics.watch_promotions(lambda: [])
    names = {family.name for family in metrics.registry.collect()}
    # The collector yields nothing for an empty cache; its families are named in the module.
    names |= set(re.findall(r'"(longshoreman_[a-z_]+)"', (ROOT / "app/metrics.py").read_text()))
    assert len(names) >= 10
    text = OPERATOR_GUIDE.read_text(encoding="utf-8")
    # prometheus_client reports counters without their `_total` suffix.
    missing = sorted(n for n in names if n not in text and f"{n}_total" not in text)
    assert not missing, f"metrics missing from docs/operator-guide.md: {missing}"
