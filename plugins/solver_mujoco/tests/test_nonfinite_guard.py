"""SolverMuJoCo's non-finite guard: MuJoCo's own instability checks (``mjWARN_BADQPOS`` /
``BADQVEL`` / ``BADQACC``, after which MuJoCo resets the world) reported through
``nonfinite_flags`` as our joint coordinate / DOF or force input, on every C-engine step path
(split step with the fused writer guard, injected contacts, RK4, kinematic bodies on the host
path), and the MuJoCo Warp backend's generic guard."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

mujoco = pytest.importorskip("mujoco")

from armillary import ModelBuilder  # noqa: E402
from armillary import CollisionPipeline  # noqa: E402
from armillary.solvers.step_guard import CLEAN, NonFiniteStateError  # noqa: E402
from armillary_solver_mujoco.solver import SolverMuJoCo  # noqa: E402

wp.config.log_level = wp.LOG_WARNING
DT = 1.0e-3
_INERTIA = wp.mat33(np.eye(3, dtype=np.float32) * 7e-4)

# step paths of the C engine: (solver kwargs, whether the scene has a kinematic body)
PATHS = {
    "split": ({}, False),
    "injected_contacts": ({"use_mujoco_contacts": False}, False),
    "rk4": ({"integrator": "RK4"}, False),
    "kinematic_host": ({}, True),
}


def _scene(worlds=1, kinematic=False, **kw):
    """Per world: two free boxes on the ground and a three-link hinge chain with a position drive
    on its middle hinge (target 0.3 rad); optionally a kinematic box."""
    t = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    for i in range(2):
        body = t.add_body(xform=wp.transform((0.3 * i, 0.0, 0.1), wp.quat_identity()), mass=0.1,
                          inertia=_INERTIA, label=f"box_{i}")  # fmt: skip
        t.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    if kinematic:
        body = t.add_body(xform=wp.transform((0.0, 1.0, 0.3), wp.quat_identity()), mass=0.1, inertia=_INERTIA,
                          is_kinematic=True, label="kinematic_box")  # fmt: skip
        t.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    parent, joints = -1, []
    for i in range(3):
        link = t.add_link(mass=0.1, com=(0.05, 0.0, 0.0), inertia=_INERTIA, label=f"link_{i}")
        joints.append(t.add_joint_revolute(parent, link, axis=(0.0, 1.0, 0.0), label=f"hinge_{i}",
                                           target_ke=20.0 if i == 1 else 0.0, target_kd=0.5 if i == 1 else 0.0,
                                           parent_xform=wp.transform((0.1 if i else 2.0, 0.0, 1.0),
                                                                     wp.quat_identity())))  # fmt: skip
        parent = link
    t.add_articulation(joints)
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    SolverMuJoCo.register_custom_attributes(b)
    b.add_ground_plane()
    b.replicate(t, worlds)
    model = b.finalize(device="cpu")
    solver = SolverMuJoCo(model, **kw)
    pipeline = CollisionPipeline(model) if not solver.use_mujoco_contacts else None
    return model, solver, pipeline


class _Sim:
    """A scene stepped ``s0 -> s1`` (swapping), with its collision pipeline when it has one."""

    def __init__(self, worlds=1, kinematic=False, **kw):
        self.model, self.solver, self.pipeline = _scene(worlds, kinematic, **kw)
        self.s0, self.s1 = self.model.state(), self.model.state()
        self.control = self.model.control()
        target = self.control.joint_target_q.numpy()
        target[self.coord("hinge_1")] = 0.3
        self.control.joint_target_q.assign(target)
        self.contacts = self.pipeline.contacts() if self.pipeline is not None else None

    def coord(self, label, world=0):
        j = self.model.joint_label.index(label) + world * (self.model.joint_count // self.model.world_count)
        return int(self.model.joint_q_start.numpy()[j])

    def dof(self, label, world=0):
        j = self.model.joint_label.index(label) + world * (self.model.joint_count // self.model.world_count)
        return int(self.model.joint_qd_start.numpy()[j])

    def step(self, n=1):
        for _ in range(n):
            if self.pipeline is not None:
                self.pipeline.collide(self.s0, self.contacts)
            self.solver.step(self.s0, self.s1, self.control, self.contacts, DT)
            self.s0, self.s1 = self.s1, self.s0

    def poison(self, what, index, value=np.nan):
        """Write ``value`` into entry ``index`` of the next step's input ``what``."""
        arr = {"joint_q": self.s0.joint_q, "joint_qd": self.s0.joint_qd, "joint_f": self.control.joint_f,
               "body_f": self.s0.body_f}[what]  # fmt: skip
        a = arr.numpy()
        a.reshape(len(a), -1)[index, 0] = value
        arr.assign(a)

    def flags(self):
        return self.solver.nonfinite_flags.numpy().tolist()


