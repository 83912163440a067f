"""Rods and particle-body attachments of :class:`~armillary.ModelBuilder` (mixin).

* :meth:`RodBuilderMixin.add_joint_rod`: one ROD joint (FREE-like layout: 7 coordinates, 6 DOFs)
  whose stretch/shear/bend/twist coefficients go to ``joint_target_ke`` / ``joint_target_kd`` in
  the order ``[shear_x, shear_y, stretch_z, bend_x, bend_y, twist_z]`` and whose structural rest
  rotation goes to ``joint_rest_q`` (zero translation, then the quaternion).
* :meth:`RodBuilderMixin.add_rod`: a :class:`~armillary.Rod` as capsule bodies connected by ROD
  joints (see ``docs/rods.md``).
* :meth:`RodBuilderMixin.add_attachment_particle_body`: a translational particle-to-body anchor,
  finalized into the ``Model.attachment_particle_body_*`` arrays.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import warp as wp

from .enums import JointType
from .exceptions import warn_deprecated
from .joint_config import JointDofConfig
from .rod import Rod, align_frame, quat_between, quat_conj, quat_mul, quat_rotate

DEFAULT_ROD_STRETCH_STIFFNESS = 1.0e5
"""Stretch (and, by default, shear) stiffness [N/m] of a rod joint without material data."""
DEFAULT_ROD_BEND_STIFFNESS = 0.0
"""Bend (and, by default, twist) stiffness [N m/rad] of a rod joint without material data."""
DEFAULT_ROD_RADIUS = 0.1
"""Capsule radius [m] of rod segments when :attr:`Rod.radius` is omitted."""
DEFAULT_ROD_COLOR = (0.26666666666666666, 0.4666666666666667, 0.6666666666666666)
"""Display color of rod capsules when ``color`` is omitted."""

_FLIP = np.array([0.0, 1.0, 0.0, 0.0])  # pi about local Y: reverses the anchor's +Z
_IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])
_EZ = np.array([0.0, 0.0, 1.0])


def _coef(value, name: str, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {name}={value!r} must be a number") from None
    if math.isnan(v) or v < 0.0:
        raise ValueError(f"{what}: {name}={v} must be >= 0 (math.inf allowed for stiffness only)" if "stiffness" in name
                         else f"{what}: {name}={v} must be finite and >= 0")  # fmt: skip
    if "damping" in name and not math.isfinite(v):
        raise ValueError(f"{what}: {name}={v} must be finite and >= 0")
    return v


def _resolve_rod_coefficients(stretch_stiffness, stretch_damping, shear_stiffness, shear_damping, bend_stiffness,
                              bend_damping, twist_stiffness, twist_damping, derived=None) -> tuple:  # fmt: skip
    """``(stretch_ke, stretch_kd, shear_ke, shear_kd, bend_ke, bend_kd, twist_ke, twist_kd)`` with the
    documented defaults; ``derived`` = per-joint ``(EA, kGA, EI, GJ) / L_dual`` or ``None``."""
    if derived is not None:
        s_ke = derived[0] if stretch_stiffness is None else stretch_stiffness
        sh_ke = derived[1] if shear_stiffness is None else shear_stiffness
        b_ke = derived[2] if bend_stiffness is None else bend_stiffness
        t_ke = derived[3] if twist_stiffness is None else twist_stiffness
    else:
        s_ke = DEFAULT_ROD_STRETCH_STIFFNESS if stretch_stiffness is None else stretch_stiffness
        sh_ke = s_ke if shear_stiffness is None else shear_stiffness
        b_ke = DEFAULT_ROD_BEND_STIFFNESS if bend_stiffness is None else bend_stiffness
        t_ke = b_ke if twist_stiffness is None else twist_stiffness
    s_kd = 0.0 if stretch_damping is None else stretch_damping
    sh_kd = shear_damping if shear_damping is not None else (s_kd if shear_stiffness is None else 0.0)
    b_kd = 0.0 if bend_damping is None else bend_damping
    t_kd = twist_damping if twist_damping is not None else (b_kd if twist_stiffness is None else 0.0)
    return s_ke, s_kd, sh_ke, sh_kd, b_ke, b_kd, t_ke, t_kd


class RodBuilderMixin:
    """Builder mixin: ROD joints, :meth:`add_rod` and particle-body attachments."""

    def _init_rods(self) -> None:
        # curves (one per add_rod call): label, world, body range, joint range
        self.curve_label: list[str] = []
        self.curve_world: list[int] = []
        self._curve_body_start: list[int] = []
        self._curve_body_end: list[int] = []
        self._curve_joint_start: list[int] = []
        self._curve_joint_end: list[int] = []
        # particle-body attachments
        self.attachment_particle_body_particle: list[int] = []
        self.attachment_particle_body_body: list[int] = []
        self.attachment_particle_body_body_point: list = []
        self.attachment_particle_body_stiffness: list[float] = []
        self.attachment_particle_body_damping: list[float] = []
        self.attachment_particle_body_enabled: list[bool] = []
        self.attachment_particle_body_world: list[int] = []

    @property
    def curve_count(self) -> int:
        return len(self.curve_label)

    @property
    def attachment_particle_body_count(self) -> int:
        return len(self.attachment_particle_body_particle)

    # ------------------------------------------------------------------ ROD joint
    def add_joint_rod(
        self,
        parent: int,
        child: int,
        *,
        parent_xform=None,
        child_xform=None,
        rest_rotation=None,
        stretch_stiffness: float | None = None,
        stretch_damping: float | None = None,
        shear_stiffness: float | None = None,
        shear_damping: float | None = None,
        bend_stiffness: float | None = None,
        bend_damping: float | None = None,
        twist_stiffness: float | None = None,
        twist_damping: float | None = None,
        label: str | None = None,
        collision_filter_parent: bool | None = None,
        enabled: bool = True,
        custom_attributes: dict | None = None,
        **kwargs,
    ) -> int:
        """Add a rod joint (7 coordinates: relative position and xyzw quaternion; 6 DOFs: relative twist).

        Each anchor frame's local +Z is its segment's material tangent. Coefficients are stored per
        DOF in ``joint_target_ke`` / ``joint_target_kd`` as ``[shear_x, shear_y, stretch_z, bend_x,
        bend_y, twist_z]``; ``joint_target_mode`` is NONE on every axis (rods are not drives).

        Args:
            parent, child: body indices (``parent`` may be ``-1``).
            parent_xform, child_xform: anchor frames in the parent / child body frames.
            rest_rotation: child anchor rotation relative to the parent anchor at structural rest
                (xyzw, normalized), stored in ``joint_rest_q`` after a zero translation; default:
                the initial relative anchor rotation from the current body poses.
            stretch_stiffness: [N/m], default 1.0e5. ``stretch_damping`` [N s/m], default 0.
            shear_stiffness: [N/m], default ``stretch_stiffness``. ``shear_damping``: default
                ``stretch_damping`` when both shear values are omitted, else 0.
            bend_stiffness: [N m/rad], default 0. ``bend_damping`` [N m s/rad], default 0.
            twist_stiffness: [N m/rad], default ``bend_stiffness``. ``twist_damping``: default
                ``bend_damping`` when both twist values are omitted, else 0.

        Stiffnesses must be ``>= 0`` (``math.inf`` allowed); dampings finite and ``>= 0``.
        Returns the joint index.
        """
        if kwargs:
            raise TypeError(f"add_joint_rod() got unexpected keyword arguments: {sorted(kwargs)}")
        what = f"add_joint_rod (joint {self.joint_count}{f' {label!r}' if label else ''})"
        vals = dict(stretch_stiffness=stretch_stiffness, stretch_damping=stretch_damping, shear_stiffness=shear_stiffness,
                    shear_damping=shear_damping, bend_stiffness=bend_stiffness, bend_damping=bend_damping,
                    twist_stiffness=twist_stiffness, twist_damping=twist_damping)  # fmt: skip
        vals = {k: (None if v is None else _coef(v, k, what)) for k, v in vals.items()}
        s_ke, s_kd, sh_ke, sh_kd, b_ke, b_kd, t_ke, t_kd = _resolve_rod_coefficients(**vals)
        rest = None
        if rest_rotation is not None:
            try:
                rest = np.asarray([float(v) for v in rest_rotation], dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"{what}: rest_rotation={rest_rotation!r} must be a quaternion (x, y, z, w)") from None
            if rest.shape != (4,):
                raise ValueError(f"{what}: rest_rotation must have 4 components (x, y, z, w), got {rest.size}")
            if not np.all(np.isfinite(rest)):
                raise ValueError(f"{what}: rest_rotation must contain finite values, got {rest.tolist()}")
            n = float(np.linalg.norm(rest))
            if n < 1e-12:
                raise ValueError(f"{what}: rest_rotation must be a nonzero quaternion")
            rest = rest / n
        lin, ang = self._free_axes()
        for cfg, ke, kd in zip(lin + ang, (sh_ke, sh_ke, s_ke, b_ke, b_ke, t_ke), (sh_kd, sh_kd, s_kd, b_kd, b_kd, t_kd)):
            cfg.target_ke = float(ke)
            cfg.target_kd = float(kd)
        j = self.add_joint(
            JointType.ROD, parent, child, linear_axes=lin, angular_axes=ang, label=label, parent_xform=parent_xform,
            child_xform=child_xform, collision_filter_parent=collision_filter_parent, enabled=enabled,
            custom_attributes=custom_attributes,
        )  # fmt: skip
        s = self.joint_q_start[j]
        if rest is None:
            rest = np.asarray(self.joint_q[s + 3 : s + 7], dtype=np.float64)
            rest = rest / np.linalg.norm(rest)
        self.joint_rest_q[s : s + 7] = [0.0, 0.0, 0.0, *(float(v) for v in rest)]
        return j

    # ------------------------------------------------------------------ add_rod
    def add_rod(
        self,
        *,
        rod: Rod,
        cfg=None,
        stretch_stiffness: float | None = None,
        stretch_damping: float | None = None,
        shear_stiffness: float | None = None,
        shear_damping: float | None = None,
        bend_stiffness: float | None = None,
        bend_damping: float | None = None,
        twist_stiffness: float | None = None,
        twist_damping: float | None = None,
        label: str | None = None,
        wrap_in_articulation: bool = True,
        color=None,
        body_frame_origin: str = "com",
        junction_collision_filter: bool = True,
    ) -> tuple[list[int], list[int]]:
        """Add a rod: one capsule body per segment, ROD joints between adjacent segments.

        Each segment ``i`` becomes a body whose local +Z is the segment's (aligned) initial
        material frame, with a capsule of the rod's radius (0.1 m by default) and half height half
        the *rest* length, mass from ``cfg.density``. Anchors sit at the segment ends.

        Joints: an ordered chain gets ``(i -> i+1)`` joints (plus ``(last -> 0)`` when closed). An
        explicit graph gets, with ``wrap_in_articulation``, a breadth-first spanning tree per
        connected component (cyclic adjacency joints omitted); without it, every adjacency: at
        each point (ascending), the lowest incident segment is the parent of the others.

        With ``wrap_in_articulation=True`` (default) the root segment of each tree (first segment
        of the chain / lowest segment of each component) gets a FREE joint to the world and each
        tree forms one articulation (the free joint first); a closed chain's closing joint stays
        outside it. With ``False`` no root joints and no articulations are created.

        Stiffness: a direct ``*_stiffness`` is applied unchanged to every joint; otherwise a rod
        with material or section-rigidity data gets ``rigidity / L_dual`` per joint (``L_dual``:
        mean rest length of the two adjacent segments), else the :meth:`add_joint_rod` defaults
        (stretch 1.0e5, shear = stretch, bend 0, twist = bend). Dampings as in
        :meth:`add_joint_rod`.

        Args:
            rod: the :class:`~armillary.Rod` (revalidated here).
            cfg: capsule :class:`ShapeConfig` (default :attr:`default_shape_cfg`).
            label: prefix of generated labels (``{label}_edge_body_{i}``, ``{label}_edge_capsule_{i}``,
                ``{label}_cable_{n}``, ``{label}_free_joint[_{c}]``, ``{label}_articulation[_{c}]``)
                and the curve label (``curve_{n}`` when ``None``).
            wrap_in_articulation: see above.
            color: capsule RGB in ``[0, 1]`` (default rod color).
            body_frame_origin: ``"com"`` (body origin at the initial segment midpoint) or the
                deprecated ``"start"`` (origin at the local start of the rest-sized capsule).
            junction_collision_filter: filter collisions between all segments incident to a point
                of an explicit graph with three or more segments.

        Returns:
            ``(body_indices, joint_indices)``: bodies in segment order, the generated ROD joints
            (automatically generated FREE root joints are not included).

        Raises:
            TypeError: ``rod`` is not a :class:`Rod`.
            ValueError: invalid rod data, ``body_frame_origin``, or rigidity-derived stiffness
                requested for a branched graph or for a wrapped cyclic graph.
        """
        if not isinstance(rod, Rod):
            raise TypeError(f"add_rod: rod must be an armillary.Rod, got {type(rod).__name__}")
        if body_frame_origin not in ("com", "start"):
            raise ValueError(f"add_rod: body_frame_origin={body_frame_origin!r} is not allowed; use 'com' or 'start'")
        if body_frame_origin == "start":
            warn_deprecated(
                "add_rod(body_frame_origin='start') is deprecated; use 'com' (for manually authored body-local "
                "anchors, subtract the old body_com offset)"
            )
        rod.validate()
        what = "add_rod"
        direct = dict(stretch_stiffness=stretch_stiffness, stretch_damping=stretch_damping, shear_stiffness=shear_stiffness,
                      shear_damping=shear_damping, bend_stiffness=bend_stiffness, bend_damping=bend_damping,
                      twist_stiffness=twist_stiffness, twist_damping=twist_damping)  # fmt: skip
        direct = {k: (None if v is None else _coef(v, k, what)) for k, v in direct.items()}
        rig = rod.section_rigidities()
        radius = rod._resolve_radius()
        radius = DEFAULT_ROD_RADIUS if radius is None else radius
        cfg = cfg if cfg is not None else self.default_shape_cfg
        color = DEFAULT_ROD_COLOR if color is None else tuple(float(c) for c in color)

        edges = rod.edges.astype(np.int64)
        n_seg = len(edges)
        p0 = rod.points.astype(np.float64)
        pr = (rod.rest_points if rod.rest_points is not None else rod.points).astype(np.float64)
        t0 = p0[edges[:, 1]] - p0[edges[:, 0]]
        t0 /= np.linalg.norm(t0, axis=1, keepdims=True)
        tr = pr[edges[:, 1]] - pr[edges[:, 0]]
        rest_len = np.linalg.norm(tr, axis=1)
        tr /= rest_len[:, None]
        q0 = np.array([align_frame(q, t) for q, t in zip(rod.quaternions.astype(np.float64), t0)])
        if rod.rest_quaternions is not None:
            qr = np.array([align_frame(q, t) for q, t in zip(rod.rest_quaternions.astype(np.float64), tr)])
        else:  # transport the initial roll to the rest tangents
            qr = np.array([align_frame(q, t) for q, t in zip(q0, tr)])
        half = 0.5 * rest_len

        # ---- topology: list of (parent_seg, child_seg, parent_at_start, child_at_start, flip)
        chain = rod.is_ordered_chain()
        pairs: list[tuple[int, int, bool, bool]] = []  # tree / adjacency joints
        closing: list[tuple[int, int, bool, bool]] = []
        roots: list[list[int]] = []  # per tree: index range into pairs, root segment
        incident: dict[int, list[int]] = {}
        for s, (a, b) in enumerate(edges.tolist()):
            incident.setdefault(a, []).append(s)
            incident.setdefault(b, []).append(s)
        branched = (not chain) and any(len(v) > 2 for v in incident.values())
        flip = True
        if chain:
            pairs = [(i, i + 1, False, True) for i in range(n_seg - 1)]
            if rod.closed:
                closing = [(n_seg - 1, 0, False, True)]
            roots = [[0, 0, len(pairs)]]
            cyclic = False
        elif wrap_in_articulation:
            visited = np.zeros(n_seg, dtype=bool)
            for root in range(n_seg):
                if visited[root]:
                    continue
                start = len(pairs)
                visited[root] = True
                queue = deque([root])
                while queue:
                    s = queue.popleft()
                    for pt in edges[s].tolist():
                        for n in incident[pt]:
                            if not visited[n]:
                                visited[n] = True
                                queue.append(n)
                                pairs.append((s, n, bool(edges[s][0] == pt), bool(edges[n][0] == pt)))
                roots.append([root, start, len(pairs)])
            n_adjacent = sum(len(v) - 1 for v in incident.values() if len(v) >= 2)
            cyclic = n_adjacent > len(pairs)
        else:
            flip = False
            for pt in sorted(incident):
                segs = sorted(incident[pt])
                for n in segs[1:]:
                    s = segs[0]
                    pairs.append((s, n, bool(edges[s][0] == pt), bool(edges[n][0] == pt)))
            visited_components = self._components(n_seg, pairs)
            cyclic = len(pairs) > n_seg - visited_components
        need_derived = rig is not None and any(direct[k] is None for k in ("stretch_stiffness", "shear_stiffness",
                                                                             "bend_stiffness", "twist_stiffness"))  # fmt: skip
        if need_derived and branched:
            raise ValueError(
                "add_rod: automatic section-rigidity discretization requires at most 2 incident segments per point; "
                "provide explicit builder stiffnesses (stretch, shear, bend and twist) for a branched graph"
            )
        if need_derived and cyclic and wrap_in_articulation:
            raise ValueError(
                "add_rod: automatic section-rigidity discretization for a cyclic graph requires "
                "wrap_in_articulation=False so every adjacency joint is retained; otherwise provide explicit "
                "builder stiffnesses"
            )

        # ---- bodies and capsules
        body0 = self.body_count
        joint0 = self.joint_count
        bodies: list[int] = []
        for i in range(n_seg):
            center = 0.5 * (p0[edges[i, 0]] + p0[edges[i, 1]])
            if body_frame_origin == "com":
                origin, shape_tf = center, None
            else:
                origin = center - quat_rotate(q0[i], np.array([0.0, 0.0, half[i]]))
                shape_tf = wp.transform(wp.vec3(0.0, 0.0, float(half[i])), wp.quat_identity())
            xform = wp.transform(wp.vec3(*origin.tolist()), wp.quat(*q0[i].tolist()))
            b = self.add_link(xform=xform, label=f"{label}_edge_body_{i}" if label else None)
            self.add_shape_capsule(
                b, xform=shape_tf, radius=radius, half_height=float(half[i]), cfg=cfg, color=color,
                label=f"{label}_edge_capsule_{i}" if label else None,
            )  # fmt: skip
            bodies.append(b)

        def anchor(seg: int, at_start: bool, flipped: bool):
            if body_frame_origin == "com":
                z = -half[seg] if at_start else half[seg]
            else:
                z = 0.0 if at_start else 2.0 * half[seg]
            rot = _FLIP if flipped else _IDENTITY
            return rot, wp.transform(wp.vec3(0.0, 0.0, float(z)), wp.quat(*rot.tolist()))

        counter = [0]

        def add(pair) -> int:
            s, n, p_start, c_start = pair
            rp, x_p = anchor(s, p_start, flip and p_start)
            rc, x_c = anchor(n, c_start, flip and not c_start)
            rest = quat_mul(quat_conj(quat_mul(qr[s], rp)), quat_mul(qr[n], rc))
            if rod.rest_straight:
                rest = _IDENTITY.copy()
            derived = None
            if rig is not None:
                l_dual = 0.5 * (rest_len[s] + rest_len[n])
                derived = tuple(r / l_dual for r in rig)
            coefs = _resolve_rod_coefficients(derived=derived, **direct)
            counter[0] += 1
            return self.add_joint_rod(
                bodies[s], bodies[n], parent_xform=x_p, child_xform=x_c, rest_rotation=rest,
                stretch_stiffness=coefs[0], stretch_damping=coefs[1], shear_stiffness=coefs[2],
                shear_damping=coefs[3], bend_stiffness=coefs[4], bend_damping=coefs[5], twist_stiffness=coefs[6],
                twist_damping=coefs[7], label=f"{label}_cable_{counter[0]}" if label else None,
                collision_filter_parent=True,
            )  # fmt: skip

        joints: list[int] = []
        if wrap_in_articulation:
            for c, (root, start, end) in enumerate(roots):
                suffix = "" if c == 0 else f"_{c}"
                free = self.add_joint_free(bodies[root], label=f"{label}_free_joint{suffix}" if label else None)
                tree = [add(pr_) for pr_ in pairs[start:end]]
                joints.extend(tree)
                self.add_articulation([free, *tree], label=f"{label}_articulation{suffix}" if label else None)
        else:
            joints.extend(add(pr_) for pr_ in pairs)
        joints.extend(add(pr_) for pr_ in closing)

        if junction_collision_filter and not chain:
            for segs in incident.values():
                if len(segs) < 3:
                    continue
                for i, a in enumerate(segs):
                    for b in segs[i + 1 :]:
                        self._filter_joint_shapes(min(bodies[a], bodies[b]), max(bodies[a], bodies[b]))

        self.curve_label.append(label if label is not None else f"curve_{self.curve_count}")
        self.curve_world.append(self.current_world)
        self._curve_body_start.append(body0)
        self._curve_body_end.append(self.body_count)
        self._curve_joint_start.append(joint0)
        self._curve_joint_end.append(self.joint_count)
        return bodies, joints

    @staticmethod
    def _components(n: int, pairs) -> int:
        parent = list(range(n))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for s, c, *_ in pairs:
            a, b = find(s), find(c)
            if a != b:
                parent[a] = b
        return len({find(i) for i in range(n)})

    # ------------------------------------------------------------------ attachments
    def add_attachment_particle_body(
        self,
        particle: int,
        body: int,
        *,
        body_point=None,
        stiffness: float = 1.0e4,
        damping: float = 0.0,
        enabled: bool = True,
        custom_attributes: dict | None = None,
    ) -> int:
        """Attach a particle to a body-local point (translational; a particle has no orientation).

        Args:
            particle: particle index.
            body: body index.
            body_point: anchor in the body frame [m] (default the body origin).
            stiffness: [N/m], ``>= 0``; ``math.inf`` requests a hard point constraint.
            damping: [N s/m], finite and ``>= 0`` (ignored for hard attachments).
            enabled: whether the attachment is active.

        Returns the attachment index. The attachment belongs to the body's world (the particle's
        when the body is global).

        Raises:
            IndexError: ``particle`` or ``body`` out of range.
            ValueError: endpoints in different worlds, a negative or NaN coefficient, a finite
                stiffness not representable in float32, a non-finite damping or ``body_point``.
        """
        idx = self.attachment_particle_body_count
        what = f"attachment {idx}"
        n_p, n_b = self.particle_count, self.body_count
        for name, v, n in (("Particle", particle, n_p), ("Body", body, n_b)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise IndexError(f"{what}: {name} index {v!r} must be an integer in [0, {n})")
            if not 0 <= int(v) < n:
                raise IndexError(f"{what}: {name} index {int(v)} is out of range for {n} {name.lower()}s (allowed 0..{n - 1})")
        particle, body = int(particle), int(body)
        wp_, wb = int(self.particle_world[particle]), int(self.body_world[body])
        if wp_ >= 0 and wb >= 0 and wp_ != wb:
            raise ValueError(
                f"{what}: endpoints belong to different worlds: body {body} is in world {wb}, particle {particle} "
                f"in world {wp_}"
            )
        try:
            k = float(stiffness)
            d = float(damping)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: stiffness and damping must be numbers, got {stiffness!r}, {damping!r}") from None
        if math.isnan(k) or k < 0.0:
            raise ValueError(f"{what}: stiffness={k} must be >= 0 or math.inf")
        if math.isfinite(k) and k > float(np.finfo(np.float32).max):
            raise ValueError(f"{what}: finite stiffness={k} must be representable in float32 (use math.inf for a hard attachment)")
        if not (math.isfinite(d) and d >= 0.0):
            raise ValueError(f"{what}: damping={d} must be finite and >= 0")
        if d > float(np.finfo(np.float32).max):
            raise ValueError(f"{what}: damping={d} must be representable in float32")
        if body_point is None:
            point = (0.0, 0.0, 0.0)
        else:
            try:
                point = tuple(float(v) for v in body_point)
            except (TypeError, ValueError):
                raise ValueError(f"{what}: body_point={body_point!r} must be a 3-vector") from None
            if len(point) != 3:
                raise ValueError(f"{what}: body_point must have 3 components, got {len(point)}")
            if not all(math.isfinite(v) for v in point):
                raise ValueError(f"{what}: body_point must be finite, got {point}")
        self._check_custom_attributes("attachment_particle_body", custom_attributes)
        self.attachment_particle_body_particle.append(particle)
        self.attachment_particle_body_body.append(body)
        self.attachment_particle_body_body_point.append(wp.vec3(*point))
        self.attachment_particle_body_stiffness.append(k)
        self.attachment_particle_body_damping.append(d)
        self.attachment_particle_body_enabled.append(bool(enabled))
        self.attachment_particle_body_world.append(wb if wb >= 0 else wp_)
        self._assign_custom_attributes("attachment_particle_body", idx, custom_attributes)
        return idx

    # ------------------------------------------------------------------ merge / finalize
    def _merge_rods(self, other, offsets: dict) -> None:
        """Append ``other``'s curves and attachments (indices shifted by ``offsets``; worlds remapped
        like the other entities of the merge)."""
        if not hasattr(other, "attachment_particle_body_particle"):
            return
        cw = self.current_world
        src_worlds = int(getattr(other, "world_count", 0))

        def wmap(w: int) -> int:
            if cw >= 0:
                return cw
            if src_worlds > 0 and w >= 0:
                return w + self.world_count - src_worlds
            return -1

        nb, nj = int(offsets["body"]), int(offsets["joint"])
        p_off = int(offsets.get("particle", 0))
        prefix = offsets.get("label_prefix")
        for i, lbl in enumerate(other.curve_label):
            self.curve_label.append(f"{prefix}/{lbl}" if prefix else lbl)
            self.curve_world.append(wmap(other.curve_world[i]))
            self._curve_body_start.append(other._curve_body_start[i] + nb)
            self._curve_body_end.append(other._curve_body_end[i] + nb)
            self._curve_joint_start.append(other._curve_joint_start[i] + nj)
            self._curve_joint_end.append(other._curve_joint_end[i] + nj)
        self.attachment_particle_body_particle.extend(p + p_off for p in other.attachment_particle_body_particle)
        self.attachment_particle_body_body.extend(b + nb for b in other.attachment_particle_body_body)
        self.attachment_particle_body_body_point.extend(other.attachment_particle_body_body_point)
        self.attachment_particle_body_stiffness.extend(other.attachment_particle_body_stiffness)
        self.attachment_particle_body_damping.extend(other.attachment_particle_body_damping)
        self.attachment_particle_body_enabled.extend(other.attachment_particle_body_enabled)
        self.attachment_particle_body_world.extend(wmap(w) for w in other.attachment_particle_body_world)

    def _finalize_rods(self, model, device, requires_grad: bool) -> None:
        """Create ``Model.attachment_particle_body_*`` (``None`` when there are no attachments, as the
        reference does) and the ``curve_*`` arrays."""
        from .custom_attributes import AttributeFrequency as AF

        n = self.attachment_particle_body_count
        model.attachment_particle_body_count = n
        model.curve_count = self.curve_count
        model.curve_label = list(self.curve_label)
        freq = getattr(model, "attribute_frequency", None)
        if not isinstance(freq, dict):
            freq = {}
            model.attribute_frequency = freq

        def arr(values, dtype, np_dtype, shape=None):
            a = np.asarray(values, dtype=np_dtype)
            if shape is not None:
                a = a.reshape(shape)
            return wp.array(a, dtype=dtype, device=device)

        names = ("particle", "body", "body_point", "stiffness", "damping", "enabled", "world")
        if n:
            model.attachment_particle_body_particle = arr(self.attachment_particle_body_particle, wp.int32, np.int32)
            model.attachment_particle_body_body = arr(self.attachment_particle_body_body, wp.int32, np.int32)
            model.attachment_particle_body_body_point = arr(
                [list(v) for v in self.attachment_particle_body_body_point], wp.vec3, np.float32, (n, 3)
            )
            model.attachment_particle_body_stiffness = arr(self.attachment_particle_body_stiffness, wp.float32, np.float32)
            model.attachment_particle_body_damping = arr(self.attachment_particle_body_damping, wp.float32, np.float32)
            model.attachment_particle_body_enabled = arr(self.attachment_particle_body_enabled, wp.bool, bool)
            model.attachment_particle_body_world = arr(self.attachment_particle_body_world, wp.int32, np.int32)
        else:
            for name in names:
                setattr(model, f"attachment_particle_body_{name}", None)
        for name in names:
            freq.setdefault(f"attachment_particle_body_{name}", AF.ATTACHMENT_PARTICLE_BODY)
        nc = self.curve_count
        for name, values in (("curve_world", self.curve_world), ("curve_body_start", self._curve_body_start),
                             ("curve_body_end", self._curve_body_end), ("curve_joint_start", self._curve_joint_start),
                             ("curve_joint_end", self._curve_joint_end)):  # fmt: skip
            setattr(model, name, arr(values, wp.int32, np.int32, (nc,)))
