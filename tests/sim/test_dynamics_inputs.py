"""The dynamics functions with optional / missing model arrays and unusual models.

``model.joint_armature = None`` used to end the process with SIGSEGV in eval_mass_matrix (a null
array handed to a kernel); it now gives the rigid-body matrix. eval_inverse_dynamics_force on a
model without articulations used to check its inputs' shapes first; it now returns at once and
leaves joint_f untouched, as the reference engine does.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
import warp as wp

import armillary as newton


def _arm(armature=0.5):
    b = newton.ModelBuilder()
    a = b.add_link(mass=1.0, com=(0.3, 0.0, 0.0), inertia=wp.mat33(np.diag([0.01, 0.02, 0.03])))
    c = b.add_link(mass=2.0, com=(0.2, 0.0, 0.0), inertia=wp.mat33(np.diag([0.02, 0.02, 0.01])))
    j0 = b.add_joint_revolute(-1, a, axis=(0.0, 1.0, 0.0), armature=armature)
    j1 = b.add_joint_revolute(a, c, axis=(0.0, 0.0, 1.0), parent_xform=wp.transform((0.5, 0.0, 0.0), wp.quat_identity()),
                              armature=armature)  # fmt: skip
    b.add_articulation([j0, j1])
    m = b.finalize(device="cpu")
    s = m.state()
    s.joint_q.assign([0.3, -0.4])
    s.joint_qd.assign([0.5, 0.7])
    newton.eval_fk(m, s.joint_q, s.joint_qd, s)
    return m, s


def _run_child(code: str) -> list[str]:
    """Run ``code`` in a child interpreter that can import ``arm`` (= :func:`_arm`); the crashes
    these tests guard against (SIGSEGV on a null array in a kernel) kill the interpreter, so they
    must not run in the test process. Returns the child's stdout lines starting with ``RESULT``."""
    helper = textwrap.dedent(inspect.getsource(_arm)).replace("def _arm(", "def arm(")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "tests_dynamics_inputs_arm.py"), "w") as f:
            f.write("import numpy as np\nimport warp as wp\nimport armillary as newton\n\n" + helper)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([tmp, os.environ.get("PYTHONPATH", "")]))
        prelude = "import numpy as np, warp as wp\nwp.config.quiet = True\nimport armillary as newton\n"
        prelude += "from tests_dynamics_inputs_arm import arm\n"
        out = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                             timeout=300, env=env)  # fmt: skip
    assert out.returncode == 0, f"exit code {out.returncode}: {out.stderr[-2000:]}"
    return [x[len("RESULT "):] for x in out.stdout.splitlines() if x.startswith("RESULT ")]


def test_armature_none_gives_the_rigid_body_matrix():
    """``model.joint_armature = None``: eval_mass_matrix (CRBA and ``J^T M J``) and
    eval_inverse_dynamics_passive(mass_matrix=...) give the rigid-body matrix (used to SIGSEGV)."""
    lines = _run_child(
        """
        rigid, s0 = arm(armature=0.0)
        expect = newton.eval_mass_matrix(rigid, s0).numpy()
        m, s = arm(armature=0.5)
        diag = np.diagonal(newton.eval_mass_matrix(m, s).numpy()[0] - expect[0])
        m.joint_armature = None
        errs = [np.abs(newton.eval_mass_matrix(m, s).numpy() - expect).max()]
        errs.append(np.abs(newton.eval_mass_matrix(m, s, J=newton.eval_jacobian(m, s)).numpy() - expect).max())
        H = wp.zeros(expect.shape, dtype=wp.float32, device="cpu")
        g = wp.zeros(m.joint_dof_count, dtype=wp.float32, device="cpu")
        newton.eval_inverse_dynamics_passive(m, s, mass_matrix=H, gravity_force=g)
        errs.append(np.abs(H.numpy() - expect).max())
        print("RESULT", *diag.tolist(), *errs)
        """
    )
    values = [float(v) for v in lines[-1].split()]
    np.testing.assert_allclose(values[:2], [0.5, 0.5], atol=1e-6)  # the armature the model had
    assert max(values[2:]) < 1e-6  # rigid-body matrix on all three paths


