"""Resolving a name that an INCOMPATIBLE plugin may provide says why it is missing and how to fix it."""

import pytest

import armillary
from armillary.plugins import PluginRegistry

from .fakes import SOLVER_PLUGIN, write_distribution


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ARMILLARY_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    return tmp_path


def test_unknown_solver_names_the_incompatible_plugin_why_and_the_fix(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-future", "fake_future", "fake_future_mod",
                       SOLVER_PLUGIN.format(cls="SolverFuture", name="SolverFuture"), requires="armillary>=9.0")
    monkeypatch.setenv("ARMILLARY_PLUGINS", "fake_future")
    registry = PluginRegistry()
    assert {r.name: r for r in registry.plugins()}["fake_future"].status == "incompatible"
    with pytest.raises(AttributeError) as info:
        registry.solvers.resolve("SolverFuture")
    message = str(info.value)
    assert message.startswith("unknown solver 'SolverFuture'")
    assert "INCOMPATIBLE" in message and "fake-future 1.0" in message
    assert "requires armillary>=9.0" in message and armillary.__version__ in message  # why
    assert "pip install" in message and "upgrade the plugin" in message  # how to fix it


def test_unknown_solver_without_incompatible_plugins_says_nothing_about_them(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-good", "fake_good", "fake_good_mod",
                       SOLVER_PLUGIN.format(cls="SolverGood", name="SolverGood"))
    monkeypatch.setenv("ARMILLARY_PLUGINS", "fake_good")
    registry = PluginRegistry()
    with pytest.raises(AttributeError) as info:
        registry.solvers.resolve("SolverNope")
    assert "INCOMPATIBLE" not in str(info.value)
    assert "SolverGood" in str(info.value)
