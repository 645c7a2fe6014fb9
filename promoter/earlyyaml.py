"""The plain block YAML most manifests are written in, read without loading PyYAML.

The local runner's early clone (:mod:`promoter.earlyclone`) needs the first step of one Stage
before anything else has loaded, and importing PyYAML alone would delay git's start by more than
the rest of the early clone's work. This reader takes the common subset: documents split by
``---``, block mappings and sequences indented with spaces, plain and simply quoted scalars,
``[]`` and ``{}``, literal (``|``) and plain folded (``>``) block scalars, comments. Anything
else (flow collections, anchors, tags, multi-line plain scalars, escapes, directives, tabs,
duplicate keys, scalars that YAML 1.1 might read as floats or dates) raises
:class:`Unsupported`, and the early clone is not tried.

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
    raw: list[str] = []
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if line.startswith(("%", "...")):
            raise Unsupported("directive or document end")
        if line.startswith("---"):
            if line.rstrip() != "---":
                raise Unsupported("content after ---")
            found += _Block(raw).parse()
            raw = []
            continue
        raw.append(line)
    return found + _Block(raw).parse()


# A line as structure: its indent, its text without comment, its number, and what makes it
# something this reader does not take (None if nothing), said only if it is read as structure:
# inside a block scalar the same line is text.
_Line = tuple[int, str, int, "str | None"]


def _token(line: str, number: int) -> _Line | None:
    """The line as structure, or None for a blank or comment line."""
    text = line.lstrip(" ")
    indent = len(line) - len(text)
    problem = "tab" if "\t" in text else None
    if "#" in text:
        if text.startswith("#"):
            return None
        if '"' in text or "'" in text:
            problem = problem or "comment beside a quoted scalar"
        cut = text.find(" #")
        if cut >= 0:
            text = text[:cut]
    text = text.rstrip(" ")
    return (indent, text, number, problem) if text else None


_BLOCK_HEADERS = frozenset(("|", "|-", "|+", ">", ">-", ">+"))


def _block_scalar(header: str, raw: list[str], first: int, parent: int) -> tuple[str, int]:
    """A literal or folded block scalar whose content starts on line ``first``, more indented
    than ``parent``; its text and the number of the line after it."""
    content: list[str] = []
    end = first
    while end < len(raw):
        line = raw[end]
        if line and not line.strip(" "):
            raise Unsupported("a line of spaces in a block scalar")
        if line and len(line) - len(line.lstrip(" ")) <= parent:
            break
        content.append(line)
        end += 1
    filled = [line for line in content if line]
    if not filled or any("\t" in line for line in filled):
        raise Unsupported("empty block scalar or tab")
    indent = len(filled[0]) - len(filled[0].lstrip(" "))
    if any(len(line) - len(line.lstrip(" ")) < indent for line in filled) or not content[0]:
        raise Unsupported("block scalar indentation")
    lines = [line[indent:] for line in content]
    trailing = 0
    while lines and not lines[-1]:
        lines.pop()
        trailing += 1
    if header[0] == "|":
        body = "\n".join(lines)
    elif any(not line or line[0] == " " for line in lines):
        raise Unsupported("folded block scalar with blank or more indented lines")
    else:
        body = " ".join(lines)
    chomp = header[1:]
    if chomp == "-":
        return body, end
    return body + "\n" + ("\n" * trailing if chomp == "+" else ""), end


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
    def __init__(self, raw: list[str]) -> None:
        self.raw = raw
        self.lines = [t for n, line in enumerate(raw) if (t := _token(line, n)) is not None]
        self.at = 0

    def parse(self) -> list[Any]:
        """The document as a list of one, or none if it is empty."""
        if not self.lines:
            return []
        value = self._node(self.lines[0][0])
        if self.at != len(self.lines):
            raise Unsupported("text after the document's top level")
        return [value]

    def _line(self) -> tuple[int, str]:
        indent, text, _, problem = self.lines[self.at]
        if problem:
            raise Unsupported(problem)
        return indent, text

    def _node(self, indent: int) -> Any:
        text = self._line()[1]
        if text == "-" or text.startswith("- "):
            return self._sequence(indent)
        return self._mapping(indent)

    def _rewrite(self, column: int, rest: str) -> None:
        """Read the rest of the current line as if it began at ``column``."""
        _, _, number, problem = self.lines[self.at]
        self.lines[self.at] = (column, rest, number, problem)

    def _sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while self.at < len(self.lines):
            here, text = self._line()
            if here != indent or not (text == "-" or text.startswith("- ")):
                break
            rest = text[1:].lstrip(" ")
            if not rest:
                self.at += 1
                items.append(self._nested(indent, allow_sequence=False))
                continue
            column = indent + len(text) - len(rest)
            if rest == "-" or rest.startswith("- "):
                self._rewrite(column, rest)  # "- - a": a sequence in a sequence
                items.append(self._sequence(column))
            elif _is_key(rest):
                # "- key: value" starts a mapping whose keys line up with "key".
                self._rewrite(column, rest)
                items.append(self._mapping(column))
            else:
                items.append(self._value(rest, indent))
        return items

    def _mapping(self, indent: int) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        while self.at < len(self.lines):
            here, text = self._line()
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
            if rest:
                mapping[key] = self._value(rest, indent)
            else:
                self.at += 1
                mapping[key] = self._nested(indent, allow_sequence=True)
        return mapping

    def _value(self, text: str, indent: int) -> Any:
        """The scalar that ends the current line (a block scalar takes the lines below)."""
        number = self.lines[self.at][2]
        self.at += 1
        if text in _BLOCK_HEADERS:
            value, after = _block_scalar(text, self.raw, number + 1, indent)
            while self.at < len(self.lines) and self.lines[self.at][2] < after:
                self.at += 1
            return value
        if self.at < len(self.lines) and self.lines[self.at][0] > indent:
            raise Unsupported("multi-line scalar")
        return _scalar(text)

    def _nested(self, indent: int, *, allow_sequence: bool) -> Any:
        """The block value that follows a ``key:`` or a ``-`` on the lines below (null if none)."""
        if self.at >= len(self.lines):
            return None
        here, text = self._line()
        if here > indent:
            return self._node(here)
        if allow_sequence and here == indent and (text == "-" or text.startswith("- ")):
            return self._sequence(indent)
        return None


def _is_key(text: str) -> bool:
    return text.endswith(":") or ": " in text
