"""Host-side model construction: :class:`ModelBuilder`.

The builder accumulates bodies, joints, articulations and shapes in Python
lists (one entry per entity, per joint DOF or per joint coordinate) and turns
them into device arrays in :meth:`ModelBuilder.finalize`.

This module holds bodies, joints, articulations and mimic relations; shapes
live in :mod:`.builder_shapes`, worlds and builder merging in
:mod:`.builder_worlds`, and finalization in :mod:`.finalize`.

Frames and units: ``body_q`` entries are world transforms of body frames
(position [m], quaternion xyzw); ``body_com`` is the center of mass in the body
frame [m]; ``body_inertia`` is the inertia about the COM in body axes [kg*m^2];
``joint_X_p`` / ``joint_X_c`` are the joint anchor frames in the parent / child
body frames.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from ._convert import check_index, to_float, to_mat33, to_transform, to_vec3
from .builder_shapes import ShapeBuilderMixin
from .builder_worlds import WorldBuilderMixin
from .enums import Axis, BodyFlags, JointTargetMode, JointType
from .joint_config import JointDofConfig
from .shape_config import ShapeConfig

from .builder_actuators import ActuatorBuilderMixin
from .builder_particles import ParticleBuilderMixin
from .builder_rods import RodBuilderMixin
from .custom_attributes import CustomAttribute, CustomAttributesMixin, CustomFrequency
from .exceptions import warn_deprecated

_ZERO_TWIST = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
_MIMIC_TYPES = (JointType.PRISMATIC, JointType.REVOLUTE, JointType.D6)


def _joint_layout(joint_type: JointType, n_lin: int, n_ang: int) -> tuple[int, int]:
    """(coordinate count, DOF count) of a joint."""
    if joint_type in (JointType.FREE, JointType.DISTANCE, JointType.ROD):
        return 7, 6
    if joint_type == JointType.BALL:
        return 4, 3
    return n_lin + n_ang, n_lin + n_ang


class ModelBuilder(ShapeBuilderMixin, WorldBuilderMixin, CustomAttributesMixin, ParticleBuilderMixin, RodBuilderMixin,
                   ActuatorBuilderMixin):
    """Builds a :class:`~armillary.Model` from bodies, joints, articulations and shapes.

    Args:
        up_axis: the world up axis (``Axis``, ``0..2`` or ``"x"/"y"/"z"``).
        gravity: gravity vector [m/s^2] of the global world and of worlds that set none;
            ``None`` means ``-9.81`` along ``up_axis``.
            A scalar is accepted (deprecated) as the signed magnitude along ``up_axis``.
    """

    JointDofConfig = JointDofConfig
    ShapeConfig = ShapeConfig
    if CustomAttribute is not None:
        CustomAttribute = CustomAttribute
        CustomFrequency = CustomFrequency

    def __init__(self, up_axis=Axis.Z, gravity=None, sdf_texture_paired_samples: bool = True):
        self.up_axis = Axis.from_any(up_axis)
        self._gravity = self._coerce_gravity(gravity)
        self.sdf_texture_paired_samples = bool(sdf_texture_paired_samples)

        # defaults
        self.default_shape_cfg = ShapeConfig()
        self.default_joint_cfg = JointDofConfig()
        self.rigid_gap = 0.1
        self.balance_inertia = True
        self.bound_mass = None
        self.bound_inertia = None
        # (feature, source) notes of authored values that need a solver feature (see note_authored_feature)
        self.authored_features: list[tuple[str, str]] = []

        # bodies
        self.body_q: list = []
        self.body_qd: list = []
        self.body_com: list = []
        self.body_mass: list[float] = []
        self.body_inertia: list = []
        self.body_label: list[str] = []
        self.body_world: list[int] = []
        self.body_flags: list[int] = []
        self.body_lock_inertia: list[bool] = []
        self.body_shapes: dict[int, list[int]] = {-1: []}

        # joints (per joint)
        self.joint_type: list[int] = []
        self.joint_parent: list[int] = []
        self.joint_child: list[int] = []
        self.joint_X_p: list = []
        self.joint_X_c: list = []
        self.joint_label: list[str] = []
        self.joint_world: list[int] = []
        self.joint_enabled: list[bool] = []
        self.joint_articulation: list[int] = []
        self.joint_q_start: list[int] = []
        self.joint_qd_start: list[int] = []
        self.joint_dof_dim: list[tuple[int, int]] = []
        self.joint_collision_filter_parent: list[bool] = []
        self.joint_mimic_joint: list[int] = []
        self.joint_mimic_coeffs: list[tuple[float, float]] = []
        self.joint_parents: dict[int, list[int]] = {}
        self.joint_children: dict[int, list[int]] = {}
        self._body_joints: dict[int, list[int]] = {}
        # joints (per coordinate)
        self.joint_q: list[float] = []
        self.joint_target_q: list[float] = []
        self.joint_rest_q: list[float] = []
        # joints (per DOF)
        self.joint_qd: list[float] = []
        self.joint_f: list[float] = []
        self.joint_act: list[float] = []
        self.joint_axis: list = []
        self.joint_limit_lower: list[float] = []
        self.joint_limit_upper: list[float] = []
        self.joint_limit_ke: list[float] = []
        self.joint_limit_kd: list[float] = []
        self.joint_target_qd: list[float] = []
        self.joint_target_ke: list[float] = []
        self.joint_target_kd: list[float] = []
        self.joint_target_mode: list[int] = []
        self.joint_armature: list[float] = []
        self.joint_friction: list[float] = []
        self.joint_effort_limit: list[float] = []
        self.joint_velocity_limit: list[float] = []
        self.joint_stiffness: list[float] = []
        self.joint_damping: list[float] = []
        self.joint_dof_count = 0
        self.joint_coord_count = 0

        # articulations
        self.articulation_start: list[int] = []
        self.articulation_end: list[int] = []
        self.articulation_label: list[str] = []
        self.articulation_world: list[int] = []

        self._init_shapes()
        self._init_worlds()
        self._init_custom_attributes()
        self._init_particles()
        self._init_rods()
        self._init_actuators()

    def note_authored_feature(self, feature: str, source: str) -> None:
        """Record that an imported value needs solver feature ``feature`` to take effect.

        ``feature`` is a key of :data:`armillary.solvers.capabilities.FEATURES` (e.g.
        ``"joint_friction"``), ``source`` says where the value was authored (``"</robot/elbow>
        newton:friction"``). Finalize copies the notes to ``Model.authored_features``; a solver
        whose capabilities lack the feature warns once per feature, naming the sources.
        """
        from ..solvers.capabilities import FEATURES

        if feature not in FEATURES:
            raise ValueError(f"note_authored_feature: unknown feature {feature!r}; allowed: {', '.join(sorted(FEATURES))}")
        note = (feature, str(source))
        if note not in self.authored_features:
            self.authored_features.append(note)

    # ------------------------------------------------------------------ gravity
    def _coerce_gravity(self, gravity) -> tuple[float, float, float]:
        up = np.asarray(self.up_axis.to_vector())
        if gravity is None:
            return tuple(float(v) for v in -9.81 * up)
        if np.ndim(gravity) == 0:
            g = to_float(gravity, "ModelBuilder gravity")
            warn_deprecated("Passing a scalar gravity to ModelBuilder is deprecated; pass a 3-vector instead.")
            return tuple(float(v) for v in g * up)
        return tuple(float(v) for v in to_vec3(gravity, "ModelBuilder gravity"))

    @property
    def gravity(self) -> tuple[float, float, float]:
        """Gravity vector [m/s^2] of the global world (-1) and of the worlds that do not set their
        own (``begin_world(gravity=...)``); see ``Model.gravity``."""
        return self._gravity

    @gravity.setter
    def gravity(self, value):
        self._gravity = self._coerce_gravity(value)

    @property
    def up_vector(self) -> tuple[float, float, float]:
        return self.up_axis.to_vector()

    # ------------------------------------------------------------------ counts
    @property
    def body_count(self) -> int:
        return len(self.body_q)

    @property
    def joint_count(self) -> int:
        return len(self.joint_type)

    @property
    def articulation_count(self) -> int:
        return len(self.articulation_start)

    # ------------------------------------------------------------------ bodies
    def add_link(
        self,
        *,
        xform=None,
        com=None,
        inertia=None,
        mass: float = 0.0,
        label: str | None = None,
        lock_inertia: bool = False,
        is_kinematic: bool = False,
        custom_attributes: dict | None = None,
    ) -> int:
        """Add a rigid body (link) without a joint; returns its index.

        Args:
            xform: initial world transform of the body frame.
            com: center of mass in the body frame [m].
            inertia: 3x3 inertia about the COM in body axes [kg*m^2] (symmetric PSD).
            mass: body mass [kg] (``>= 0``); shapes added later add their own mass.
            lock_inertia: when ``True`` shapes added later do not change mass, COM or inertia.
            is_kinematic: prescribed-motion body; only allowed for articulation roots.
        """
        idx = self.body_count
        what = f"body {idx} ('{label}')" if label else f"body {idx}"
        tf = to_transform(xform, f"{what}: xform")
        m = to_float(mass, f"{what}: mass", minimum=0.0)
        c = to_vec3(com, f"{what}: com")
        inertia_m = to_mat33(inertia, f"{what}: inertia")
        self._check_custom_attributes("body", custom_attributes)
        self.body_q.append(tf)
        self.body_qd.append(_ZERO_TWIST)
        self.body_com.append(c)
        self.body_mass.append(m)
        self.body_inertia.append(inertia_m)
        self.body_label.append(label if label is not None else f"body_{idx}")
        self.body_world.append(self.current_world)
        self.body_flags.append(int(BodyFlags.KINEMATIC if is_kinematic else BodyFlags.DYNAMIC))
        self.body_lock_inertia.append(bool(lock_inertia))
        self.body_shapes[idx] = []
        self._assign_custom_attributes("body", idx, custom_attributes)
        return idx

    def add_body(
        self,
        *,
        xform=None,
        com=None,
        inertia=None,
        mass: float = 0.0,
        label: str | None = None,
        lock_inertia: bool = False,
        is_kinematic: bool = False,
        custom_attributes: dict | None = None,
    ) -> int:
        """Add a free-floating body: a link, a FREE joint to the world and an articulation.

        Returns the body index. The joint is labeled ``"{label}_free_joint"`` and the
        articulation ``"{label}_articulation"`` when ``label`` is given.
        """
        body = self.add_link(
            xform=xform,
            com=com,
            inertia=inertia,
            mass=mass,
            label=label,
            lock_inertia=lock_inertia,
            is_kinematic=is_kinematic,
            custom_attributes=custom_attributes,
        )
        joint = self.add_joint_free(body, label=f"{label}_free_joint" if label else None)
        self.add_articulation([joint], label=f"{label}_articulation" if label else None)
        return body

    # ------------------------------------------------------------------ joints
    def add_joint(
        self,
        joint_type,
        parent: int,
        child: int,
        *,
        linear_axes=None,
        angular_axes=None,
        label: str | None = None,
        parent_xform=None,
        child_xform=None,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
    ) -> int:
        """Add a joint of any type; returns its index.

        Args:
            joint_type: a :class:`JointType`.
            parent: parent body index or ``-1`` for the world.
            child: child body index.
            linear_axes, angular_axes: lists of :class:`JointDofConfig` (linear DOFs first in the
                DOF layout). FREE/DISTANCE joints take 3 + 3 axes, BALL 3 angular, FIXED none,
                PRISMATIC one linear, REVOLUTE one angular, D6 up to 3 + 3.
            parent_xform, child_xform: joint anchor frames in the parent / child body frames.
            collision_filter_parent: filter collisions between the shapes of parent and child;
                defaults to ``True`` when the parent is a body.
            enabled: whether solvers enforce the joint.
        """
        idx = self.joint_count
        what = f"joint {idx} ('{label}')" if label else f"joint {idx}"
        try:
            jt = JointType(int(joint_type))
        except (TypeError, ValueError):
            raise ValueError(
                f"{what}: joint_type={joint_type!r} is not a JointType; allowed: {[t.name for t in JointType]}"
            ) from None
        parent = check_index(parent, self.body_count, f"{what}: parent body", allow_world=True)
        child = check_index(child, self.body_count, f"{what}: child body")
        if parent == child:
            raise ValueError(f"{what}: parent and child are the same body {child}; a joint must connect two different bodies")
        lin = list(linear_axes or [])
        ang = list(angular_axes or [])
        for i, cfg in enumerate(lin + ang):
            if not isinstance(cfg, JointDofConfig):
                raise ValueError(f"{what}: axis {i} must be a ModelBuilder.JointDofConfig, got {type(cfg).__name__}")
        expected = {
            JointType.PRISMATIC: ((1,), (0,)),
            JointType.REVOLUTE: ((0,), (1,)),
            JointType.BALL: ((0,), (3,)),
            JointType.FIXED: ((0,), (0,)),
            JointType.FREE: ((3,), (3,)),
            JointType.DISTANCE: ((3,), (3,)),
            JointType.ROD: ((3,), (3,)),
            JointType.D6: ((0, 1, 2, 3), (0, 1, 2, 3)),
        }[jt]
        if len(lin) not in expected[0] or len(ang) not in expected[1]:
            raise ValueError(
                f"{what}: a {jt.name} joint takes {expected[0]} linear and {expected[1]} angular axes, "
                f"got {len(lin)} linear and {len(ang)} angular"
            )
        for i, cfg in enumerate(lin + ang):
            cfg.validate(f"{what} axis {i}", check_order=jt != JointType.DISTANCE)
        x_p = to_transform(parent_xform, f"{what}: parent_xform")
        x_c = to_transform(child_xform, f"{what}: child_xform")
        n_coord, n_dof = _joint_layout(jt, len(lin), len(ang))
        if collision_filter_parent is None:
            collision_filter_parent = parent >= 0
        self._check_custom_attributes("joint", custom_attributes, dof_count=n_dof, coord_count=n_coord)

        # --- commit (all validation above) ---
        self.joint_type.append(int(jt))
        self.joint_parent.append(parent)
        self.joint_child.append(child)
        self.joint_X_p.append(x_p)
        self.joint_X_c.append(x_c)
        self.joint_label.append(label if label is not None else f"joint_{idx + 1}")
        self.joint_world.append(self.current_world)
        self.joint_enabled.append(bool(enabled))
        self.joint_articulation.append(-1)
        self.joint_q_start.append(self.joint_coord_count)
        self.joint_qd_start.append(self.joint_dof_count)
        self.joint_dof_dim.append((len(lin), len(ang)) if jt != JointType.BALL else (0, 3))
        self.joint_collision_filter_parent.append(bool(collision_filter_parent))
        self.joint_mimic_joint.append(-1)
        self.joint_mimic_coeffs.append((0.0, 1.0))
        self.joint_parents.setdefault(child, []).append(parent)
        self.joint_children.setdefault(parent, []).append(child)
        self._body_joints.setdefault(child, []).append(idx)
        if parent >= 0:
            self._body_joints.setdefault(parent, []).append(idx)

        cfgs = lin + ang
        for cfg in cfgs:
            self.joint_axis.append(cfg.axis)
            self.joint_qd.append(0.0)
            self.joint_f.append(0.0)
            self.joint_act.append(0.0)
            self.joint_limit_lower.append(cfg.limit_lower)
            self.joint_limit_upper.append(cfg.limit_upper)
            self.joint_limit_ke.append(cfg.limit_ke)
            self.joint_limit_kd.append(cfg.limit_kd)
            self.joint_target_qd.append(cfg.target_qd)
            self.joint_target_ke.append(cfg.target_ke)
            self.joint_target_kd.append(cfg.target_kd)
            self.joint_target_mode.append(int(cfg.actuator_mode) if cfg.actuator_mode is not None else int(JointTargetMode.NONE))
            self.joint_armature.append(cfg.armature)
            self.joint_friction.append(cfg.friction)
            self.joint_effort_limit.append(cfg.effort_limit)
            self.joint_velocity_limit.append(cfg.velocity_limit)
            self.joint_stiffness.append(cfg.stiffness)
            self.joint_damping.append(cfg.damping)

        if jt in (JointType.FREE, JointType.DISTANCE, JointType.ROD):
            q = self._relative_pose(parent, child, x_p, x_c)
            self.joint_q.extend(q)
            self.joint_target_q.extend(q)
            self.joint_rest_q.extend((0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0))
        elif jt == JointType.BALL:
            self.joint_q.extend((0.0, 0.0, 0.0, 1.0))
            self.joint_target_q.extend((0.0, 0.0, 0.0, 1.0))
            self.joint_rest_q.extend((0.0, 0.0, 0.0, 1.0))
        else:
            for cfg in cfgs:
                self.joint_q.append(0.0)
                self.joint_target_q.append(cfg.target_q)
                self.joint_rest_q.append(0.0 if cfg.rest_q is None else cfg.rest_q)
        self.joint_coord_count += n_coord
        self.joint_dof_count += n_dof

        if collision_filter_parent and parent >= 0:
            self._filter_joint_shapes(parent, child)
        self._assign_custom_attributes("joint", idx, custom_attributes)
        return idx

    def _relative_pose(self, parent: int, child: int, x_p, x_c) -> list[float]:
        """Joint coordinates ``(p, q)`` reproducing the current child pose: ``(X_wp X_p)^-1 X_wc X_c``."""
        x_wc = self.body_q[child]
        x_wp = self.body_q[parent] if parent >= 0 else wp.transform_identity()
        x = wp.transform_multiply(wp.transform_inverse(wp.transform_multiply(x_wp, x_p)), wp.transform_multiply(x_wc, x_c))
        return [float(v) for v in x]

    def _dof_cfg(self, axis, overrides: dict, what: str) -> JointDofConfig:
        """A copy of ``axis`` (when it is a JointDofConfig) or of the default config with ``overrides``."""
        if isinstance(axis, JointDofConfig):
            cfg = JointDofConfig.__new__(JointDofConfig)
            cfg.__dict__.update(axis.__dict__)
        else:
            cfg = JointDofConfig.__new__(JointDofConfig)
            cfg.__dict__.update(self.default_joint_cfg.__dict__)
            if axis is not None:
                from .joint_config import normalize_axis

                cfg.axis = normalize_axis(axis, f"{what}: axis")
        for k, v in overrides.items():
            if v is None:
                continue
            if k == "actuator_mode":
                cfg.actuator_mode = v
            elif k == "rest_q":
                cfg.rest_q = to_float(v, f"{what}: rest_q")
            else:
                setattr(cfg, k, to_float(v, f"{what}: {k}", allow_inf=True))
        return cfg

    @staticmethod
    def _pop_deprecated_targets(kw: dict, target_q, target_qd, target_pos, target_vel):
        if target_pos is not None:
            warn_deprecated("target_pos is deprecated; use target_q instead.")
            if target_q is None:
                target_q = target_pos
        if target_vel is not None:
            warn_deprecated("target_vel is deprecated; use target_qd instead.")
            if target_qd is None:
                target_qd = target_vel
        if kw:
            raise TypeError(f"unexpected keyword arguments: {sorted(kw)}")
        return target_q, target_qd

    def _add_scalar_joint(self, jt, parent, child, axis, *, parent_xform, child_xform, label,
                          collision_filter_parent, enabled, custom_attributes, **values) -> int:  # fmt: skip
        what = f"joint {self.joint_count} ('{label}')" if label else f"joint {self.joint_count}"
        cfg = self._dof_cfg(axis, values, what)
        lin, ang = ([cfg], []) if jt == JointType.PRISMATIC else ([], [cfg])
        return self.add_joint(
            jt,
            parent,
            child,
            linear_axes=lin,
            angular_axes=ang,
            label=label,
            parent_xform=parent_xform,
            child_xform=child_xform,
            collision_filter_parent=collision_filter_parent,
            enabled=enabled,
            custom_attributes=custom_attributes,
        )

    def add_joint_revolute(
        self,
        parent: int,
        child: int,
        *,
        parent_xform=None,
        child_xform=None,
        axis=None,
        target_q: float | None = None,
        target_qd: float | None = None,
        target_ke: float | None = None,
        target_kd: float | None = None,
        damping: float | None = None,
        stiffness: float | None = None,
        rest_q: float | None = None,
        limit_lower: float | None = None,
        limit_upper: float | None = None,
        limit_ke: float | None = None,
        limit_kd: float | None = None,
        armature: float | None = None,
        effort_limit: float | None = None,
        velocity_limit: float | None = None,
        friction: float | None = None,
        actuator_mode=None,
        target_pos: float | None = None,
        target_vel: float | None = None,
        label: str | None = None,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
        **kwargs,
    ) -> int:
        """Add a one-DOF hinge about ``axis`` (joint frame; default X); angles in rad."""
        target_q, target_qd = self._pop_deprecated_targets(kwargs, target_q, target_qd, target_pos, target_vel)
        return self._add_scalar_joint(
            JointType.REVOLUTE, parent, child, axis, parent_xform=parent_xform, child_xform=child_xform, label=label,
            collision_filter_parent=collision_filter_parent, enabled=enabled, custom_attributes=custom_attributes,
            target_q=target_q, target_qd=target_qd, target_ke=target_ke, target_kd=target_kd, damping=damping,
            stiffness=stiffness, rest_q=rest_q, limit_lower=limit_lower, limit_upper=limit_upper, limit_ke=limit_ke,
            limit_kd=limit_kd, armature=armature, effort_limit=effort_limit, velocity_limit=velocity_limit,
            friction=friction, actuator_mode=actuator_mode,
        )  # fmt: skip

    def add_joint_prismatic(
        self,
        parent: int,
        child: int,
        *,
        parent_xform=None,
        child_xform=None,
        axis=Axis.X,
        target_q: float | None = None,
        target_qd: float | None = None,
        target_ke: float | None = None,
        target_kd: float | None = None,
        damping: float | None = None,
        stiffness: float | None = None,
        rest_q: float | None = None,
        limit_lower: float | None = None,
        limit_upper: float | None = None,
        limit_ke: float | None = None,
        limit_kd: float | None = None,
        armature: float | None = None,
        effort_limit: float | None = None,
        velocity_limit: float | None = None,
        friction: float | None = None,
        actuator_mode=None,
        target_pos: float | None = None,
        target_vel: float | None = None,
        label: str | None = None,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
        **kwargs,
    ) -> int:
        """Add a one-DOF slider along ``axis`` (joint frame); positions in m."""
        target_q, target_qd = self._pop_deprecated_targets(kwargs, target_q, target_qd, target_pos, target_vel)
        return self._add_scalar_joint(
            JointType.PRISMATIC, parent, child, axis, parent_xform=parent_xform, child_xform=child_xform, label=label,
            collision_filter_parent=collision_filter_parent, enabled=enabled, custom_attributes=custom_attributes,
            target_q=target_q, target_qd=target_qd, target_ke=target_ke, target_kd=target_kd, damping=damping,
            stiffness=stiffness, rest_q=rest_q, limit_lower=limit_lower, limit_upper=limit_upper, limit_ke=limit_ke,
            limit_kd=limit_kd, armature=armature, effort_limit=effort_limit, velocity_limit=velocity_limit,
            friction=friction, actuator_mode=actuator_mode,
        )  # fmt: skip

    def add_joint_ball(
        self,
        parent: int,
        child: int,
        *,
        parent_xform=None,
        child_xform=None,
        armature: float | None = None,
        friction: float | None = None,
        damping: float | None = None,
        stiffness: float | None = None,
        actuator_mode=None,
        label: str | None = None,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
    ) -> int:
        """Add a spherical joint: 4 coordinates (quaternion xyzw), 3 angular DOFs."""
        what = f"joint {self.joint_count}"
        vals = dict(armature=armature, friction=friction, damping=damping, stiffness=stiffness, actuator_mode=actuator_mode)
        axes = [self._dof_cfg(a, vals, what) for a in (Axis.X, Axis.Y, Axis.Z)]
        return self.add_joint(
            JointType.BALL, parent, child, angular_axes=axes, label=label, parent_xform=parent_xform,
            child_xform=child_xform, collision_filter_parent=collision_filter_parent, enabled=enabled,
            custom_attributes=custom_attributes,
        )  # fmt: skip

    def add_joint_fixed(
        self,
        parent: int,
        child: int,
        *,
        parent_xform=None,
        child_xform=None,
        label: str | None = None,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
    ) -> int:
        """Add a weld without DOFs."""
        return self.add_joint(
            JointType.FIXED, parent, child, label=label, parent_xform=parent_xform, child_xform=child_xform,
            collision_filter_parent=collision_filter_parent, enabled=enabled, custom_attributes=custom_attributes,
        )  # fmt: skip

    @staticmethod
    def _free_axes() -> tuple[list, list]:
        lin = [JointDofConfig.create_unlimited(a) for a in (Axis.X, Axis.Y, Axis.Z)]
        ang = [JointDofConfig.create_unlimited(a) for a in (Axis.X, Axis.Y, Axis.Z)]
        return lin, ang

    def add_joint_free(
        self,
        child: int,
        *,
        parent_xform=None,
        child_xform=None,
        parent: int = -1,
        label: str | None = None,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
    ) -> int:
        """Add a 6-DOF floating joint; its coordinates start at the child's current pose."""
        lin, ang = self._free_axes()
        return self.add_joint(
            JointType.FREE, parent, child, linear_axes=lin, angular_axes=ang, label=label, parent_xform=parent_xform,
            child_xform=child_xform, collision_filter_parent=collision_filter_parent, enabled=enabled,
            custom_attributes=custom_attributes,
        )  # fmt: skip

    def add_joint_distance(
        self,
        parent: int,
        child: int,
        *,
        parent_xform=None,
        child_xform=None,
        min_distance: float = -1.0,
        max_distance: float = 1.0,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
        label: str | None = None,
    ) -> int:
        """Add a distance joint keeping the anchors within ``[min_distance, max_distance]`` [m]
        (negative bounds disable that side)."""
        what = f"joint {self.joint_count}"
        lo = to_float(min_distance, f"{what}: min_distance")
        hi = to_float(max_distance, f"{what}: max_distance")
        if lo >= 0.0 and hi >= 0.0 and lo > hi:
            raise ValueError(f"{what}: min_distance={lo} is greater than max_distance={hi}")
        lin, ang = self._free_axes()
        lin[0] = JointDofConfig(axis=Axis.X)
        lin[0].limit_lower, lin[0].limit_upper = lo, hi
        return self.add_joint(
            JointType.DISTANCE, parent, child, linear_axes=lin, angular_axes=ang, label=label,
            parent_xform=parent_xform, child_xform=child_xform, collision_filter_parent=collision_filter_parent,
            enabled=enabled, custom_attributes=custom_attributes,
        )  # fmt: skip

    def add_joint_d6(
        self,
        parent: int,
        child: int,
        *,
        linear_axes=None,
        angular_axes=None,
        label: str | None = None,
        parent_xform=None,
        child_xform=None,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
        **kwargs,
    ) -> int:
        """Add a generic joint with up to 3 linear and 3 angular DOFs (linear first)."""
        if kwargs:
            raise TypeError(f"add_joint_d6() got unexpected keyword arguments: {sorted(kwargs)}")

        def conv(axes):
            return [a if isinstance(a, JointDofConfig) else self._dof_cfg(a, {}, f"joint {self.joint_count}") for a in (axes or [])]

        return self.add_joint(
            JointType.D6, parent, child, linear_axes=conv(linear_axes), angular_axes=conv(angular_axes), label=label,
            parent_xform=parent_xform, child_xform=child_xform, collision_filter_parent=collision_filter_parent,
            enabled=enabled, custom_attributes=custom_attributes,
        )  # fmt: skip

    # ------------------------------------------------------------------ articulations
    def _joint_name(self, j: int) -> str:
        return f"Joint {j} ('{self.joint_label[j]}')"

    def add_articulation(self, joints, label: str | None = None, custom_attributes: dict | None = None) -> int:
        """Group joints into an articulation (a kinematic tree); returns its index.

        The joints must be a contiguous index range not yet in an articulation, each
        child body may appear once, and only root links (joint parent -1) may be kinematic.
        """
        idx = self.articulation_count
        joints = [check_index(j, self.joint_count, f"articulation {idx}: joint index") for j in (joints or [])]
        if not joints:
            raise ValueError(f"articulation {idx}: cannot create an articulation with no joints")
        js = sorted(set(joints))
        if len(js) != len(joints):
            raise ValueError(f"articulation {idx}: joint list {joints} contains duplicates")
        for j in js:
            a = self.joint_articulation[j]
            if a >= 0:
                raise ValueError(
                    f"{self._joint_name(j)} already belongs to articulation {a} ('{self.articulation_label[a]}'). "
                    "Each joint can only belong to one articulation."
                )
        for a, b in zip(js[:-1], js[1:]):
            if b != a + 1:
                raise ValueError(
                    f"articulation {idx}: joints must be contiguous. Got indices {js}, but there is a gap between {a} and {b}. "
                    "Create all joints for an articulation before creating joints for another articulation."
                )
        seen: dict[int, int] = {}
        for j in js:
            child, parent = self.joint_child[j], self.joint_parent[j]
            if child in seen:
                raise ValueError(
                    f"{self._joint_name(j)}: body {child} ('{self.body_label[child]}') is already the child of "
                    f"{self._joint_name(seen[child])} in this articulation; an articulation must be a tree"
                )
            seen[child] = j
            if self.body_flags[child] & BodyFlags.KINEMATIC and parent != -1:
                raise ValueError(
                    f"Body {child} ('{self.body_label[child]}') is kinematic but is attached to parent body {parent} "
                    f"('{self.body_label[parent]}') by {self._joint_name(j)}. Only root bodies (whose joint parent is "
                    "the world) can be kinematic."
                )
        self._check_custom_attributes("articulation", custom_attributes)
        for j in js:
            self.joint_articulation[j] = idx
        self.articulation_start.append(js[0])
        self.articulation_end.append(js[-1] + 1)
        self.articulation_label.append(label if label is not None else f"articulation_{idx}")
        self.articulation_world.append(self.current_world)
        self._assign_custom_attributes("articulation", idx, custom_attributes)
        return idx

    # ------------------------------------------------------------------ mimic
    def set_joint_mimic(self, joint: int, reference_joint: int | None, *, coeffs=(0.0, 1.0)) -> None:
        """Make ``joint`` follow ``reference_joint``: ``q = coeffs[0] + coeffs[1] * q_ref`` per coordinate.

        ``reference_joint=None`` makes the joint independent again. Both joints must be
        PRISMATIC, REVOLUTE or D6 with equal coordinate and DOF counts; chains are rejected.
        """
        joint = check_index(joint, self.joint_count, "set_joint_mimic: joint")
        if reference_joint is None or reference_joint == -1:
            self.joint_mimic_joint[joint] = -1
            self.joint_mimic_coeffs[joint] = (0.0, 1.0)
            return
        ref = check_index(reference_joint, self.joint_count, "set_joint_mimic: reference_joint")
        try:
            c0, c1 = (float(c) for c in coeffs)
        except (TypeError, ValueError):
            raise ValueError(f"set_joint_mimic: coeffs={coeffs!r} must be a pair (offset, multiplier) of numbers") from None
        if not (math.isfinite(c0) and math.isfinite(c1)):
            raise ValueError(f"set_joint_mimic: coeffs=({c0}, {c1}) must be finite")
        if joint == ref:
            raise ValueError(f"set_joint_mimic: joint {joint} cannot mimic itself")
        tj, tr = JointType(self.joint_type[joint]), JointType(self.joint_type[ref])
        if tj not in _MIMIC_TYPES or tr not in _MIMIC_TYPES:
            raise ValueError(
                "Mimic followers and references only support PRISMATIC, REVOLUTE, D6 joints. "
                f"Follower joint {joint} has type {tj.name}; reference joint {ref} has type {tr.name}."
            )
        if self.joint_dof_dim[joint] != self.joint_dof_dim[ref] and sum(self.joint_dof_dim[joint]) != sum(
            self.joint_dof_dim[ref]
        ):
            raise ValueError(
                f"set_joint_mimic: follower joint {joint} has {sum(self.joint_dof_dim[joint])} DOFs but reference "
                f"joint {ref} has {sum(self.joint_dof_dim[ref])}; position and velocity dimensions must match"
            )
        if self.joint_mimic_joint[ref] != -1:
            raise ValueError(f"set_joint_mimic: reference joint {ref} is already a mimic joint (it follows joint {self.joint_mimic_joint[ref]})")
        followers = [i for i, r in enumerate(self.joint_mimic_joint) if r == joint]
        if followers:
            raise ValueError(f"set_joint_mimic: follower joint {joint} is already referenced by another mimic joint {followers[0]}")
        self.joint_mimic_joint[joint] = ref
        self.joint_mimic_coeffs[joint] = (c0, c1)

    def collapse_fixed_joints(self, verbose: bool = False, joints_to_keep=None) -> dict:
        """Merge bodies connected by FIXED joints into their parents; see :func:`armillary.sim.collapse.collapse_fixed_joints`."""
        from .collapse import collapse_fixed_joints

        return collapse_fixed_joints(self, verbose=verbose, joints_to_keep=joints_to_keep)

    # ------------------------------------------------------------------ finalize
    def finalize(
        self,
        device=None,
        *,
        requires_grad: bool = False,
        skip_all_validations: bool = False,
        skip_validation_worlds: bool = False,
        skip_validation_joints: bool = False,
        skip_validation_shapes: bool = False,
        skip_validation_inertia: bool = False,
        skip_validation_structure: bool = False,
        skip_validation_joint_ordering: bool = True,
    ):
        """Convert the builder into a :class:`~armillary.Model` on ``device``.

        Validation, each part skippable (``skip_all_validations`` skips all):

        * ``structure``: list lengths and cross references consistent;
        * ``joints``: no joint connecting two articulations, no non-root orphan joint
          (loop-closing joints and standalone world-root joints are accepted);
        * ``worlds``: no world context left open (``RuntimeError``);
        * ``shapes``: shape bodies, transforms, sizes, margins and materials valid;
        * ``inertia``: physically invalid body inertias (asymmetric, indefinite, violating
          the triangle inequality) are corrected with a warning naming the body;
          valid ones are kept exactly as given;
        * ``joint_ordering`` (skipped by default): joints of an articulation in
          parent-first order.

        Errors are ``ValueError`` naming the entity (index and label) and the reason.
        """
        from .finalize import finalize_builder

        return finalize_builder(
            self,
            device,
            requires_grad=requires_grad,
            skip_validation_joints=skip_all_validations or skip_validation_joints,
            skip_validation_structure=skip_all_validations or skip_validation_structure,
            skip_validation_worlds=skip_all_validations or skip_validation_worlds,
            skip_validation_shapes=skip_all_validations or skip_validation_shapes,
            skip_validation_inertia=skip_all_validations or skip_validation_inertia,
            skip_validation_joint_ordering=skip_all_validations or skip_validation_joint_ordering,
        )

    # ------------------------------------------------------------------ importers
    def add_mjcf(self, source, **kwargs):
        """Import an MJCF file or string through the ``"mjcf"`` importer plugin."""
        from .. import plugins

        return plugins.import_into(self, "mjcf", source, **kwargs)

    def add_urdf(self, source, **kwargs):
        """Import a URDF file or string through the ``"urdf"`` importer plugin."""
        from .. import plugins

        return plugins.import_into(self, "urdf", source, **kwargs)

    def add_usd(self, source, **kwargs):
        """Import a USD stage through the ``"usd"`` importer plugin."""
        from .. import plugins

        return plugins.import_into(self, "usd", source, **kwargs)

    def __getattr__(self, name: str):
        # only called for missing attributes: route add_<format> to importer plugins
        if name.startswith("add_") and not name.startswith("add__"):
            from .. import plugins

            return plugins.importer_method(self, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
