"""The armillary-solver-semi-implicit distribution is discoverable through the ``armillary`` entry points."""

import importlib.metadata
import subprocess
import sys


def test_entry_point_is_declared():
    eps = [ep for ep in importlib.metadata.entry_points(group="armillary") if ep.name == "solver_semi_implicit"]
    assert len(eps) == 1
    assert eps[0].value == "armillary_solver_semi_implicit.plugin"
    assert eps[0].dist.metadata["Name"] == "armillary-solver-semi-implicit"


def test_plugin_module_is_light():
    """Importing the plugin module (what discovery does) imports neither Warp kernels nor heavy dependencies."""
    code = (
        "import sys, armillary_solver_semi_implicit.plugin; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('mujoco', 'mujoco_warp', 'pxr', 'torch', 'trimesh') "
        "or m.startswith('armillary_solver_semi_implicit.') and m != 'armillary_solver_semi_implicit.plugin']; "
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_solver_resolves_by_name_and_documents_every_option():
    import inspect

    import armillary

    cls = armillary.solvers.SolverSemiImplicit
    assert cls.__module__ == "armillary_solver_semi_implicit.solver"
    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name not in ("self", "model")]
    assert [p.name for p in params] == ["angular_damping", "friction_smoothing", "joint_attach_ke", "joint_attach_kd",
                                        "joint_mimic_ke", "joint_mimic_kd", "enable_tri_contact", "deterministic"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    assert [p.default for p in params] == [0.05, None, 1.0e4, 100.0, 100.0, 1.0, True, None]
    for p in params:
        assert f"{p.name}:" in cls.__doc__, f"option {p.name} is not documented in the class docstring"
