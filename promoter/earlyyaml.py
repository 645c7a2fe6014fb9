"""The plain block YAML most manifests are written in, read without loading PyYAML.

The local runner's early clone (:mod:`promoter.earlyclone`) needs the first step of one Stage
before anything else has loaded, and importing PyYAML alone would delay git's start by more than
the rest of the early clone's work. This reader takes the common subset: documents split by
``---``, block mappings and sequences indented with spaces, plain and simply quoted scalars,
``[]`` and ``{}``, comments. Anything else (flow collections, anchors, tags, block or
multi-line scalars, escapes, directives, tabs, duplicate keys, scalars that YAML 1.1 might read
as floats or dates) raises :class:`Unsupported`, and the early clone is not tried.

What it reads is a hint, never the truth: the git-clone step takes the early clone only if the
manifests as PyYAML reads them ask for the very same clone (:func:`promoter.gitcmd.clone_key`).
Scalars stay strings, but for ``true``/``false``/``null``/``~`` and plain integers, as in
YAML's core schema.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A plain scalar must not start with any of these (YAML indicators this reader does not take).
_INDICATORS = frozenset("[]{}&*!|>%@`,?")


class Unsupported(ValueError):
    """The text uses YAML this reader does not take."""


def documents(text: str) -> list[Any]:
    """The documents of ``text`` (empty ones left out)."""
    found: list[Any] = []
    lines: list[tuple[int, str]] = []
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        if line.startswith(("%", "...")):
            raise Unsupported("directive or document end")
        if line.startswith("---"):
            if line.rstrip() != "---":
                raise Unsupported("content after ---")
            if lines:
                found.append(_Block(lines).parse())
            lines = []
            continue
        token = _token(line)
        if token is not None:
            lines.append(token)
    if lines:
        found.append(_Block(lines).parse())
    return found


def _token(line: str) -> tuple[int, str] | None:
    """(indent, text without its comment), or None for a blank or comment line."""
    text = line.lstrip(" ")
    indent = len(line) - len(text)
    if text.startswith("\t") or "\t" in text:
        raise Unsupported("tab")
    if "#" in text:
        if text.startswith("#"):
            return None
        if '"' in text or "'" in text:
            raise Unsupported("comment beside a quoted scalar")
        cut = text.find(" #")
        if cut >= 0:
            text = text[:cut]
    text = text.rstrip(" ")
    return (indent, text) if text else None


def _scalar(text: str) -> Any:
    if text[0] in "\"'":
        quote = text[0]
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != quote or quote in inner or "\\" in inner:
            raise Unsupported("quoted scalar")
        return inner
    if text == "[]" or text == "{}":
        return [] if text == "[]" else {}  # what PyYAML writes for empty collections
    if text[0] in _INDICATORS or text.startswith(("- ", ": ")) or ": " in text:
        raise Unsupported(f"scalar {text[:20]!r}")
    word = _WORDS.get(text, text)
    if word is not text:
        return word
    if text[0] in "0123456789+-.":
        return _numberish(text)
    return text


# YAML 1.1's booleans and nulls (PyYAML's resolver: ``on: x`` is ``True: x``).
_WORDS: dict[str, Any] = {
    **dict.fromkeys(("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"), True),
    **dict.fromkeys(("false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"), False),
    **dict.fromkeys(("null", "Null", "NULL", "~"), None),
}
_DIGITS = frozenset("0123456789")
# Every character a YAML 1.1 int, float (.inf, .nan) or timestamp can hold.
_NUMBER_CHARS = _DIGITS | frozenset("+-._: eExXoObBacdfACDFinINtTzZ")


def _numberish(text: str) -> Any:
    """A plain scalar that starts like a number: an int, a string that no number or date can
    be (./out, a version such as 1.27.0, a hex digest), or Unsupported."""
    digits = text[1:] if text[0] in "+-" else text
    if digits.isascii() and digits.isdigit() and (digits == "0" or digits[0] != "0"):
        return int(text)
    if not set(text) <= _NUMBER_CHARS:
        return text  # a character no number or date has
    if set(text) <= _DIGITS | {"."} and text.count(".") >= 2:
        return text
    if text.isalnum() and not text.isdigit() and text[:2].lower() not in ("0x", "0b", "0o"):
        return text  # letters among the digits, no point or sign
    raise Unsupported(f"number-like scalar {text[:20]!r}")


class _Block:
    def __init__(self, lines: list[tuple[int, str]]) -> None:
        self.lines = lines
        self.at = 0

    def parse(self) -> Any:
        value = self._node(self.lines[0][0])
        if self.at != len(self.lines):
            raise Unsupported("text after the document's top level")
        return value

    def _node(self, indent: int) -> Any:
        if self.lines[self.at][1] == "-" or self.lines[self.at][1].startswith("- "):
            return self._sequence(indent)
        return self._mapping(indent)

    def _sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while self.at < len(self.lines):
            here, text = self.lines[self.at]
            if here != indent or not (text == "-" or text.startswith("- ")):
                break
            rest = text[1:].lstrip(" ")
            if not rest:
                self.at += 1
                items.append(self._nested(indent, allow_sequence=False))
                continue
            column = indent + len(text) - len(rest)
            if rest == "-" or rest.startswith("- "):
                self.lines[self.at] = (column, rest)  # "- - a": a sequence in a sequence
                items.append(self._sequence(column))
            elif _is_key(rest):
                # "- key: value" starts a mapping whose keys line up with "key".
                self.lines[self.at] = (column, rest)
                items.append(self._mapping(column))
            else:
                self.at += 1
                items.append(_scalar(rest))
                self._no_continuation(indent)
        return items

    def _mapping(self, indent: int) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        while self.at < len(self.lines):
            here, text = self.lines[self.at]
            if here != indent:
                if here > indent:
                    raise Unsupported("unexpected indentation")
                break
            if text == "-" or text.startswith("- "):
                break  # a sequence at the indent of its parent's keys: it ends the mapping
            if not _is_key(text):
                raise Unsupported(f"not a key: {text[:20]!r}")
            raw_key, _, rest = text.partition(":")
            key, rest = _scalar(raw_key.strip()), rest.strip(" ")
            if not isinstance(key, str) or key[:1] in ("", "-", "<") or key in mapping:
                raise Unsupported(f"key {raw_key[:20]!r}")
            self.at += 1
            if rest:
                mapping[key] = _scalar(rest)
                self._no_continuation(indent)
            else:
                mapping[key] = self._nested(indent, allow_sequence=True)
        return mapping

    def _nested(self, indent: int, *, allow_sequence: bool) -> Any:
        """The block value that follows a ``key:`` or a ``-`` on the lines below (null if none)."""
        if self.at >= len(self.lines):
            return None
        here, text = self.lines[self.at]
        if here > indent:
            return self._node(here)
        if allow_sequence and here == indent and (text == "-" or text.startswith("- ")):
            return self._sequence(indent)
        return None

    def _no_continuation(self, indent: int) -> None:
        if self.at < len(self.lines) and self.lines[self.at][0] > indent:
            raise Unsupported("multi-line scalar")


def _is_key(text: str) -> bool:
    return text.endswith(":") or ": " in text
