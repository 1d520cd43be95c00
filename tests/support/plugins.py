"""Put a test-only object under a name in `veribatch.registry`, for the length of a test.

A real plug-in is an installed distribution's entry point (tests/plugins/ and
tests/test_plugins.py install two); a fake task or engine defined inside a test module is
not installed, so this adds it to the registry's in-process view for the `with` block and
removes it after, leaving no trace for the next test.
"""

from __future__ import annotations

import contextlib
import importlib.metadata as metadata
from collections.abc import Iterator
from typing import Any

from veribatch import registry


@contextlib.contextmanager
def installed(group: str, name: str, obj: Any) -> Iterator[None]:
    """`registry.names(group)` lists `name` and `registry.load(group, name)` returns `obj`."""
    entries = registry._group(group)
    if name in entries:
        raise ValueError(f"{name!r} is already installed in {group}")
    target = f"{getattr(obj, '__module__', 'tests')}:{getattr(obj, '__qualname__', name)}"
    entries[name] = metadata.EntryPoint(name, target, group)
    registry._loaded[(group, name)] = obj
    try:
        yield
    finally:
        entries.pop(name, None)
        registry._loaded.pop((group, name), None)


def install(monkeypatch: Any, group: str, name: str, obj: Any) -> None:
    """`installed` undone by pytest's `monkeypatch` at the end of the test."""
    target = f"{getattr(obj, '__module__', 'tests')}:{getattr(obj, '__qualname__', name)}"
    monkeypatch.setitem(registry._group(group), name, metadata.EntryPoint(name, target, group))
    monkeypatch.setitem(registry._loaded, (group, name), obj)
