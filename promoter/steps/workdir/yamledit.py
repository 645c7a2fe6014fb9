"""The round-trip YAML editor the YAML steps share: ruamel.yaml, in the file's own layout.

yaml-update (where its quick path, :mod:`promoter.steps.workdir.yamlsplice`, does not apply),
helm-update-chart, yaml-merge and kustomize-set-image edit YAML through :class:`RoundTripYaml`,
which keeps comments, key order and quoting and writes the file back in the indentation it had.
The module, and with it ruamel.yaml, is imported by those steps when they first need it: the
library takes longer to load than a small Promotion's git commands run (``bench/bench_runner.py``).
"""

from __future__ import annotations

import io
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import ScalarString

from promoter.errors import StepError

# (mapping indent, sequence indent, sequence dash offset), most common first.
_LAYOUTS: tuple[tuple[int, int, int], ...] = (
    (2, 2, 0),
    (2, 4, 2),
    (4, 4, 2),
    (4, 4, 0),
    (4, 6, 4),
    (4, 2, 0),
    (3, 3, 0),
    (3, 5, 2),
)
_DOCUMENT_START = re.compile(r"---[ \t]*(#.*)?")
_DOCUMENT_END = re.compile(r"(?<=\n)\.\.\.[ \t]*\n?\Z")


def rt_yaml(layout: tuple[int, int, int] = _LAYOUTS[0]) -> YAML:
    """ruamel.yaml's round-trip mode in ``layout`` (the most common by default)."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    # Never re-wrap long values: a promotion must only touch the values it updates.
    yaml.width = 1 << 30
    mapping, sequence, offset = layout
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def _split_preamble(text: str) -> tuple[str, str]:
    """Split off leading comments and an explicit ``---``.

    ruamel.yaml drops comments that precede ``---``, so they are kept aside verbatim.
    """
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped == "" or stripped.startswith("#") or stripped.startswith("%"):
            continue
        if _DOCUMENT_START.fullmatch(stripped):
            return "".join(lines[: number + 1]), "".join(lines[number + 1 :])
        break
    return "", text


class RoundTripYaml:
    """A YAML file loaded for editing, dumped back in its own layout.

    The layout (indentation of maps and lists) is the one among common layouts that reproduces
    the untouched file byte for byte; if none does, the one that changes fewest lines is used
    and the file may be reformatted in places.
    """

    def __init__(self, text: str, *, kind: str, source: str) -> None:
        self.original = text
        self._newline = "\r\n" if "\r\n" in text else "\n"
        body = text.replace("\r\n", "\n")
        self._preamble, self._body = _split_preamble(body)
        # ruamel drops a closing `...` too; keep it aside like the preamble.
        end_marker = _DOCUMENT_END.search(self._body)
        self._postamble = end_marker.group(0) if end_marker else ""
        if end_marker:
            self._body = self._body[: end_marker.start()]
        try:
            # One document only: writing back several would need a multi-document editor and
            # none of the steps using this class (values files, kustomizations, Chart.yaml)
            # has more than one.
            self.data: Any = rt_yaml().load(self._body)
        except YAMLError as err:
            raise StepError(
                f"{kind}: {source} is not valid YAML: {one_line(err)}", terminal=True
            ) from None
        # ruamel keeps no comments of a document without content; keep them for when one is
        # added.
        comments_only = all(
            not line.strip() or line.lstrip().startswith("#") for line in self._body.splitlines()
        )
        self._comments_only = self._body if self.data is None and comments_only else ""
        if self._comments_only and not self._comments_only.endswith("\n"):
            self._comments_only += "\n"
        self._reference = ""
        self._layout = self._detect_layout()

    def _dump(self, layout: tuple[int, int, int]) -> str:
        if self.data is None:
            return ""
        buffer = io.StringIO()
        rt_yaml(layout).dump(self.data, buffer)
        return buffer.getvalue()

    def _detect_layout(self) -> tuple[int, int, int]:
        if self.data is None:
            return _LAYOUTS[0]
        expected = self._expected_body()
        wanted = expected.splitlines()
        best, best_score = _LAYOUTS[0], -1
        for layout in _LAYOUTS:
            dumped = self._dump(layout)
            if dumped == expected:
                self._reference = dumped
                return layout
            # No exact match (a `null` ruamel writes as nothing, odd spacing): keep the layout
            # that changes fewest lines; text() carries the other lines over from the file.
            score = sum(1 for a, b in zip(dumped.splitlines(), wanted, strict=False) if a == b)
            if score > best_score:
                best, best_score, self._reference = layout, score, dumped
        return best

    def _expected_body(self) -> str:
        # ruamel always ends with a newline; text() restores a missing one.
        return self._body if self._body.endswith("\n") else self._body + "\n"

    def text(self) -> str:
        dumped = self._dump(self._layout)
        expected = self._expected_body()
        if self._reference != expected and dumped != self._reference:
            dumped = _carry_over(expected, self._reference, dumped)
        out = self._preamble + self._comments_only + dumped + self._postamble
        if self.original and not self.original.endswith(("\n", "\r")) and out.endswith("\n"):
            out = out[:-1]
        return out.replace("\n", self._newline) if self._newline != "\n" else out


def _carry_over(original: str, before: str, after: str) -> str:
    """Apply the edit ``before`` -> ``after`` (two ruamel dumps) to the file's own text.

    ``before`` is ruamel's rendering of the untouched file. Where it differs from the file only
    line by line (ruamel writes ``key: null`` as ``key:``, collapses spacing), lines the edit did
    not touch are taken from the file, so a promotion's diff shows only its own change.
    """
    original_lines = original.splitlines(keepends=True)
    before_lines = before.splitlines(keepends=True)
    if len(original_lines) != len(before_lines):
        return after
    after_lines = after.splitlines(keepends=True)
    out: list[str] = []
    import difflib  # here, not at the top: only an edit that moved lines needs it

    matcher = difflib.SequenceMatcher(None, before_lines, after_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out.extend(original_lines[i1:i2] if tag == "equal" else after_lines[j1:j2])
    return "".join(out)


def keep_style(old: Any, new: Any) -> Any:
    """Carry a YAML string's quoting style (``"v1"``, ``'v1'``, ``|``) over to its new value."""
    if isinstance(old, ScalarString) and isinstance(new, str):
        return type(old)(new)
    return new


def merge(base: Any, patch: Any) -> Any:
    """Apply ``patch`` over ``base`` the way Kargo's yaml-merge (kyaml's merge2) does.

    Maps merge key by key, recursively; anything else in ``patch`` (a scalar, a list) replaces
    what ``base`` has, so lists are replaced whole, as Helm does with values files; a ``null``
    in ``patch`` removes the key. ``base`` is edited in place so its comments stay.
    """
    if not (isinstance(base, dict) and isinstance(patch, dict)):
        return patch
    for key, value in patch.items():
        if value is None:
            base.pop(key, None)
            continue
        base[key] = merge(base[key], value) if key in base else value
        # The later file's comment on a key it sets is the one that explains the value.
        comment = getattr(patch, "ca", None)
        if comment is not None and key in comment.items and isinstance(base, CommentedMap):
            base.ca.items[key] = comment.items[key]
    return base


def one_line(err: Exception) -> str:
    return " ".join(str(err).split())


# Maps the editor creates (a missing key on an update's path), with room for comments.
new_map = CommentedMap

__all__ = ("RoundTripYaml", "YAMLError", "keep_style", "merge", "new_map", "one_line", "rt_yaml")
