"""yaml-update's quick path (promoter/steps/workdir/yamlsplice.py) against the round-trip editor.

The quick path writes a new scalar in place of the old one; where it answers at all, its text
must be the editor's (promoter/steps/workdir/yamledit.py), so which path a file takes never shows
in a
commit. Hypothesis generates documents in the layout people write (two-space maps, comments,
quoted and plain scalars of every type YAML 1.1 and 1.2 read differently) and updates of
existing and missing keys with values of every kind; both editors run on each.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promoter.steps.workdir import yamledit
from promoter.steps.workdir.updates import KeyPart, Update, apply_update, parse_key
from promoter.steps.workdir.yaml_update import STEPS
from promoter.steps.workdir.yamlsplice import splice
from tests.support.steps import make_context

ROOT = Path(__file__).resolve().parents[3]

# Scalars as written in a file: plain ones that YAML 1.1 and 1.2 read as different types, quoted
# ones, numbers, booleans, nulls.
SCALARS = [
    "v1", "1.2.3", "latest", "nginx", "my/image", "yes", "no", "on", "1.0", "007", "0x1F",
    "1e5", "1_000", "true", "True", "null", "~", "2024-01-01", "12:30", "'v1'", "'1.0'",
    "v1", "1.2.3", "'v1'", '"v1"', "3",
    '"v1"', '"yes"', "3", "-4", "0", "false", "'it''s'", "a b", "x:y", "''", "sha256:abc",
]  # fmt: skip
# Keys of other types ("1", "on") are rarer than in the list, so most documents can be spliced.
KEYS = ["image", "tag", "newTag", "name", "version", "replicas", "app", "chart", "1", "on"]
# New values of every kind an expression can give.
VALUES: list[Any] = [
    "1.27.0", "v2", "latest", "nginx", "yes", "1e5", "1.0", "", "it's", 'say "hi"', "a b",
    "x: y", "sha256:def", "0x10", "2025-02-02", "ünï", 5, 0, -1, True, False, None, 1.5,
    "5", "true", "null", "v1",
    # The usual ones, again, so that most updates can take the quick path.
    "1.27.0", "v2", "v3.0.1-rc.1", 7, True,
]  # fmt: skip


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[list[str]]]:
    """A YAML text and the key paths of its scalars."""
    lines: list[str] = []
    paths: list[list[str]] = []

    def mapping(depth: int, indent: str, path: list[str]) -> None:
        keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
        for key in keys:
            if draw(st.booleans()) and depth < 2:
                if draw(st.booleans()):
                    lines.append(f"{indent}{key}:")
                    mapping(depth + 1, indent + "  ", [*path, key])
                else:
                    lines.append(f"{indent}{key}:")
                    for index in range(draw(st.integers(1, 3))):
                        item = draw(st.sampled_from(SCALARS))
                        lines.append(f"{indent}- {item}")
                        paths.append([*path, key, str(index)])
            else:
                value = draw(st.sampled_from(SCALARS))
                comment = draw(st.sampled_from(["", "  # pinned", " # why"]))
                lines.append(f"{indent}{key}: {value}{comment}")
                paths.append([*path, key])
            if draw(st.integers(0, 5)) == 0:
                lines.append(f"{indent}# a note")

    if draw(st.booleans()):
        lines.append("# header comment")
    mapping(0, "", [])
    return "\n".join(lines) + "\n", paths


def editor(text: str, updates: list[tuple[list[KeyPart], Any]]) -> str | None:
    """What the round-trip editor writes (None when it refuses the file or an update)."""
    try:
        document = yamledit.RoundTripYaml(text, kind="yaml-update", source="'f.yaml'")
    except Exception:
        return None
    changed = False
    for parts, value in updates:
        update = Update(".".join(p.name for p in parts), parts, value, "config.updates[0].key")
        try:
            outcome = apply_update(
                "yaml-update", document.data, update, yamledit.new_map,
                keep_style=yamledit.keep_style,
            )  # fmt: skip
        except Exception:
            return None
        document.data = outcome.root
        changed = changed or outcome.changed
    return document.text() if changed else text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_where_the_quick_path_answers_it_writes_what_the_editor_writes(data: st.DataObject) -> None:
    text, paths = data.draw(documents())
    count = data.draw(st.integers(1, 3))
    updates: list[tuple[list[KeyPart], Any]] = []
    for _ in range(count):
        path = data.draw(st.sampled_from([*paths, ["missing"], [*paths[0], "deeper"]]))
        updates.append((parse_key(".".join(path)), data.draw(st.sampled_from(VALUES))))
    quick = splice(text, updates)
    if quick is not None:
        assert quick == editor(text, updates), (text, updates)


@pytest.mark.parametrize(
    ("text", "key", "value", "expected"),
    [
        # The usual update: an image tag in a kustomization.
        (
            "images:\n- name: my/image\n  newTag: v0\n",
            "images.0.newTag", "1.27.0",
            "images:\n- name: my/image\n  newTag: 1.27.0\n",
        ),
        # Quotes, comments and the lines around stay as they were.
        (
            "# values\nimage:\n  tag: 'v1'  # pinned by release\n  pullPolicy: IfNotPresent\n",
            "image.tag", "v2",
            "# values\nimage:\n  tag: 'v2'  # pinned by release\n  pullPolicy: IfNotPresent\n",
        ),
        ('app:\n  version: "1.0.0"\n', "app.version", "1.1.0", 'app:\n  version: "1.1.0"\n'),
        ("replicas: 3\n", "replicas", 5, "replicas: 5\n"),
        ("enabled: false\n", "enabled", True, "enabled: true\n"),
        # Already the value: nothing changes.
        ("tag: v1\n", "tag", "v1", "tag: v1\n"),
        ("tag: 'v1'\n", "tag", "v1", "tag: 'v1'\n"),
    ],
)  # fmt: skip
def test_the_quick_path_writes_the_new_value_in_place(
    text: str, key: str, value: Any, expected: str
) -> None:
    assert splice(text, [(parse_key(key), value)]) == expected
    assert editor(text, [(parse_key(key), value)]) == expected


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("tag: v1\n", "missing", "v2"),  # a key to create
        ("images: []\n", "images.0", "x"),  # an item to create
        ("image:\n  tag: v1\n", "image", "v2"),  # not a scalar
        ("tag: v1\n", "tag", "1.0"),  # would read back as a number
        ("tag: v1\n", "tag", "yes"),  # a boolean to YAML 1.1
        ("tag: v1\n", "tag", "x: y"),  # needs quotes
        ("tag: v1\n", "tag", None),
        ("tag: v1\n", "tag", 1.5),
        ("base: &b v1\ntag: *b\n", "tag", "v2"),  # an alias
        ("tag: !custom v1\n", "tag", "v2"),  # a tag
        ("a: 1\n---\nb: 2\n", "a", 3),  # two documents
        ("tag: |\n  v1\n", "tag", "v2"),  # a block scalar
        ("tag: v1\r\n", "tag", "v2"),  # CRLF: the editor keeps line ends file-wide
        ("tag: on\n", "tag", "v2"),  # the old value reads differently in 1.1 and 1.2
        ("1: a\ntag: v1\n", "tag", "v2"),  # keys of other types
        ("tag: v1\ntag: v2\n", "tag", "v3"),  # duplicate keys: the editor refuses them
    ],
)
def test_the_quick_path_leaves_to_the_editor_what_it_cannot_be_sure_of(
    text: str, key: str, value: Any
) -> None:
    assert splice(text, [(parse_key(key), value)]) is None


@pytest.mark.parametrize(
    ("before", "value", "after"),
    [
        ("  tag: v1      # set by Kargo\n", "v2", "  tag: v2      # set by Kargo\n"),
        ("  tag: v1 # set by Kargo\n", "1.27.0", "  tag: 1.27.0 # set by Kargo\n"),
        ("  tag: v1.2.3    # set by Kargo\n", "v2", "  tag: v2        # set by Kargo\n"),
        # Not the editor's layout (three spaces after the colon): the editor writes the line.
        ("  tag:   v1   # set by Kargo\n", "v2", "  tag: v2     # set by Kargo\n"),
    ],
)
async def test_yaml_update_keeps_a_trailing_comment_in_its_column(
    tmp_path: Path, before: str, value: str, after: str
) -> None:
    """Through the step, whichever path it takes; the commit message is Kargo's."""
    target = tmp_path / "values.yaml"
    target.write_text("image:\n" + before + "  pullPolicy: Always\n")
    ctx = make_context(tmp_path, work_dir=tmp_path)
    result = await STEPS["yaml-update"].run(
        ctx, {"path": "values.yaml", "updates": [{"key": "image.tag", "value": value}]}
    )
    assert target.read_text() == "image:\n" + after + "  pullPolicy: Always\n"
    assert result.output == {"commitMessage": f"Updated values.yaml\n\n- image.tag: {value}"}


def test_an_image_tag_update_never_loads_ruamel(tmp_path: Path) -> None:
    probe = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from promoter.steps.workdir.yaml_update import STEPS\n"
        "from tests.support.steps import make_context\n"
        "work = Path(sys.argv[1])\n"
        "(work / 'k.yaml').write_text('images:\\n- name: my/image\\n  newTag: v0\\n')\n"
        "config = {'path': 'k.yaml', 'updates': [{'key': 'images.0.newTag', 'value': '1.2.3'}]}\n"
        "asyncio.run(STEPS['yaml-update'].run(make_context(work, work_dir=work), config))\n"
        "assert (work / 'k.yaml').read_text().endswith('newTag: 1.2.3\\n')\n"
        "assert 'ruamel.yaml' not in sys.modules, 'ruamel was imported'\n"
    )
    subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=ROOT, check=True, timeout=120)
