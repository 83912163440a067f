"""Discrete rod input data: :class:`Rod` (``armillary.Rod``).

A :class:`Rod` stores the initial centerline points, the segment topology (an ordered chain of
consecutive points, or an explicit graph of edges), one material frame per segment (a unit
quaternion ``(x, y, z, w)`` whose local ``+Z`` axis is the segment tangent), optional
structural-rest points and frames, and optional constitutive data: either an isotropic elastic
material (``youngs_modulus`` with ``poissons_ratio`` or ``shear_modulus`` and a circular ``radius``)
or a complete set of section rigidities (EA, kGA, EI, GJ). :meth:`ModelBuilder.add_rod
<armillary.ModelBuilder.add_rod>` turns it into capsule bodies connected by ROD joints.

All validation errors are ``ValueError`` naming the offending array (and index) and what is allowed.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["Rod", "SHEAR_CORRECTION", "MIN_SEGMENT_LENGTH", "FRAME_ALIGNMENT_TOLERANCE"]

SHEAR_CORRECTION = 0.9
"""Transverse shear correction factor ``k`` of a solid circular section (OpenUSD-compatible)."""
MIN_SEGMENT_LENGTH = 1e-9
"""Shortest accepted segment [m]."""
FRAME_ALIGNMENT_TOLERANCE = 0.999
"""Minimum dot product between a frame's local +Z axis and its segment tangent."""


# ---------------------------------------------------------------------- quaternion helpers (xyzw, float64)
def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of (..., 4) xyzw quaternions."""
    ax, ay, az, aw = np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)
    bx, by, bz, bw = np.moveaxis(np.asarray(b, dtype=np.float64), -1, 0)
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    q = np.array(q, dtype=np.float64)
    q[..., :3] *= -1.0
    return q


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate (..., 3) vectors by (..., 4) unit quaternions."""
    q = np.asarray(q, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    u, w = q[..., :3], q[..., 3:4]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_from_axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis)
    s = math.sin(0.5 * angle)
    return np.array([axis[0] * s, axis[1] * s, axis[2] * s, math.cos(0.5 * angle)])


