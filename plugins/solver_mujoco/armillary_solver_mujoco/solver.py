"""``SolverMuJoCo``: armillary models stepped by MuJoCo (the C engine; MuJoCo Warp on request).

The model is converted once (:mod:`.convert`) into an ``MjModel`` of one world; each world gets
an ``MjData``. A step converts the input state (:mod:`.state_map`), controls and forces into
MuJoCo's arrays when they changed, steps every world and writes the output state.

C engine, the usual case (Euler, implicit or implicitfast integrator, MuJoCo's own contacts, no
kinematic bodies): each world runs ``mj_step2`` then ``mj_step1``, which is bit-identical to
``mj_step`` and leaves ``mj_data`` holding the forward pass (poses, COM velocities, sensors,
constraints) of the *new* state; one recorded Warp launch (:mod:`.host_state`) then writes
``joint_q``, ``joint_qd``, ``body_q`` and ``body_qd`` of every world from MuJoCo's float64 buffers.
Otherwise (RK4, ``use_mujoco_contacts=False``) the worlds run ``mj_step`` (or the injected-contact
pipeline) and the writer follows ``mj_kinematics``/``mj_comPos``/``mj_comVel``; with kinematic
bodies the state is converted on the host and ``body_q``/``body_qd`` follow by forward
kinematics.

When ``state_in`` is exactly the state this solver wrote on the previous step (same object,
same values), the float64 ``MjData`` state is continued as is instead of being rebuilt from the
float32 arrays, so a stepping loop reproduces MuJoCo's own trajectory to float64 precision.
Editing the state between steps (any value) makes the next step start from the edited state.
Controls are written to ``ctrl`` only when the targets change, applied forces only while they are
non-zero (and once more to clear them).

Non-finite guard (see :mod:`armillary.solvers.step_guard`): MuJoCo checks every ``qpos``, ``qvel``
and ``qacc`` entry of each step itself and, on a NaN, infinite or huge (> 1e10) one, warns
(``mjWARN_BADQPOS`` / ``BADQVEL`` / ``BADQACC``) and resets that world (``mj_resetData``: ``qpos0``
at rest, controls and applied forces cleared), after which the step goes on from the reset state.
The C engine's steps consume those warnings and report them in :attr:`nonfinite_flags`: a bad
``qpos`` as the joint coordinate, a bad ``qvel`` or ``qacc`` as the joint DOF it maps to (a
``qacc`` of a world with a non-finite ``control.joint_f`` / ``state_in.body_f`` entry as that
entry), so ``check_finite`` and debug mode raise naming it (and what MuJoCo reported). That
world's ``state_out`` holds the world restarted by MuJoCo, never the NaN (unless the model sets
``mjDSBL_AUTORESET``); the other worlds are unaffected, and the next step sends the controls and
forces again. With the one-launch writer, a small launch after it (one thread per world,
:mod:`.host_state`) is the guard (``fuses_finite_guard``: no generic guard launch over the whole
state); the host path (kinematic bodies) runs the generic guard launch and checks the warnings on
the host; MuJoCo Warp, which does not reset, lets the NaN reach ``state_out`` where the generic
guard flags it.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import warp as wp

from armillary.flags import ModelFlags
from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, CouplingInterface, SolverBase, SolverCapabilities
from armillary.solvers.coupling import ENDPOINT_BODY

from armillary.launch import LaunchCache
from armillary.sim.kinematics import eval_fk

from . import attributes
from . import observables as _observables
from .convert import Conversion, convert_model
from .host_state import WARNING_NAMES, HostStateWriter, MjWarnings, mujoco_index_maps
from .state_map import StateMap, qconj, qmul, qrot

__all__ = ["SolverMuJoCo"]

_OPTION_NAMES = ("integrator", "cone", "solver", "impratio", "iterations", "ls_iterations", "tolerance",
                 "ls_tolerance", "density", "viscosity", "wind", "magnetic")  # fmt: skip
_REBUILD = (ModelFlags.JOINT_PROPERTIES | ModelFlags.JOINT_DOF_PROPERTIES | ModelFlags.BODY_PROPERTIES
            | ModelFlags.BODY_INERTIAL_PROPERTIES | ModelFlags.SHAPE_PROPERTIES | ModelFlags.MODEL_PROPERTIES
            | ModelFlags.JOINT_DOF_FORCE_PROPERTIES | ModelFlags.JOINT_DOF_INERTIAL_PROPERTIES
            | ModelFlags.JOINT_REFERENCE_POSE_PROPERTIES | ModelFlags.SHAPE_TYPE_AND_SOURCE
            | ModelFlags.CONSTRAINT_PROPERTIES | ModelFlags.ACTUATOR_PROPERTIES)  # fmt: skip


def _all_zero(a) -> bool:
    """Whether every byte of ``a`` is zero (a -0.0 counts as a value: harmless, it is written)."""
    b = a.tobytes()
    return b == bytes(len(b))


class SolverMuJoCo(SolverBase, CouplingInterface):
    """Steps an armillary model with MuJoCo.

    Args:
        model: the model (every world a replica of world 0; see :mod:`.convert` for what converts).
        use_mujoco_contacts: ``True`` (default): MuJoCo detects contacts itself from the converted
            geoms (``contype``/``conaffinity`` from the ``mujoco`` custom attributes, collision
            filter pairs as body ``<exclude>``\\s) and ``step`` expects ``contacts=None``.
            ``False``: ``step`` takes armillary :class:`~armillary.Contacts` (from a
            :class:`~armillary.CollisionPipeline`) and hands them to MuJoCo's constraint solver
            with the MuJoCo contact parameters of the two geoms.
        use_mujoco_cpu: ``True``: the MuJoCo C engine (the default on the CPU device);
            ``False``: MuJoCo Warp (the default on CUDA; it also runs on Warp's CPU device, with a
            long first compilation and a slow step: see the plugin README).
        nconmax: contacts per world (MuJoCo Warp only; the C engine grows its arena as needed).
        njmax: constraint rows per world (MuJoCo Warp only). ``None``: MuJoCo's defaults.
        iterations: ``mjOption.iterations`` (constraint solver iterations). Like every option
            below, ``None`` keeps the model's ``mujoco:*`` value (from MJCF ``<option>``), else
            MuJoCo's default.
        ls_iterations: ``mjOption.ls_iterations`` (line-search iterations).
        solver: ``"PGS"``, ``"CG"`` or ``"Newton"`` (or MuJoCo's integer code).
        integrator: ``"Euler"``, ``"RK4"``, ``"implicit"`` or ``"implicitfast"`` (MuJoCo's default,
            also ours when the model says nothing, is Euler).
        cone: ``"pyramidal"`` or ``"elliptic"`` friction cones.
        impratio: ``mjOption.impratio`` (friction-to-normal impedance ratio).
        tolerance: ``mjOption.tolerance`` (solver termination).
        ls_tolerance: ``mjOption.ls_tolerance``.
        density: medium density [kg/m^3] for MuJoCo's fluid forces.
        viscosity: medium viscosity [Pa s].
        wind: medium velocity (3,) [m/s].
        magnetic: global magnetic flux (3,) [T].
        disable_contacts: disable MuJoCo contacts entirely (``mjDSBL_CONTACT``).
        save_to_mjcf: path to write the converted model as MJCF (debugging).
        include_sites: convert site shapes to MuJoCo sites.
        skip_visual_only_geoms: do not convert shapes that neither collide nor are sites.
        separate_worlds: accepted for scripts written for the reference engine; worlds are
            always separate here (one ``MjData`` each).
        update_data_interval: accepted likewise; the state is converted every step.
        collision_pipeline: optional :class:`~armillary.CollisionPipeline` kept on the solver for
            callers that want one place to find it; ``step`` uses the ``contacts`` it is given.

    Attributes:
        mj_model: the compiled ``mujoco.MjModel`` (one world).
        mj_data: the ``mujoco.MjData`` of world 0 (``mj_datas`` has all of them).
    """

    capabilities = SolverCapabilities(
        coordinates=Coordinates.GENERALIZED,
        joint_types=frozenset({JointType.PRISMATIC, JointType.REVOLUTE, JointType.BALL, JointType.FIXED,
                               JointType.FREE, JointType.D6}),  # fmt: skip
        features=frozenset({"rigid_bodies", "body_forces", "joint_forces", "kinematic_bodies", "rigid_contacts",
                            "friction", "joint_limits", "joint_drives", "joint_springs", "joint_armature",
                            "joint_damping", "joint_friction", "mimic_joints",
                            "loop_joints", "multiple_worlds", "reset_world_mask"}),  # fmt: skip
        deterministic=True,
        collision_pipeline=True,
    )
    SUPPORTED_OBSERVABLES = _observables.SUPPORTED_OBSERVABLES
    """``body_qdd``; ``body_parent_f`` from MuJoCo's ``cfrc_int`` (C engine only; see :mod:`.observables`)."""

    def __init__(
        self,
        model,
        *,
        use_mujoco_contacts: bool = True,
        use_mujoco_cpu: bool | None = None,
        nconmax: int | None = None,
        njmax: int | None = None,
        iterations: int | None = None,
        ls_iterations: int | None = None,
        solver: int | str | None = None,
        integrator: int | str | None = None,
        cone: int | str | None = None,
        impratio: float | None = None,
        tolerance: float | None = None,
        ls_tolerance: float | None = None,
        density: float | None = None,
        viscosity: float | None = None,
        wind: tuple | None = None,
        magnetic: tuple | None = None,
        disable_contacts: bool | None = None,
        save_to_mjcf: str | None = None,
        include_sites: bool = True,
        skip_visual_only_geoms: bool = True,
        separate_worlds: bool | None = None,
        update_data_interval: int | None = None,
        collision_pipeline=None,
    ):
        super().__init__(model, collision_pipeline=collision_pipeline)
        import mujoco

        self._mujoco = mujoco
        device = wp.get_device(model.device)
        if use_mujoco_cpu is None:
            use_mujoco_cpu = not device.is_cuda
        for name, value in (("nconmax", nconmax), ("njmax", njmax)):
            if value is not None and int(value) < 0:
                raise ValueError(f"SolverMuJoCo: {name} must be >= 0, got {value!r}")
        self.use_mujoco_contacts = bool(use_mujoco_contacts)
        self.use_mujoco_cpu = bool(use_mujoco_cpu)
        self.nconmax, self.njmax = nconmax, njmax
        self.save_to_mjcf = save_to_mjcf
        self.include_sites = bool(include_sites)
        self.skip_visual_only_geoms = bool(skip_visual_only_geoms)
        self.disable_contacts = bool(disable_contacts)
        self._host_arrays = not device.is_cuda
        self._options = {
            "integrator": None if integrator is None else attributes.parse_integrator(integrator),
            "cone": None if cone is None else attributes.parse_cone(cone),
            "solver": None if solver is None else attributes.parse_solver(solver),
            "iterations": iterations, "ls_iterations": ls_iterations, "impratio": impratio,
            "tolerance": tolerance, "ls_tolerance": ls_tolerance, "density": density,
            "viscosity": viscosity, "wind": wind, "magnetic": magnetic,
        }  # fmt: skip
        self._launches = LaunchCache()
        self._build()

    # ------------------------------------------------------------------ setup
    @classmethod
    def register_custom_attributes(cls, builder) -> None:
        """Declare the ``mujoco:*`` attributes (geom contact parameters, joint limit/friction
        solver parameters, gravity compensation, ``<option>`` values); see :mod:`.attributes`."""
        attributes.register(builder)

    def _build(self) -> None:
        mujoco = self._mujoco
        self.conversion: Conversion = convert_model(
            self.model, options=self._options, include_sites=self.include_sites,
            skip_visual_only_geoms=self.skip_visual_only_geoms, use_mujoco_contacts=self.use_mujoco_contacts,
        )  # fmt: skip
        m = self.conversion.mj_model
        if self.disable_contacts:
            m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        if self.save_to_mjcf:
            os.makedirs(os.path.dirname(os.path.abspath(self.save_to_mjcf)), exist_ok=True)
            with open(self.save_to_mjcf, "w") as f:
                f.write(self.conversion.spec.to_xml())
        if not self.use_mujoco_contacts and int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4):
            raise ValueError("SolverMuJoCo: use_mujoco_contacts=False needs a single-stage integrator; RK4 "
                             "re-detects contacts at every stage (use Euler, implicit or implicitfast)")  # fmt: skip
        self.mj_model = m
        self.mj_models = [m] * self.conversion.world_count
        self.mj_datas = [mujoco.MjData(m) for _ in range(self.conversion.world_count)]
        self.mj_data = self.mj_datas[0]
        self.state_map = StateMap(self.model, self.conversion)
        self._force_tables()
        self._last_written = None  # (joint_q array, joint_qd array, q bytes, qd bytes)
        self._views = {}
        self._plans = {}
        self._pairs, self._pairs_of = [], None  # (MjModel, MjData) per world, for self.mj_models
        self._dt = None
        self._ready = False  # every MjData holds mj_step1 of its current qpos/qvel
        self._mj_warnings = MjWarnings(len(self.mj_datas))
        self._warn_new = self._mj_warnings.new  # warnings the guard consumed this step (checked per step)
        self._warn_indices = [int(getattr(mujoco.mjtWarning, name)) for name in WARNING_NAMES]
        self._writer = HostStateWriter(self.model, self.conversion, self.state_map, self.mj_datas, m,
                                       self._mj_warnings)  # fmt: skip
        self.__dict__.pop("_param_writer", None)
        self.__dict__.pop("_injector", None)
        if self.conversion.world_count > 1 and not self._worlds_share_parameters():
            from .parameters import PUSHABLE, per_world_models

            self.mj_models = per_world_models(self, int(PUSHABLE))
        self._warp = None
        if not self.use_mujoco_cpu:
            from .warp_backend import WarpBackend

            self._warp = WarpBackend(self)
        rk4 = int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4)
        self._step_split = bool(self._writer.supported and not self._has_kinematic and not rk4
                                and (self.use_mujoco_contacts or self.disable_contacts))  # fmt: skip
        # the writer's guard launch is the non-finite guard of the steps it ends (every body and DOF)
        self.fuses_finite_guard = bool(self._warp is None and self._writer.supported and not self._has_kinematic
                                       and not int(self.model.particle_count or 0))  # fmt: skip

    def _force_tables(self) -> None:
        """Index tables for controls and applied forces (world 0 entities; per-world offsets)."""
        conv = self.conversion
        self._act_p = [(dof, aid) for dof, aid, kind in conv.actuators if kind == "p"]
        self._act_v = [(dof, aid) for dof, aid, kind in conv.actuators if kind == "v"]
        self._forces_written = False
        self._force_scan = True  # the writer guard's force_scan (HostStateWriter starts at 1)
        self._last_ctrl = None
        # position targets have the joint_q layout: the coordinate of each driven scalar DOF
        dof_coord = {}
        for _, kind, qs, ds, _, _, n in conv.joint_map:
            if kind == "scalar":
                dof_coord.update({ds + k: qs + k for k in range(n)})
        self._act_p_coord = np.asarray([dof_coord[d] for d, _ in self._act_p], np.int64)
        self._act_p_id = np.asarray([a for _, a in self._act_p], np.int64)
        self._act_v_dof = np.asarray([d for d, _ in self._act_v], np.int64)
        self._act_v_id = np.asarray([a for _, a in self._act_v], np.int64)
        worlds = conv.worlds
        self._body_local = worlds[0].bodies.astype(np.int64)
        self._body_mj = conv.body_ids[self._body_local] if len(self._body_local) else np.zeros(0, np.int64)
        b0 = int(worlds[0].bodies[0]) if len(worlds[0].bodies) else 0
        self._body_off = np.array([int(w.bodies[0]) - b0 if len(w.bodies) else 0 for w in worlds], np.int64)
        # FREE joints: their joint_f is a world wrench at the child COM -> xfrc_applied of the child
        child = self.model.joint_child.numpy() if self.model.joint_count else np.zeros(0, np.int64)
        self._free_joint_body = []
        for j, kind, qs, ds, mq, md, n in conv.joint_map:
            if kind == "free":
                self._free_joint_body.append((ds, int(conv.body_ids[child[j]])))
        kin = conv.kinematic_dofs
        self._has_kinematic = bool(len(kin))
        converted = sum(n for *_, n in conv.joint_map) * conv.world_count
        self._copy_unconverted = converted < int(self.model.joint_dof_count)

    # --------------------------------------------------------------- contract
    @property
    def supported_observables(self) -> frozenset[str]:
        """``body_qdd`` and ``body_parent_f``; MuJoCo Warp: ``body_qdd`` only."""
        return _observables.supported(self)

    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Step every world once; ``observables``: a container from :meth:`observables`."""
        if self._warp is None and self.use_mujoco_contacts and contacts is not None and not self.disable_contacts:
            self._warn_once("contacts-ignored", "SolverMuJoCo(use_mujoco_contacts=True) detects contacts itself; the "
                                                "contacts passed to step() are ignored")  # fmt: skip
        observed = _observables.begin(self, observables, state_in, state_out, contacts)
        try:
            self._step(state_in, state_out, control, contacts, dt)
        finally:
            self._observe_parent = None
        if observed is not None:
            _observables.finish(self, observed, observables, state_out, control, dt)

    def _step(self, state_in, state_out, control, contacts, dt: float) -> None:
        if self._warp is not None:
            if self._copy_unconverted and state_out is not state_in:
                wp.copy(state_out.joint_q, state_in.joint_q)
                wp.copy(state_out.joint_qd, state_in.joint_qd)
            self._warp.step(self, state_in, state_out, control, contacts, float(dt))
            eval_fk(self.model, state_out.joint_q, state_out.joint_qd, state_out)
            return
        mujoco = self._mujoco
        if self._pairs_of is not self.mj_models:  # per-world models replaced (notify_model_changed)
            self._pairs = list(zip(self.mj_models, self.mj_datas))
            self._pairs_of = self.mj_models
            self._dt = None  # new models carry the converted timestep
            self._ready = False
        dt = float(dt)
        if dt != self._dt:
            for mw in {id(x): x for x in self.mj_models}.values():
                mw.opt.timestep = dt
            self._dt = dt
            self._ready = False
        plan = self._plan(state_in, state_out, control)
        q_in, qd_in = plan[1], plan[2]
        last = self._last_written
        if not (last is not None and last[0] is state_in and last[1] == q_in.tobytes()
                and last[2] == qd_in.tobytes()):  # fmt: skip
            # not the state this solver wrote last (or edited since): restart MuJoCo from it
            qpos, qvel = self.state_map.to_mujoco(q_in, qd_in)
            for w, d in enumerate(self.mj_datas):
                d.qpos[:] = qpos[w]
                d.qvel[:] = qvel[w]
            self._ready = False
        self._apply_inputs(plan)
        if self._step_split:
            # mj_step2 + mj_step1 == mj_step (bit-identical for Euler/implicit/implicitfast), and it
            # leaves each MjData with the forward pass of the new state, read by the writer
            step1, step2 = mujoco.mj_step1, mujoco.mj_step2
            if not self._ready:
                for mw, d in self._pairs:
                    step1(mw, d)
            parent = self.__dict__.get("_observe_parent")  # body_parent_f requested (observables)
            for w, (mw, d) in enumerate(self._pairs):
                step2(mw, d)
                if parent is not None:
                    parent.capture(mujoco, w, mw, d)
                step1(mw, d)
            self._ready = True
            plan[9]()  # MjData -> state_out (joint and body coordinates), and the non-finite guard
            self._last_written = (state_out, plan[7].tobytes(), plan[8].tobytes())
            if self._warn_new[0]:
                self._after_mujoco_reset()
            return
        self._ready = False
        if self.use_mujoco_contacts or self.disable_contacts:
            for mw, d in self._pairs:
                mujoco.mj_step(mw, d)
        else:
            self._step_with_contacts(state_in, contacts)
        parent = self.__dict__.get("_observe_parent")  # body_parent_f requested (observables)
        if parent is not None:
            for w, (mw, d) in enumerate(self._pairs):
                parent.capture(mujoco, w, mw, d)
        if plan[9] is not None and not self._has_kinematic:
            for mw, d in self._pairs:  # positions and velocities of the new state for the writer
                mujoco.mj_kinematics(mw, d)
                mujoco.mj_comPos(mw, d)
                mujoco.mj_comVel(mw, d)
            plan[9]()
            self._last_written = (state_out, plan[7].tobytes(), plan[8].tobytes())
            if self._warn_new[0]:
                self._after_mujoco_reset()
            return
        fired = self._mj_warnings.consume(self.mj_datas, self._warn_indices)
        if fired:
            self._report_warnings(fired, plan)
        if len(self.mj_datas) == 1:
            qpos, qvel = self.mj_data.qpos[None], self.mj_data.qvel[None]
        else:
            qpos = np.stack([d.qpos for d in self.mj_datas])
            qvel = np.stack([d.qvel for d in self.mj_datas])
        q_out = np.array(q_in, dtype=np.float64)
        qd_out = np.array(qd_in, dtype=np.float64)
        self.state_map.from_mujoco(qpos, qvel, q_out, qd_out)
        if self._has_kinematic:
            kin = self._kinematic_all_worlds()
            qd_out[kin] = qd_in[kin]
        q32, qd32 = q_out.astype(np.float32), qd_out.astype(np.float32)
        if self._host_arrays:  # CPU device: write through zero-copy views
            plan[7][:] = q32
            plan[8][:] = qd32
        else:
            state_out.joint_q.assign(q32)
            state_out.joint_qd.assign(qd32)
        self._last_written = (state_out, q32.tobytes(), qd32.tobytes())
        eval_fk(self.model, state_out.joint_q, state_out.joint_qd, state_out)

    # ------------------------------------------------------------ non-finite guard
    def _after_mujoco_reset(self) -> None:
        """MuJoCo reset worlds during the step (``mj_resetData`` cleared ``ctrl`` and the applied
        forces): the next step writes them again."""
        self._warn_new[0] = 0
        self._last_ctrl = None
        self._forces_written = True

    def _report_warnings(self, fired, plan) -> None:
        """Host version of the guard kernel's report (step paths without the writer): flag each
        ``(world, kind, lastinfo)`` MuJoCo warning as our joint coordinate / DOF."""
        from armillary.solvers.step_guard import SLOT_JOINT_COORD, SLOT_JOINT_DOF

        maps = self.__dict__.get("_index_maps")
        if maps is None or maps[0] is not self.conversion:
            maps = self._index_maps = (self.conversion, *mujoco_index_maps(self.conversion, self.mj_model.nq,
                                                                            self.mj_model.nv))  # fmt: skip
        _, qpos_coord, dof_dof = maps
        sm = self.state_map
        flags = self.nonfinite_flags
        values = flags.numpy()
        for w, k, i in fired:
            if k == 2 and not self._world_forces_finite(plan, w):
                continue  # a bad qacc from a non-finite force input: the generic guard flags the input
            if k == 0:
                table, offset, slot = qpos_coord, sm.q_off, SLOT_JOINT_COORD
            else:
                table, offset, slot = dof_dof, sm.d_off, SLOT_JOINT_DOF
            index = (int(table[i]) if 0 <= i < len(table) else 0) + int(offset[w])
            values[slot] = min(int(values[slot]), index)
        if not wp.get_device(flags.device).is_cpu:  # a copy: write it back (only when MuJoCo warned)
            flags.assign(values)
        self._after_mujoco_reset()

    def _world_forces_finite(self, plan, w: int) -> bool:
        """Whether world ``w``'s ``state_in.body_f`` and ``control.joint_f`` entries are finite."""
        sm = self.state_map
        body_f, joint_f = plan[3], plan[4]
        if body_f is not None and len(self._body_local):
            if not np.isfinite(body_f[self._body_local + self._body_off[w]]).all():
                return False
        if joint_f is not None and joint_f.size:
            dofs = np.concatenate([sm.scalar_d, (sm.ball_d[:, None] + np.arange(3)).ravel(),
                                   (sm.free_d[:, None] + np.arange(6)).ravel()])  # fmt: skip
            if not np.isfinite(joint_f[dofs + sm.d_off[w]]).all():
                return False
        return True

    def check_finite(self, state=None) -> None:
        """As :meth:`SolverBase.check_finite`; when MuJoCo reported an instability since the last
        check (and reset the world), the error also says which (warning, world, MuJoCo address)."""
        from armillary.solvers.step_guard import NonFiniteStateError

        warn = self._mj_warnings
        try:
            super().check_finite(state)
        except NonFiniteStateError as exc:
            autoreset = not (int(self.mj_model.opt.disableflags) & int(self._mujoco.mjtDisableBit.mjDSBL_AUTORESET))
            note = warn.describe(autoreset)
            warn.clear()
            if not note:
                raise
            head, sep, tail = str(exc).partition("; check dt")
            raise NonFiniteStateError(f"{head}; {note}{sep}{tail}", solver=exc.solver, kind=exc.kind, index=exc.index,
                                      step=exc.step) from None  # fmt: skip
        if warn.count.any():
            warn.clear()

    def reset_nonfinite(self) -> None:
        super().reset_nonfinite()
        self._mj_warnings.clear()

    def _view(self, arr):
        """Zero-copy numpy view of a host array (cached: ``wp.array.numpy()`` costs microseconds)."""
        views = self._views
        hit = views.get(id(arr))
        if hit is None or hit[0] is not arr:
            if len(views) > 32:
                views.clear()
            hit = views[id(arr)] = (arr, arr.numpy())
        return hit[1]

    def _plan(self, state_in, state_out, control):
        """Host views and the output writer for one ``(state_in, state_out, control)`` triple,
        cached while those objects hold the same arrays: ``(arrays, q_in, qd_in, body_f, joint_f,
        target_q, target_qd, q_out, qd_out, write)`` (views are numpy, ``None`` where absent;
        ``write``: the recorded MjData -> ``state_out`` launch and guard, ``None`` when unsupported)."""
        if control is not None:
            arrays = (state_in, state_in.joint_q, state_in.joint_qd, state_in.body_f, state_out, state_out.joint_q,
                      state_out.joint_qd, state_out.body_q, state_out.body_qd, control, control.joint_f,
                      control.joint_target_q, control.joint_target_qd)  # fmt: skip
        else:
            arrays = (state_in, state_in.joint_q, state_in.joint_qd, state_in.body_f, state_out, state_out.joint_q,
                      state_out.joint_qd, state_out.body_q, state_out.body_qd, None, None, None, None)  # fmt: skip
        key = (id(state_in), id(state_out), id(control))
        plan = self._plans.get(key)
        if plan is not None and plan[0] == arrays:  # identity of every element (the plan holds them)
            return plan
        if len(self._plans) > 8:
            self._plans.clear()
        view = self._view
        model = self.model
        tq = arrays[11] if arrays[11] is not None else model.joint_target_q
        tqd = arrays[12] if arrays[12] is not None else model.joint_target_qd
        empty = np.zeros(0, np.float32)
        plan = self._plans[key] = (
            arrays, view(arrays[1]), view(arrays[2]), None if arrays[3] is None else view(arrays[3]),
            None if arrays[10] is None else view(arrays[10]), empty if tq is None else view(tq),
            empty if tqd is None else view(tqd), view(arrays[5]), view(arrays[6]),
            self._writer.replay_for(state_out, state_in, control, self.nonfinite_flags) if self._writer.supported
            else None,
        )  # fmt: skip
        return plan

    def _worlds_share_parameters(self) -> bool:
        """Whether every world's parameter arrays equal world 0's (one MjModel serves all)."""
        model, conv = self.model, self.conversion
        groups = (
            ("bodies", ("body_mass", "body_com", "body_inertia")),
            ("joints", ()),
            ("shapes", ("shape_material_mu", "shape_material_mu_torsional", "shape_material_mu_rolling",
                        "shape_margin", "shape_gap")),
        )  # fmt: skip
        for attr, names in groups:
            ranges = [getattr(w, attr) for w in conv.worlds]
            for name in names:
                arr = getattr(model, name).numpy()
                ref = arr[ranges[0]]
                if any(not np.array_equal(arr[r], ref) for r in ranges[1:]):
                    return False
        sm = self.state_map
        for name in ("joint_armature", "joint_damping", "joint_friction", "joint_stiffness", "joint_limit_lower",
                     "joint_limit_upper", "joint_target_ke", "joint_target_kd", "joint_effort_limit"):  # fmt: skip
            if not self.model.joint_dof_count:
                break
            arr = getattr(model, name).numpy()
            n = len(arr) // max(len(conv.worlds), 1)
            if len(sm.d_off) > 1 and n and any(not np.array_equal(arr[o:o + n], arr[:n]) for o in sm.d_off[1:]):
                return False
        g = model.gravity.numpy().reshape(-1, 3)[: max(int(model.world_count), 1)]  # world rows (not the global one)
        return bool(np.all(g == g[0]))

    def _kinematic_all_worlds(self):
        kin = self.conversion.kinematic_dofs
        return (self.state_map.d_off[:, None] + kin[None, :]).reshape(-1)

    def _apply_inputs(self, plan) -> None:
        """Controls (drive targets), generalized forces and body wrenches of a step :meth:`_plan`
        into each MjData (written only when they change: ``mj_step`` leaves ``ctrl`` and the
        applied-force arrays as they are)."""
        sm = self.state_map
        W = len(self.mj_datas)
        body_f, joint_f, target_q, target_qd = plan[3], plan[4], plan[5], plan[6]
        if self._act_p_id.size or self._act_v_id.size:
            signature = (target_q.tobytes(), target_qd.tobytes())
            if signature != self._last_ctrl:
                ctrl = np.zeros((W, self.mj_model.nu))
                if self._act_p_id.size:
                    ctrl[:, self._act_p_id] = target_q[sm._idx(self._act_p_coord, sm.q_off)]
                if self._act_v_id.size:
                    ctrl[:, self._act_v_id] = target_qd[sm._idx(self._act_v_dof, sm.d_off)]
                for w, d in enumerate(self.mj_datas):
                    d.ctrl[:] = ctrl[w]
                self._last_ctrl = signature
        has_joint_f = joint_f is not None and joint_f.size and not _all_zero(joint_f)
        has_body_f = body_f is not None and len(self._body_local) and not _all_zero(body_f)
        if self._writer.supported and bool(has_joint_f or has_body_f) != self._force_scan:
            self._force_scan = bool(has_joint_f or has_body_f)  # all-zero forces are finite: the guard skips them
            self._writer.force_scan_np[0] = int(self._force_scan)
        if not (has_joint_f or has_body_f or self._forces_written):
            return  # MuJoCo's applied-force arrays still hold zeros
        self._forces_written = bool(has_joint_f or has_body_f)
        qfrc = np.zeros((W, self.mj_model.nv))
        xfrc = np.zeros((W, self.mj_model.nbody, 6))
        if has_joint_f:
            if len(sm.scalar_d):
                qfrc[:, sm.scalar_md] = joint_f[sm._idx(sm.scalar_d, sm.d_off)]
            if len(sm.ball_d):
                q_in = self._ball_quats()
                f = joint_f[sm._idx(sm.ball_d, sm.d_off)[..., None] + np.arange(3)]
                rc = np.broadcast_to(sm.ball_rc, q_in.shape)
                qfrc[:, (sm.ball_md[:, None] + np.arange(3))] = qrot(rc, qrot(qconj(q_in), f))
            for ds, bid in self._free_joint_body:
                xfrc[:, bid] += joint_f[sm.d_off[:, None] + ds + np.arange(6)[None, :]]
        if has_body_f:
            np.add.at(xfrc, (slice(None), self._body_mj), body_f[sm._idx(self._body_local, self._body_off)])
        for w, d in enumerate(self.mj_datas):
            d.qfrc_applied[:] = qfrc[w]
            d.xfrc_applied[:] = xfrc[w]

    def _ball_quats(self):
        sm = self.state_map
        qpos = np.stack([d.qpos for d in self.mj_datas])
        from .state_map import wxyz_to_xyzw

        qm = wxyz_to_xyzw(qpos[:, (sm.ball_mq[:, None] + np.arange(4))])
        rc = np.broadcast_to(sm.ball_rc, qm.shape)
        return qmul(qmul(qconj(rc), qm), rc)

    def _step_with_contacts(self, state_in, contacts) -> None:
        from .contacts import step_with_injected_contacts

        self._contact_state = state_in
        step_with_injected_contacts(self, contacts)

    def _warn_once(self, key, message):
        seen = self.__dict__.setdefault("_warned", set())
        if key not in seen:
            seen.add(key)
            warnings.warn(message, UserWarning, stacklevel=3)

    def notify_model_changed(self, flags) -> None:
        """Push changed parameters into the compiled model(s) in place (body inertial, joint DOF,
        shape and model properties: masses, inertias, armature, damping, friction, springs, limits,
        drive gains, contact parameters, gravity); the MuJoCo state is kept. Structural changes
        (joint or shape types, anchors, axes, sources, constraints) recompile the model."""
        from .parameters import PUSHABLE, per_world_models

        super().notify_model_changed(flags)
        self._ready = False  # parameters feed mj_step1 (constraint impedances, passive forces)
        value = int(flags)
        structural = value & int(_REBUILD) & ~int(PUSHABLE)
        if value & int(PUSHABLE) and not structural:
            self.mj_models = per_world_models(self, value & int(PUSHABLE))
            self.mj_model = self.mj_models[0]
            if self._warp is not None:
                self._warp.put_parameters(self)
            return
        if value & int(_REBUILD):
            saved = [(d.qpos.copy(), d.qvel.copy()) for d in self.mj_datas]
            self._build()
            for d, (q, v) in zip(self.mj_datas, saved):
                if d.qpos.shape == q.shape and d.qvel.shape == v.shape:
                    d.qpos[:] = q
                    d.qvel[:] = v

    # ------------------------------------------------------------ coupling hooks
    def _mobility(self, endpoint_kind, endpoint_index, endpoint_local_pos):
        """Per endpoint: translational and rotational mobility ``J M^-1 J^T`` (3x3 each, world) at the
        current MuJoCo state (positions refreshed with ``mj_fwdPosition``), and the body rotation."""
        mujoco = self._mujoco
        kinds = np.asarray(endpoint_kind.numpy() if hasattr(endpoint_kind, "numpy") else endpoint_kind, np.int64)
        idx = np.asarray(endpoint_index.numpy() if hasattr(endpoint_index, "numpy") else endpoint_index, np.int64)
        loc = np.asarray(endpoint_local_pos.numpy() if hasattr(endpoint_local_pos, "numpy") else endpoint_local_pos,
                         np.float64).reshape(-1, 3)  # fmt: skip
        conv = self.conversion
        world_of = {}
        for w, lay in enumerate(conv.worlds):
            for k, b in enumerate(lay.bodies):
                world_of[int(b)] = (w, int(conv.worlds[0].bodies[k]))
        refreshed = set()
        out = []
        for e, (kind, b) in enumerate(zip(kinds, idx)):
            if kind != ENDPOINT_BODY:
                raise ValueError(f"SolverMuJoCo: coupling endpoint {e} is not a body (kind {int(kind)}); this solver "
                                 "has no particles")  # fmt: skip
            if int(b) not in world_of:
                raise ValueError(f"SolverMuJoCo: coupling endpoint {e}: body {int(b)} is not simulated by this solver")
            w, b0 = world_of[int(b)]
            m, d = self.mj_models[w], self.mj_datas[w]
            if w not in refreshed:
                mujoco.mj_fwdPosition(m, d)
                refreshed.add(w)
            mid = int(conv.body_ids[b0])
            R = d.xmat[mid].reshape(3, 3)  # body frame (ximat is the principal-axes frame)
            point = d.xipos[mid] + R @ loc[e]
            jacp = np.zeros((3, m.nv))
            jacr = np.zeros((3, m.nv))
            mujoco.mj_jac(m, d, jacp, jacr, point, mid)
            J = np.vstack([jacp, jacr])
            Minv_Jt = np.zeros((6, m.nv))  # rows: M^-1 J^T columns
            mujoco.mj_solveM(m, d, Minv_Jt, J)
            A = J @ Minv_Jt.T
            out.append((A[:3, :3], A[3:, 3:], R))
        return out

    def coupling_eval_effective_mass(self, endpoint_kind, endpoint_index, endpoint_local_pos, out) -> None:
        """Effective mass [kg] of body endpoints from MuJoCo's joint-space inertia: with the point
        mobility ``A = J M^-1 J^T`` (3x3, includes armature and every joint), ``3 / trace(A)`` (the
        harmonic mean over the three axes; a free body at its COM gives its mass; a fully locked
        point gives 1e30). Reads the current MuJoCo state."""
        vals = []
        for A_t, _, _ in self._mobility(endpoint_kind, endpoint_index, endpoint_local_pos):
            tr = float(np.trace(A_t))
            vals.append(3.0 / tr if tr > 1e-30 else 1.0e30)
        out.assign(np.asarray(vals, np.float32))

    def coupling_eval_effective_mass_block(self, endpoint_kind, endpoint_index, endpoint_local_pos, out_mass,
                                           out_inertia=None) -> None:  # fmt: skip
        """Effective mass (as :meth:`coupling_eval_effective_mass`) and effective inertia [kg m^2]:
        the inverse of the rotational mobility ``J_r M^-1 J_r^T``, in the body frame (locked axes get
        1e30). Joints only add inertia, so it is never below the body's own inertia."""
        masses, inertias = [], []
        for A_t, A_r, R in self._mobility(endpoint_kind, endpoint_index, endpoint_local_pos):
            tr = float(np.trace(A_t))
            masses.append(3.0 / tr if tr > 1e-30 else 1.0e30)
            vals, vecs = np.linalg.eigh(0.5 * (A_r + A_r.T))
            inv = np.where(vals > 1e-30, 1.0 / np.maximum(vals, 1e-30), 1.0e30)
            I_W = (vecs * inv) @ vecs.T
            inertias.append(R.T @ I_W @ R)
        out_mass.assign(np.asarray(masses, np.float32))
        if out_inertia is not None:
            out_inertia.assign(np.asarray(inertias, np.float32))

    def reset_mujoco_state(self, state, *, qpos=None, qvel=None) -> None:
        """Reset every world's ``MjData`` (``mj_resetData``) to ``state``, or to the float64 MuJoCo
        vectors ``qpos`` / ``qvel`` (shape ``(nq,)`` / ``(nv,)`` or per world ``(W, nq)`` / ``(W, nv)``),
        in which case ``state`` must already hold the same configuration (for its float32 copy):
        the next ``step(state, ...)`` then starts from the exact double-precision values."""
        mujoco = self._mujoco
        if qpos is None or qvel is None:
            qpos, qvel = self.state_map.to_mujoco(state.joint_q.numpy(), state.joint_qd.numpy())
        qpos = np.broadcast_to(np.asarray(qpos, np.float64), (len(self.mj_datas), self.mj_model.nq))
        qvel = np.broadcast_to(np.asarray(qvel, np.float64), (len(self.mj_datas), self.mj_model.nv))
        for w, d in enumerate(self.mj_datas):
            mujoco.mj_resetData(self.mj_models[w], d)
            d.qpos[:] = qpos[w]
            d.qvel[:] = qvel[w]
        self._last_ctrl = None  # mj_resetData cleared ctrl and the applied forces
        self._forces_written = False
        self._ready = False
        self._last_written = (state, state.joint_q.numpy().tobytes(), state.joint_qd.numpy().tobytes())

    def reset(self, state, world_mask=None, flags=None) -> None:
        super().reset(state, world_mask=world_mask, flags=flags)
        self._last_written = None
        self._ready = False
        for d in self.mj_datas:
            d.qacc_warmstart[:] = 0.0
