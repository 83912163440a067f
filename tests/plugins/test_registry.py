"""Name resolution through the registry: solvers, importers, actuators, run-time plugins."""

import types

import pytest

import armillary
from armillary.solvers import SolverBase, SolverCapabilities


def make_plugin(**hooks):
    """A plugin object with the given hook implementations."""
    ns = types.SimpleNamespace()
    for name, fn in hooks.items():
        setattr(ns, name, armillary.hookimpl(fn))
    return ns


class SolverFake(SolverBase):
    """A fake solver.

    Args:
        model: the model.
        gain: a documented option.
    """

    capabilities = SolverCapabilities(coordinates="maximal", joint_types={"FREE"}, features={"rigid_bodies"})

    def __init__(self, model, *, gain: float = 1.0):
        self.gain = gain


def test_known_but_missing_solver_names_distribution_and_pip_command():
    with pytest.raises(ImportError) as info:
        armillary.solvers.SolverXPBD  # noqa: B018
    message = str(info.value)
    assert "armillary-solver-xpbd" in message
    assert "pip install armillary-solver-xpbd" in message


def test_every_planned_solver_gives_an_install_hint():
    for name, dist in [("SolverFeatherstone", "armillary-solver-featherstone"), ("SolverMuJoCo", "armillary-solver-mujoco"),
                       ("SolverVBD", "armillary-solver-vbd"), ("SolverCoupledADMM", "armillary-coupling")]:
        with pytest.raises(ImportError, match=f"pip install {dist}"):
            getattr(armillary.solvers, name)


def test_unknown_solver_lists_what_is_installed(registry):
    registry.register(make_plugin(armillary_register_solvers=lambda registry: registry.add(
        "SolverFake", SolverFake, summary="fake")), name="fake")
    with pytest.raises(AttributeError) as info:
        armillary.solvers.SolverNope  # noqa: B018
    assert "SolverNope" in str(info.value) and "SolverFake" in str(info.value)
    assert not hasattr(armillary.solvers, "SolverNope")


def test_run_time_registration_resolves_and_lists(registry):
    record = registry.register(make_plugin(armillary_register_solvers=lambda registry: registry.add(
        "SolverFake", "tests.plugins.test_registry:SolverFake", summary="fake")), name="fake")
    assert record.status == "loaded" and record.provides == [("solver", "SolverFake")]
    assert armillary.solvers.SolverFake.__name__ == "SolverFake"
    assert "SolverFake" in dir(armillary.solvers)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(make_plugin(), name="fake")
    registry.unregister("fake")
    with pytest.raises(AttributeError):
        armillary.solvers.SolverFake  # noqa: B018


def test_registered_solver_must_subclass_solverbase_and_declare_capabilities(registry):
    class NotASolver:
        pass

    class NoCaps(SolverBase):
        pass

    def hook(registry):
        registry.add("SolverBad", NotASolver, summary="not a solver")
        registry.add("SolverNoCaps", NoCaps, summary="inherits the default declaration")

    registry.register(make_plugin(armillary_register_solvers=hook), name="bad")
    with pytest.raises(TypeError, match="not a SolverBase subclass"):
        armillary.solvers.SolverBad  # noqa: B018
    with pytest.raises(TypeError, match="must declare its own"):
        armillary.solvers.SolverNoCaps  # noqa: B018


@pytest.mark.parametrize(
    "name,target,summary,error",
    [
        ("Bad Name", "a.b:C", "x", "identifier"),
        ("SolverX", "no_colon", "x", "target must be"),
        ("SolverX", "a.b:C", "  ", "summary is required"),
    ],
)
def test_registration_input_is_validated(registry, name, target, summary, error):
    def hook(registry):
        registry.add(name, target, summary=summary)

    record = registry.register(make_plugin(armillary_register_solvers=hook), name="p")
    assert record.status == "failed"
    assert error in str(record.error)


