""":class:`NarrowPhase`: the narrow phase as a stand-alone stage fed by any broad phase.

:meth:`NarrowPhase.launch` runs the per-pair routines of :mod:`.narrow_phase` (the same
kernel :class:`CollisionPipeline` uses) on the candidate pairs and writes flat contact
arrays. With ``contact_writer_warp_func`` a user ``@wp.func`` decides how each contact is
stored (:meth:`NarrowPhase.launch_custom_write`).

Launches per call: one preparation kernel (splits ``shape_data``, keeps the candidate pairs
the narrow phase handles, fills the per-shape velocities of speculative contacts), the
narrow-phase kernel, with ``deterministic=True`` a radix sort and a gather kernel (the
:class:`CollisionPipeline` code, :mod:`.contact_sort`), and one writer kernel; counters and
sort keys are reset by device memsets. Nothing syncs with the host after the first call for a
given ``shape_types`` / ``shape_source`` pair of arrays (that first call reads them once to
build the convex-mesh vertex and triangle-mesh edge buffers).
"""

from __future__ import annotations

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.enums import GeoType
from .broad_phase import grid_dim
from .mesh_collision import GeoBuffers, build_geo_buffers
from .contact_sort import DeterministicSort, ReductionSlots, alloc_contact_out, set_counters, set_reduction
from .mesh_collision import hull_face_normals, triangle_edge_flags
from .narrow_phase import OVERFLOW_RIGID_C, PAIR_MAX_CONTACTS, ContactOut, narrow_phase_kernel, note_dropped

#: geometry types whose contacts need per-model buffers (vertices, BVHs, heightfield samples)
_MODEL_BUFFER_TYPES = (int(GeoType.CONVEX_MESH), int(GeoType.MESH), int(GeoType.HFIELD))


@wp.struct
class ContactData:
    """One contact as handed to a custom contact writer (all quantities in world frame)."""

    shape_a: int
    shape_b: int
    #: midpoint of the two surface points [m]
    contact_point_center: wp.vec3
    #: unit normal pointing from shape a to shape b
    contact_normal_a_to_b: wp.vec3
    #: signed distance between the (margin-padded) surfaces along the normal, negative when penetrating [m]
    contact_distance: float
    #: surface points on shape a and shape b [m]
    point_a: wp.vec3
    point_b: wp.vec3
    #: effective radius + margin of each shape (surface offset from the core point along the normal) [m]
    margin_a: float
    margin_b: float
    #: per-pair feature id of the contact
    feature_id: int


@wp.struct
class FlatContactWriterData:
    """Writer data of the default writer used by :meth:`NarrowPhase.launch`."""

    contact_pair: wp.array(dtype=wp.vec2i)
    contact_position: wp.array(dtype=wp.vec3)
    contact_normal: wp.array(dtype=wp.vec3)
    contact_penetration: wp.array(dtype=float)


@wp.func
def write_contact_flat(contact: ContactData, data: FlatContactWriterData, output_index: int):
    """Default writer: flat pair / center position / normal / signed distance arrays."""
    data.contact_pair[output_index] = wp.vec2i(contact.shape_a, contact.shape_b)
    data.contact_position[output_index] = contact.contact_point_center
    data.contact_normal[output_index] = contact.contact_normal_a_to_b
    data.contact_penetration[output_index] = contact.contact_distance


@wp.func
def _contact_data(src: ContactOut, i: int):
    # every shape is its own identity-posed pseudo body in this stage: core points are world points
    c = ContactData()
    n = src.normal[i]
    pa = src.point0[i] + src.offset0[i]
    pb = src.point1[i] + src.offset1[i]
    c.shape_a = src.shape0[i]
    c.shape_b = src.shape1[i]
    c.contact_point_center = 0.5 * (pa + pb)
    c.contact_normal_a_to_b = n
    c.contact_distance = wp.dot(n, pb - pa)
    c.point_a = pa
    c.point_b = pb
    c.margin_a = src.margin0[i]
    c.margin_b = src.margin1[i]
    c.feature_id = src.point_id[i]
    return c


