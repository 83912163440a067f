"""Particles and soft-body elements of :class:`~armillary.ModelBuilder`.

Particles are point masses (position [m], velocity [m/s], mass [kg], contact radius [m],
:class:`~armillary.ParticleFlags`, world index). Elements connect particles:

* springs: ``(i, j)`` with stiffness ``ke`` [N/m], damping ``kd`` [N*s/m], rest length [m]
  (initial distance) and an actuation ``control`` value;
* triangles (membranes / cloth): ``(i, j, k)`` with materials ``(ke, ka, kd, drag, lift)``, rest
  area [m^2] and rest pose (inverse 2x2 rest edge matrix in the triangle's own frame, [1/m]);
* bending edges: ``(o0, o1, v1, v2)``: the shared edge ``v1 -> v2`` and the opposite vertices
  ``o0`` (in the triangle whose winding contains ``v1 -> v2``) and ``o1`` (-1 on a boundary);
  rest dihedral angle [rad], rest length [m] and bending properties ``(ke, kd)``;
* tetrahedra (volumetric FEM): ``(i, j, k, l)`` with materials ``(k_mu, k_lambda, k_damp)``
  [Pa, Pa, Pa*s] and rest pose (inverse 3x3 rest edge matrix, [1/m]).

Everything is host-side (lists / numpy) until :meth:`_finalize_particles` builds the model arrays.
"""

from __future__ import annotations

import functools

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp

from .enums import ParticleFlags
from .exceptions import warn
from .graph_coloring import ColoringAlgorithm, color_graph
from .rotations import quat_rotate

__all__ = ["ParticleBuilderMixin", "ColoringAlgorithm", "edges_from_triangles", "bending_angle"]


# ---------------------------------------------------------------------------------------------
# small host-side geometry helpers


def _vec3(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float64).reshape(3)


def _xform_parts(xform) -> tuple[np.ndarray, np.ndarray] | None:
    if xform is None:
        return None
    if hasattr(xform, "p") and hasattr(xform, "q"):
        return _vec3(xform.p), np.asarray(xform.q, dtype=np.float64).reshape(4)
    arr = np.asarray(xform, dtype=np.float64).reshape(-1)
    if arr.size != 7:
        raise ValueError(f"xform must be a transform (7 values: p, q xyzw), got {xform!r}")
    return arr[:3], arr[3:]


def bending_angle(x_o0, x_o1, x_v1, x_v2) -> float:
    """Signed dihedral angle [rad] of the bending edge ``(o0, o1, v1, v2)`` (0 for a flat pair).

    ``n1 = (v1 - o0) x (v2 - o0)``, ``n2 = (v2 - o1) x (v1 - o1)``, ``e = v2 - v1``;
    ``angle = atan2(((n1 x n2) . e/|e|), (n1 . n2))``.
    """
    x1, x2, x3, x4 = _vec3(x_o0), _vec3(x_o1), _vec3(x_v1), _vec3(x_v2)
    n1 = np.cross(x3 - x1, x4 - x1)
    n2 = np.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    ln1, ln2, le = np.linalg.norm(n1), np.linalg.norm(n2), np.linalg.norm(e)
    if ln1 < 1e-12 or ln2 < 1e-12 or le < 1e-12:
        return 0.0
    n1 /= ln1
    n2 /= ln2
    cos_t = float(np.dot(n1, n2))
    sin_t = float(np.dot(np.cross(n1, n2), e / le))
    return math.atan2(sin_t, cos_t)


def edges_from_triangles(tris: np.ndarray) -> np.ndarray:
    """Bending edges ``(o0, o1, v1, v2)`` of a triangle mesh, one per undirected edge.

    ``v1 -> v2`` follows the winding of the first triangle containing the edge and ``o0`` is that
    triangle's third vertex; ``o1`` is the third vertex of the second triangle or -1 (boundary).
    Edges shared by more than two triangles keep the first two.
    """
    tris = np.asarray(tris, dtype=np.int64).reshape(-1, 3)
    index: dict[tuple[int, int], int] = {}
    out: list[list[int]] = []
    for a, b, c in tris:
        for v1, v2, o in ((a, b, c), (b, c, a), (c, a, b)):
            key = (min(v1, v2), max(v1, v2))
            e = index.get(key)
            if e is None:
                index[key] = len(out)
                out.append([int(o), -1, int(v1), int(v2)])
            elif out[e][1] == -1:
                out[e][1] = int(o)
    return np.asarray(out, dtype=np.int64).reshape(-1, 4)


def _tri_pose_and_area(p, q, r) -> tuple[np.ndarray | None, float]:
    qp, rp = q - p, r - p
    n = np.cross(qp, rp)
    area = 0.5 * float(np.linalg.norm(n))
    if area <= 0.0 or np.linalg.norm(qp) == 0.0:
        return None, 0.0
    n = n / np.linalg.norm(n)
    e1 = qp / np.linalg.norm(qp)
    e2 = np.cross(n, e1)
    D = np.array([[e1 @ qp, e1 @ rp], [e2 @ qp, e2 @ rp]])
    if abs(np.linalg.det(D)) < 1e-20:
        return None, 0.0
    return np.linalg.inv(D), area


def _tet_pose_and_volume(x0, x1, x2, x3) -> tuple[np.ndarray | None, float]:
    Dm = np.column_stack([x1 - x0, x2 - x0, x3 - x0])
    vol = float(np.linalg.det(Dm)) / 6.0
    if vol <= 0.0:
        return None, vol
    return np.linalg.inv(Dm), vol


def _world_start(worlds: Sequence[int], world_count: int) -> np.ndarray:
    """Start index of every world's entities plus the end of the last world and the total.

    ``start[w]`` is the first index with world >= w (non-global), else one past the last
    world entity, else the total; the last entry is the total count. Shape (world_count + 2,).
    """
    w = np.asarray(worlds, dtype=np.int64)
    total = len(w)
    out = np.empty(world_count + 2, dtype=np.int32)
    nonglobal = np.nonzero(w >= 0)[0]
    tail = int(nonglobal[-1]) + 1 if nonglobal.size else total
    for k in range(world_count + 1):
        idx = np.nonzero(w >= k)[0]
        out[k] = int(idx[0]) if idx.size else tail
    out[world_count + 1] = total
    return out


def _per_item(value, n: int, name: str) -> list:
    """Broadcast a scalar (or None) to ``n`` items or check a sequence's length."""
    if value is None or np.ndim(value) == 0:
        return [value] * n
    seq = list(value)
    if len(seq) != n:
        raise ValueError(f"{name} has {len(seq)} entries, expected {n}")
    return seq


# ---------------------------------------------------------------------------------------------


def _deformable_object(kind: str):
    """Record what a cloth (``kind="surface"``) or soft-body (``"volume"``) creation method added.

    The wrapped method's ``label`` names the object (``surface_N`` / ``volume_N`` when ``None``);
    the particle, triangle, edge and tetrahedron ranges it appended become the model's
    ``surface_*`` / ``volume_*`` arrays.
    """

    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, label: str | None = None, **kwargs):
            mark = self._deformable_counts()
            result = method(self, *args, label=label, **kwargs)
            end = self._deformable_counts()
            groups = self._surfaces if kind == "surface" else self._volumes
            name = label if label is not None else f"{kind}_{len(groups)}"
            groups.append((name, self._particle_world_index(), mark, end))
            return result

        return wrapper

    return decorate


