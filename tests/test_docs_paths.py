"""Every repository path the documentation names in backticks exists.

Files move (a benchmark's tables, its CLI commands); a page that still names the old
place sends a reader to nothing.  This test reads each backticked span of the pages
below, takes every path in it that ends in `.py`, `.md` or `.yaml` and whose first
component is a directory of this repository (top level, or a package of `veribatch/`),
and requires it to exist.  A placeholder (`tasks/<task>/tables.py`) stands for the name of
a benchmark, a verifier adapter or a SLURM profile and must give an existing file for at
least one of them (so `aggregate/<task>.py` fails though `aggregate/build.py` exists); a
`*` must match some file.  Paths of other projects (`benchexec/tools/template.py`) start
with a directory this repository does not have and are not checked.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "veribatch"

# The pages a reader follows; CHANGELOG.md is left out on purpose: it names the places
# files had when each round changed them.
PAGES = sorted(
    [ROOT / "README.md", PACKAGE / "verifiers" / "z3c" / "README.md"]
    + list((ROOT / "docs").glob("*.md"))
)

_SPAN = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"[\w.<>*/-]*/[\w.<>*-]*\.(?:py|md|yaml)\b")
_PLACEHOLDER = re.compile(r"<[^>/]*>")


def _bases(page: Path) -> list[Path]:
    """Where a relative path in `page` may start: the repository, the package, the page's own folder."""
    return [ROOT, PACKAGE, page.parent]


def _first_components() -> set[str]:
    """Directory names a checked path may start with (so other projects' paths are skipped)."""
    names = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    names |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_")}
    return names


def paths_in(page: Path) -> list[tuple[int, str]]:
    """(line, path) for each checked repository path named in backticks on `page`."""
    firsts = _first_components()
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for span in _SPAN.findall(line):
            for path in _PATH.findall(span):
                path = path.lstrip("./")
                if path.split("/", 1)[0] in firsts:
                    found.append((number, path))
    return found


_ADAPTER = re.compile(r"^class \w+\((?:\w+\.)?Tool\)", re.MULTILINE)


def placeholder_names() -> set[str]:
    """What `<name>` in a path may stand for: benchmark folders, verifier adapters, SLURM profiles."""
    names = {p.parent.name for p in (PACKAGE / "tasks").glob("*/__init__.py")}
    for module in (PACKAGE / "verifiers").rglob("*.py"):
        if _ADAPTER.search(module.read_text(encoding="utf-8")):
            names.add(module.parent.name if module.stem == "tool" else module.stem)
    names |= {p.stem for p in (PACKAGE / "slurm_profiles").glob("*.yaml")}
    return names


def exists(page: Path, path: str) -> bool:
    """Whether `path` names a file from one of the page's bases, for some name in each placeholder."""
    if _PLACEHOLDER.search(path):
        candidates = {_PLACEHOLDER.sub(name, path) for name in placeholder_names()}
    else:
        candidates = {path}
    return any(glob.glob(str(base / c)) for base in _bases(page) for c in candidates)


def test_pages_name_paths_at_all() -> None:
    """The extraction finds paths (a broken pattern would make the real test vacuous)."""
    readme = ROOT / "README.md"
    assert len(paths_in(readme)) >= 5
    assert any(p.startswith("veribatch/") for _, p in paths_in(ROOT / "docs" / "architecture.md"))


def test_a_moved_path_is_caught(tmp_path: Path) -> None:
    """A page naming a file that is not there fails the check; a placeholder that matches passes."""
    page = tmp_path / "page.md"
    page.write_text(
        "See `veribatch/aggregate/cebench_card.py` and `veribatch/tasks/<task>/tables.py`,\n"
        "`python bench/verifier.py --split easy`, `veribatch/aggregate/<task>.py`\n"
        "and BenchExec's `benchexec/tools/template.py`.\n",
        encoding="utf-8",
    )
    named = [p for _, p in paths_in(page)]
    assert named == [
        "veribatch/aggregate/cebench_card.py",
        "veribatch/tasks/<task>/tables.py",
        "bench/verifier.py",
        "veribatch/aggregate/<task>.py",
    ]
    assert not exists(page, "veribatch/aggregate/cebench_card.py")
    assert exists(page, "veribatch/tasks/<task>/tables.py")
    assert exists(page, "bench/verifier.py")
    # aggregate/build.py exists, but no benchmark's name makes aggregate/<task>.py a file
    assert not exists(page, "veribatch/aggregate/<task>.py")
    assert exists(page, "tests/verifiers/test_<name>.py")


# Pages whose owners have not yet followed the move to one folder per benchmark.  Strict:
# once a page is fixed its entry must go, so the page is checked from then on.
STALE = {
}


def _page_param(page: Path) -> object:
    name = str(page.relative_to(ROOT))
    marks = [pytest.mark.xfail(reason=STALE[name], strict=True)] if name in STALE else []
    return pytest.param(page, id=name, marks=marks)


@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES])
def test_named_paths_exist(page: Path) -> None:
    missing = [f"{page.relative_to(ROOT)}:{n}: `{p}`" for n, p in paths_in(page) if not exists(page, p)]
    assert not missing, "paths named in the docs that are not in the tree:\n" + "\n".join(missing)