_WRITER_KERNELS: dict = {}


def _make_writer_kernel(writer_func, data_type):
    """Kernel calling ``writer_func(ContactData, data_type, output_index)`` for every generated contact
    (built once per writer function, in its own module)."""
    key = (id(writer_func), id(data_type))
    hit = _WRITER_KERNELS.get(key)
    if hit is not None and hit[0] is writer_func:
        return hit[1]

    def write_contacts(src: ContactOut, data: data_type, out_capacity: int, out_count: wp.array(dtype=int),
                       stride: int):  # fmt: skip
        tid = wp.tid()
        m = wp.min(src.count[0], src.capacity)
        n = wp.min(m, out_capacity)
        if tid == 0:
            if out_count.shape[0] > 0:
                out_count[0] = n
            if m > n:  # the output arrays are shorter than the staging buffer
                note_dropped(src.overflow, OVERFLOW_RIGID_C, m - n, out_capacity)
        i = tid
        while i < n:
            writer_func(_contact_data(src, i), data, i)
            i += stride

    # real types (this module uses postponed annotations, which cannot see the closure)
    write_contacts.__annotations__ = {"src": ContactOut, "data": data_type, "out_capacity": int,
                                      "out_count": wp.array(dtype=int), "stride": int}  # fmt: skip
    kernel = wp.kernel(write_contacts, module="unique")
    _WRITER_KERNELS[key] = (writer_func, kernel)
    return kernel


@wp.kernel
def _prepare_kernel(
    pairs: wp.array(dtype=wp.vec2i),
    pair_count: wp.array(dtype=int),
    shape_types: wp.array(dtype=int),
    shape_data: wp.array(dtype=wp.vec4),
    shape_transform: wp.array(dtype=wp.transform),
    lin_vel: wp.array(dtype=wp.vec3),
    ang_vel: wp.array(dtype=wp.vec3),
    pair_ok: wp.array2d(dtype=int),
    out_pairs: wp.array(dtype=wp.vec2i),
    out_pair_count: wp.array(dtype=int),
    skipped_pair_count: wp.array(dtype=int),
    scale: wp.array(dtype=wp.vec3),
    margin: wp.array(dtype=float),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    stride: int,
):
    tid = wp.tid()
    s = tid
    while s < shape_data.shape[0]:
        d = shape_data[s]
        scale[s] = wp.vec3(d[0], d[1], d[2])
        margin[s] = d[3]
        v = wp.vec3(0.0)
        w = wp.vec3(0.0)
        if lin_vel.shape[0] > s:
            v = lin_vel[s]
        if ang_vel.shape[0] > s:
            w = ang_vel[s]
        body_qd[s] = wp.spatial_vector(v, w)
        body_com[s] = wp.transform_get_translation(shape_transform[s])
        s += stride
    n = wp.min(pair_count[0], pairs.shape[0])
    i = tid
    while i < n:
        p = pairs[i]
        i += stride
        ta = shape_types[p[0]]
        tb = shape_types[p[1]]
        lo = wp.min(ta, tb)
        hi = wp.max(ta, tb)
        if lo < 0 or hi >= pair_ok.shape[0] or pair_ok[lo, hi] == 0:
            wp.atomic_add(skipped_pair_count, 0, 1)
            continue
        k = wp.atomic_add(out_pair_count, 0, 1)
        if k < out_pairs.shape[0]:
            out_pairs[k] = p
        else:
            wp.atomic_sub(out_pair_count, 0, 1)


@wp.kernel
def _mesh_size_kernel(mesh_id: wp.uint64, out: wp.array(dtype=int)):
    m = wp.mesh_get(mesh_id)
    out[0] = m.points.shape[0]
    out[1] = m.indices.shape[0]