def quat_between(a: np.ndarray, b: np.ndarray, fallback_axis: np.ndarray | None = None) -> np.ndarray:
    """Minimal rotation taking unit vector ``a`` onto unit vector ``b``.

    For opposite vectors the rotation is by pi about ``fallback_axis`` (projected perpendicular to
    ``a``) or, without one, about the world axis least aligned with ``a``.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = float(np.dot(a, b))
    if d < -1.0 + 1e-12:
        axis = None
        if fallback_axis is not None:
            f = np.asarray(fallback_axis, dtype=np.float64)
            f = f - np.dot(f, a) * a
            if np.linalg.norm(f) > 1e-9:
                axis = f
        if axis is None:
            axis = np.cross(a, np.eye(3)[int(np.argmin(np.abs(a)))])
        axis = axis / np.linalg.norm(axis)
        return np.array([axis[0], axis[1], axis[2], 0.0])
    c = np.cross(a, b)
    q = np.array([c[0], c[1], c[2], 1.0 + d])
    return q / np.linalg.norm(q)


_EZ = np.array([0.0, 0.0, 1.0])


def align_frame(q: np.ndarray, tangent: np.ndarray) -> np.ndarray:
    """Minimally rotate unit frame ``q`` so that its local +Z equals ``tangent`` (roll preserved)."""
    z = quat_rotate(q, _EZ)
    out = quat_mul(quat_between(z, tangent), q)
    return out / np.linalg.norm(out)


def _float_or_none(value, name: str):
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    return v


class Rod:
    """Discrete rod input for model construction (see ``docs/rods.md``).

    Args:
        points: initial centerline node positions in world space [m], shape ``(N, 3)``, ``N >= 2``.
        edges: optional simple-graph segment endpoint indices, shape ``(E, 2)``; self-edges and
            duplicate undirected edges are rejected. If omitted, consecutive points form an
            ordered chain.
        quaternions: optional per-segment material frames in world space (xyzw), shape ``(E, 4)``;
            each frame's local +Z must align with its segment (dot >= 0.999). Non-unit frames are
            normalized; zero or non-finite frames are rejected. If omitted, an ordered chain uses
            parallel transport and other topologies align each frame independently to its edge.
        rest_points: optional structural-rest node positions [m], shape ``(N, 3)``; their edge
            lengths define capsule geometry, mass, anchors and rigidity discretization.
        rest_quaternions: optional structural-rest frames, shape ``(E, 4)``, aligned with the rest
            tangents. If omitted, assembly transports the initial roll to the rest tangents.
        rest_straight: use zero intrinsic bend and twist (identity rest rotations) without changing
            the initial pose or the segment lengths; requires an ordered chain with at least two
            segments and no explicit rest data.
        closed: connect the last segment to the first; only without ``edges``, with at least two
            segments and coincident first/last structural-rest points (``rest_points`` if given,
            else ``points``).
        radius: capsule / circular-section radius [m] (``> 0``); assembly uses 0.1 m when omitted.
        youngs_modulus: Young's modulus ``E`` [Pa] (``>= 0``); requires ``radius`` and exactly one
            of ``poissons_ratio`` (``-1 < nu < 0.5``) and ``shear_modulus`` [Pa] (``>= 0``).
        stretch_rigidity, shear_rigidity, bend_rigidity, twist_rigidity: section rigidities EA [N],
            kGA [N], EI [N m^2], GJ [N m^2] (finite, ``>= 0``), all four together; mutually
            exclusive with the elastic material inputs.

    Raises:
        ValueError: invalid or inconsistent geometry, frames, topology or constitutive inputs.
    """

    def __init__(
        self,
        points,
        *,
        edges=None,
        quaternions=None,
        rest_points=None,
        rest_quaternions=None,
        rest_straight: bool = False,
        closed: bool = False,
        radius: float | None = None,
        youngs_modulus: float | None = None,
        poissons_ratio: float | None = None,
        shear_modulus: float | None = None,
        stretch_rigidity: float | None = None,
        shear_rigidity: float | None = None,
        bend_rigidity: float | None = None,
        twist_rigidity: float | None = None,
    ):
        self._points = self._normalize_points(points, "points")
        self._edges_are_implicit = edges is None
        self._edges = self._chain_edges(len(self._points)) if edges is None else self._normalize_edges(edges, len(self._points))
        self.closed = bool(closed)
        self.rest_straight = bool(rest_straight)
        self._rest_points = None if rest_points is None else self._normalize_points(rest_points, "rest_points")
        self._rest_quaternions = None if rest_quaternions is None else self._normalize_quaternions(rest_quaternions, "rest_quaternions")
        self.radius = radius
        self.youngs_modulus = youngs_modulus
        self.poissons_ratio = poissons_ratio
        self.shear_modulus = shear_modulus
        self.stretch_rigidity = stretch_rigidity
        self.shear_rigidity = shear_rigidity
        self.bend_rigidity = bend_rigidity
        self.twist_rigidity = twist_rigidity
        self._quaternions = None
        self._validate_topology()
        if quaternions is None:
            self.compute_frames()
        else:
            self._quaternions = self._normalize_quaternions(quaternions, "quaternions")
        self.validate()

    # ------------------------------------------------------------------ normalization
    @staticmethod
    def _chain_edges(n: int) -> np.ndarray:
        i = np.arange(max(n - 1, 0), dtype=np.int32)
        return np.stack([i, i + 1], axis=1).astype(np.int32).reshape(-1, 2)

    @staticmethod
    def _normalize_points(points, name: str) -> np.ndarray:
        try:
            p = np.array(points, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an array of shape (N, 3) of numbers") from None
        if p.ndim != 2 or p.shape[1] != 3:
            raise ValueError(f"{name} must have shape (N, 3), got {p.shape}")
        if len(p) < 2:
            raise ValueError(f"{name} must contain at least 2 points, got {len(p)}")
        bad = np.nonzero(~np.all(np.isfinite(p), axis=1))[0]
        if len(bad):
            raise ValueError(f"{name} must be finite; point index {int(bad[0])} is {p[bad[0]].tolist()}")
        return np.ascontiguousarray(p, dtype=np.float32)

    @staticmethod
    def _normalize_edges(edges, n_points: int) -> np.ndarray:
        e = np.asarray(edges)
        if e.ndim != 2 or e.shape[1] != 2 or (e.size and not np.issubdtype(e.dtype, np.integer)):
            if e.size and e.ndim == 2 and e.shape[1] == 2 and np.issubdtype(e.dtype, np.floating) and np.all(e == np.round(e)):
                e = e.astype(np.int64)
            else:
                raise ValueError(f"edges must have shape (E, 2) and contain integer indices, got shape {e.shape} dtype {e.dtype}")
        if len(e) == 0:
            raise ValueError("edges must contain at least 1 edge")
        bad = np.nonzero(np.any((e < 0) | (e >= n_points), axis=1))[0]
        if len(bad):
            k = int(bad[0])
            raise ValueError(f"edges must contain point indices in [0, {n_points}); edge index {k} is {e[k].tolist()}")
        self_edges = np.nonzero(e[:, 0] == e[:, 1])[0]
        if len(self_edges):
            k = int(self_edges[0])
            raise ValueError(f"edges must not connect a point to itself; edge index {k} is {e[k].tolist()}")
        seen: dict[tuple[int, int], int] = {}
        for k, (a, b) in enumerate(e.tolist()):
            key = (min(a, b), max(a, b))
            if key in seen:
                raise ValueError(
                    f"edges must not contain duplicates; edge index {k} {[a, b]} repeats edge index {seen[key]}"
                )
            seen[key] = k
        return np.ascontiguousarray(e, dtype=np.int32)

    @staticmethod
    def _normalize_quaternions(quats, name: str, count: int | None = None) -> np.ndarray:
        try:
            q = np.array(quats, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an array of shape (E, 4) of numbers (x, y, z, w)") from None
        if q.ndim != 2 or q.shape[1] != 4:
            raise ValueError(f"{name} must have shape (E, 4) (x, y, z, w), got {q.shape}")
        bad = np.nonzero(~np.all(np.isfinite(q), axis=1))[0]
        if len(bad):
            raise ValueError(f"{name} must be finite; segment index {int(bad[0])} is {q[bad[0]].tolist()}")
        norm = np.linalg.norm(q, axis=1)
        bad = np.nonzero(norm < 1e-12)[0]
        if len(bad):
            raise ValueError(f"{name} must be non-zero; segment index {int(bad[0])} is {q[bad[0]].tolist()}")
        return np.ascontiguousarray(q / norm[:, None], dtype=np.float32)

    # ------------------------------------------------------------------ properties
    @property
    def points(self) -> np.ndarray:
        """Initial centerline node positions [m], shape ``(N, 3)``, float32 (writable)."""
        return self._points

    @points.setter
    def points(self, value) -> None:
        p = self._normalize_points(value, "points")
        if self._edges_are_implicit:
            edges = self._chain_edges(len(p))
        else:
            edges = self._edges
            if int(edges.max()) >= len(p):
                raise ValueError(f"points: edges reference point index {int(edges.max())} but only {len(p)} points were given")
        self._points = p
        self._edges = edges

    @property
    def edges(self) -> np.ndarray:
        """Segment endpoint indices, shape ``(E, 2)``, int32 (writable; assigning disables the automatic chain)."""
        return self._edges

    @edges.setter
    def edges(self, value) -> None:
        e = self._normalize_edges(value, len(self._points))
        self._edges = e
        self._edges_are_implicit = False

    @property
    def quaternions(self) -> np.ndarray:
        """Normalized segment frames in world space (xyzw), shape ``(E, 4)``, float32 (writable)."""
        return self._quaternions

    @quaternions.setter
    def quaternions(self, value) -> None:
        self._quaternions = self._normalize_quaternions(value, "quaternions")

    @property
    def rest_points(self) -> np.ndarray | None:
        """Structural-rest points [m], shape ``(N, 3)``; ``None`` uses the initial points."""
        return self._rest_points

    @rest_points.setter
    def rest_points(self, value) -> None:
        self._rest_points = None if value is None else self._normalize_points(value, "rest_points")

    @property
    def rest_quaternions(self) -> np.ndarray | None:
        """Structural-rest frames, shape ``(E, 4)``; ``None`` transports the initial roll."""
        return self._rest_quaternions

    @rest_quaternions.setter
    def rest_quaternions(self, value) -> None:
        self._rest_quaternions = None if value is None else self._normalize_quaternions(value, "rest_quaternions")

    @property
    def point_count(self) -> int:
        return len(self._points)

    @property
    def segment_count(self) -> int:
        return len(self._edges)

    @property
    def segment_lengths(self) -> np.ndarray:
        """Initial length of every segment [m], shape ``(E,)``."""
        p = self._points.astype(np.float64)
        return np.linalg.norm(p[self._edges[:, 1]] - p[self._edges[:, 0]], axis=1)

    def rest_segment_lengths(self) -> np.ndarray:
        """Structural-rest length of every segment [m] (from ``rest_points``, else ``points``)."""
        p = (self._rest_points if self._rest_points is not None else self._points).astype(np.float64)
        return np.linalg.norm(p[self._edges[:, 1]] - p[self._edges[:, 0]], axis=1)

    def is_ordered_chain(self) -> bool:
        """Whether the topology is an ordered chain (edges omitted, or exactly ``[[i, i+1], ...]``)."""
        if self._edges_are_implicit:
            return True
        e = self._edges
        return len(e) == len(self._points) - 1 and np.array_equal(e, self._chain_edges(len(self._points)))

    # ------------------------------------------------------------------ validation
    def _validate_topology(self) -> None:
        if self._edges_are_implicit and len(self._edges) != len(self._points) - 1:
            self._edges = self._chain_edges(len(self._points))
        if not self._edges_are_implicit and int(self._edges.max()) >= len(self._points):
            raise ValueError(f"edges must contain point indices in [0, {len(self._points)})")
        lengths = self.segment_lengths
        short = np.nonzero(~(lengths > MIN_SEGMENT_LENGTH))[0]
        if len(short):
            k = int(short[0])
            raise ValueError(
                f"all rod segments must have length > {MIN_SEGMENT_LENGTH} m; segment index {k} "
                f"(points {self._edges[k].tolist()}) has length {lengths[k]:.3g} in points"
            )

    @staticmethod
    def _check_alignment(points: np.ndarray, edges: np.ndarray, quats: np.ndarray, name: str) -> None:
        p = points.astype(np.float64)
        t = p[edges[:, 1]] - p[edges[:, 0]]
        t /= np.linalg.norm(t, axis=1, keepdims=True)
        z = quat_rotate(quats.astype(np.float64), np.broadcast_to(_EZ, t.shape))
        dots = np.sum(z * t, axis=1)
        bad = np.nonzero(~(dots >= FRAME_ALIGNMENT_TOLERANCE))[0]
        if len(bad):
            k = int(bad[0])
            raise ValueError(
                f"{name} at segment index {k} must align local +Z with the segment direction "
                f"(dot product {dots[k]:.4f}, allowed >= {FRAME_ALIGNMENT_TOLERANCE})"
            )

    def validate(self) -> None:
        """Revalidate the whole rod (geometry, frames, rest data, options, constitutive inputs)."""
        self._validate_topology()
        n, e = len(self._points), len(self._edges)
        if self._quaternions is None or len(self._quaternions) != e:
            got = 0 if self._quaternions is None else len(self._quaternions)
            raise ValueError(f"quaternions must contain {e} frames (one per segment), got {got}")
        self._check_alignment(self._points, self._edges, self._quaternions, "quaternion")
        if self._rest_points is not None:
            if len(self._rest_points) != n:
                raise ValueError(f"rest_points must contain {n} points (one per point), got {len(self._rest_points)}")
            rl = self.rest_segment_lengths()
            short = np.nonzero(~(rl > MIN_SEGMENT_LENGTH))[0]
            if len(short):
                k = int(short[0])
                raise ValueError(f"all rod segments must have length > {MIN_SEGMENT_LENGTH} m; segment index {k} has rest length {rl[k]:.3g}")
        if self._rest_quaternions is not None:
            if len(self._rest_quaternions) != e:
                raise ValueError(f"rest_quaternions must contain {e} frames (one per segment), got {len(self._rest_quaternions)}")
            rp = self._rest_points if self._rest_points is not None else self._points
            self._check_alignment(rp, self._edges, self._rest_quaternions, "rest_quaternion")
        if self.rest_straight:
            if self._rest_points is not None or self._rest_quaternions is not None:
                raise ValueError("rest_straight cannot be combined with explicit rest_points or rest_quaternions")
            if not self.is_ordered_chain() or e < 2:
                raise ValueError(f"rest_straight requires an ordered chain with at least two segments (got {e} segment(s)"
                                 f"{'' if self.is_ordered_chain() else ' in an explicit graph'})")
        if self.closed:
            if not self._edges_are_implicit:
                raise ValueError("closed is only valid when edges is omitted (ordered chains)")
            if e < 2:
                raise ValueError(f"closed rods require at least two segments, got {e}")
            rp = (self._rest_points if self._rest_points is not None else self._points).astype(np.float64)
            name = "rest_points" if self._rest_points is not None else "points"
            gap = float(np.linalg.norm(rp[-1] - rp[0]))
            scale = max(1.0, float(np.abs(rp).max()))
            if gap > 1e-6 * scale:
                raise ValueError(
                    f"closed rods require the first and last {name} to coincide (repeat the first point at the end); "
                    f"they are {gap:.3g} m apart"
                )
        self._resolve_section_rigidities()

    # ------------------------------------------------------------------ constitutive data
    def _resolve_radius(self) -> float | None:
        r = _float_or_none(self.radius, "radius")
        if r is not None and not (math.isfinite(r) and r > 0.0):
            raise ValueError(f"radius must be finite and > 0, got {r}")
        return r

    def _resolve_elastic_material(self) -> tuple[float, float, float] | None:
        """``(E, radius, G)`` of the elastic material, or ``None`` without material inputs."""
        E = _float_or_none(self.youngs_modulus, "youngs_modulus")
        nu = _float_or_none(self.poissons_ratio, "poissons_ratio")
        G = _float_or_none(self.shear_modulus, "shear_modulus")
        r = self._resolve_radius()
        if E is None and nu is None and G is None:
            return None
        if E is None:
            raise ValueError("youngs_modulus is required with elastic material inputs (poissons_ratio / shear_modulus)")
        if r is None:
            raise ValueError("radius is required with elastic material inputs (it defines the circular cross-section)")
        if (nu is None) == (G is None):
            raise ValueError("exactly one of poissons_ratio and shear_modulus must be supplied with youngs_modulus")
        if not (math.isfinite(E) and E >= 0.0):
            raise ValueError(f"youngs_modulus must be finite and >= 0, got {E}")
        if nu is not None:
            if not (math.isfinite(nu) and -1.0 < nu < 0.5):
                raise ValueError(f"poissons_ratio must satisfy -1 < nu < 0.5, got {nu}")
            G = E / (2.0 * (1.0 + nu))
        elif not (math.isfinite(G) and G >= 0.0):
            raise ValueError(f"shear_modulus must be finite and >= 0, got {G}")
        return E, r, G

    _RIGIDITY_NAMES = ("stretch_rigidity", "shear_rigidity", "bend_rigidity", "twist_rigidity")

    def _resolve_section_rigidities(self) -> tuple[float, float, float, float] | None:
        vals = [_float_or_none(getattr(self, n), n) for n in self._RIGIDITY_NAMES]
        given = [v is not None for v in vals]
        material = any(getattr(self, n) is not None for n in ("youngs_modulus", "poissons_ratio", "shear_modulus"))
        if any(given) and material:
            raise ValueError(
                "elastic material inputs (youngs_modulus, poissons_ratio, shear_modulus) and section rigidity inputs "
                "(stretch_rigidity, shear_rigidity, bend_rigidity, twist_rigidity) are mutually exclusive"
            )
        if any(given):
            if not all(given):
                missing = [n for n, g in zip(self._RIGIDITY_NAMES, given) if not g]
                raise ValueError(
                    "stretch_rigidity, shear_rigidity, bend_rigidity, and twist_rigidity must be supplied together; "
                    f"missing {missing}"
                )
            for n, v in zip(self._RIGIDITY_NAMES, vals):
                if not (math.isfinite(v) and v >= 0.0):
                    raise ValueError(f"{n} must be finite and >= 0, got {v}")
            self._resolve_radius()
            return tuple(vals)  # type: ignore[return-value]
        mat = self._resolve_elastic_material()
        if mat is None:
            self._resolve_radius()
            return None
        E, r, G = mat
        area = math.pi * r * r
        inertia = math.pi * r**4 / 4.0
        polar = math.pi * r**4 / 2.0
        return (E * area, SHEAR_CORRECTION * G * area, E * inertia, G * polar)

    def section_rigidities(self) -> tuple[float, float, float, float] | None:
        """Section rigidities ``(EA, kGA, EI, GJ)`` [N, N, N m^2, N m^2], or ``None`` without constitutive data.

        For an elastic material on a solid circular section of radius ``r``: ``A = pi r^2``,
        ``I = pi r^4 / 4``, ``J = pi r^4 / 2``, ``G = shear_modulus`` or ``E / (2 (1 + nu))`` and
        ``k = 0.9``. Direct rigidities are returned as given.
        """
        return self._resolve_section_rigidities()

    # ------------------------------------------------------------------ frames
    def compute_frames(self, *, twist_total: float = 0.0) -> None:
        """Recompute the initial segment frames from the current centerline.

        Ordered chains use parallel transport (each frame is the previous one minimally rotated
        onto the next tangent, so consecutive frames have no relative twist) and ``twist_total``
        [rad] is split in equal per-segment increments about the tangents, the first frame
        included. Other topologies align each frame independently (minimal rotation of the
        identity onto the edge); ``twist_total`` must then be zero.
        """
        tw = _float_or_none(twist_total, "twist_total")
        if not math.isfinite(tw):
            raise ValueError(f"twist_total must be finite, got {tw}")
        self._validate_topology()
        p = self._points.astype(np.float64)
        t = p[self._edges[:, 1]] - p[self._edges[:, 0]]
        t /= np.linalg.norm(t, axis=1, keepdims=True)
        e = len(t)
        out = np.empty((e, 4))
        if self.is_ordered_chain():
            q = quat_between(_EZ, t[0], fallback_axis=np.array([0.0, 1.0, 0.0]))
            out[0] = q
            for i in range(1, e):
                x_axis = quat_rotate(q, np.array([1.0, 0.0, 0.0]))
                q = quat_mul(quat_between(t[i - 1], t[i], fallback_axis=x_axis), q)
                q /= np.linalg.norm(q)
                out[i] = q
            if tw != 0.0:
                for i in range(e):
                    out[i] = quat_mul(out[i], quat_from_axis_angle(_EZ, tw * (i + 1) / e))
        else:
            if tw != 0.0:
                raise ValueError("twist_total must be zero unless the topology is an ordered chain")
            for i in range(e):
                out[i] = quat_between(_EZ, t[i], fallback_axis=np.array([0.0, 1.0, 0.0]))
        self._quaternions = np.ascontiguousarray(out, dtype=np.float32)

    # ------------------------------------------------------------------ helpers
    def copy(self) -> "Rod":
        """An independent, revalidated copy of this rod."""
        return Rod(
            self._points.copy(), edges=None if self._edges_are_implicit else self._edges.copy(),
            quaternions=self._quaternions.copy(),
            rest_points=None if self._rest_points is None else self._rest_points.copy(),
            rest_quaternions=None if self._rest_quaternions is None else self._rest_quaternions.copy(),
            rest_straight=self.rest_straight, closed=self.closed, radius=self.radius,
            youngs_modulus=self.youngs_modulus, poissons_ratio=self.poissons_ratio, shear_modulus=self.shear_modulus,
            stretch_rigidity=self.stretch_rigidity, shear_rigidity=self.shear_rigidity,
            bend_rigidity=self.bend_rigidity, twist_rigidity=self.twist_rigidity,
        )  # fmt: skip

    @staticmethod
    def create_straight(start, direction, length: float, *, segment_count: int, twist_total: float = 0.0, **kwargs) -> "Rod":
        """A straight ordered chain of ``segment_count`` equal segments from ``start`` along ``direction``
        (normalized) of total ``length`` [m]; ``kwargs`` are the other :class:`Rod` arguments (no
        ``edges``/``quaternions``/``closed``)."""
        if isinstance(segment_count, bool) or int(segment_count) != segment_count or int(segment_count) < 1:
            raise ValueError(f"segment_count must be an integer >= 1, got {segment_count!r}")
        d = np.asarray(direction, dtype=np.float64).reshape(3)
        nrm = float(np.linalg.norm(d))
        if not (math.isfinite(nrm) and nrm > 0.0):
            raise ValueError(f"direction must be a finite non-zero vector, got {d.tolist()}")
        length = float(length)
        if not (math.isfinite(length) and length > 0.0):
            raise ValueError(f"length must be finite and > 0, got {length}")
        s = np.asarray(start, dtype=np.float64).reshape(3)
        pts = s + np.outer(np.linspace(0.0, length, int(segment_count) + 1), d / nrm)
        rod = Rod(pts, **kwargs)
        if twist_total:
            rod.compute_frames(twist_total=twist_total)
        return rod

    def __repr__(self) -> str:
        kind = "chain" if self.is_ordered_chain() else "graph"
        return f"Rod({self.point_count} points, {self.segment_count} segments, {kind}{', closed' if self.closed else ''})"