def _poison_cases(sim):
    """``(input, index, expected kind, expected index, expected MuJoCo warning)`` per case."""
    return [
        ("joint_q", sim.coord("hinge_2"), "joint coordinate", sim.coord("hinge_2"), "mjWARN_BADQPOS"),
        ("joint_qd", sim.dof("hinge_2"), "joint DOF", sim.dof("hinge_2"), "mjWARN_BADQVEL"),
        ("joint_f", sim.dof("hinge_2"), "control.joint_f entry", sim.dof("hinge_2"), "mjWARN_BADQACC"),
        ("body_f", 0, "state_in.body_f entry", 0, "mjWARN_BADQACC"),
    ]


@pytest.mark.parametrize("path", list(PATHS))
def test_debug_mode_raises_naming_the_entry_where_nan_entered(path):
    kw, kinematic = PATHS[path]
    sim = _Sim(kinematic=kinematic, **kw)
    assert sim.solver.fuses_finite_guard is (not kinematic)
    labels = {sim.coord("hinge_2"): "hinge_2", 0: "box_0"}
    for what, index, kind, expect, warning in _poison_cases(sim):
        sim.solver.debug = False
        sim.step(3)
        sim.solver.debug = True
        sim.poison(what, index)
        with pytest.raises(NonFiniteStateError) as info:
            sim.step()
        err = info.value
        assert (err.kind, err.index) == (kind, expect), (what, str(err))
        assert labels.get(expect, "hinge_2") in str(err) and warning in str(err) and "reset" in str(err), str(err)
        assert err.step == sim.solver.step_count
        # MuJoCo reset the world: the output is finite, the flags were reset by the raise
        for name in ("body_q", "body_qd", "joint_q", "joint_qd"):
            assert np.all(np.isfinite(getattr(sim.s1, name).numpy())), (what, name)
        assert sim.flags() == [CLEAN] * 7
        sim.s0.assign(sim.s1)  # continue from the reset output; clear the poisoned input
        sim.control.joint_f.zero_()
        sim.s0.body_f.zero_()


@pytest.mark.parametrize("path", ["split", "kinematic_host"])
def test_without_debug_check_finite_raises_after_the_step(path):
    kw, kinematic = PATHS[path]
    sim = _Sim(kinematic=kinematic, **kw)
    sim.step(3)
    sim.poison("joint_q", sim.coord("hinge_2"))
    sim.step()  # no raise: the flags hold it
    assert sim.flags()[2] == sim.coord("hinge_2")
    with pytest.raises(NonFiniteStateError, match=r"joint coordinate .*'hinge_2'.*mjWARN_BADQPOS in world 0") as info:
        sim.solver.check_finite(sim.s0)
    assert info.value.kind == "joint coordinate"
    sim.solver.check_finite(sim.s0)  # reset by the raise
    sim.step(20)  # the world goes on from MuJoCo's reset, nothing flagged
    sim.solver.check_finite(sim.s0)


def test_clean_run_never_flags():
    """Drives, joint and body forces and contacts for 300 steps (every C path): no flag, no
    MuJoCo warning consumed, and the fused paths launch no generic guard."""
    for path, (kw, kinematic) in PATHS.items():
        sim = _Sim(kinematic=kinematic, **kw)
        f = sim.control.joint_f.numpy()
        f[sim.dof("hinge_0")] = 0.05
        sim.control.joint_f.assign(f)
        bf = sim.s0.body_f.numpy()
        bf[1, 2] = 0.5
        sim.s0.body_f.assign(bf)
        for _ in range(30):
            sim.step(10)
            assert sim.flags() == [CLEAN] * 7, path
        sim.solver.check_finite(sim.s0)
        assert not sim.solver._mj_warnings.count.any(), path
        guard_launches = sim.solver._step_guard._guards
        assert (len(guard_launches) == 0) is sim.solver.fuses_finite_guard, path
        q = sim.s0.joint_q.numpy()
        assert abs(q[sim.coord("hinge_1")] - 0.3) < 0.1, (path, q)  # the drive holds its target


def test_multi_world_flags_the_poisoned_world_and_leaves_the_others_alone():
    """NaN in world 1 of 3: the flag names world 1's coordinate, worlds 0 and 2 step as in a clean
    run (to float32: the edited state restarts MuJoCo from the float32 arrays), world 1 restarts
    from MuJoCo's reset."""
    runs = []
    for poison in (False, True):
        sim = _Sim(worlds=3)
        sim.step(20)
        if poison:
            sim.poison("joint_q", sim.coord("hinge_2", world=1))
        sim.step()
        runs.append((sim, sim.flags(), sim.s0.body_q.numpy().reshape(3, -1, 7)))
    (_, clean_flags, clean), (sim, flags, got) = runs
    assert clean_flags == [CLEAN] * 7
    assert flags[2] == sim.coord("hinge_2", world=1) and flags.count(CLEAN) == 6
    np.testing.assert_allclose(got[[0, 2]], clean[[0, 2]], atol=1e-6)
    assert np.all(np.isfinite(got[1])) and not np.allclose(got[1], clean[1], atol=1e-3)
    with pytest.raises(NonFiniteStateError, match=r"world 1 \(qpos\["):
        sim.solver.check_finite()


