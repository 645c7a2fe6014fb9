"""The early clone's YAML reader (promoter/earlyyaml.py) reads what PyYAML reads, or says no.

It only gives the local runner a hint (the git-clone step still checks the clone against the
manifests as PyYAML reads them), but a hint that differs would start a clone for nothing. So for
every text here, from plain manifests to YAML it does not take, it must return exactly PyYAML's
documents or raise Unsupported.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from promoter.earlyyaml import Unsupported, documents

ROOT = Path(__file__).resolve().parent.parent

READ = {
    "stage": """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata:
  name: test   # the first Stage
  namespace: demo
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: demo}
""".replace("{kind: Warehouse, name: demo}", "\n      kind: Warehouse\n      name: demo"),
    "steps": """\
steps:
- uses: git-clone
  config:
    repoURL: https://github.com/example/repo.git
    checkout:
    - branch: main
      path: ./out
- uses: git-commit
  as: commit
""",
    "documents": "---\na: 1\n---\n# only a comment\n---\n- x\n- 'y'\n- \"z\"\n",
    "nested sequences": "- - a\n  - b\n-\n  - c\n- d: e\n  f:\n  - g\n",
    "scalars": "a: true\nb: no\nbb: On\nc: null\nd: ~\ne: 0\nf: -12\ng: 1.27.0\n"
    "h: 7c9e6b1\ni: ./out\nj: http://host/#frag\nk: ''\nl:\n",
    "indented top level": "  a: 1\n  b:\n    c: 2\n",
    "crlf": "a: 1\r\nb: two\r\n",
    "empty collections": "a: []\nb: {}\nc:\n- []\n",
    "literal blocks": "a: |\n  one # not a comment\n\n  'two'\nb: |-\n  x\nc: |+\n  y\n\nd: 1\n",
    "folded blocks": "a: >-\n  one\n  two\nb:\n- >\n    three\n    four\n- |\n    five\n",
    "block scalar in a sequence of mappings": "- k: |\n    t\n  v: w\n",
}

REFUSED = {
    "flow mapping": "a: {b: 1}\n",
    "flow sequence": "a: [1, 2]\n",
    "anchor": "a: &x 1\nb: *x\n",
    "tag": "a: !!str 1\n",
    "folded block with a blank line": "a: >-\n  one\n\n  two\n",
    "folded block with a more indented line": "a: >\n  one\n    two\n",
    "block scalar with an indentation indicator": "a: |2\n   text\n",
    "block scalar with a line of spaces": "a: |\n  one\n   \n  two\n",
    "multi-line plain": "a: one\n  two\n",
    "escape": 'a: "tab\\t"\n',
    "quoted with a comment": "a: 'x' # c\n",
    "tab": "a:\n\tb: 1\n",
    "duplicate key": "a: 1\na: 2\n",
    "float": "a: 1.5\n",
    "date": "a: 2024-01-02\n",
    "octal": "a: 012\n",
    "hex": "a: 0x1f\n",
    "infinity": "a: .inf\n",
    "sexagesimal": "a: 1:30\n",
    "directive": "%YAML 1.1\n---\na: 1\n",
    "complex key": "? a\n: b\n",
    "merge key": "a: 1\n<<: {}\n",
    "content after ---": "--- a: 1\n",
    "bad indentation": "a: 1\n   b: 2\n",
    "a key that is no string": "on: yes\n",
}


def pyyaml(text: str) -> list[object]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


@pytest.mark.parametrize("text", READ.values(), ids=READ.keys())
def test_plain_block_yaml_is_read_as_pyyaml_reads_it(text: str) -> None:
    assert documents(text) == pyyaml(text)


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_yaml_beyond_the_plain_block_subset_is_refused(text: str) -> None:
    with pytest.raises(Unsupported):
        documents(text)


def test_every_yaml_file_of_the_repository_is_read_as_pyyaml_reads_it_or_refused() -> None:
    files = [*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/**/*.yaml")]
    files += [*ROOT.glob("deploy/**/*.yaml")]
    read = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            mine = documents(text)
        except Unsupported:
            continue
        assert mine == pyyaml(text), path
        read += 1
    assert read >= len(files) // 3, "most plain manifests are read"