@wp.kernel
def _mesh_copy_kernel(mesh_id: wp.uint64, points: wp.array(dtype=wp.vec3), indices: wp.array(dtype=int)):
    i = wp.tid()
    m = wp.mesh_get(mesh_id)
    if i < m.points.shape[0]:
        points[i] = m.points[i]
    if i < m.indices.shape[0]:
        indices[i] = m.indices[i]


def _read_mesh(mesh_id: int, device):
    """Host copies (points, indices) of the ``wp.Mesh`` with id ``mesh_id`` (setup only)."""
    size = wp.zeros(2, dtype=int, device=device)
    wp.launch(_mesh_size_kernel, dim=1, inputs=[wp.uint64(mesh_id), size], device=device)
    npts, nidx = (int(x) for x in size.numpy())
    pts = wp.zeros(max(npts, 1), dtype=wp.vec3, device=device)
    idx = wp.zeros(max(nidx, 1), dtype=int, device=device)
    wp.launch(_mesh_copy_kernel, dim=max(npts, nidx, 1), inputs=[wp.uint64(mesh_id), pts, idx], device=device)
    return pts.numpy()[:npts], idx.numpy()[:nidx]


def _geo_from_source(types: np.ndarray, source: np.ndarray, device) -> GeoBuffers:
    """Geometry buffers from newton's ``shape_source`` convention: per shape the id of a
    ``wp.Mesh`` (newton: ``Mesh.finalize()``) for MESH and CONVEX_MESH shapes (the hull vertices are the
    mesh points), unused for analytic shapes."""
    n = len(types)
    m = max(n, 1)
    vstart = np.zeros(m, np.int32)
    vcount = np.zeros(m, np.int32)
    fcount = np.zeros(m, np.int32)
    mesh_ids = np.zeros(m, np.uint64)
    tri_start = np.zeros(m, np.int32)
    chunks, fchunks = [], []
    total = ftotal = 0
    host = {}
    fl_start = {}
    for s in range(n):
        t = int(types[s])
        if t not in (int(GeoType.MESH), int(GeoType.CONVEX_MESH)):
            continue
        mid = int(source[s])
        if mid == 0:
            raise ValueError(f"NarrowPhase: shape {s} is a {GeoType(t).name} but shape_source[{s}] is 0; pass the "
                             "id of a wp.Mesh over its vertices and triangles")  # fmt: skip
        if mid not in host:
            host[mid] = _read_mesh(mid, device)
        pts, idx = host[mid]
        if t == int(GeoType.CONVEX_MESH):
            if len(pts) == 0:
                raise ValueError(f"NarrowPhase: convex mesh shape {s} has no vertices")
            if ("hull", mid) not in fl_start:
                fn = hull_face_normals(pts)
                fl_start[("hull", mid)] = (total, len(pts), len(fn))
                chunks += [pts.astype(np.float32), fn]
                total += len(pts) + len(fn)
            vstart[s], vcount[s], fcount[s] = fl_start[("hull", mid)]
        else:
            mesh_ids[s] = mid
            if mid not in fl_start:
                fl = triangle_edge_flags(pts, idx)
                fl_start[mid] = ftotal
                fchunks.append(fl)
                ftotal += len(fl)
            tri_start[s] = fl_start[mid]
    with wp.ScopedDevice(device):
        g = GeoBuffers()
        g.verts = wp.array(np.concatenate(chunks).astype(np.float32) if chunks else np.zeros((1, 3), np.float32),
                           dtype=wp.vec3)  # fmt: skip
        g.vstart = wp.array(vstart, dtype=int)
        g.vcount = wp.array(vcount, dtype=int)
        g.fcount = wp.array(fcount, dtype=int)
        g.mesh_id = wp.array(mesh_ids, dtype=wp.uint64)
        g.hf_data = wp.zeros(1, dtype=float)
        g.hf_start = wp.zeros(m, dtype=int)
        g.hf_dims = wp.zeros(m, dtype=wp.vec4)
        g.tri_flags = wp.array(np.concatenate(fchunks).astype(np.int32) if fchunks else np.zeros(1, np.int32),
                               dtype=int)  # fmt: skip
        g.tri_start = wp.array(tri_start, dtype=int)
    return g


