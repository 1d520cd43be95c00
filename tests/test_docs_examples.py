"""The how-to pages' examples are the toy plug-ins' files, so the examples cannot drift.

A fenced code block of docs/adding-a-benchmark.md or docs/adding-a-verifier.md whose first
line is a comment naming a file under tests/plugins/ (``# tests/plugins/.../cli.py``) must
be contained in that file — the whole file, for the ones each page walks through.  The
toy packages themselves are installed and run by tests/test_plugins.py, so what the pages
show is code that works.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = "tests/plugins/"
# page → the files it shows whole (each toy package's pyproject.toml and modules)
WHOLE = {
    "docs/adding-a-benchmark.md": [
        "tests/plugins/toy_benchmark/pyproject.toml",
        "tests/plugins/toy_benchmark/toy_benchmark/__init__.py",
        "tests/plugins/toy_benchmark/toy_benchmark/tables.py",
        "tests/plugins/toy_benchmark/toy_benchmark/cli.py",
    ],
    "docs/adding-a-verifier.md": [
        "tests/plugins/toy_verifier/pyproject.toml",
        "tests/plugins/toy_verifier/toy_verifier/__init__.py",
    ],
}
_FENCE = re.compile(r"^(?P<indent> *)```[\w-]*\n(?P<body>.*?)^(?P=indent)```\s*$", re.M | re.S)
_NAMES = re.compile(r"#\s*(\S+)\s*$")


def examples(text: str) -> list[tuple[str, str]]:
    """(named file, the block's code after its first line) for each fenced block whose first
    line is a comment naming a file under tests/plugins/."""
    found = []
    for m in _FENCE.finditer(text):
        indent = m.group("indent")
        lines = [line.removeprefix(indent) for line in m.group("body").splitlines(keepends=True)]
        named = _NAMES.fullmatch(lines[0].strip()) if lines else None
        if named and named.group(1).startswith(PLUGINS):
            found.append((named.group(1), "".join(lines[1:])))
    return found


@pytest.mark.parametrize("page", sorted(WHOLE))
def test_each_example_naming_a_toy_file_is_that_file(page: str) -> None:
    shown = examples((ROOT / page).read_text(encoding="utf-8"))
    for path, code in shown:
        file = ROOT / path
        assert file.is_file(), f"{page}: an example names {path}, which does not exist"
        assert code.strip() and code in file.read_text(encoding="utf-8"), \
            f"{page}: the example of {path} differs from the file (copy the file into the page)"
    whole = {path for path, code in shown if code == (ROOT / path).read_text(encoding="utf-8")}
    assert not set(WHOLE[page]) - whole, f"{page}: not shown whole: {sorted(set(WHOLE[page]) - whole)}"


def test_a_drifted_example_is_caught() -> None:
    """The extraction finds named blocks (indented ones too) and skips unnamed ones."""
    text = ("```python\n# tests/plugins/a/x.py\nx = 1\n```\n\n```python\nprint()\n```\n"
            "- item\n\n  ```toml\n  # tests/plugins/a/pyproject.toml\n  [project]\n  ```\n"
            "```python\n# veribatch/other.py\ny = 2\n```\n")
    assert examples(text) == [("tests/plugins/a/x.py", "x = 1\n"),
                              ("tests/plugins/a/pyproject.toml", "[project]\n")]
