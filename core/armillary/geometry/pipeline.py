""":class:`CollisionPipeline`: AABBs -> broad phase -> narrow phase -> (optional) deterministic sort.

Launches per :meth:`CollisionPipeline.collide` call: one AABB kernel (which also resets
the counters), the broad phase (1 launch; SAP: 2 + sort), the narrow phase (1), the
mesh-mesh / heightfield-mesh routes when the model has such pairs (:mod:`.mesh_mesh`: a counter
memset, a claim, a feature and, with reduction, a finalize kernel), the soft
contact kernel when the model has particles and particle-colliding shapes (1), and with
``deterministic=True`` a radix sort plus one gather kernel (:mod:`.contact_sort`, shared with
:class:`.NarrowPhase`); with contact matching
(:mod:`.matching`, implies ``deterministic``) 3 more (sticky: 4), plus a scan and 2 kernels
for contact reports; with ``requires_grad`` one recorded launch filling the deprecated
``rigid_contact_diff_*`` outputs (:mod:`.contact_kinematics`). Nothing syncs with the host,
so ``collide`` can be captured in a CUDA graph once the pipeline and its contacts exist.

Buffer overflow is counted inside those kernels (no extra launch): a contact (or broad-phase
candidate pair) that finds its buffer full is dropped and counted in the contacts buffer's
``contact_counters`` / ``contact_capacity_needed``, which the AABB kernel resets (the needed
capacities only on ``Contacts.clear()``); :meth:`CollisionPipeline.check_overflow` reads them on
the host and warns once per pipeline and kind, naming the capacity to pass.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.contacts import ContactOverflow, Contacts
from ..sim.exceptions import warn as _warn
from ..sim.enums import GeoType, ShapeFlags
from .broad_phase import BroadPhaseAllPairs, BroadPhaseExplicit, BroadPhaseSAP, grid_dim
from ..launch import LaunchCache
from .contact_kinematics import contact_kinematics_kernel
from .matching import ContactMatcher
from .contact_sort import (DeterministicSort, ReductionSlots, alloc_contact_out, copy_contact_out, set_counters,
                           set_reduction)
from .mesh_mesh import MM_PAIR_ESTIMATE, MeshMeshRoute, prim_sdf_flags, routed_pair_mask
from .narrow_phase import (
    PAIR_MAX_CONTACTS,
    SOFT_CONTACT_TYPES,
    ContactOut,
    convex_mesh_buffers,
    narrow_phase_kernel,
    soft_contact_kernel,
)

_PLANE = wp.constant(int(GeoType.PLANE))
_SPHERE = wp.constant(int(GeoType.SPHERE))
_CAPSULE = wp.constant(int(GeoType.CAPSULE))
_BOX = wp.constant(int(GeoType.BOX))
_BIG = wp.constant(1.0e6)


@wp.kernel
def _aabb_kernel(
    shape_count: int,
    shape_type: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=wp.transform),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_margin: wp.array(dtype=float),
    shape_gap: wp.array(dtype=float),
    shape_radius: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    spec: int,
    dt: float,
    emax: float,
    shape_X: wp.array(dtype=wp.transform),
    lower: wp.array(dtype=wp.vec3),
    upper: wp.array(dtype=wp.vec3),
    cand_count: wp.array(dtype=int),
    rigid_count: wp.array(dtype=int),
    soft_count: wp.array(dtype=int),
    dropped: wp.array(dtype=int),
    generation: wp.array(dtype=int),
    sort_key: wp.array(dtype=wp.int64),
    key_fill: wp.int64,
    stride: int,
):
    tid = wp.tid()
    if tid == 0:
        cand_count[0] = 0
        rigid_count[0] = 0
        soft_count[0] = 0
        for k in range(dropped.shape[0]):
            dropped[k] = 0
        if generation.shape[0] > 0:
            generation[0] = generation[0] + 1
    k = tid
    while k < sort_key.shape[0]:
        sort_key[k] = key_fill
        k += stride
    s = tid
    while s < shape_count:
        body = shape_body[s]
        X = shape_transform[s]
        if body >= 0:
            X = body_q[body] * X
        shape_X[s] = X
        t = shape_type[s]
        sc = shape_scale[s]
        c = wp.transform_get_translation(X)
        q = wp.transform_get_rotation(X)
        ext = wp.vec3(0.0)
        if t == _SPHERE:
            ext = wp.vec3(sc[0])
        elif t == _CAPSULE:
            ax = wp.quat_rotate(q, wp.vec3(0.0, 0.0, sc[1]))
            ext = wp.vec3(wp.abs(ax[0]) + sc[0], wp.abs(ax[1]) + sc[0], wp.abs(ax[2]) + sc[0])
        elif t == _BOX:
            for i in range(3):
                e = wp.vec3(0.0)
                e[i] = sc[i]
                a = wp.quat_rotate(q, e)
                ext += wp.vec3(wp.abs(a[0]), wp.abs(a[1]), wp.abs(a[2]))
        elif t == _PLANE:
            if sc[0] > 0.0 and sc[1] > 0.0:
                ax = wp.quat_rotate(q, wp.vec3(0.5 * sc[0], 0.0, 0.0))
                ay = wp.quat_rotate(q, wp.vec3(0.0, 0.5 * sc[1], 0.0))
                ext = wp.vec3(wp.abs(ax[0]) + wp.abs(ay[0]), wp.abs(ax[1]) + wp.abs(ay[1]),
                              wp.abs(ax[2]) + wp.abs(ay[2]))  # fmt: skip
            else:
                ext = wp.vec3(_BIG)
        else:
            ext = wp.vec3(shape_radius[s])
        pad = shape_margin[s] + shape_gap[s]
        if spec != 0 and body >= 0:
            v = wp.spatial_top(body_qd[body])
            w = wp.spatial_bottom(body_qd[body])
            com = wp.transform_point(body_q[body], body_com[body])
            reach = wp.length(c - com) + shape_radius[s]
            pad += wp.min((wp.length(v) + wp.length(w) * reach) * dt, emax)
        lower[s] = c - ext - wp.vec3(pad)
        upper[s] = c + ext + wp.vec3(pad)
        s += stride


def _type_name(t: int) -> str:
    try:
        return GeoType(int(t)).name
    except ValueError:
        return str(int(t))


class CollisionPipeline:
    """Rigid (shape-shape) and soft (particle-shape) contact generation for a :class:`Model`.

    Rigid pairs: analytic routines for PLANE, SPHERE, CAPSULE and BOX; GJK (separated) and
    MPR with refinement (overlapping) for every other pair among SPHERE, CAPSULE, ELLIPSOID,
    CYLINDER (incl. barrel), BOX, CONE and CONVEX_MESH and against PLANE, with clipped face
    manifolds (up to 4 points); triangle MESH and HFIELD against all of those through a BVH /
    the grid, with back-face culling (CCW winding). MESH-MESH and HFIELD-MESH pairs go through
    :mod:`.mesh_mesh`: each side's vertices and (feature) edges against the other side's signed
    distance, from its SDF when the mesh carries one (``Mesh.sdf``, BVH fallback outside the grid
    and below the narrow band), else from the BVH (deep points included), or the heightfield
    evaluated on the fly (plus the heightfield grid points under the mesh against the mesh);
    sizing estimate 40 contacts per such pair, at most 180 (<= 240) per reduced pair.
    Plane-plane, plane-heightfield and heightfield-heightfield pairs are static-static and never
    collide. Pairs of two hydroelastic shapes
    (``ShapeFlags.HYDROELASTIC``) go to :class:`.hydroelastic.HydroelasticSDF`
    (``sdf_hydroelastic_config``; contact areas with per-contact stiffness, see
    ``docs/hydroelastic.md``) instead of the narrow phase. Soft contacts are generated
    for particles against PLANE, SPHERE, CAPSULE and BOX shapes (analytic), ELLIPSOID, CYLINDER,
    CONE and CONVEX_MESH shapes (particle center as a point through GJK / MPR), and MESH and
    HFIELD shapes (closest triangle to the particle center within radius + gap, from the BVH /
    the grid cells under it; the CCW front side is outside, a particle behind its closest
    triangle is inside and gets a negative distance with the normal still pointing out).

    ``reduce_contacts=True`` (default) reduces the contacts of every MESH / HFIELD pair (each
    overlapping triangle otherwise contributes up to 4) to at most
    :data:`.narrow_phase.REDUCE_KEEP` (7): the deepest one plus the ones extremal along 6
    directions (60 degrees apart) in the plane normal to the deepest contact's normal, so the
    support polygon is kept (ties go to the lower sub-key: the result is order independent).
    The reduction runs inside the pair's narrow-phase thread on a bounded slot block
    (:data:`.narrow_phase.REDUCE_SLOTS` candidates, compacted when full); a pair finding no free
    block (more mesh pairs than estimated with the SAP / NxN broad phases) emits unreduced.
    MESH-MESH / HFIELD-MESH pairs use their own binned streaming reduction instead (20 normal
    bins, per bin the deepest contact and the extremal ones along 8 in-plane directions; exact and
    order independent through 64-bit ``atomic_max`` keys, see :mod:`.mesh_mesh`).
    Deterministic ordering sorts by (shape_a, shape_b, sub_key) with a 24-bit sub-key
    (:mod:`.contact_sort`), unique for meshes of up to 2^22 triangles.
    """

    @dataclasses.dataclass
    class SpeculativeContactConfig:
        """Velocity-adapted gaps: ``g_eff = max(g, min(v dt, max_speculative_extension))``."""

        max_speculative_extension: float = 0.1

    def __init__(
        self,
        model,
        *,
        reduce_contacts: bool = True,
        body_pair_reduction=None,
        rigid_contact_max: int | None = None,
        max_triangle_pairs: int | None = None,
        shape_pairs_filtered=None,
        include_static_kinematic_pairs: bool = True,
        soft_contact_max: int | None = None,
        soft_contact_gap: float | None = None,
        soft_contact_margin: float | None = None,
        enable_rigid_soft_full_surface_contact: bool = False,
        requires_grad: bool | None = None,
        broad_phase=None,
        narrow_phase=None,
        sdf_hydroelastic_config=None,
        shape_pairs_max: int | None = None,
        deterministic: bool = False,
        contact_matching: str = "disabled",
        contact_matching_pos_threshold: float = 0.0005,
        contact_matching_normal_dot_threshold: float = 0.995,
        contact_report: bool = False,
        verify_buffers: bool = True,
        contact_reduction_hashtable_size_factor: float = 0.25,
        speculative_contact_gap_max: float | None = None,
        speculative_config: SpeculativeContactConfig | None = None,
        dynamic_shape_scale: bool = False,
        publish_capacity: bool = True,
    ):
        self.model = model
        self.device = model.device
        # ---- options this slice does not implement: refuse instead of ignoring
        if body_pair_reduction is not None:
            raise NotImplementedError("CollisionPipeline: body_pair_reduction is not implemented yet")
        if narrow_phase is not None:
            raise NotImplementedError("CollisionPipeline: a prebuilt narrow_phase is not supported yet")
        self.sdf_hydroelastic_config = sdf_hydroelastic_config  # see the hydroelastic split below
        if enable_rigid_soft_full_surface_contact:
            raise NotImplementedError("CollisionPipeline: full-surface rigid-soft contacts are not implemented yet")
        if contact_matching not in ("disabled", "latest", "sticky"):
            raise ValueError(f"CollisionPipeline: contact_matching={contact_matching!r} must be 'disabled', "
                             "'latest' or 'sticky'")  # fmt: skip
        if contact_report and contact_matching == "disabled":
            raise ValueError("CollisionPipeline: contact_report=True requires a non-disabled contact_matching mode")
        # max_triangle_pairs / hashtable factor / dynamic_shape_scale concern the reference's staged
        # triangle and SDF routes: here a mesh pair's triangles are processed (and its contacts
        # reduced, see reduce_contacts) inside the pair's thread, so they have nothing to act on.
        self.reduce_contacts = bool(reduce_contacts)
        self.max_triangle_pairs = max_triangle_pairs
        self.contact_reduction_hashtable_size_factor = float(contact_reduction_hashtable_size_factor)
        self.dynamic_shape_scale = bool(dynamic_shape_scale)
        self.verify_buffers = bool(verify_buffers)
        self.deterministic = bool(deterministic) or contact_matching != "disabled"  # matching implies it
        self.contact_matching = contact_matching
        self.contact_matching_pos_threshold = float(contact_matching_pos_threshold)
        self.contact_matching_normal_dot_threshold = float(contact_matching_normal_dot_threshold)
        self.contact_report = bool(contact_report)
        self.include_static_kinematic_pairs = bool(include_static_kinematic_pairs)
        self.requires_grad = bool(model.requires_grad if requires_grad is None else requires_grad)

        # ---- speculative contacts
        # ``speculative_config=SpeculativeContactConfig(max_speculative_extension=e)`` (the nested
        # spelling) and the flat ``speculative_contact_gap_max=e`` (the reference engine 1.8) spell the
        # same setting: either enables it, both are accepted when they agree
        if speculative_config is not None:
            ext = getattr(speculative_config, "max_speculative_extension", None)
            if ext is None:
                raise TypeError("CollisionPipeline: speculative_config must be a CollisionPipeline."
                                f"SpeculativeContactConfig, got {type(speculative_config).__name__}")  # fmt: skip
            if speculative_contact_gap_max is not None and float(speculative_contact_gap_max) != float(ext):
                raise ValueError(
                    f"CollisionPipeline: speculative_contact_gap_max={speculative_contact_gap_max!r} disagrees with "
                    f"speculative_config.max_speculative_extension={ext!r}; both spell the same setting, pass one"
                )
            speculative_contact_gap_max = ext
        if speculative_contact_gap_max is not None:
            e = float(speculative_contact_gap_max)
            if not math.isfinite(e) or e < 0.0:
                raise ValueError(f"CollisionPipeline: speculative_contact_gap_max={speculative_contact_gap_max!r} "
                                 "must be a non-negative finite number or None")  # fmt: skip
            speculative_contact_gap_max = e
        self.speculative_contact_gap_max = speculative_contact_gap_max

        # ---- soft contact gap
        if soft_contact_margin is not None and soft_contact_gap is not None:
            raise ValueError("CollisionPipeline: soft_contact_margin is an alias of soft_contact_gap; pass one")
        gap = soft_contact_gap if soft_contact_gap is not None else soft_contact_margin
        self.soft_contact_margin = float(0.01 if gap is None else gap)

        n = int(model.shape_count)
        self.shape_count = n
        dev = self.device
        types = model.shape_type.numpy().astype(np.int64) if n else np.zeros(0, np.int64)
        flags = model.shape_flags.numpy().astype(np.int64) if n else np.zeros(0, np.int64)

        # ---- candidate pairs known on the host: routing check and capacity estimates
        if shape_pairs_filtered is not None:
            pairs_np = shape_pairs_filtered.numpy() if isinstance(shape_pairs_filtered, wp.array) else np.asarray(
                shape_pairs_filtered)  # fmt: skip
            pairs_np = np.asarray(pairs_np, dtype=np.int32).reshape(-1, 2)
        else:
            pairs_np = np.asarray(model.shape_contact_pairs, dtype=np.int32).reshape(-1, 2)
        # hydroelastic pairs (both shapes flagged) leave the regular narrow phase (:mod:`.hydroelastic`)
        self.hydroelastic_sdf = None
        _hyd = (flags & int(ShapeFlags.HYDROELASTIC)) != 0
        if len(pairs_np) and np.any(_hyd):
            from .hydroelastic import HydroelasticSDF

            _hm = _hyd[pairs_np[:, 0]] & _hyd[pairs_np[:, 1]]
            if np.any(_hm):
                self.hydroelastic_sdf = HydroelasticSDF(model, sdf_hydroelastic_config, pairs_np[_hm],
                                                        deterministic=self.deterministic, device=dev)  # fmt: skip
                pairs_np = pairs_np[~_hm]
        self._check_pairs(pairs_np, types, model)
        # mesh-mesh / heightfield-mesh / primitive-SDF-mesh routes (:mod:`.mesh_mesh`)
        self._prim_sdf = prim_sdf_flags(model, types)

        # ---- broad phase
        if broad_phase is None:
            broad_phase = "explicit"
        self._explicit_pairs = None
        if isinstance(broad_phase, str):
            mode = broad_phase.lower()
            if mode == "explicit":
                self.broad_phase = BroadPhaseExplicit()
            elif mode == "nxn":
                self.broad_phase = BroadPhaseAllPairs(model.shape_world, model.shape_flags, device=dev)
            elif mode == "sap":
                self.broad_phase = BroadPhaseSAP(model.shape_world, model.shape_flags, device=dev)
            else:
                raise ValueError(f"CollisionPipeline: broad_phase={broad_phase!r} must be 'explicit', 'nxn' or 'sap'")
            self.broad_phase_mode = mode
        elif isinstance(broad_phase, (BroadPhaseAllPairs, BroadPhaseSAP, BroadPhaseExplicit)):
            self.broad_phase = broad_phase
            self.broad_phase_mode = {BroadPhaseAllPairs: "nxn", BroadPhaseSAP: "sap",
                                     BroadPhaseExplicit: "explicit"}[type(broad_phase)]  # fmt: skip
        else:
            raise TypeError(f"CollisionPipeline: broad_phase must be a mode string or a broad phase instance, "
                            f"got {type(broad_phase).__name__}")  # fmt: skip
        if self.broad_phase_mode == "explicit":
            self._explicit_pairs = wp.array(pairs_np.reshape(-1, 2), dtype=wp.vec2i, device=dev)
            pair_cap = len(pairs_np)
        else:
            pair_cap = int(self.broad_phase.max_pair_count)
            if shape_pairs_max is not None:
                pair_cap = min(pair_cap, int(shape_pairs_max))
        self.shape_pairs_max = max(pair_cap, 1)

        # ---- filter pairs (sorted, canonical) for nxn / sap
        fp = model.shape_collision_filter_pairs_array() if hasattr(model, "shape_collision_filter_pairs_array") \
            else np.asarray(sorted(model.shape_collision_filter_pairs), dtype=np.int32).reshape(-1, 2)  # fmt: skip
        self._filter_pairs = wp.array(np.asarray(fp, dtype=np.int32).reshape(-1, 2), dtype=wp.vec2i, device=dev)

        # ---- capacities
        if rigid_contact_max is None:
            rigid_contact_max = model.rigid_contact_max
        if rigid_contact_max is None:
            if len(pairs_np):
                ta = types[pairs_np[:, 0]]
                tb = types[pairs_np[:, 1]]
                lo, hi = np.minimum(ta, tb), np.maximum(ta, tb)
                per = np.zeros(len(pairs_np), np.int64)
                for (x, y), m in PAIR_MAX_CONTACTS.items():
                    per[(lo == x) & (hi == y)] = m
                per[routed_pair_mask(pairs_np, types, self._prim_sdf)] = MM_PAIR_ESTIMATE
                est = int(per.sum())
            else:
                est = 0
            rigid_contact_max = max(1000, min(est, 40 * n + 1000))
            if self.hydroelastic_sdf is not None:
                rigid_contact_max += self.hydroelastic_sdf.contact_estimate
        self.rigid_contact_max = int(rigid_contact_max)
        if self.hydroelastic_sdf is not None:  # staging buffers allocated here, not inside collide
            self.hydroelastic_sdf.prepare(self.rigid_contact_max, self.shape_pairs_max)
        if self.rigid_contact_max < 0:
            raise ValueError("CollisionPipeline: rigid_contact_max must be >= 0")

        pcount = int(getattr(model, "particle_count", 0) or 0)
        soft_mask = (flags & int(ShapeFlags.COLLIDE_PARTICLES)) != 0
        soft_shapes = np.nonzero(soft_mask)[0].astype(np.int32) if pcount else np.zeros(0, np.int32)
        if len(soft_shapes):
            bad = [int(s) for s in soft_shapes if int(types[s]) not in SOFT_CONTACT_TYPES]
            if bad:
                raise NotImplementedError(f"CollisionPipeline: particle-{_type_name(types[bad[0]])} soft contacts "
                                          f"(shape {bad[0]}) are not implemented yet")  # fmt: skip
        self._soft_shapes = wp.array(soft_shapes, dtype=int, device=dev)
        self.soft_contact_pair_count = pcount * len(soft_shapes)
        if soft_contact_max is None:
            soft_contact_max = model.soft_contact_max if model.soft_contact_max is not None else \
                self.soft_contact_pair_count  # fmt: skip
        self.soft_contact_max = int(soft_contact_max)
        if publish_capacity:
            model.rigid_contact_max = self.rigid_contact_max
            model.soft_contact_max = self.soft_contact_max

        # ---- work buffers
        with wp.ScopedDevice(dev):
            self._shape_X = wp.zeros(max(n, 1), dtype=wp.transform)
            self._lower = wp.zeros(max(n, 1), dtype=wp.vec3)
            self._upper = wp.zeros(max(n, 1), dtype=wp.vec3)
            self._candidates = wp.zeros(self.shape_pairs_max, dtype=wp.vec2i)
            self._counters = wp.zeros(1, dtype=int)  # candidate pair count
            self._empty_i64 = wp.zeros(0, dtype=wp.int64)
            self._empty_i = wp.zeros(0, dtype=int)
            self._body_com = model.body_com if model.body_count else wp.zeros(1, dtype=wp.vec3)
            self._body_flags = getattr(model, "body_flags", None)
            if self._body_flags is None:
                self._body_flags = wp.zeros(0, dtype=int)
            # stand-ins for the state arrays of a model without bodies
            self._no_body_q = wp.zeros(1, dtype=wp.transform)
            self._no_body_qd = wp.zeros(1, dtype=wp.spatial_vector)
            # mesh / heightfield contact reduction: one slot block per mesh / heightfield candidate pair
            self._reduction = None
            if self.reduce_contacts:
                mesh_like = np.isin(types, (int(GeoType.MESH), int(GeoType.HFIELD)))
                if self.broad_phase_mode == "explicit":
                    blocks = int(np.count_nonzero(mesh_like[pairs_np[:, 0]] | mesh_like[pairs_np[:, 1]])) if len(
                        pairs_np) else 0  # fmt: skip
                else:
                    blocks = min(int(self.shape_pairs_max), int(np.count_nonzero(mesh_like)) * max(n - 1, 0))
                if blocks:
                    self._reduction = ReductionSlots(blocks, dev)
            # (empty slots: contacts written directly; allocated here, not inside collide)
            self._slots = self._reduction if self._reduction is not None else ReductionSlots(0, dev)
            self._mm = None
            self._mm_route = None
            mm_blocks = self._mm_block_count(pairs_np, types, model)
            if mm_blocks:
                self._mm = MeshMeshRoute(model, types, self._prim_sdf, mm_blocks, self.reduce_contacts, dev)
                if np.any(self._prim_sdf[:n] != 0):
                    self._mm_route = self._mm.buffers.prim_sdf
            self._sorter = None
            self._key_shift = max(1, int(n).bit_length())
            if self.deterministic:
                self._sorter = DeterministicSort(n, self.rigid_contact_max, dev)
                self._key_shift = self._sorter.key_shift
                self._scratch = set_reduction(self._sorter.scratch, self._slots, self._mm_route)
                self._sort_key = self._sorter.sort_key
                self._key_fill = self._sorter.key_fill
            self._key_fill_arg = wp.int64(self._key_fill if self.deterministic else 0)
            # recorded launches of collide (one argument set per state / contacts buffer in use)
            self._launches = LaunchCache(max_entries=16)
            self._outs: dict[int, tuple[Contacts, ContactOut, ContactOut | None]] = {}
            self._overflow_warned: set[str] = set()  # kinds check_overflow has warned about
            self._matcher = None
            if self.contact_matching != "disabled":
                self._matcher = ContactMatcher(model, self.rigid_contact_max, self.contact_matching,
                                               self.contact_matching_pos_threshold,
                                               self.contact_matching_normal_dot_threshold, self.contact_report, dev)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _check_pairs(pairs_np, types, model):
        # geometry buffers (convex-mesh vertices, triangle BVHs, heightfields): validated and built
        # once here, so that collide() does no host work and stays graph-capturable
        convex_mesh_buffers(model)
        if not len(pairs_np):
            return
        ta = types[pairs_np[:, 0]]
        tb = types[pairs_np[:, 1]]
        lo, hi = np.minimum(ta, tb), np.maximum(ta, tb)
        supported = np.zeros(len(pairs_np), dtype=bool)
        M, H, P = int(GeoType.MESH), int(GeoType.HFIELD), int(GeoType.PLANE)
        # mesh-mesh routes (:mod:`.mesh_mesh`); PLANE-HFIELD / HFIELD-HFIELD are static-static (no contacts)
        for x, y in list(PAIR_MAX_CONTACTS) + [(M, M), (H, M), (P, H), (H, H)]:
            supported |= (lo == x) & (hi == y)
        if not supported.all():
            k = int(np.nonzero(~supported)[0][0])
            a, b = int(pairs_np[k, 0]), int(pairs_np[k, 1])
            raise NotImplementedError(
                f"CollisionPipeline: narrow phase for {_type_name(lo[k])}-{_type_name(hi[k])} pairs "
                f"(shapes {a} and {b}) is not implemented yet; supported: every pair among PLANE, HFIELD, "
                "SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH, CONE and CONVEX_MESH except PLANE-PLANE "
                "(PLANE-HFIELD and HFIELD-HFIELD pairs are static and produce no contacts)")

    def _mm_block_count(self, pairs_np, types, model) -> int:
        """Upper bound of the candidate pairs routed to :mod:`.mesh_mesh` (one block each)."""
        prim = self._prim_sdf[: len(types)]
        if self.broad_phase_mode == "explicit":
            return int(np.count_nonzero(routed_pair_mask(pairs_np, types, self._prim_sdf)))
        M, H = int(GeoType.MESH), int(GeoType.HFIELD)
        world = model.shape_world.numpy() if len(types) else np.zeros(0, np.int64)
        ism, ish, isp = types == M, types == H, prim != 0
        total = 0
        g = world < 0
        mg, hg, pg = int(np.count_nonzero(ism & g)), int(np.count_nonzero(ish & g)), int(np.count_nonzero(isp & g))
        for w in np.unique(world[~g]) if np.any(~g) else [None]:
            sel = (world == w) if w is not None else np.zeros(len(types), bool)
            m = int(np.count_nonzero(ism & sel)) + mg
            h = int(np.count_nonzero(ish & sel)) + hg
            pr = int(np.count_nonzero(isp & sel)) + pg
            total += m * (m - 1) // 2 + m * (h + pr)
        if np.any(~g):
            total -= (len(np.unique(world[~g])) - 1) * (mg * (mg - 1) // 2 + mg * (hg + pg))  # global-global once
        return int(min(max(total, 0), self.shape_pairs_max))

    def _alloc_out(self, cap: int) -> ContactOut:
        return alloc_contact_out(cap, self._key_shift)

    def _contacts_out_cached(self, contacts: Contacts) -> ContactOut:
        """The narrow phase's output for ``contacts``: :meth:`_contacts_out`, or with
        ``deterministic`` the staging buffer counting its overflow in ``contacts``; made once per
        contacts buffer (same struct object every call, so the recorded narrow-phase launch is
        replayed) and rebuilt when its arrays were replaced."""
        hit = self._outs.get(id(contacts))
        if hit is not None and hit[0] is contacts and hit[1].count is contacts.rigid_contact_count and \
                hit[1].point0 is contacts.rigid_contact_point0 and hit[1].normal is contacts.rigid_contact_normal and \
                hit[1].overflow is contacts._overflow:  # fmt: skip
            return hit[2] if self.deterministic else hit[1]
        out = self._contacts_out(contacts)
        staging = None
        if self.deterministic:
            staging = set_counters(copy_contact_out(self._scratch), contacts._overflow)
        if len(self._outs) >= 4:
            self._outs.pop(next(iter(self._outs)))
        self._outs[id(contacts)] = (contacts, out, staging)
        return staging if self.deterministic else out

    def _contacts_out(self, contacts: Contacts) -> ContactOut:
        o = ContactOut()
        o.count = contacts.rigid_contact_count
        o.shape0 = contacts.rigid_contact_shape0
        o.shape1 = contacts.rigid_contact_shape1
        o.point0 = contacts.rigid_contact_point0
        o.point1 = contacts.rigid_contact_point1
        o.offset0 = contacts.rigid_contact_offset0
        o.offset1 = contacts.rigid_contact_offset1
        o.normal = contacts.rigid_contact_normal
        o.margin0 = contacts.rigid_contact_margin0
        o.margin1 = contacts.rigid_contact_margin1
        o.point_id = contacts.rigid_contact_point_id
        o.sort_key = self._empty_i64
        o.sort_value = self._empty_i
        o.capacity = contacts.rigid_contact_max
        o.key_shift = self._key_shift
        set_counters(o, contacts._overflow)
        return set_reduction(o, self._slots, self._mm_route)

    # ------------------------------------------------------------------ public API
    def contacts(self) -> Contacts:
        """A new :class:`Contacts` buffer sized for this pipeline."""
        c = Contacts(self.rigid_contact_max, self.soft_contact_max, requires_grad=self.requires_grad,
                     device=self.device, contact_matching=self.contact_matching != "disabled",
                     contact_report=self.contact_report)  # fmt: skip
        c._contact_matching_mode = self.contact_matching
        c.shape_count = int(self.model.shape_count)  # the model the buffer is for (checked by solver steps)
        init = getattr(self.model, "_init_custom_contacts", None)
        if init is not None:
            init(c)
        return c

    def collide(self, state, contacts: Contacts, *, soft_contact_margin: float | None = None,
                soft_self_contact: bool = False, dt: float | None = None) -> None:  # fmt: skip
        """Fill ``contacts`` (cleared first) with the rigid and soft contacts of ``state``.

        ``dt`` [s] is the time until the next collision update; it is required when
        speculative contacts are enabled (``0.0`` uses the authored gaps only) and ignored
        otherwise.
        """
        if soft_self_contact:
            raise NotImplementedError("CollisionPipeline.collide: soft self-contact is not implemented yet")
        stamp = self.__dict__.get("_input_stamp")
        if stamp is None or getattr(state, "_armillary_checked", None) is not stamp \
                or getattr(contacts, "_armillary_checked", None) is not stamp:  # fmt: skip
            from ..solvers.step_guard import _stamp_for, check_collide_inputs

            self._input_stamp = _stamp_for(self.model)
            if contacts is not None and getattr(contacts, "__dict__", {}).get("shape_count") != self.shape_count:
                contacts.__dict__["shape_count"] = None  # any buffer may be refilled for this model
            check_collide_inputs(self.model, state, contacts)
        if soft_contact_margin is not None:
            warnings.warn("CollisionPipeline.collide(soft_contact_margin=...) is deprecated; pass soft_contact_gap "
                          "to the constructor", DeprecationWarning, stacklevel=2)  # fmt: skip
            soft_margin = float(soft_contact_margin)
        else:
            soft_margin = self.soft_contact_margin
        if contacts.rigid_contact_max < self.rigid_contact_max and self.deterministic:
            raise ValueError("CollisionPipeline.collide: contacts buffer is smaller than the pipeline's "
                             "rigid_contact_max; allocate it with pipeline.contacts()")  # fmt: skip
        spec = self.speculative_contact_gap_max is not None
        if spec:
            if dt is None:
                raise ValueError("CollisionPipeline.collide: dt is required when speculative contacts are enabled")
            dt = float(dt)
            if not math.isfinite(dt) or dt < 0.0:
                raise ValueError(f"CollisionPipeline.collide: dt={dt!r} must be a non-negative finite number")
        emax = float(self.speculative_contact_gap_max or 0.0)
        dtv = float(dt or 0.0) if spec else 0.0
        spec_i = int(spec and dtv > 0.0 and emax > 0.0)

        model = self.model
        dev = self.device
        if contacts.clear_buffers:
            contacts._clear_rows()  # counts and overflow counters: reset by the AABB kernel
        n = self.shape_count
        body_q = state.body_q if model.body_count else self._no_body_q
        body_qd = state.body_qd if model.body_count else self._no_body_qd
        out = self._contacts_out_cached(contacts)
        sort_key = self._sort_key if self.deterministic else self._empty_i64
        dim = grid_dim(dev, max(n, self.rigid_contact_max if self.deterministic else 1))
        launch = self._launches.launch
        launch(_aabb_kernel, dim,
               [n, model.shape_type, model.shape_body, model.shape_transform, model.shape_scale,
                model.shape_margin, model.shape_gap, model.shape_collision_radius, body_q, body_qd,
                self._body_com, spec_i, dtv, emax, self._shape_X, self._lower, self._upper, self._counters,
                out.count, contacts.soft_contact_count, contacts.contact_counters, contacts.contact_generation,
                sort_key, self._key_fill_arg, dim],
               device=dev)  # fmt: skip
        if self._reduction is not None:
            self._reduction.reset()
        if n >= 2:
            common = dict(shape_body=model.shape_body, body_flags=self._body_flags,
                          include_static_kinematic_pairs=self.include_static_kinematic_pairs)  # fmt: skip
            if self.broad_phase_mode == "explicit":
                self.broad_phase.launch(self._lower, self._upper, None, self._explicit_pairs,
                                        int(self._explicit_pairs.shape[0]), self._candidates, self._counters,
                                        device=dev, skip_count_zero=True, **common)  # fmt: skip
            else:
                self.broad_phase.launch(self._lower, self._upper, None, model.shape_collision_group,
                                        model.shape_world, n, self._candidates, self._counters, device=dev,
                                        filter_pairs=self._filter_pairs, num_filter_pairs=int(self._filter_pairs.shape[0]),
                                        skip_count_zero=True, **common)  # fmt: skip
            if self.hydroelastic_sdf is not None and self.broad_phase_mode != "explicit":
                self.hydroelastic_sdf.filter_candidates(model, self._candidates, self._counters, out)
            ndim = grid_dim(dev, self.shape_pairs_max)
            launch(narrow_phase_kernel, ndim,
                   [self._candidates, self._counters, model.shape_type, model.shape_body, self._shape_X,
                    model.shape_scale, model.shape_margin, model.shape_gap, body_q, body_qd,
                    self._body_com, spec_i, dtv, emax, out, ndim, *convex_mesh_buffers(model)],
                   device=dev)  # fmt: skip
            if self._mm is not None:
                self._mm.launch(self._candidates, self._counters, model, self._shape_X, body_q, body_qd,
                                self._body_com, spec_i, dtv, emax, out, convex_mesh_buffers(model)[0], ndim)
        if self.hydroelastic_sdf is not None:  # per-contact stiffness travels beside `out`
            hstiff = self.hydroelastic_sdf.stiffness_scratch(self.rigid_contact_max) if self.deterministic else \
                contacts.rigid_contact_stiffness  # fmt: skip
            hstiff.zero_()
            self.hydroelastic_sdf.launch(self._shape_X, self._lower, self._upper, out, hstiff, body_q)
        if self.deterministic:
            self._sorter.sort_into(self._contacts_out(contacts), dev)
            if self.hydroelastic_sdf is not None:
                self.hydroelastic_sdf.gather_stiffness(contacts.rigid_contact_count, contacts.rigid_contact_max,
                                                       self._sorter.sort_value, hstiff,
                                                       contacts.rigid_contact_stiffness, dev)  # fmt: skip
        if self._matcher is not None:
            self._matcher.run(model, contacts, body_q)
        # bookkeeping written through __dict__: an attribute assignment would make the next step
        # re-check the whole buffer (CheckedAttributes)
        contacts.__dict__["_contact_matching_mode"] = self.contact_matching
        contacts.__dict__["shape_count"] = n  # filled for this model
        if self.requires_grad and contacts._rigid_contact_diff_distance is not None and contacts.rigid_contact_max:
            # deprecated outputs, recorded on the tape (see eval_rigid_contact_kinematics)
            wp.launch(contact_kinematics_kernel, dim=contacts.rigid_contact_max,
                      inputs=[contacts.rigid_contact_count, contacts.rigid_contact_shape0,
                              contacts.rigid_contact_shape1, contacts.rigid_contact_point0,
                              contacts.rigid_contact_point1, contacts.rigid_contact_normal,
                              contacts.rigid_contact_margin0, contacts.rigid_contact_margin1, model.shape_body,
                              body_q],
                      outputs=[contacts._rigid_contact_diff_distance, contacts._rigid_contact_diff_point0_world,
                               contacts._rigid_contact_diff_point1_world],
                      device=dev)  # fmt: skip
        if self.soft_contact_pair_count and contacts.soft_contact_max > 0:
            sdim = grid_dim(dev, self.soft_contact_pair_count)
            # replayed like the other launches (no backward: nothing to record on a tape)
            launch(soft_contact_kernel, sdim,
                   [state.particle_q, model.particle_radius, model.particle_flags, model.particle_world,
                    int(model.particle_count), self._soft_shapes, int(self._soft_shapes.shape[0]),
                    model.shape_type, model.shape_body, model.shape_world, self._shape_X, model.shape_scale,
                    body_q, soft_margin, *convex_mesh_buffers(model), contacts.soft_contact_count,
                    contacts.soft_contact_particle, contacts.soft_contact_shape, contacts.soft_contact_indices,
                    contacts.soft_contact_barycentric, contacts.soft_contact_body_pos,
                    contacts.soft_contact_body_vel, contacts.soft_contact_normal, contacts.soft_contact_tids,
                    contacts._overflow, sdim],
                   device=dev)  # fmt: skip

    def check_overflow(self, contacts: Contacts, *, warn: bool = True) -> ContactOverflow:
        """Read the overflow counters of ``contacts`` (filled by :meth:`collide`; one small device
        read, so call it where the host synchronises anyway, e.g. once per frame, and outside
        graph capture) and return them as a :class:`~armillary.sim.contacts.ContactOverflow`.

        With ``warn`` an :class:`~armillary.NewtonWarning` names, per kind of buffer that
        overflowed since the contacts were created or cleared (rigid contacts, soft contacts,
        broad-phase candidate pairs), how many were dropped and the capacity to pass instead;
        each kind is reported once per pipeline.
        """
        o = contacts.overflow()
        if not (warn and o):
            return o
        rigid_cap = self.rigid_contact_max if self.deterministic else contacts.rigid_contact_max
        kinds = (
            ("rigid", o.rigid_needed, o.rigid_dropped, "rigid contacts", "rigid_contact_max", rigid_cap,
             "model.rigid_contact_max"),
            ("soft", o.soft_needed, o.soft_dropped, "soft (particle-shape) contacts", "soft_contact_max",
             contacts.soft_contact_max, "model.soft_contact_max"),
            ("pairs", o.pairs_needed, o.pairs_dropped, "broad-phase candidate shape pairs", "shape_pairs_max",
             self.shape_pairs_max, None),
        )  # fmt: skip
        parts = []
        for kind, needed, dropped, what, name, cap, model_attr in kinds:
            if needed <= 0 or kind in self._overflow_warned:
                continue
            self._overflow_warned.add(kind)
            also = f" (or set {model_attr} before creating the pipeline)" if model_attr else ""
            parts.append(f"{what}: one collide() produced {needed} but {name}={cap}, {dropped} dropped in the "
                         f"last collide(); pass {name}={needed} or more to CollisionPipeline{also}")  # fmt: skip
        if parts:
            _warn("CollisionPipeline: contact buffer overflow, contacts were dropped and bodies may pass through "
                  "each other. " + "; ".join(parts) + ". Allocate the contacts with pipeline.contacts(); "
                  "Contacts.overflow() returns the counts (reported once per pipeline and kind).")  # fmt: skip
        return o

    def reset_contact_matching(self, world_mask=None) -> None:
        """Clear all previous-frame contact history now, or, with ``world_mask`` (a 1-D ``wp.bool``
        array of ``model.world_count + 1`` entries on the model device, the last entry selecting
        global shapes), drop at the next :meth:`collide` the history of every contact with a shape
        in a selected world; masked
        selections accumulate until that call consumes them. No-op without contact matching."""
        if self._matcher is not None:
            self._matcher.reset(world_mask)