#: speculative extension used when collision_update_dt > 0 and none is given [m]
_DEFAULT_SPECULATIVE_EXTENSION = 0.1

#: options of the reference narrow phase accepted as tuning hints (see :class:`NarrowPhase`)
_HINTS = ("max_triangle_pairs", "max_mesh_mesh_pairs", "max_mesh_plane_pairs", "has_meshes", "has_heightfields",
          "use_lean_gjk_mpr", "convex_support_acceleration", "has_generic_convex_pairs", "sparse_gjk_pairs",
          "split_gjk_mpr", "candidate_pair_work_estimate", "verify_buffers",
          "contact_reduction_hashtable_size_factor", "sdf_texture_paired_samples")  # fmt: skip
#: geometry inputs of the reference's launch that this implementation does not need
_IGNORED_INPUTS = ("shape_collision_radius", "shape_flags", "shape_voxel_resolution", "shape_sdf_index",
                   "shape_sdf_data", "texture_sdf_data", "shape_collision_aabb_lower", "shape_collision_aabb_upper",
                   "shape_local_aabb_lower", "shape_local_aabb_upper", "shape_heightfield_index", "mesh_edge_centers",
                   "mesh_edge_halves", "shape_base_gap", "shape_support_data", "support_lut",
                   "support_vertex_offsets", "hydroelastic_shape_sdf_data_prepared")  # fmt: skip