def test_controls_are_sent_again_after_mujoco_resets_a_world():
    """mj_resetData clears ctrl and the applied forces: the guard makes the next step write them."""
    sim = _Sim()
    f = sim.control.joint_f.numpy()
    f[sim.dof("hinge_0")] = 0.05
    sim.control.joint_f.assign(f)
    sim.step(5)
    d = sim.solver.mj_data
    ctrl, qfrc = d.ctrl.copy(), d.qfrc_applied.copy()
    assert np.any(ctrl != 0.0) and np.any(qfrc != 0.0)
    sim.poison("joint_qd", sim.dof("hinge_2"))
    sim.step()
    assert not np.any(d.ctrl) and not np.any(d.qfrc_applied)  # MuJoCo's reset
    sim.step()
    np.testing.assert_array_equal(d.ctrl, ctrl)
    np.testing.assert_array_equal(d.qfrc_applied, qfrc)
    with pytest.raises(NonFiniteStateError, match="mjWARN_BADQVEL"):
        sim.solver.check_finite()


def test_finite_but_huge_force_reports_the_dof_mujoco_names():
    """A finite force too large for MuJoCo (qacc > 1e10) is no non-finite input: the bad qacc is
    reported as the DOF MuJoCo names (the chain's first: the mass matrix couples the chain)."""
    sim = _Sim()
    sim.step(3)
    sim.poison("joint_f", sim.dof("hinge_2"), 1.0e30)
    sim.step()
    chain = {sim.dof(f"hinge_{i}") for i in range(3)}
    flags = sim.flags()
    assert flags[3] in chain and flags.count(CLEAN) == 6, flags
    with pytest.raises(NonFiniteStateError, match=r"joint DOF .*hinge_.*mjWARN_BADQACC"):
        sim.solver.check_finite()


def test_without_mujoco_autoreset_the_nan_reaches_state_out_and_is_flagged():
    """``mjDSBL_AUTORESET``: MuJoCo warns but keeps the NaN; the writer's own checks flag it."""
    sim = _Sim()
    sim.solver.mj_model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)
    sim.step(3)
    sim.poison("joint_q", sim.coord("hinge_2"))
    sim.step()
    assert not np.all(np.isfinite(sim.s0.joint_q.numpy()))
    with pytest.raises(NonFiniteStateError, match="was not reset") as info:
        sim.solver.check_finite(sim.s0)
    assert info.value.kind == "joint coordinate"


def test_fused_guard_flags_a_nan_force_mujoco_never_sees():
    """NaN ``body_f`` on a body welded to the world, and zero forces again: the writer's scan
    flags the entry whatever MuJoCo does with it, and skips all-zero forces."""
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    free = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=0.1, inertia=_INERTIA)
    b.add_shape_sphere(free, radius=0.05)
    welded = b.add_link(mass=0.1, inertia=_INERTIA, label="welded")
    b.add_shape_sphere(welded, radius=0.05)
    b.add_articulation([b.add_joint_fixed(-1, welded, parent_xform=wp.transform((1.0, 0.0, 1.0), wp.quat_identity()))])
    model = b.finalize(device="cpu")
    solver = SolverMuJoCo(model)
    assert solver.fuses_finite_guard
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, None, DT)
    f = np.zeros((model.body_count, 6), np.float32)
    f[welded, 3] = np.inf
    s1.body_f.assign(f)
    solver.step(s1, s0, None, None, DT)
    with pytest.raises(NonFiniteStateError, match=r"state_in.body_f entry 1 \('welded'\)") as info:
        solver.check_finite()
    assert (info.value.kind, info.value.index) == ("state_in.body_f entry", welded)
    s1.body_f.zero_()
    for _ in range(3):
        solver.step(s1, s0, None, None, DT)
        s0, s1 = s1, s0
    solver.check_finite()


def test_warp_backend_guard():
    """MuJoCo Warp does not reset: the NaN reaches state_out and the generic guard reports it."""
    pytest.importorskip("mujoco_warp")
    sim = _Sim(use_mujoco_cpu=False)
    assert sim.solver.fuses_finite_guard is False
    sim.step(3)
    assert sim.flags() == [CLEAN] * 7
    sim.solver.debug = True
    sim.poison("joint_q", sim.coord("hinge_2"))
    with pytest.raises(NonFiniteStateError):
        sim.step()