class ParticleBuilderMixin:
    """Builder mixin: particles, springs, triangles, bending edges, tetrahedra, coloring.

    Builder lists (one entry per element) have the same names as the model arrays
    (``particle_q``, ``spring_indices`` (flat, 2 per spring), ``tri_indices``, ...).
    """

    # -- setup ------------------------------------------------------------------------------------

    def _init_particles(self) -> None:
        self.default_particle_radius = 0.1
        """default particle contact radius [m]."""
        self.default_tri_ke = 100.0
        self.default_tri_ka = 100.0
        self.default_tri_kd = 10.0
        self.default_tri_drag = 0.0
        self.default_tri_lift = 0.0
        self.default_edge_ke = 100.0
        self.default_edge_kd = 0.0
        self.default_spring_ke = 100.0
        self.default_spring_kd = 0.0
        self.default_tet_k_mu = 1000.0
        self.default_tet_k_lambda = 1000.0
        self.default_tet_k_damp = 0.0
        self.default_tet_density = 1.0
        self.particle_max_velocity = 1.0e5
        """particle speed clamp [m/s]."""
        # particle-particle contact parameters (model-wide)
        self.particle_ke = 1.0e3
        self.particle_kd = 1.0e2
        self.particle_kf = 1.0e2
        self.particle_mu = 0.5
        self.particle_cohesion = 0.0
        self.particle_adhesion = 0.0
        # particle-shape (soft) contact parameters (model-wide)
        self.soft_contact_ke = 1.0e3
        self.soft_contact_kd = 10.0
        self.soft_contact_kf = 1.0e3
        self.soft_contact_mu = 0.5
        self.soft_contact_restitution = 0.0

        self.particle_q: list = []
        # deformable objects: (label, world, counts at start, counts at end), see _deformable_object
        self._surfaces: list = []
        self._volumes: list = []
        self.particle_qd: list = []
        self.particle_mass: list[float] = []
        self.particle_radius: list[float] = []
        self.particle_flags: list[int] = []
        self.particle_world: list[int] = []
        self.particle_color_groups: list[np.ndarray] = []

        self.spring_indices: list[int] = []
        self.spring_rest_length: list[float] = []
        self.spring_stiffness: list[float] = []
        self.spring_damping: list[float] = []
        self.spring_control: list[float] = []

        self.tri_indices: list[tuple[int, int, int]] = []
        self.tri_poses: list = []
        self.tri_activations: list[float] = []
        self.tri_materials: list[tuple[float, float, float, float, float]] = []
        self.tri_areas: list[float] = []
        self.tri_color: list[tuple[float, float, float]] = []
        self.tri_opacity: list[float] = []

        self.edge_indices: list[tuple[int, int, int, int]] = []
        self.edge_rest_angle: list[float] = []
        self.edge_rest_length: list[float] = []
        self.edge_bending_properties: list[tuple[float, float]] = []

        self.tet_indices: list[tuple[int, int, int, int]] = []
        self.tet_poses: list = []
        self.tet_activations: list[float] = []
        self.tet_materials: list[tuple[float, float, float]] = []

    # counts (the builder class may define its own; these read the lists)
    @property
    def particle_count(self) -> int:
        """Number of particles."""
        return len(self.particle_q)

    @property
    def spring_count(self) -> int:
        """Number of springs."""
        return len(self.spring_rest_length)

    @property
    def tri_count(self) -> int:
        """Number of triangles."""
        return len(self.tri_indices)

    @property
    def edge_count(self) -> int:
        """Number of bending edges."""
        return len(self.edge_indices)

    @property
    def tet_count(self) -> int:
        """Number of tetrahedra."""
        return len(self.tet_indices)

    def _particle_world_index(self) -> int:
        w = getattr(self, "current_world", -1)
        return -1 if w is None else int(w)

    def _particle_custom(self, frequency_key: str, index, values) -> None:
        if values:
            assign = getattr(self, "_assign_custom_attributes", None)
            if assign is None:
                raise ValueError("custom attributes are not available on this builder")
            assign(frequency_key, index, values)

    def _pos(self, i: int) -> np.ndarray:
        return _vec3(self.particle_q[i])

    # -- particles --------------------------------------------------------------------------------

    def add_particle(
        self,
        pos,
        vel,
        mass: float,
        radius: float | None = None,
        flags: int = ParticleFlags.ACTIVE,
        custom_attributes: dict[str, Any] | None = None,
    ) -> int:
        """Add a particle.

        Args:
            pos: initial position (3,) [m].
            vel: initial velocity (3,) [m/s].
            mass: mass [kg]; 0 makes a kinematic particle (inverse mass 0).
            radius: contact radius [m]; None uses :attr:`default_particle_radius`.
            flags: :class:`~armillary.ParticleFlags`.
            custom_attributes: ``{key: value}`` for PARTICLE-frequency custom attributes.

        Returns:
            The particle index.
        """
        if mass < 0.0:
            raise ValueError(f"particle mass must be >= 0, got {mass}")
        idx = len(self.particle_q)
        p, v = wp.vec3(*_vec3(pos)), wp.vec3(*_vec3(vel))
        self._particle_custom("particle", idx, custom_attributes)  # validates before committing
        self.particle_q.append(p)
        self.particle_qd.append(v)
        self.particle_mass.append(float(mass))
        self.particle_radius.append(float(self.default_particle_radius if radius is None else radius))
        self.particle_flags.append(int(flags))
        self.particle_world.append(self._particle_world_index())
        return idx

    def add_particles(
        self,
        pos: Sequence,
        vel: Sequence,
        mass: Sequence[float],
        radius: Sequence[float] | None = None,
        flags: Sequence[int] | None = None,
        custom_attributes: dict[str, Any] | None = None,
    ) -> None:
        """Add particles from per-particle sequences (positions (N, 3) [m], velocities (N, 3) [m/s],
        masses (N,) [kg], radii (N,) [m] or None for the default, flags (N,) or None for ACTIVE).

        ``custom_attributes`` values are broadcast, or give one value per particle.
        """
        pos = np.asarray(pos, dtype=np.float64).reshape(-1, 3)
        n = len(pos)
        vel = np.asarray(vel, dtype=np.float64).reshape(-1, 3)
        mass = np.asarray(mass, dtype=np.float64).reshape(-1)
        if len(vel) != n or len(mass) != n:
            raise ValueError(f"add_particles: pos has {n} entries but vel has {len(vel)} and mass {len(mass)}")
        radii = _per_item(radius, n, "radius")
        flg = _per_item(flags, n, "flags")
        start = len(self.particle_q)
        for k in range(n):
            r = radii[k]
            f = flg[k]
            self.add_particle(pos[k], vel[k], float(mass[k]), r, ParticleFlags.ACTIVE if f is None else int(f))
        self._particle_custom("particle", list(range(start, start + n)), custom_attributes)

    def add_particle_grid(
        self,
        *,
        pos,
        rot,
        vel,
        dim_x: int,
        dim_y: int,
        dim_z: int,
        cell_x: float,
        cell_y: float,
        cell_z: float,
        mass: float,
        jitter: float,
        radius_mean: float | None = None,
        radius_std: float = 0.0,
        flags: list[int] | int | None = None,
        custom_attributes: dict[str, Any] | None = None,
    ) -> None:
        """Add ``dim_x * dim_y * dim_z`` particles on a regular lattice (x fastest, then y, z).

        Positions are ``pos + rot * (x*cell_x, y*cell_y, z*cell_z) + jitter * U[0, 1)^3`` [m];
        each particle has ``mass`` [kg] and radius ``radius_mean`` (default radius if None)
        plus Gaussian noise of ``radius_std`` [m].
        """
        rng = np.random.default_rng()
        grid = np.array(
            [(x * cell_x, y * cell_y, z * cell_z) for z in range(dim_z) for y in range(dim_y) for x in range(dim_x)],
            dtype=np.float64,
        ).reshape(-1, 3)
        n = len(grid)
        pts = _vec3(pos) + quat_rotate(np.asarray(rot, dtype=np.float64), grid)
        if jitter:
            pts = pts + rng.random((n, 3)) * float(jitter)
        r0 = self.default_particle_radius if radius_mean is None else float(radius_mean)
        radii = np.full(n, r0)
        if radius_std > 0.0:
            radii = np.maximum(radii + rng.normal(0.0, radius_std, n), 0.0)
        flg = _per_item(flags, n, "flags")
        start = len(self.particle_q)
        for k in range(n):
            f = flg[k]
            self.add_particle(pts[k], vel, mass, float(radii[k]), ParticleFlags.ACTIVE if f is None else int(f))
        self._particle_custom("particle", list(range(start, start + n)), custom_attributes)

    # -- springs ----------------------------------------------------------------------------------

    def add_spring(
        self, i: int, j: int, ke: float, kd: float, control: float, custom_attributes: dict[str, Any] | None = None
    ) -> int:
        """Add a spring between particles ``i`` and ``j`` (rest length = current distance [m]).

        Args:
            ke: stiffness [N/m]. kd: damping [N*s/m]. control: actuation level.

        Returns:
            The spring index.
        """
        self._check_particles("spring", (i, j))
        idx = self.spring_count
        self.spring_indices.extend((int(i), int(j)))
        self.spring_stiffness.append(float(ke))
        self.spring_damping.append(float(kd))
        self.spring_control.append(float(control))
        self.spring_rest_length.append(float(np.linalg.norm(self._pos(j) - self._pos(i))))
        self._particle_custom("spring", idx, custom_attributes)
        return idx

    def _check_particles(self, what: str, ids, allow_negative: bool = False) -> None:
        n = len(self.particle_q)
        for p in ids:
            p = int(p)
            if (p < 0 and not allow_negative) or p >= n:
                raise IndexError(f"{what} references particle {p}, but the builder has {n} particles")

    # -- triangles --------------------------------------------------------------------------------

    def add_triangle(
        self,
        i: int,
        j: int,
        k: int,
        *,
        tri_ke: float | None = None,
        tri_ka: float | None = None,
        tri_kd: float | None = None,
        tri_drag: float | None = None,
        tri_lift: float | None = None,
        color=None,
        opacity: float | None = None,
        custom_attributes: dict[str, Any] | None = None,
    ) -> float:
        """Add a triangle element (membrane) between particles ``i, j, k``.

        Material ``(tri_ke, tri_ka, tri_kd, tri_drag, tri_lift)`` defaults to the builder's
        ``default_tri_*``. The rest pose and rest area come from the current positions.
        A degenerate triangle is not added (a warning is issued) and 0.0 is returned.

        Returns:
            The rest area [m^2].
        """
        self._check_particles("triangle", (i, j, k))
        pose, area = _tri_pose_and_area(self._pos(i), self._pos(j), self._pos(k))
        if pose is None:
            warn(f"degenerate triangle ({i}, {j}, {k}) was not added")
            return 0.0
        idx = self.tri_count
        self.tri_indices.append((int(i), int(j), int(k)))
        self.tri_poses.append(pose.tolist())
        self.tri_activations.append(0.0)
        self.tri_materials.append(
            (
                float(self.default_tri_ke if tri_ke is None else tri_ke),
                float(self.default_tri_ka if tri_ka is None else tri_ka),
                float(self.default_tri_kd if tri_kd is None else tri_kd),
                float(self.default_tri_drag if tri_drag is None else tri_drag),
                float(self.default_tri_lift if tri_lift is None else tri_lift),
            )
        )
        self.tri_areas.append(area)
        self.tri_color.append(tuple(float(c) for c in color) if color is not None else (0.7, 0.7, 0.7))
        self.tri_opacity.append(1.0 if opacity is None else float(opacity))
        self._particle_custom("triangle", idx, custom_attributes)
        return area

    def add_triangles(
        self,
        i,
        j,
        k,
        *,
        tri_ke: Sequence[float] | None = None,
        tri_ka: Sequence[float] | None = None,
        tri_kd: Sequence[float] | None = None,
        tri_drag: Sequence[float] | None = None,
        tri_lift: Sequence[float] | None = None,
        color=None,
        opacity=None,
        custom_attributes: dict[str, Any] | None = None,
    ) -> list[float]:
        """Add triangles from index sequences; per-triangle (or scalar) materials.

        ``custom_attributes`` values are broadcast, or give one value per added triangle.

        Returns:
            The rest area [m^2] of each triangle (0.0 for skipped degenerate ones).
        """
        i = np.asarray(i, dtype=np.int64).reshape(-1)
        n = len(i)
        j = np.asarray(j, dtype=np.int64).reshape(-1)
        k = np.asarray(k, dtype=np.int64).reshape(-1)
        mats = [_per_item(m, n, name) for m, name in ((tri_ke, "tri_ke"), (tri_ka, "tri_ka"), (tri_kd, "tri_kd"), (tri_drag, "tri_drag"), (tri_lift, "tri_lift"))]
        if color is None or (np.ndim(color) == 1 and len(color) == 3):
            colors = [color] * n
        else:
            colors = _per_item(list(color), n, "color")
        opac = _per_item(opacity, n, "opacity")
        areas = []
        added: list[tuple[int, int]] = []  # (input position, triangle index)
        for t in range(n):
            before = self.tri_count
            areas.append(
                self.add_triangle(
                    int(i[t]), int(j[t]), int(k[t]),
                    tri_ke=mats[0][t], tri_ka=mats[1][t], tri_kd=mats[2][t], tri_drag=mats[3][t], tri_lift=mats[4][t],
                    color=colors[t], opacity=opac[t],
                )
            )
            if self.tri_count > before:
                added.append((t, before))
        if custom_attributes and added:
            vals = {}
            for key, v in custom_attributes.items():
                attr = getattr(self, "custom_attributes", {}).get(key)
                shape = ()
                if attr is not None and attr.dtype is not str:
                    shape = tuple(getattr(attr.dtype, "_shape_", ()))
                per_item = (
                    not isinstance(v, (str, bytes, dict))
                    and np.ndim(v) > len(shape)
                    and len(v) == n
                )
                vals[key] = [v[t] for t, _ in added] if per_item else v
            self._particle_custom("triangle", [tri for _, tri in added], vals)
        return areas

    # -- bending edges ----------------------------------------------------------------------------

    def add_edge(
        self,
        i: int,
        j: int,
        k: int,
        l: int,
        *,
        rest: float | None = None,
        edge_ke: float | None = None,
        edge_kd: float | None = None,
        custom_attributes: dict[str, Any] | None = None,
    ) -> int:
        """Add a bending edge: ``i``, ``j`` the opposite vertices (``j`` may be -1 on a boundary),
        ``k -> l`` the shared edge.

        Args:
            rest: rest dihedral angle [rad]; None computes it from the current positions.
            edge_ke: bending stiffness; edge_kd: bending damping (builder defaults if None).

        Returns:
            The edge index.
        """
        self._check_particles("edge", (k, l))
        self._check_particles("edge", (i, j), allow_negative=True)
        if rest is None:
            rest = bending_angle(self._pos(i), self._pos(j), self._pos(k), self._pos(l)) if i >= 0 and j >= 0 else 0.0
        idx = self.edge_count
        self.edge_indices.append((int(i), int(j), int(k), int(l)))
        self.edge_rest_angle.append(float(rest))
        self.edge_rest_length.append(float(np.linalg.norm(self._pos(l) - self._pos(k))))
        self.edge_bending_properties.append(
            (float(self.default_edge_ke if edge_ke is None else edge_ke), float(self.default_edge_kd if edge_kd is None else edge_kd))
        )
        self._particle_custom("edge", idx, custom_attributes)
        return idx

    def add_edges(
        self,
        i,
        j,
        k,
        l,
        *,
        rest: Sequence[float] | None = None,
        edge_ke: Sequence[float] | None = None,
        edge_kd: Sequence[float] | None = None,
        custom_attributes: dict[str, Any] | None = None,
    ) -> None:
        """Add bending edges from index sequences (see :meth:`add_edge`); per-edge or scalar values."""
        i = np.asarray(i, dtype=np.int64).reshape(-1)
        n = len(i)
        j = np.asarray(j, dtype=np.int64).reshape(-1)
        k = np.asarray(k, dtype=np.int64).reshape(-1)
        l = np.asarray(l, dtype=np.int64).reshape(-1)
        rests = _per_item(rest, n, "rest")
        kes = _per_item(edge_ke, n, "edge_ke")
        kds = _per_item(edge_kd, n, "edge_kd")
        start = self.edge_count
        for t in range(n):
            self.add_edge(int(i[t]), int(j[t]), int(k[t]), int(l[t]), rest=rests[t], edge_ke=kes[t], edge_kd=kds[t])
        self._particle_custom("edge", list(range(start, start + n)), custom_attributes)

    # -- tetrahedra -------------------------------------------------------------------------------

    def add_tetrahedron(
        self,
        i: int,
        j: int,
        k: int,
        l: int,
        k_mu: float = 1.0e3,
        k_lambda: float = 1.0e3,
        k_damp: float = 0.0,
        custom_attributes: dict[str, Any] | None = None,
    ) -> float:
        """Add a tetrahedral FEM element (positively oriented: ``(j-i) x (k-i) . (l-i) > 0``).

        Args:
            k_mu, k_lambda: Lame parameters [Pa]; k_damp: damping [Pa*s].

        Returns:
            The signed rest volume [m^3]; an inverted or degenerate element is not added
            (a warning is issued).
        """
        self._check_particles("tetrahedron", (i, j, k, l))
        pose, vol = _tet_pose_and_volume(self._pos(i), self._pos(j), self._pos(k), self._pos(l))
        if pose is None:
            warn(f"inverted or degenerate tetrahedron ({i}, {j}, {k}, {l}) was not added")
            return vol
        idx = self.tet_count
        self.tet_indices.append((int(i), int(j), int(k), int(l)))
        self.tet_poses.append(pose.tolist())
        self.tet_activations.append(0.0)
        self.tet_materials.append((float(k_mu), float(k_lambda), float(k_damp)))
        self._particle_custom("tetrahedron", idx, custom_attributes)
        return vol

    # -- generators -------------------------------------------------------------------------------

    def _add_mesh_edges(self, tris: np.ndarray, edge_ke, edge_kd, custom_attributes=None) -> np.ndarray:
        edges = edges_from_triangles(tris)
        start = self.edge_count
        for o0, o1, v1, v2 in edges:
            self.add_edge(int(o0), int(o1), int(v1), int(v2), edge_ke=edge_ke, edge_kd=edge_kd)
        if custom_attributes and len(edges):
            self._particle_custom("edge", list(range(start, start + len(edges))), custom_attributes)
        return edges

    def _add_edge_springs(self, edges: np.ndarray, ke, kd) -> None:
        ke = self.default_spring_ke if ke is None else ke
        kd = self.default_spring_kd if kd is None else kd
        seen = set()
        for o0, o1, v1, v2 in edges:
            for a, b in ((v1, v2), (o0, o1)):
                if a < 0 or b < 0:
                    continue
                key = (min(a, b), max(a, b))
                if key in seen:
                    continue
                seen.add(key)
                self.add_spring(int(a), int(b), ke, kd, 0.0)

    @_deformable_object("surface")
    def add_cloth_grid(
        self,
        *,
        pos,
        rot,
        vel,
        dim_x: int,
        dim_y: int,
        cell_x: float,
        cell_y: float,
        mass: float,
        reverse_winding: bool = False,
        fix_left: bool = False,
        fix_right: bool = False,
        fix_top: bool = False,
        fix_bottom: bool = False,
        tri_ke: float | None = None,
        tri_ka: float | None = None,
        tri_kd: float | None = None,
        tri_drag: float | None = None,
        tri_lift: float | None = None,
        edge_ke: float | None = None,
        edge_kd: float | None = None,
        add_springs: bool = False,
        spring_ke: float | None = None,
        spring_kd: float | None = None,
        particle_radius: float | None = None,
        color=None,
        opacity=None,
        custom_attributes_particles: dict[str, Any] | None = None,
        custom_attributes_edges: dict[str, Any] | None = None,
        custom_attributes_triangles: dict[str, Any] | None = None,
        label: str | None = None,
    ) -> None:
        """Add a rectangular cloth of ``dim_x * dim_y`` cells ((dim_x+1)*(dim_y+1) particles).

        Particle ``(x, y)`` (index ``y*(dim_x+1) + x``) is at ``pos + rot * (x*cell_x, y*cell_y, 0)``
        [m] with velocity ``vel`` [m/s] and mass ``mass`` [kg] (per particle). Each cell is split into
        two triangles; ``reverse_winding`` uses the other diagonal. ``fix_left/right/bottom/top``
        (x = 0, x = dim_x, y = 0, y = dim_y) make those particles kinematic (mass 0, not ACTIVE).
        Bending edges join neighbouring triangles; ``add_springs`` also adds springs along every
        edge and across every interior edge.
        """
        W = dim_x + 1
        start = len(self.particle_q)
        local = np.array([(x * cell_x, y * cell_y, 0.0) for y in range(dim_y + 1) for x in range(W)], dtype=np.float64)
        pts = _vec3(pos) + quat_rotate(np.asarray(rot, dtype=np.float64), local)
        for y in range(dim_y + 1):
            for x in range(W):
                fixed = (fix_left and x == 0) or (fix_right and x == dim_x) or (fix_bottom and y == 0) or (fix_top and y == dim_y)
                self.add_particle(
                    pts[y * W + x], vel, 0.0 if fixed else mass, particle_radius, 0 if fixed else ParticleFlags.ACTIVE
                )
        n = len(self.particle_q) - start
        self._particle_custom("particle", list(range(start, start + n)), custom_attributes_particles)
        tris = []
        for y in range(dim_y):
            for x in range(dim_x):
                i0 = start + y * W + x
                i1, i2, i3 = i0 + 1, i0 + W, i0 + W + 1
                if reverse_winding:
                    tris += [(i0, i1, i3), (i0, i3, i2)]
                else:
                    tris += [(i0, i1, i2), (i1, i3, i2)]
        tris = np.asarray(tris, dtype=np.int64).reshape(-1, 3)
        self._add_generated_triangles(tris, tri_ke, tri_ka, tri_kd, tri_drag, tri_lift, color, opacity, custom_attributes_triangles)
        edges = self._add_mesh_edges(tris, edge_ke, edge_kd, custom_attributes_edges)
        if add_springs:
            self._add_edge_springs(edges, spring_ke, spring_kd)

    def _add_generated_triangles(self, tris, tri_ke, tri_ka, tri_kd, tri_drag, tri_lift, color, opacity, custom_attributes):
        if len(tris) == 0:
            return
        self.add_triangles(
            tris[:, 0], tris[:, 1], tris[:, 2],
            tri_ke=tri_ke, tri_ka=tri_ka, tri_kd=tri_kd, tri_drag=tri_drag, tri_lift=tri_lift,
            color=color, opacity=opacity, custom_attributes=custom_attributes,
        )

    @_deformable_object("surface")
    def add_cloth_mesh(
        self,
        *,
        pos,
        rot,
        scale: float,
        vel,
        vertices,
        indices,
        density: float,
        tri_ke: float | None = None,
        tri_ka: float | None = None,
        tri_kd: float | None = None,
        tri_drag: float | None = None,
        tri_lift: float | None = None,
        edge_ke: float | None = None,
        edge_kd: float | None = None,
        add_springs: bool = False,
        spring_ke: float | None = None,
        spring_kd: float | None = None,
        particle_radius: float | None = None,
        color=None,
        opacity=None,
        custom_attributes_particles: dict[str, Any] | None = None,
        custom_attributes_edges: dict[str, Any] | None = None,
        custom_attributes_triangles: dict[str, Any] | None = None,
        custom_attributes_springs: dict[str, Any] | None = None,
        validate_mesh: bool = False,
        label: str | None = None,
    ) -> None:
        """Add a cloth from a triangle mesh (``vertices`` (V, 3), flat ``indices`` (3*T,)).

        Vertices are placed at ``pos + rot * (scale * v)`` [m]. Each particle's mass is
        ``density`` [kg/m^2] times one third of the area of its adjacent triangles.
        """
        verts = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
        tris_local = np.asarray(indices, dtype=np.int64).reshape(-1, 3)
        if validate_mesh and len(tris_local) and (tris_local.min() < 0 or tris_local.max() >= len(verts)):
            raise ValueError("add_cloth_mesh: triangle indices out of range")
        pts = _vec3(pos) + quat_rotate(np.asarray(rot, dtype=np.float64), verts * float(scale))
        masses = np.zeros(len(verts))
        for a, b, c in tris_local:
            area = 0.5 * np.linalg.norm(np.cross(pts[b] - pts[a], pts[c] - pts[a]))
            masses[[a, b, c]] += density * area / 3.0
        start = len(self.particle_q)
        for v in range(len(verts)):
            self.add_particle(pts[v], vel, float(masses[v]), particle_radius)
        self._particle_custom("particle", list(range(start, start + len(verts))), custom_attributes_particles)
        tris = tris_local + start
        self._add_generated_triangles(tris, tri_ke, tri_ka, tri_kd, tri_drag, tri_lift, color, opacity, custom_attributes_triangles)
        edges = self._add_mesh_edges(tris, edge_ke, edge_kd, custom_attributes_edges)
        if add_springs:
            s0 = self.spring_count
            self._add_edge_springs(edges, spring_ke, spring_kd)
            if custom_attributes_springs and self.spring_count > s0:
                self._particle_custom("spring", list(range(s0, self.spring_count)), custom_attributes_springs)

    def _add_tets_with_surface(
        self, tets: np.ndarray, k_mu, k_lambda, k_damp, tri_params, add_surface_mesh_edges, edge_ke, edge_kd, color,
        opacity, surface: np.ndarray | None = None,
    ) -> None:
        """Add tetrahedra (inverted ones reoriented) and their boundary triangles (``surface`` (F, 3)
        global particle indices when given, else computed from the open faces)."""
        n = len(tets)
        mus, lams, damps = _per_item(k_mu, n, "k_mu"), _per_item(k_lambda, n, "k_lambda"), _per_item(k_damp, n, "k_damp")
        faces: dict[tuple[int, int, int], tuple[int, int, int] | None] = {}
        for t, (a, b, c, d) in enumerate(tets):
            if self._signed_volume(a, b, c, d) < 0.0:
                b, c = c, b
            self.add_tetrahedron(int(a), int(b), int(c), int(d), mus[t], lams[t], damps[t])
            for f in ((a, c, b), (a, b, d), (a, d, c), (b, c, d)):
                key = tuple(sorted(int(x) for x in f))
                faces[key] = None if key in faces else tuple(int(x) for x in f)
        if surface is None:
            surface = np.asarray([f for f in faces.values() if f is not None], dtype=np.int64).reshape(-1, 3)
        ke, ka, kd, drag, lift = tri_params
        self._add_generated_triangles(surface, ke, ka, kd, drag, lift, color, opacity, None)
        if add_surface_mesh_edges and len(surface):
            self._add_mesh_edges(surface, edge_ke, edge_kd)

    def _signed_volume(self, a, b, c, d) -> float:
        x0 = self._pos(a)
        return float(np.linalg.det(np.column_stack([self._pos(b) - x0, self._pos(c) - x0, self._pos(d) - x0]))) / 6.0

    @_deformable_object("volume")
    def add_soft_grid(
        self,
        *,
        pos,
        rot,
        vel,
        dim_x: int,
        dim_y: int,
        dim_z: int,
        cell_x: float,
        cell_y: float,
        cell_z: float,
        density: float,
        k_mu: float,
        k_lambda: float,
        k_damp: float,
        fix_left: bool = False,
        fix_right: bool = False,
        fix_top: bool = False,
        fix_bottom: bool = False,
        tri_ke: float = 0.0,
        tri_ka: float = 0.0,
        tri_kd: float = 0.0,
        tri_drag: float = 0.0,
        tri_lift: float = 0.0,
        add_surface_mesh_edges: bool = True,
        edge_ke: float = 0.0,
        edge_kd: float = 0.0,
        particle_radius: float | None = None,
        color=None,
        opacity=None,
        label: str | None = None,
    ) -> None:
        """Add a box of ``dim_x * dim_y * dim_z`` hexahedral cells, 5 tetrahedra each (alternating
        split so faces match). Particle ``(x, y, z)`` is at ``pos + rot * (x*cell_x, y*cell_y, z*cell_z)``
        [m] with mass ``density * cell_x*cell_y*cell_z`` [kg]; ``fix_*`` (x = 0, x = dim_x, y = dim_y,
        y = 0) particles get mass 0. Surface triangles (materials ``tri_*``, zero by default) and,
        if ``add_surface_mesh_edges``, surface bending edges are added for collision.
        """
        X, Y, Z = dim_x + 1, dim_y + 1, dim_z + 1
        start = len(self.particle_q)
        local = np.array(
            [(x * cell_x, y * cell_y, z * cell_z) for z in range(Z) for y in range(Y) for x in range(X)], dtype=np.float64
        )
        pts = _vec3(pos) + quat_rotate(np.asarray(rot, dtype=np.float64), local)
        m = float(density) * cell_x * cell_y * cell_z
        for z in range(Z):
            for y in range(Y):
                for x in range(X):
                    fixed = (fix_left and x == 0) or (fix_right and x == dim_x) or (fix_top and y == dim_y) or (fix_bottom and y == 0)
                    self.add_particle(pts[(z * Y + y) * X + x], vel, 0.0 if fixed else m, particle_radius)

        def vid(x, y, z):
            return start + (z * Y + y) * X + x

        tets = []
        for z in range(dim_z):
            for y in range(dim_y):
                for x in range(dim_x):
                    c = [vid(x + (q & 1), y + ((q >> 1) & 1), z + ((q >> 2) & 1)) for q in range(8)]
                    if (x + y + z) % 2 == 0:
                        tets += [(c[1], c[2], c[4], c[7]), (c[0], c[1], c[2], c[4]), (c[3], c[2], c[1], c[7]),
                                 (c[5], c[1], c[4], c[7]), (c[6], c[4], c[2], c[7])]
                    else:
                        tets += [(c[0], c[3], c[5], c[6]), (c[1], c[0], c[3], c[5]), (c[2], c[3], c[0], c[6]),
                                 (c[4], c[0], c[5], c[6]), (c[7], c[3], c[6], c[5])]
        self._add_tets_with_surface(
            np.asarray(tets, dtype=np.int64).reshape(-1, 4), k_mu, k_lambda, k_damp,
            (tri_ke, tri_ka, tri_kd, tri_drag, tri_lift), add_surface_mesh_edges, edge_ke, edge_kd, color, opacity,
        )

    @_deformable_object("volume")
    def add_soft_mesh(
        self,
        *,
        pos,
        rot,
        scale: float,
        vel,
        mesh=None,
        vertices=None,
        indices=None,
        density: float | None = None,
        k_mu=None,
        k_lambda=None,
        k_damp=None,
        tri_ke: float = 0.0,
        tri_ka: float = 0.0,
        tri_kd: float = 0.0,
        tri_drag: float = 0.0,
        tri_lift: float = 0.0,
        add_surface_mesh_edges: bool = True,
        edge_ke: float = 0.0,
        edge_kd: float = 0.0,
        particle_radius: float | None = None,
        color=None,
        opacity=None,
        validate_mesh: bool = False,
        label: str | None = None,
    ) -> None:
        """Add a tetrahedral soft body from a :class:`~armillary.TetMesh` ``mesh`` or from ``vertices``
        (V, 3) and flat ``indices`` (4*T,).

        Vertices are placed at ``pos + rot * (scale * v)`` [m]; each particle gets a quarter of
        the mass (``density`` [kg/m^3] * volume) of its adjacent tetrahedra. ``k_mu``, ``k_lambda``
        [Pa] and ``k_damp`` [Pa*s] are scalars or per-tetrahedron arrays. Resolution order: explicit
        argument > the ``mesh``'s value > builder default (``default_tet_density``,
        ``default_tet_k_mu``, ``default_tet_k_lambda``, ``default_tet_k_damp``). With a ``mesh``,
        its surface triangles become the generated surface and its custom attributes (PARTICLE,
        TETRAHEDRON or TRIANGLE frequency, declared on this builder first) are assigned to the new
        particles / tetrahedra / surface triangles.
        """
        surface = None
        mesh_custom = {}
        if mesh is not None:
            if vertices is None:
                vertices = getattr(mesh, "vertices", None)
            if indices is None:
                indices = getattr(mesh, "tet_indices", getattr(mesh, "indices", None))
                surface = getattr(mesh, "surface_tri_indices", None)
            density = getattr(mesh, "density", None) if density is None else density
            k_mu = getattr(mesh, "k_mu", None) if k_mu is None else k_mu
            k_lambda = getattr(mesh, "k_lambda", None) if k_lambda is None else k_lambda
            k_damp = getattr(mesh, "k_damp", None) if k_damp is None else k_damp
            mesh_custom = dict(getattr(mesh, "custom_attributes", None) or {})
        if vertices is None or indices is None:
            raise ValueError("add_soft_mesh needs vertices and indices (or a mesh)")
        density = self.default_tet_density if density is None else float(density)
        k_mu = self.default_tet_k_mu if k_mu is None else k_mu
        k_lambda = self.default_tet_k_lambda if k_lambda is None else k_lambda
        k_damp = self.default_tet_k_damp if k_damp is None else k_damp
        verts = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
        tets_local = np.asarray(indices, dtype=np.int64).reshape(-1, 4)
        if validate_mesh and len(tets_local) and (tets_local.min() < 0 or tets_local.max() >= len(verts)):
            raise ValueError("add_soft_mesh: tetrahedron indices out of range")
        custom_plan = self._soft_mesh_custom_plan(mesh_custom, len(verts), len(tets_local), surface)
        pts = _vec3(pos) + quat_rotate(np.asarray(rot, dtype=np.float64), verts * float(scale))
        masses = np.zeros(len(verts))
        for a, b, c, d in tets_local:
            vol = abs(np.linalg.det(np.column_stack([pts[b] - pts[a], pts[c] - pts[a], pts[d] - pts[a]]))) / 6.0
            masses[[a, b, c, d]] += density * vol / 4.0
        start = len(self.particle_q)
        for v in range(len(verts)):
            self.add_particle(pts[v], vel, float(masses[v]), particle_radius)
        if surface is not None:
            surface = np.asarray(surface, dtype=np.int64).reshape(-1, 3) + start
            if float(scale) < 0.0:  # mirrored: keep the surface wound outward
                surface = surface[:, ::-1]
        tet0, tri0 = self.tet_count, self.tri_count
        self._add_tets_with_surface(
            tets_local + start, k_mu, k_lambda, k_damp, (tri_ke, tri_ka, tri_kd, tri_drag, tri_lift),
            add_surface_mesh_edges, edge_ke, edge_kd, color, opacity, surface=surface,
        )
        ranges = {"particle": (start, len(self.particle_q)), "tetrahedron": (tet0, self.tet_count),
                  "triangle": (tri0, self.tri_count)}
        for key, freq_key, values in custom_plan:
            lo, hi = ranges[freq_key]
            if hi - lo == len(values):  # skipped (degenerate) elements make a per-element mapping ambiguous
                self._particle_custom(freq_key, list(range(lo, hi)), {key: list(values)})
            else:
                warn(
                    f"add_soft_mesh: custom attribute {key!r} not assigned: {hi - lo} {freq_key} elements were "
                    f"added for {len(values)} values (degenerate elements were skipped)"
                )

    def _soft_mesh_custom_plan(self, custom: dict, n_verts: int, n_tets: int, surface) -> list:
        """Validate a TetMesh's custom attributes against this builder before anything is added."""
        if not custom:
            return []
        from .custom_attributes import AttributeFrequency as F

        targets = {F.PARTICLE: ("particle", n_verts), F.TETRAHEDRON: ("tetrahedron", n_tets),
                   F.TRIANGLE: ("triangle", None if surface is None else len(np.asarray(surface).reshape(-1)) // 3)}
        declared = getattr(self, "custom_attributes", {}) or {}
        plan = []
        for key, (values, freq) in custom.items():
            if key not in declared:
                raise ValueError(
                    f"TetMesh custom attribute {key!r} is not registered in ModelBuilder. "
                    "Register it first via add_custom_attribute()."
                )
            freq = F(int(freq))
            if freq not in targets:
                raise ValueError(
                    f"TetMesh custom attribute {key!r} has frequency {freq.name}; add_soft_mesh assigns only "
                    "PARTICLE, TETRAHEDRON and TRIANGLE attributes"
                )
            decl = declared[key]
            if getattr(decl, "frequency", freq) != freq:
                raise ValueError(
                    f"TetMesh custom attribute {key!r} has frequency {freq.name} but is registered with "
                    f"{getattr(decl.frequency, 'name', decl.frequency)}"
                )
            freq_key, count = targets[freq]
            if count is not None and len(values) != count:
                raise ValueError(
                    f"TetMesh custom attribute {key!r} has {len(values)} values for {count} {freq_key} elements"
                )
            plan.append((key, freq_key, np.asarray(values)))
        return plan

    # -- coloring ---------------------------------------------------------------------------------

    def _particle_graph_edges(self, include_bending: bool = False) -> np.ndarray:
        """(E, 2) particle pairs that share an element (springs, triangles, tetrahedra, edges)."""
        pairs = []
        if self.spring_indices:
            pairs.append(np.asarray(self.spring_indices, dtype=np.int64).reshape(-1, 2))
        if self.tri_indices:
            t = np.asarray(self.tri_indices, dtype=np.int64)
            pairs += [t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]
        if self.tet_indices:
            t = np.asarray(self.tet_indices, dtype=np.int64)
            pairs += [t[:, [a, b]] for a in range(4) for b in range(a + 1, 4)]
        if self.edge_indices:
            e = np.asarray(self.edge_indices, dtype=np.int64)
            pairs.append(e[:, [2, 3]])
            if include_bending:
                pairs += [e[:, [0, 1]], e[:, [0, 2]], e[:, [0, 3]], e[:, [1, 2]], e[:, [1, 3]]]
        if not pairs:
            return np.zeros((0, 2), dtype=np.int64)
        allp = np.concatenate(pairs)
        allp = allp[(allp[:, 0] >= 0) & (allp[:, 1] >= 0)]
        return allp

    def color(
        self,
        include_bending: bool = False,
        balance_colors: bool = True,
        target_max_min_color_ratio: float = 1.1,
        coloring_algorithm: ColoringAlgorithm = ColoringAlgorithm.MCS,
    ) -> None:
        """Color particles (and rigid bodies joined by joints) for parallel Gauss-Seidel (VBD).

        Fills :attr:`particle_color_groups` (one int32 array of particle indices per color) so
        that no two particles sharing a spring, triangle, tetrahedron or bending edge (its shared
        edge; with ``include_bending`` also its opposite vertices) have the same color, and
        ``body_color_groups`` likewise for bodies connected by a joint.
        """
        self.particle_color_groups = color_graph(
            len(self.particle_q),
            self._particle_graph_edges(include_bending),
            balance_colors,
            target_max_min_color_ratio,
            coloring_algorithm,
        )
        parents = getattr(self, "joint_parent", None)
        children = getattr(self, "joint_child", None)
        body_count = int(getattr(self, "body_count", 0) or 0)
        if parents is not None and children is not None and body_count:
            pairs = np.asarray([(p, c) for p, c in zip(parents, children) if p >= 0 and c >= 0], dtype=np.int64).reshape(-1, 2)
            self.body_color_groups = color_graph(body_count, pairs, balance_colors, target_max_min_color_ratio, coloring_algorithm)

    def _deformable_counts(self) -> tuple[int, int, int, int]:
        """(particles, triangles, edges, tetrahedra) added so far."""
        return len(self.particle_q), len(self.tri_indices), len(self.edge_indices), len(self.tet_indices)

    @property
    def surface_label(self) -> list[str]:
        """Labels of the cloth objects (``add_cloth_grid`` / ``add_cloth_mesh``), in creation order."""
        return [g[0] for g in self._surfaces]

    @property
    def volume_label(self) -> list[str]:
        """Labels of the soft bodies (``add_soft_grid`` / ``add_soft_mesh``), in creation order."""
        return [g[0] for g in self._volumes]

    def set_coloring(self, particle_color_groups) -> None:
        """Use a user-provided particle coloring (one index array per color)."""
        self.particle_color_groups = [np.asarray(g, dtype=np.int32).reshape(-1) for g in particle_color_groups]

    # -- merging ----------------------------------------------------------------------------------

    def _merge_particles(self, other, offsets: dict, xform=None) -> None:
        """Append ``other``'s particles and elements, transformed by ``xform`` (positions rotated and
        translated, velocities rotated), into world ``offsets["world"]``; element indices are
        offset by ``offsets["particle"]`` (this builder's particle count before the merge)."""
        if not hasattr(other, "particle_q"):
            return
        p_off = int(offsets.get("particle", len(self.particle_q)))
        world = offsets.get("world", self._particle_world_index())
        world = -1 if world is None else int(world)
        n = len(other.particle_q)
        if n:
            q = np.asarray([_vec3(v) for v in other.particle_q])
            qd = np.asarray([_vec3(v) for v in other.particle_qd])
            parts = _xform_parts(xform)
            if parts is not None:
                p, rq = parts
                q = p + quat_rotate(rq, q)
                qd = quat_rotate(rq, qd)
            self.particle_q.extend(wp.vec3(*v) for v in q)
            self.particle_qd.extend(wp.vec3(*v) for v in qd)
            self.particle_mass.extend(other.particle_mass)
            self.particle_radius.extend(other.particle_radius)
            self.particle_flags.extend(other.particle_flags)
            self.particle_world.extend([world] * n)

        def shift(idx):
            return tuple(int(i) + p_off if int(i) >= 0 else int(i) for i in idx)

        self.spring_indices.extend(int(i) + p_off for i in other.spring_indices)
        self.spring_rest_length.extend(other.spring_rest_length)
        self.spring_stiffness.extend(other.spring_stiffness)
        self.spring_damping.extend(other.spring_damping)
        self.spring_control.extend(other.spring_control)
        self.tri_indices.extend(shift(t) for t in other.tri_indices)
        self.tri_poses.extend(other.tri_poses)
        self.tri_activations.extend(other.tri_activations)
        self.tri_materials.extend(other.tri_materials)
        self.tri_areas.extend(other.tri_areas)
        self.tri_color.extend(getattr(other, "tri_color", [(0.7, 0.7, 0.7)] * len(other.tri_indices)))
        self.tri_opacity.extend(getattr(other, "tri_opacity", [1.0] * len(other.tri_indices)))
        self.edge_indices.extend(shift(e) for e in other.edge_indices)
        self.edge_rest_angle.extend(other.edge_rest_angle)
        self.edge_rest_length.extend(other.edge_rest_length)
        self.edge_bending_properties.extend(other.edge_bending_properties)
        self.tet_indices.extend(shift(t) for t in other.tet_indices)
        self.tet_poses.extend(other.tet_poses)
        self.tet_activations.extend(other.tet_activations)
        self.tet_materials.extend(other.tet_materials)
        base = (p_off, int(offsets.get("tri", 0)), int(offsets.get("edge", 0)), int(offsets.get("tet", 0)))
        prefix = offsets.get("label_prefix")
        for mine, theirs in ((self._surfaces, other._surfaces), (self._volumes, other._volumes)):
            for name, _, start, end in theirs:
                mine.append((f"{prefix}/{name}" if prefix else name, world,
                             tuple(a + b for a, b in zip(start, base)), tuple(a + b for a, b in zip(end, base))))
        for c, grp in enumerate(other.particle_color_groups):
            g = np.asarray(grp, dtype=np.int32) + p_off
            if c < len(self.particle_color_groups):
                self.particle_color_groups[c] = np.concatenate([np.asarray(self.particle_color_groups[c], dtype=np.int32), g])
            else:
                self.particle_color_groups.append(g)

    # -- finalize ---------------------------------------------------------------------------------

    def _finalize_particles(self, model, device, requires_grad: bool) -> None:
        """Create the particle / element arrays on ``model`` (see the module docstring for units).

        Shapes: ``particle_q``/``particle_qd`` (N,) vec3; ``particle_mass``, ``particle_inv_mass``,
        ``particle_radius`` (N,) float32; ``particle_flags``, ``particle_world``, ``particle_colors``
        (N,) int32; ``particle_world_start`` (W+2,) int32; ``spring_indices`` (2*S,) int32;
        ``spring_*`` (S,) float32; ``tri_indices`` (T, 3) int32; ``tri_poses`` (T,) mat22;
        ``tri_materials`` (T, 5); ``tri_areas``/``tri_activations`` (T,); ``edge_indices`` (E, 4)
        int32; ``edge_rest_angle``/``edge_rest_length`` (E,); ``edge_bending_properties`` (E, 2);
        ``tet_indices`` (K, 4) int32; ``tet_poses`` (K,) mat33; ``tet_materials`` (K, 3);
        ``tet_activations`` (K,).
        """
        f32 = np.float32

        def arr(data, dtype, shape_tail=(), grad=False):
            a = np.asarray(data, dtype=f32 if dtype not in (wp.int32,) else np.int32)
            n = len(data)
            a = a.reshape((n, *shape_tail)) if n else np.zeros((0, *shape_tail), dtype=a.dtype)
            return wp.array(a, dtype=dtype, device=device, requires_grad=bool(grad and requires_grad))

        N = len(self.particle_q)
        mass = np.asarray(self.particle_mass, dtype=np.float64)
        inv_mass = np.where(mass > 0.0, 1.0 / np.where(mass > 0.0, mass, 1.0), 0.0)
        q = np.asarray([_vec3(v) for v in self.particle_q], dtype=f32).reshape(-1, 3)
        qd = np.asarray([_vec3(v) for v in self.particle_qd], dtype=f32).reshape(-1, 3)
        model.particle_count = N
        model.particle_q = wp.array(q, dtype=wp.vec3, device=device, requires_grad=requires_grad)
        model.particle_qd = wp.array(qd, dtype=wp.vec3, device=device, requires_grad=requires_grad)
        model.particle_mass = arr(self.particle_mass, wp.float32, grad=True)
        model.particle_inv_mass = arr(inv_mass, wp.float32, grad=True)
        model.particle_radius = arr(self.particle_radius, wp.float32, grad=True)
        model.particle_flags = arr([int(f) for f in self.particle_flags], wp.int32)
        model.particle_world = arr(self.particle_world, wp.int32)
        world_count = int(getattr(model, "world_count", None) or max(int(getattr(self, "world_count", 0) or 0), 1))
        model.particle_world_start = wp.array(_world_start(self.particle_world, world_count), dtype=wp.int32, device=device)
        model.particle_max_radius = float(max(self.particle_radius)) if N else 0.0
        model.particle_max_velocity = float(self.particle_max_velocity)
        for name in ("particle_ke", "particle_kd", "particle_kf", "particle_mu", "particle_cohesion", "particle_adhesion"):
            setattr(model, name, float(getattr(self, name)))
        for name in ("soft_contact_ke", "soft_contact_kd", "soft_contact_kf", "soft_contact_mu", "soft_contact_restitution"):
            setattr(model, name, float(getattr(self, name)))

        for kind, groups, parts in (("surface", self._surfaces, ("particle", "tri", "edge")),
                                    ("volume", self._volumes, ("particle", None, None, "tet"))):
            setattr(model, f"{kind}_count", len(groups))
            setattr(model, f"{kind}_label", [g[0] for g in groups])
            setattr(model, f"{kind}_world", arr([g[1] for g in groups], wp.int32))
            for slot, part in enumerate(parts):
                if part is None:
                    continue
                setattr(model, f"{kind}_{part}_start", arr([g[2][slot] for g in groups], wp.int32))
                setattr(model, f"{kind}_{part}_end", arr([g[3][slot] for g in groups], wp.int32))

        S = self.spring_count
        model.spring_count = S
        model.spring_indices = arr(self.spring_indices, wp.int32)
        model.spring_rest_length = arr(self.spring_rest_length, wp.float32, grad=True)
        model.spring_stiffness = arr(self.spring_stiffness, wp.float32, grad=True)
        model.spring_damping = arr(self.spring_damping, wp.float32, grad=True)
        model.spring_control = arr(self.spring_control, wp.float32, grad=True)
        model.spring_constraint_lambdas = wp.zeros(S, dtype=wp.float32, device=device, requires_grad=requires_grad)

        T = self.tri_count
        model.tri_count = T
        model.tri_indices = arr(self.tri_indices, wp.int32, (3,))
        model.tri_poses = arr(self.tri_poses, wp.mat22, (2, 2), grad=True)
        model.tri_activations = arr(self.tri_activations, wp.float32, grad=True)
        model.tri_materials = arr(self.tri_materials, wp.float32, (5,), grad=True)
        model.tri_areas = arr(self.tri_areas, wp.float32, grad=True)
        model.tri_color = arr(self.tri_color, wp.vec3, (3,))
        model.tri_opacity = arr(self.tri_opacity, wp.float32)

        E = self.edge_count
        model.edge_count = E
        model.edge_indices = arr(self.edge_indices, wp.int32, (4,))
        model.edge_rest_angle = arr(self.edge_rest_angle, wp.float32, grad=True)
        model.edge_rest_length = arr(self.edge_rest_length, wp.float32, grad=True)
        model.edge_bending_properties = arr(self.edge_bending_properties, wp.float32, (2,), grad=True)
        model.edge_constraint_lambdas = wp.zeros(E, dtype=wp.float32, device=device, requires_grad=requires_grad)

        K = self.tet_count
        model.tet_count = K
        model.tet_indices = arr(self.tet_indices, wp.int32, (4,))
        model.tet_poses = arr(self.tet_poses, wp.mat33, (3, 3), grad=True)
        model.tet_activations = arr(self.tet_activations, wp.float32, grad=True)
        model.tet_materials = arr(self.tet_materials, wp.float32, (3,), grad=True)

        colors = np.full(N, -1, dtype=np.int32)
        groups = []
        for c, g in enumerate(self.particle_color_groups):
            g = np.asarray(g, dtype=np.int32).reshape(-1)
            colors[g] = c
            groups.append(wp.array(g, dtype=wp.int32, device=device))
        model.particle_color_groups = groups
        model.particle_colors = wp.array(colors, dtype=wp.int32, device=device)
        if hasattr(self, "body_color_groups") and getattr(model, "body_color_groups", None) in (None, []):
            nb = int(getattr(self, "body_count", 0) or 0)
            bcolors = np.full(nb, -1, dtype=np.int32)
            bgroups = []
            for c, g in enumerate(self.body_color_groups):
                g = np.asarray(g, dtype=np.int32).reshape(-1)
                bcolors[g] = c
                bgroups.append(wp.array(g, dtype=wp.int32, device=device))
            model.body_color_groups = bgroups
            model.body_colors = wp.array(bcolors, dtype=wp.int32, device=device)

        # frequencies of the built-in particle arrays (for Model.get_attribute_frequency)
        from .custom_attributes import AttributeFrequency as AF

        freq = getattr(model, "attribute_frequency", None)
        if not isinstance(freq, dict):
            freq = {}
            model.attribute_frequency = freq
        for name in ("particle_q", "particle_qd", "particle_mass", "particle_inv_mass", "particle_radius", "particle_flags", "particle_world", "particle_colors"):
            freq.setdefault(name, AF.PARTICLE)
        for name in ("spring_rest_length", "spring_stiffness", "spring_damping", "spring_control"):
            freq.setdefault(name, AF.SPRING)
        for name in ("tri_indices", "tri_poses", "tri_activations", "tri_materials", "tri_areas"):
            freq.setdefault(name, AF.TRIANGLE)
        for name in ("edge_indices", "edge_rest_angle", "edge_rest_length", "edge_bending_properties"):
            freq.setdefault(name, AF.EDGE)
        for name in ("tet_indices", "tet_poses", "tet_activations", "tet_materials"):
            freq.setdefault(name, AF.TETRAHEDRON)