class NarrowPhase:
    """Generate contacts for candidate shape pairs from any broad phase.

    Handles the pairs :class:`CollisionPipeline` handles: every pair among PLANE, SPHERE,
    CAPSULE, ELLIPSOID, CYLINDER, BOX, CONE and CONVEX_MESH except PLANE-PLANE, and MESH /
    HFIELD against convex shapes (PLANE-MESH too); other candidate pairs (e.g. PLANE-PLANE,
    MESH-MESH) produce no contacts and are counted in :attr:`skipped_pair_count` (a one-element
    device array, reset by every launch; read it to detect pairs this narrow phase cannot handle).
    Contacts that find the output full (``contact_max``, or the length of :meth:`launch`'s output
    arrays) are dropped and counted in :attr:`dropped_contact_count` (one-element device array,
    reset by every launch; ``count + dropped`` is the capacity that would have held them all).

    Geometry of CONVEX_MESH and MESH shapes comes from ``shape_source`` (as in the reference:
    per shape the id of a ``wp.Mesh`` over the shape's unscaled vertices and CCW triangles, e.g.
    ``wp.Mesh(points, indices).id``; a convex mesh's hull vertices are its points). HFIELD
    shapes need the heightfield samples, which ``shape_source`` does not carry: pass ``model=``
    (a finalized :class:`Model`; its geometry buffers then serve every shape, and
    ``shape_source`` is not needed).

    Args:
        max_candidate_pairs: capacity of the candidate pair buffer handed to :meth:`launch`.
        reduce_contacts: reduce the contacts of each MESH / HFIELD pair (unreduced, every
            triangle contributes up to 4) to at most :data:`.narrow_phase.REDUCE_KEEP`: the
            deepest plus the contacts extremal along 6 directions in its contact plane, the same
            reduction as ``CollisionPipeline(reduce_contacts=True)``. Primitive and convex pairs
            emit their (at most 4-5 point) manifolds either way.
        device: device of the internal buffers.
        contact_writer_warp_func: optional ``@wp.func`` ``writer(contact: ContactData,
            writer_data: YourStruct, output_index: int)``; its kernel is built here, once.
            ``output_index`` runs over ``0 .. n-1`` for the ``n`` contacts generated.
        contact_max: capacity of the internal contact buffer of :meth:`launch_custom_write`
            (defaults to ``5 * max_candidate_pairs``); :meth:`launch` grows it to the size of
            its output arrays when needed.
        deterministic: order the contacts by (shape_a, shape_b, sub_key) with the
            pipeline's radix sort, so that runs are bit-identical (see
            :class:`CollisionPipeline`).

    Tuning hints of the reference implementation are accepted and have no effect here:
    ``max_triangle_pairs``, ``max_mesh_mesh_pairs`` and ``max_mesh_plane_pairs`` size the
    reference's separate triangle / mesh-plane work queues, while this narrow phase processes
    a mesh pair's triangles inside that pair's thread (BVH query) and has no such queue;
    ``use_lean_gjk_mpr``, ``split_gjk_mpr``, ``sparse_gjk_pairs``, ``has_generic_convex_pairs``,
    ``convex_support_acceleration`` and ``candidate_pair_work_estimate`` select or balance the
    reference's separate GJK / MPR kernels, whereas one grid-stride kernel routes every pair
    here; ``contact_reduction_hashtable_size_factor`` sizes the reference's hash-table reduction
    (the reduction here uses fixed per-pair slot blocks, one per candidate pair);
    ``has_meshes`` / ``has_heightfields`` = ``False`` skip allocating those slot blocks;
    ``verify_buffers`` asks for host-side overflow checks, which would sync (overflowing
    contacts are dropped, the written count capped and the drops counted in
    :attr:`dropped_contact_count` instead); ``sdf_texture_paired_samples``
    concerns SDF contacts, which are not implemented. Options that would change results and are
    not implemented (``hydroelastic_sdf``, ...) raise :class:`NotImplementedError`.
    """

    def __init__(self, *, max_candidate_pairs: int, reduce_contacts: bool = True, device=None,
                 contact_writer_warp_func=None, contact_max: int | None = None, deterministic: bool = False,
                 **kwargs):  # fmt: skip
        unsupported = {k: v for k, v in kwargs.items() if v is not None and v is not False and k not in _HINTS}
        if unsupported:
            raise NotImplementedError(f"NarrowPhase: options {sorted(unsupported)} are not implemented yet")
        self.max_candidate_pairs = int(max_candidate_pairs)
        if self.max_candidate_pairs < 0:
            raise ValueError("NarrowPhase: max_candidate_pairs must be >= 0")
        self.reduce_contacts = bool(reduce_contacts)
        self.deterministic = bool(deterministic)
        self._want_slots = self.reduce_contacts and (kwargs.get("has_meshes", True) is not False
                                                     or kwargs.get("has_heightfields", True) is not False)  # fmt: skip
        self.device = wp.get_device(device)
        self.contact_max = int(contact_max) if contact_max is not None else 5 * max(self.max_candidate_pairs, 1)
        self.contact_writer_warp_func = contact_writer_warp_func
        self._flat_kernel = _make_writer_kernel(write_contact_flat, FlatContactWriterData)
        self._custom_kernel = None
        self._custom_data_type = None
        if contact_writer_warp_func is not None:
            types = list(getattr(contact_writer_warp_func, "input_types", {}).values())
            if len(types) != 3:
                raise TypeError("NarrowPhase: contact_writer_warp_func must be a @wp.func taking "
                                "(contact: ContactData, writer_data: <struct>, output_index: int)")  # fmt: skip
            self._custom_data_type = types[1]
            self._custom_kernel = _make_writer_kernel(contact_writer_warp_func, self._custom_data_type)
        n = max(int(max(self.max_candidate_pairs, 1)), 1)
        ok = np.zeros((int(max(GeoType)) + 1,) * 2, np.int32)
        for x, y in PAIR_MAX_CONTACTS:
            ok[x, y] = 1
        with wp.ScopedDevice(self.device):
            self._pair_ok = wp.array(ok, dtype=int)
            self._pairs = wp.zeros(n, dtype=wp.vec2i)
            self._pair_count = wp.zeros(1, dtype=int)
            self.skipped_pair_count = wp.zeros(1, dtype=int)
            self._overflow = wp.zeros(8, dtype=int)  # see narrow_phase.note_dropped
            self.dropped_contact_count = self._overflow[0:1]
            self._no_count = wp.zeros(0, dtype=int)
            self._no_vec = wp.zeros(0, dtype=wp.vec3)
        self._no_slots = ReductionSlots(0, self.device)
        self._scratch = None
        self._sorted = None
        self._sorter = None
        self._slots = None
        self._shape_bufs = None
        self._geo_cache = {}

    # ------------------------------------------------------------------ helpers
    def _alloc_scratch(self, cap: int) -> ContactOut:
        cap = max(int(cap), 1)
        if self._scratch is None or self._scratch.capacity < cap:
            with wp.ScopedDevice(self.device):
                self._scratch = alloc_contact_out(cap)
        return self._scratch

    def _shape_buffers(self, n: int):
        n = max(int(n), 1)
        if self._shape_bufs is None or self._shape_bufs[0].shape[0] != n:
            with wp.ScopedDevice(self.device):
                # every shape is its own pseudo body at the identity pose (shape_transform is
                # already in world space); its velocity feeds speculative contacts
                self._shape_bufs = (wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=float),
                                    wp.array(np.arange(n, dtype=np.int32), dtype=int),
                                    wp.array(np.tile(np.array([0, 0, 0, 0, 0, 0, 1], np.float32), (n, 1)),
                                             dtype=wp.transform),
                                    wp.zeros(n, dtype=wp.spatial_vector), wp.zeros(n, dtype=wp.vec3))  # fmt: skip
        return self._shape_bufs

    def _geo(self, shape_types, shape_source, model):
        """(geometry buffers, whether any MESH / HFIELD shape exists); host work once per key."""
        src_key = 0 if shape_source is None else (shape_source.ptr, int(shape_source.shape[0]))
        key = (shape_types.ptr, int(shape_types.shape[0]), src_key, id(model) if model is not None else 0)
        hit = self._geo_cache.get(key)
        if hit is not None:
            return hit
        types = shape_types.numpy()
        mesh_like = bool(np.isin(types, (int(GeoType.MESH), int(GeoType.HFIELD))).any())
        if model is not None:
            self._geo_cache[key] = hit = (build_geo_buffers(model)[0], mesh_like)
            return hit
        hf = np.nonzero(types == int(GeoType.HFIELD))[0]
        if len(hf):
            raise NotImplementedError(f"NarrowPhase: HFIELD shape {int(hf[0])} needs the heightfield samples, which "
                                      "shape_source does not carry; pass model=... to launch()")  # fmt: skip
        meshes = np.nonzero(np.isin(types, (int(GeoType.MESH), int(GeoType.CONVEX_MESH))))[0]
        if len(meshes) and shape_source is None:
            s = int(meshes[0])
            raise ValueError(f"NarrowPhase: shape {s} is a {GeoType(int(types[s])).name}; pass shape_source (per "
                             "shape the id of a wp.Mesh of its geometry) or model=... to launch()")  # fmt: skip
        if len(meshes) and int(shape_source.shape[0]) < len(types):
            raise ValueError(f"NarrowPhase: shape_source has {shape_source.shape[0]} entries for {len(types)} shapes")
        src = shape_source.numpy().astype(np.uint64) if len(meshes) else np.zeros(len(types), np.uint64)
        g = _geo_from_source(types, src, self.device)
        self._geo_cache[key] = hit = (g, mesh_like)
        return hit

    def _reduction_slots(self, mesh_like: bool):
        if not (self._want_slots and mesh_like):
            return self._no_slots
        if self._slots is None:
            # one block per candidate pair (only mesh / heightfield pairs claim one)
            self._slots = ReductionSlots(self.max_candidate_pairs, self.device)
        return self._slots

    def _outputs(self, n: int, cap: int, mesh_like: bool):
        """(staging buffer the kernel writes, buffer the writer reads)."""
        slots = self._reduction_slots(mesh_like)
        if slots is not None:
            slots.reset()
        if not self.deterministic:
            out = set_reduction(self._alloc_scratch(cap), slots)
            set_counters(out, self._overflow)
            out.count.zero_()
            return out, out
        cap = max(int(cap), 1)
        if self._sorter is None or self._sorter.capacity < cap or self._sorter_n != n:
            self._sorter = DeterministicSort(n, cap, self.device, who="NarrowPhase")
            self._sorter_n = n
            with wp.ScopedDevice(self.device):
                self._sorted = alloc_contact_out(self._sorter.capacity)
            set_counters(self._sorted, self._overflow)
        out = set_counters(set_reduction(self._sorter.scratch, slots), self._overflow)
        out.count.zero_()
        self._sorter.reset_keys()
        return out, self._sorted

    def _run(self, candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform, shape_gap,
             cap, model, shape_source, lin_vel, ang_vel, dt, emax, device, who):  # fmt: skip
        dev = wp.get_device(device) if device is not None else self.device
        if candidate_pair.shape[0] > self._pairs.shape[0]:
            raise ValueError(f"NarrowPhase: candidate_pair holds {candidate_pair.shape[0]} pairs, more than "
                             f"max_candidate_pairs={self.max_candidate_pairs}")  # fmt: skip
        dt = 0.0 if dt is None else float(dt)
        if not np.isfinite(dt) or dt < 0.0:
            raise ValueError(f"NarrowPhase.{who}: collision_update_dt={dt!r} must be a non-negative finite number")
        if emax is None:
            emax = 0.0 if dt == 0.0 else _DEFAULT_SPECULATIVE_EXTENSION
        emax = float(emax)
        if not (np.isfinite(emax) and emax >= 0.0):
            raise ValueError(f"NarrowPhase.{who}: max_speculative_extension={emax!r} must be a non-negative finite "
                             "number")  # fmt: skip
        spec = int(dt > 0.0 and emax > 0.0)
        n = int(shape_types.shape[0])
        scale, margin, body, body_q, body_qd, body_com = self._shape_buffers(n)
        for name, arr in (("shape_linear_velocity", lin_vel), ("shape_angular_velocity", ang_vel)):
            if arr is not None and int(arr.shape[0]) < n:
                raise ValueError(f"NarrowPhase.{who}: {name} has {arr.shape[0]} entries for {n} shapes")
        geo, mesh_like = self._geo(shape_types, shape_source, model)
        out, final = self._outputs(n, cap, mesh_like)
        self._pair_count.zero_()
        self.skipped_pair_count.zero_()
        self._overflow.zero_()
        pdim = grid_dim(dev, max(n, candidate_pair.shape[0]))
        wp.launch(_prepare_kernel, dim=pdim,
                  inputs=[candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform,
                          lin_vel if lin_vel is not None else self._no_vec,
                          ang_vel if ang_vel is not None else self._no_vec, self._pair_ok, self._pairs,
                          self._pair_count, self.skipped_pair_count, scale, margin, body_qd, body_com, pdim],
                  device=dev, record_tape=False)  # fmt: skip
        ndim = grid_dim(dev, self._pairs.shape[0])
        wp.launch(narrow_phase_kernel, dim=ndim,
                  inputs=[self._pairs, self._pair_count, shape_types, body, shape_transform, scale, margin, shape_gap,
                          body_q, body_qd, body_com, spec, dt, emax, out, ndim, geo],
                  device=dev, record_tape=False)  # fmt: skip
        if self.deterministic:
            self._sorter.sort_into(final, dev)
        return final, dev

    # ------------------------------------------------------------------ public API
    def launch(self, *, candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform,
               shape_gap, contact_pair, contact_position, contact_normal, contact_penetration, contact_count,
               shape_source=None, contact_tangent=None, shape_linear_velocity=None, shape_angular_velocity=None,
               collision_update_dt: float | None = None, max_speculative_extension: float | None = None,
               device=None, model=None, **kwargs) -> None:  # fmt: skip
        """Generate contacts for ``candidate_pair[:candidate_pair_count[0]]`` into flat arrays.

        ``shape_data`` holds scale (xyz) and margin (w) per shape, ``shape_transform`` the
        world transforms, ``shape_gap`` the per-shape contact gaps, ``shape_source`` per shape
        the ``wp.Mesh`` id of MESH / CONVEX_MESH shapes (``model=`` instead serves every shape
        type from the model's buffers, heightfields included). Per contact: the shape pair, the
        midpoint of the two surface points, the normal from the first to the second shape and
        ``contact_penetration``, the signed distance between the margin-padded surfaces
        (negative when penetrating). ``contact_count[0]`` is set to the number written (at most
        the length of the output arrays; with ``deterministic=True`` the first ones in the
        sorted order).

        Speculative contacts: with ``collision_update_dt > 0`` a pair is admitted when its
        distance is below ``max(gap, min(v_n * dt, max_speculative_extension))`` where ``v_n``
        is the approach speed of the two surface points from ``shape_linear_velocity``
        (velocity of each shape's origin, world frame) and ``shape_angular_velocity`` (world
        frame); missing velocities count as zero; ``max_speculative_extension=None`` means 0.1 m, the
        default of :class:`CollisionPipeline.SpeculativeContactConfig`.

        Geometry arrays this implementation does not need (``shape_collision_radius``,
        ``shape_flags``, ``shape_voxel_resolution``, SDF and edge data, ...) are accepted and
        ignored.
        """
        if contact_tangent is not None:
            raise NotImplementedError("NarrowPhase.launch: contact_tangent output is not implemented yet")
        self._check_kwargs(kwargs, "launch")
        cap = int(contact_pair.shape[0])
        out, dev = self._run(candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform,
                             shape_gap, max(cap, self.contact_max), model, shape_source, shape_linear_velocity,
                             shape_angular_velocity, collision_update_dt, max_speculative_extension, device,
                             "launch")  # fmt: skip
        data = FlatContactWriterData()
        data.contact_pair = contact_pair
        data.contact_position = contact_position
        data.contact_normal = contact_normal
        data.contact_penetration = contact_penetration
        wdim = grid_dim(dev, out.capacity)
        wp.launch(self._flat_kernel, dim=wdim, inputs=[out, data, cap, contact_count, wdim], device=dev,
                  record_tape=False)  # fmt: skip

    def launch_custom_write(self, *, candidate_pair, candidate_pair_count, shape_types, shape_data,
                            shape_transform, shape_gap, writer_data, shape_source=None, shape_linear_velocity=None,
                            shape_angular_velocity=None, collision_update_dt: float | None = None,
                            max_speculative_extension: float | None = None, device=None, model=None,
                            **kwargs) -> None:  # fmt: skip
        """Like :meth:`launch`, but every contact goes through the constructor's
        ``contact_writer_warp_func`` as ``writer(contact, writer_data, output_index)``
        (``output_index`` in ``0 .. n-1``; at most ``contact_max`` contacts)."""
        if self._custom_kernel is None:
            raise ValueError("NarrowPhase.launch_custom_write: construct the NarrowPhase with "
                             "contact_writer_warp_func=... first")  # fmt: skip
        self._check_kwargs(kwargs, "launch_custom_write")
        out, dev = self._run(candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform,
                             shape_gap, self.contact_max, model, shape_source, shape_linear_velocity,
                             shape_angular_velocity, collision_update_dt, max_speculative_extension, device,
                             "launch_custom_write")  # fmt: skip
        wdim = grid_dim(dev, out.capacity)
        wp.launch(self._custom_kernel, dim=wdim, inputs=[out, writer_data, out.capacity, self._no_count, wdim],
                  device=dev, record_tape=False)  # fmt: skip

    @staticmethod
    def _check_kwargs(kwargs, who):
        unknown = sorted(k for k in kwargs if k not in _IGNORED_INPUTS)
        if unknown:
            raise TypeError(f"NarrowPhase.{who}: unexpected arguments {unknown}")