MISSING = ("body_com", "joint_axis", "joint_X_p", "joint_ancestor", "joint_dof_dim")


def test_other_missing_model_arrays_raise_instead_of_crashing():
    lines = _run_child(
        f"""
        for name in {MISSING!r}:
            m, s = arm()
            setattr(m, name, None)
            calls = (lambda: newton.eval_mass_matrix(m, s), lambda: newton.eval_jacobian(m, s),
                     lambda: newton.eval_inverse_dynamics_passive(m, s, coriolis_force=wp.zeros(2, dtype=float)))
            for call in calls:
                try:
                    call()
                    print("RESULT", name, "no error")
                except ValueError as e:
                    print("RESULT", name, str(e))
        """
    )
    assert len(lines) == 3 * len(MISSING)
    for line in lines:
        name = line.split()[0]
        assert f"model.{name} is None" in line, line


def test_gravity_arrays_are_needed_only_for_the_gravity_force():
    lines = _run_child(
        """
        m, s = arm()
        expect = newton.eval_mass_matrix(m, s).numpy()
        m.gravity = None
        m.joint_world = None
        print("RESULT M", np.abs(newton.eval_mass_matrix(m, s).numpy() - expect).max())
        c = wp.zeros(2, dtype=wp.float32, device="cpu")
        newton.eval_inverse_dynamics_passive(m, s, coriolis_force=c)
        print("RESULT C", int(np.all(np.isfinite(c.numpy())) and np.abs(c.numpy()).max() > 0.0))
        try:
            newton.eval_inverse_dynamics_passive(m, s, gravity_force=wp.zeros(2, dtype=wp.float32, device="cpu"))
            print("RESULT G no error")
        except ValueError as e:
            print("RESULT G", e)
        """
    )
    assert float(lines[0].split()[1]) == 0.0
    assert lines[1] == "C 1"
    assert "model.gravity is None" in lines[2]


def test_missing_state_arrays_raise():
    lines = _run_child(
        """
        m, s = arm()
        s.joint_qd = None
        try:
            newton.eval_mass_matrix(m, s)
            print("RESULT no error")
        except ValueError as e:
            print("RESULT", e)
        """
    )
    assert "state.joint_qd is None" in lines[0]


def test_inverse_dynamics_force_without_articulations_returns_first():
    b = newton.ModelBuilder()
    b.add_link(mass=1.0)
    b.add_particle((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0)
    m = b.finalize(device="cpu")
    s = m.state()
    assert m.articulation_count == 0
    joint_f = wp.array([1.0, 2.0, 3.0], dtype=wp.float32, device="cpu")
    # neither missing nor wrongly shaped inputs are looked at
    newton.eval_inverse_dynamics_force(m, s, mass_matrix=None, joint_qdd=None, coriolis_force=None,
                                       gravity_force=None, joint_f=joint_f)  # fmt: skip
    newton.eval_inverse_dynamics_force(m, s, mass_matrix=wp.zeros((3, 3, 3), dtype=wp.float32, device="cpu"),
                                       joint_qdd=wp.zeros(2, dtype=wp.float32, device="cpu"), coriolis_force=None,
                                       gravity_force=None, joint_f=joint_f)  # fmt: skip
    np.testing.assert_array_equal(joint_f.numpy(), [1.0, 2.0, 3.0])


def test_missing_outputs_message_is_the_reference_engines():
    m, s = _arm()
    with pytest.raises(ValueError) as exc:
        newton.eval_inverse_dynamics_passive(m, s)
    assert str(exc.value) == "At least one inverse-dynamics output must be provided."
    view = newton.selection.ArticulationView(m, "*")
    with pytest.raises(ValueError) as exc:
        view.eval_inverse_dynamics_passive(s)
    assert str(exc.value) == "At least one inverse-dynamics output must be provided."
