"""Discovery through entry points: laziness, failure isolation, conflicts, versions."""

import subprocess
import sys

import pytest

import armillary
from armillary.plugins import PluginConflictError, PluginRegistry, PluginVersionError, version_satisfies

from .fakes import SOLVER_PLUGIN, write_distribution


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_armillary_imports_no_plugin_and_no_heavy_dependency():
    code = (
        "import sys, armillary\n"
        "heavy = {'mujoco', 'mujoco_warp', 'pxr', 'torch', 'trimesh'}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith('armillary_'))\n"
        "assert not bad, bad\n"
        "assert 'armillary.plugins' not in sys.modules, 'plugin discovery ran at import'\n"
        "print('ok')\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_plugins_load_on_first_use_only():
    """The first name resolution loads the plugin modules, not before."""
    code = (
        "import sys, armillary\n"
        "assert not any(m.startswith('armillary_') for m in sys.modules)\n"
        "names = dir(armillary.solvers)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('armillary_') and m.endswith('.plugin'))\n"
        "print(len(loaded))\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) >= 1  # at least the in-repo plugins are installed in the test env


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ARMILLARY_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    return tmp_path


def _select(monkeypatch, *names):
    monkeypatch.setenv("ARMILLARY_PLUGINS", ",".join(names))


def test_entry_point_plugin_is_discovered(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-good", "fake_good", "fake_good_mod",
                       SOLVER_PLUGIN.format(cls="SolverGood", name="SolverGood"))
    _select(monkeypatch, "fake_good")
    registry = PluginRegistry()
    cls = registry.solvers.resolve("SolverGood")
    assert cls.__name__ == "SolverGood"
    record = {r.name: r for r in registry.plugins()}["fake_good"]
    assert record.status == "loaded"
    assert record.distribution == "fake-good" and record.version == "1.0"
    assert ("solver", "SolverGood") in record.provides
    # installed plugins not selected by ARMILLARY_PLUGINS are listed as disabled
    assert all(r.status == "disabled" for r in registry.plugins() if r.name not in ("fake_good", "builtin"))


def test_broken_plugin_is_isolated(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-good", "fake_good", "fake_good_mod",
                       SOLVER_PLUGIN.format(cls="SolverGood", name="SolverGood"))
    write_distribution(fake_site, "fake-broken", "fake_broken", "fake_broken_mod",
                       "raise RuntimeError('boom at import')\n")
    _select(monkeypatch, "fake_good", "fake_broken")
    registry = PluginRegistry()
    records = {r.name: r for r in registry.plugins()}
    assert records["fake_broken"].status == "failed"
    assert "boom at import" in str(records["fake_broken"].error)
    assert registry.solvers.resolve("SolverGood").__name__ == "SolverGood"
    with pytest.raises(AttributeError) as info:
        registry.solvers.resolve("SolverFromBroken")
    message = str(info.value)
    assert "fake-broken 1.0" in message and "boom at import" in message
    assert isinstance(info.value.__cause__, RuntimeError)


def test_plugin_whose_hook_raises_is_isolated(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-hookfail", "fake_hookfail", "fake_hookfail_mod", """
        import armillary

        @armillary.hookimpl
        def armillary_register_solvers(registry):
            registry.add("SolverHalf", "x.y:Z", summary="registered before the failure")
            raise KeyError("hook failed")
    """)
    _select(monkeypatch, "fake_hookfail")
    registry = PluginRegistry()
    record = {r.name: r for r in registry.plugins()}["fake_hookfail"]
    assert record.status == "failed" and isinstance(record.error, KeyError)
    assert "SolverHalf" not in registry.solvers.names()  # nothing half-registered survives


def test_known_solver_from_broken_plugin_reraises_with_cause(fake_site, monkeypatch):
    """A broken distribution that is the known provider of a name: using the name re-raises, chained."""
    write_distribution(fake_site, "armillary-solver-vbd", "fake_vbd", "fake_vbd_mod",
                       "import not_a_real_module_xyz\n")
    _select(monkeypatch, "fake_vbd")
    registry = PluginRegistry()
    with pytest.raises(ImportError) as info:
        registry.solvers.resolve("SolverVBD")
    assert "armillary-solver-vbd" in str(info.value) and "not_a_real_module_xyz" in str(info.value)
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_lazy_target_import_failure_names_distribution(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-lazy", "fake_lazy", "fake_lazy_mod", """
        import armillary

        @armillary.hookimpl
        def armillary_register_solvers(registry):
            registry.add("SolverLazy", "fake_lazy_missing_module:SolverLazy", summary="imports on use")
    """)
    _select(monkeypatch, "fake_lazy")
    registry = PluginRegistry()
    assert "SolverLazy" in registry.solvers.names()  # registered without importing the target
    with pytest.raises(ImportError) as info:
        registry.solvers.resolve("SolverLazy")
    assert "fake-lazy 1.0" in str(info.value)
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_duplicate_solver_names_are_rejected_naming_both(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-one", "fake_one", "fake_one_mod",
                       SOLVER_PLUGIN.format(cls="SolverA", name="SolverDup"))
    write_distribution(fake_site, "fake-two", "fake_two", "fake_two_mod",
                       SOLVER_PLUGIN.format(cls="SolverB", name="SolverDup"))
    _select(monkeypatch, "fake_one", "fake_two")
    registry = PluginRegistry()
    with pytest.raises(PluginConflictError) as info:
        registry.solvers.resolve("SolverDup")
    assert "fake-one 1.0" in str(info.value) and "fake-two 1.0" in str(info.value)
    # unregistering one of them resolves the conflict: no silent override in either direction
    registry.unregister("fake_one")
    assert registry.solvers.resolve("SolverDup").__name__ == "SolverB"


def test_incompatible_core_range_is_reported_not_loaded(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-future", "fake_future", "fake_future_mod",
                       "raise AssertionError('must not be imported')\n", requires="armillary>=9.0")
    _select(monkeypatch, "fake_future")
    registry = PluginRegistry()
    record = {r.name: r for r in registry.plugins()}["fake_future"]
    assert record.status == "incompatible"
    assert isinstance(record.error, PluginVersionError)
    message = str(record.error)
    assert "fake-future 1.0" in message and ">=9.0" in message and armillary.__version__ in message
    assert "pip install" in message


def test_autoload_can_be_disabled(fake_site, monkeypatch):
    write_distribution(fake_site, "fake-good", "fake_good", "fake_good_mod",
                       SOLVER_PLUGIN.format(cls="SolverGood", name="SolverGood"))
    monkeypatch.setenv("ARMILLARY_DISABLE_PLUGIN_AUTOLOAD", "1")
    registry = PluginRegistry()
    assert [r.name for r in registry.plugins()] == ["builtin"]
    assert "SolverGood" not in registry.solvers.names()


@pytest.mark.parametrize(
    "version,spec,expected",
    [
        ("0.1.0", ">=0.1,<0.2", True),
        ("0.2.0", ">=0.1,<0.2", False),
        ("0.1.5", "~=0.1.2", True),
        ("0.2.0", "~=0.1.2", False),
        ("1.4", "==1.*", True),
        ("2.0", "==1.*", False),
        ("0.1.0", "!=0.1.0", False),
        ("0.1.0", "", True),
    ],
)
def test_version_specifiers(version, spec, expected):
    assert version_satisfies(version, spec) is expected


def test_bad_version_specifier_is_a_clear_error():
    with pytest.raises(ValueError, match="unsupported version specifier"):
        version_satisfies("0.1.0", "=>0.1")