def test_importer_methods_resolve_and_missing_importer_names_distribution(registry):
    builder_calls = []

    def add_toy(builder, source, scale=1.0):
        builder_calls.append((builder, source, scale))
        return "done"

    registry.register(make_plugin(armillary_register_importers=lambda registry: registry.add(
        "toy", add_toy, suffixes=(".toy",), summary="toy format")), name="toy")
    from armillary.plugins import import_into, importer_method

    sentinel = object()
    assert import_into(sentinel, "toy", "file.toy", scale=2.0) == "done"
    assert importer_method(sentinel, "add_toy")("x.toy") == "done"
    assert builder_calls == [(sentinel, "file.toy", 2.0), (sentinel, "x.toy", 1.0)]
    assert registry.importers.for_path("MODEL.TOY").name == "toy"
    with pytest.raises(AttributeError, match="add_toy"):
        importer_method(sentinel, "add_nothing")
    with pytest.raises(ImportError, match="pip install armillary-importer-mjcf"):
        import_into(sentinel, "mjcf", "robot.xml")


def test_importer_api_module_backs_the_usd_namespace(registry, tmp_path, monkeypatch):
    """``armillary.usd.<name>`` resolves through the ``usd`` importer's declared api module."""
    (tmp_path / "toy_usd_api.py").write_text("__all__ = ['helper']\ndef helper():\n    return 42\n_hidden = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="pip install armillary-importer-usd"):
        armillary.usd.get_mesh  # noqa: B018
    registry.register(make_plugin(armillary_register_importers=lambda registry: registry.add(
        "usd", lambda builder, source: None, suffixes=(".usda",), api="toy_usd_api", summary="toy usd")), name="usd")
    assert armillary.usd.helper() == 42
    assert dir(armillary.usd) == ["helper"]
    with pytest.raises(AttributeError, match="no attribute 'nope'.*available: helper"):
        armillary.usd.nope  # noqa: B018
    with pytest.raises(AttributeError, match="_hidden"):
        armillary.usd._hidden  # noqa: B018
    with pytest.raises(ValueError, match="dotted module name"):
        registry.importers.add("bad", lambda b, s: None, api="not a module", summary="bad")


def test_actuator_components_resolve_through_the_module(registry):
    class ControllerToy:
        pass

    def hook(registry):
        registry.add("ControllerToy", ControllerToy, kind="controller", summary="toy controller")

    registry.register(make_plugin(armillary_register_actuators=hook), name="act")
    assert armillary.actuators.ControllerToy is ControllerToy
    assert registry.actuators.get("ControllerToy").meta["component_kind"] == "controller"
    with pytest.raises(AttributeError, match="ControllerToy"):
        armillary.actuators.ControllerNope  # noqa: B018

    def bad(registry):
        registry.add("Thing", ControllerToy, kind="gearbox", summary="bad kind")

    assert registry.register(make_plugin(armillary_register_actuators=bad), name="bad").status == "failed"


def test_custom_attribute_hook_reaches_plugins_with_solver_name(registry):
    seen = []
    registry.register(make_plugin(armillary_register_custom_attributes=lambda builder, solver: seen.append(
        (builder, solver))), name="attrs")
    sentinel = object()
    SolverFake.register_custom_attributes(sentinel)
    from armillary.plugins import register_custom_attributes

    register_custom_attributes(sentinel)
    assert seen == [(sentinel, "SolverFake"), (sentinel, None)]


def test_builtin_scenes_register_through_the_public_hook(registry):
    record = {r.name: r for r in registry.plugins()}["builtin"]
    assert record.distribution == "armillary"
    assert ("scene", "falling_shapes") in record.provides
    assert registry.scenes.get("falling_shapes").meta["dt"] > 0


def test_coupled_namespace_resolves_through_the_registry():
    import armillary.solvers.experimental.coupled as coupled

    with pytest.raises(ImportError, match="pip install armillary-coupling"):
        coupled.SolverCoupledProxy  # noqa: B018
    assert armillary.solvers.experimental.coupled is coupled
