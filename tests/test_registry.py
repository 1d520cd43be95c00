"""`veribatch.registry` on its own, against real entry points: distributions made for the test
(a ``<name>.dist-info`` folder with ``METADATA`` and ``entry_points.txt``, on ``sys.path``)
are what importlib.metadata finds, exactly as for a pip-installed plug-in."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from veribatch import registry

GROUP = registry.TOOLS


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An extra site folder on sys.path; the registry forgets what it saw before and after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.clear_cache()
    yield tmp_path
    for module in ("toyreg_good", "toyreg_failing"):
        sys.modules.pop(module, None)
    registry.clear_cache()


def distribution(site: Path, name: str, version: str, entries: dict[str, str]) -> None:
    """Install (by hand, as pip would leave it) a distribution declaring `entries` in GROUP."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entries.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}")


def module(site: Path, name: str, text: str) -> None:
    (site / f"{name}.py").write_text(text)


def test_a_name_loads_its_object_once_and_listing_imports_nothing(site: Path) -> None:
    module(site, "toyreg_good", "LOADS = []\nclass Thing:\n    pass\nLOADS.append(1)\n")
    distribution(site, "toyreg-good", "1.2", {"toyreg-thing": "toyreg_good:Thing"})
    assert "toyreg-thing" in registry.names(GROUP)
    assert registry.target(GROUP, "toyreg-thing") == "toyreg_good:Thing"
    assert registry.distribution(GROUP, "toyreg-thing") == "toyreg-good 1.2"
    assert "toyreg_good" not in sys.modules  # listed, described, not imported
    thing = registry.load(GROUP, "toyreg-thing")
    assert thing.__name__ == "Thing" and registry.load(GROUP, "toyreg-thing") is thing
    assert sys.modules["toyreg_good"].LOADS == [1]


def test_an_unknown_name_lists_the_known_ones(site: Path) -> None:
    distribution(site, "toyreg-a", "1.0", {"toyreg-alpha": "toyreg_good:A", "toyreg-beta": "toyreg_good:B"})
    with pytest.raises(registry.UnregisteredNameError) as caught:
        registry.load(GROUP, "toyreg-gamma")
    e = caught.value
    assert isinstance(e, LookupError) and e.name == "toyreg-gamma"
    assert e.known == registry.names(GROUP) and {"toyreg-alpha", "toyreg-beta"} <= set(e.known)
    assert str(e).startswith("unknown verifier 'toyreg-gamma'; known: ")
    assert "toyreg-alpha, toyreg-beta" in str(e)
    with pytest.raises(ValueError, match="unknown entry-point group 'veribatch.nope'"):
        registry.names("veribatch.nope")


def test_a_plugin_that_fails_to_import_names_its_distribution_and_breaks_only_itself(site: Path) -> None:
    module(site, "toyreg_failing", "raise RuntimeError('half-installed: libfoo missing')\n")
    module(site, "toyreg_good", "class Thing:\n    pass\n")
    distribution(site, "toyreg-broken", "0.3", {"toyreg-broken": "toyreg_failing:Tool"})
    distribution(site, "toyreg-fine", "2.0", {"toyreg-fine": "toyreg_good:Thing"})
    assert {"toyreg-broken", "toyreg-fine"} <= set(registry.names(GROUP))
    with pytest.raises(registry.PluginLoadError) as caught:
        registry.load(GROUP, "toyreg-broken")
    message = str(caught.value)
    assert "from toyreg-broken 0.3" in message and "toyreg_failing:Tool" in message
    assert "RuntimeError: half-installed: libfoo missing" in message
    assert isinstance(caught.value, ImportError)
    assert registry.load(GROUP, "toyreg-fine").__name__ == "Thing"


def test_a_name_declared_by_two_distributions_is_refused_naming_both(site: Path) -> None:
    module(site, "toyreg_good", "class A:\n    pass\nclass B:\n    pass\n")
    distribution(site, "toyreg-first", "1.0", {"toyreg-same": "toyreg_good:A"})
    distribution(site, "toyreg-second", "4.5", {"toyreg-same": "toyreg_good:B"})
    assert registry.names(GROUP).count("toyreg-same") == 1  # listed: `--help` still says it exists
    for use in (registry.load, registry.target, registry.distribution):
        with pytest.raises(registry.DuplicateNameError) as caught:
            use(GROUP, "toyreg-same")
        message = str(caught.value)
        assert "toyreg-first 1.0" in message and "toyreg-second 4.5" in message, message
        assert "toyreg_good:A" in message and "toyreg_good:B" in message


def test_the_same_target_declared_twice_is_no_clash(site: Path) -> None:
    """One package seen twice (an editable install and its build, say) is one plug-in."""
    module(site, "toyreg_good", "class A:\n    pass\n")
    distribution(site, "toyreg-first", "1.0", {"toyreg-same": "toyreg_good:A"})
    distribution(site, "toyreg-again", "1.0", {"toyreg-same": "toyreg_good:A"})
    assert registry.load(GROUP, "toyreg-same").__name__ == "A"


def test_ours_come_from_the_running_checkout_even_where_it_is_not_installed(site: Path) -> None:
    """A checkout used through PYTHONPATH (a cluster job, the vLLM venv) has no veribatch
    metadata, or an older one: its built-ins are still its pyproject.toml's, never a stale
    install's, and a stale install's other value for one of our names is no clash."""
    import tomllib

    pyproject = Path(registry.__file__).resolve().parents[1] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text())["project"]["entry-points"][GROUP]
    # an older install of veribatch itself, declaring a name we no longer have and another target
    distribution(site, "veribatch", "0.0.1", {"gone": "veribatch.old:Gone",
                                              "z3": "veribatch.old:OldZ3"})
    registry.clear_cache()
    assert set(registry.names(GROUP)) >= set(declared) and "gone" not in registry.names(GROUP)
    assert registry.target(GROUP, "z3") == declared["z3"]
    assert "the checkout at" in registry.distribution(GROUP, "z3")
