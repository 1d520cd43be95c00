"""Every name a user can type, found through Python entry points: tools, executors, engines,
tasks and CLI commands, ours and those of other installed packages alike.

A package plugs in by declaring entry points in its ``pyproject.toml``::

    [project.entry-points."veribatch.tools"]
    toy = "toy_verifier:ToyTool"

veribatch declares its own built-ins the same way, in its own ``pyproject.toml`` (one
declaration for ours and others').  Ours are read from the pyproject.toml of the checkout
that is running (`_own_entries`) — so a checkout used through ``PYTHONPATH`` without an
install, or with an install older than its entry points, still sees exactly its built-ins —
and from the installed metadata when veribatch is a wheel; every other package's come from
its install.

Why entry points: they are the ecosystem's plug-in convention (pytest, lm-evaluation-harness),
listing them reads the installed packages' metadata only (nothing is imported: ``launch
status`` and ``launch --help`` stay cheap), and a package outside this repository adds a
verifier or a benchmark without an edit here.  An object is imported on first `load` and
cached; a plug-in that fails to import breaks only its own name, with an error naming its
distribution.

This module is the bottom layer: it imports nothing of ours, so each package maps
`UnregisteredNameError` to its own error (`UnknownToolError`, `UnknownEngineError`, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # imported when a group is first listed: importlib.metadata costs ~70 ms, which
    # `launch status` (that lists nothing) must not pay
    from importlib import metadata

TOOLS = "veribatch.tools"
EXECUTORS = "veribatch.executors"
ENGINES = "veribatch.engines"
TASKS = "veribatch.tasks"
COMMANDS = "veribatch.commands"
GROUPS = (TOOLS, EXECUTORS, ENGINES, TASKS, COMMANDS)

_WHAT = {TOOLS: "verifier", EXECUTORS: "executor", ENGINES: "engine", TASKS: "task",
         COMMANDS: "command"}

_entries: dict[str, dict[str, metadata.EntryPoint]] = {}
_loaded: dict[tuple[str, str], Any] = {}


class UnregisteredNameError(LookupError):
    """A name no installed package declares in the group; the message lists the known ones."""

    def __init__(self, group: str, name: str, known: list[str]) -> None:
        self.group, self.name, self.known = group, name, known
        listed = ", ".join(known) if known else (
            "none (is veribatch installed? run: pip install -e . in the checkout)")
        super().__init__(f"unknown {_WHAT.get(group, group)} {name!r}; known: {listed}")

    def __str__(self) -> str:  # LookupError's str() would quote the message
        return str(self.args[0])


class PluginLoadError(ImportError):
    """A declared entry point failed to import; the message names the distribution to fix."""


class DuplicateNameError(LookupError):
    """Two installed distributions declare the same name in one group with different targets."""


_OWN = "veribatch"


def _dist(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None and ep.value.startswith(f"{_OWN}."):
        return f"{_OWN} (the checkout at {_checkout()})"
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"


def _checkout() -> Path | None:
    """The source checkout this `veribatch` is imported from (its pyproject.toml beside the
    package), or None for an installed wheel."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def _own_entries(group: str) -> list[metadata.EntryPoint] | None:
    """veribatch's own built-ins, read from the pyproject.toml of the code that is running.

    The code that runs decides what is built in: a checkout used through ``PYTHONPATH``
    (a cluster job, another venv — the vLLM one) or one whose install is older than its
    entry points then still finds every built-in, and never a stale one.  None when this
    `veribatch` is no checkout (a wheel: its metadata says it)."""
    root = _checkout()
    if root is None:
        return None
    import tomllib
    from importlib import metadata

    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    except (OSError, ValueError, KeyError):
        return None
    if project.get("name") != _OWN:
        return None
    table = (project.get("entry-points") or {}).get(group) or {}
    return [metadata.EntryPoint(name=n, value=str(v), group=group) for n, v in table.items()]


def _is_own(ep: metadata.EntryPoint) -> bool:
    dist = getattr(ep, "dist", None)
    return dist is not None and dist.name.lower().replace("_", "-") == _OWN


def _group(group: str) -> dict[str, metadata.EntryPoint]:
    if group not in GROUPS:
        raise ValueError(f"unknown entry-point group {group!r}; known: {', '.join(GROUPS)}")
    if group not in _entries:
        from importlib import metadata

        own = _own_entries(group)
        installed = list(metadata.entry_points(group=group))
        if own is not None:  # ours from the running checkout, every other package's from its install
            installed = own + [ep for ep in installed if not _is_own(ep)]
        found: dict[str, metadata.EntryPoint] = {}
        for ep in installed:
            seen = found.get(ep.name)
            if seen is not None and seen.value != ep.value:
                # kept so that names() still lists it; load() says what clashes
                found[ep.name] = _Clash(seen, ep)  # type: ignore[assignment]
            elif seen is None:
                found[ep.name] = ep
        _entries[group] = found
    return _entries[group]


class _Clash:
    """Two entry points for one name: loading it is an error naming both distributions."""

    def __init__(self, a: metadata.EntryPoint, b: metadata.EntryPoint) -> None:
        self.a, self.b = a, b


def names(group: str) -> list[str]:
    """The names declared in `group` by every installed distribution, sorted; imports nothing."""
    return sorted(_group(group))


def target(group: str, name: str) -> str:
    """The dotted ``module:attr`` that `name` stands for, without importing it."""
    ep = _entry(group, name)
    return ep.value


def distribution(group: str, name: str) -> str:
    """The distribution (name and version) that declares `name` in `group`."""
    return _dist(_entry(group, name))


def _entry(group: str, name: str) -> metadata.EntryPoint:
    entries = _group(group)
    try:
        ep = entries[name]
    except KeyError:
        raise UnregisteredNameError(group, name, sorted(entries)) from None
    if isinstance(ep, _Clash):
        raise DuplicateNameError(
            f"{_WHAT[group]} {name!r} is declared twice in {group}: {ep.a.value} by "
            f"{_dist(ep.a)} and {ep.b.value} by {_dist(ep.b)}; uninstall one of them")
    return ep


def load(group: str, name: str) -> Any:
    """The object `name` stands for in `group`, imported on first use and cached.

    Raises `UnregisteredNameError` for a name no installed package declares, `PluginLoadError`
    (naming the distribution) when its module fails to import."""
    key = (group, name)
    if key not in _loaded:
        ep = _entry(group, name)
        try:
            _loaded[key] = ep.load()
        except Exception as e:
            raise PluginLoadError(
                f"{_WHAT[group]} {name!r} ({ep.value}, from {_dist(ep)}) failed to load: "
                f"{type(e).__name__}: {e}") from e
    return _loaded[key]


def clear_cache() -> None:
    """Forget what was listed and loaded (tests that install a package at run time)."""
    _entries.clear()
    _loaded.clear()
