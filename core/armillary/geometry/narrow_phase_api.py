""":class:`NarrowPhase`: the narrow phase as a stand-alone stage fed by any broad phase.

:meth:`NarrowPhase.launch` runs the per-pair routines of :mod:`.narrow_phase` (the same
kernel :class:`CollisionPipeline` uses) on the candidate pairs and writes flat contact
arrays. With ``contact_writer_warp_func`` a user ``@wp.func`` decides how each contact is
stored (:meth:`NarrowPhase.launch_custom_write`).

Launches per call: one preparation kernel (splits ``shape_data``, keeps the candidate pairs
the narrow phase handles and resets the counters), the narrow-phase kernel and one writer
kernel. Nothing syncs with the host after the first call for a given ``shape_types`` array.
"""

from __future__ import annotations

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.enums import GeoType
from .broad_phase import grid_dim
from .mesh_collision import GeoBuffers, build_geo_buffers
from .narrow_phase import PAIR_MAX_CONTACTS, ContactOut, narrow_phase_kernel

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
    # shape_body is -1 for every shape in this stage, so the core points are world points
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
        n = wp.min(wp.min(src.count[0], src.capacity), out_capacity)
        if tid == 0 and out_count.shape[0] > 0:
            out_count[0] = n
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
    pair_ok: wp.array2d(dtype=int),
    out_pairs: wp.array(dtype=wp.vec2i),
    out_pair_count: wp.array(dtype=int),
    skipped_pair_count: wp.array(dtype=int),
    scale: wp.array(dtype=wp.vec3),
    margin: wp.array(dtype=float),
    stride: int,
):
    tid = wp.tid()
    s = tid
    while s < shape_data.shape[0]:
        d = shape_data[s]
        scale[s] = wp.vec3(d[0], d[1], d[2])
        margin[s] = d[3]
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


class NarrowPhase:
    """Generate contacts for candidate shape pairs from any broad phase.

    Handles the pairs :class:`CollisionPipeline` handles: every pair among PLANE, SPHERE,
    CAPSULE, ELLIPSOID, CYLINDER, BOX, CONE and CONVEX_MESH except PLANE-PLANE, and MESH /
    HFIELD against convex shapes; other candidate pairs (e.g. PLANE-PLANE, MESH-MESH) produce
    no contacts and are counted in :attr:`skipped_pair_count` (a one-element device array,
    reset by every launch; read it to detect pairs this narrow phase cannot handle yet). CONVEX_MESH, MESH and HFIELD shapes need the model's geometry buffers: pass
    ``model=`` to :meth:`launch` / :meth:`launch_custom_write`.

    Args:
        max_candidate_pairs: capacity of the candidate pair buffer handed to :meth:`launch`.
        reduce_contacts: accepted for interface compatibility (mesh contact reduction is not
            performed; mesh pairs emit the unreduced per-triangle contacts).
        device: device of the internal buffers.
        contact_writer_warp_func: optional ``@wp.func`` ``writer(contact: ContactData,
            writer_data: YourStruct, output_index: int)``; its kernel is built here, once.
            ``output_index`` runs over ``0 .. n-1`` for the ``n`` contacts generated.
        contact_max: capacity of the internal contact buffer of :meth:`launch_custom_write`
            (defaults to ``5 * max_candidate_pairs``); :meth:`launch` grows it to the size of
            its output arrays when needed.
    """

    def __init__(self, *, max_candidate_pairs: int, reduce_contacts: bool = True, device=None,
                 contact_writer_warp_func=None, contact_max: int | None = None, **kwargs):  # fmt: skip
        unsupported = {k: v for k, v in kwargs.items() if v is not None and v is not False and k not in (
            "max_triangle_pairs", "max_mesh_mesh_pairs", "max_mesh_plane_pairs", "has_meshes", "has_heightfields",
            "use_lean_gjk_mpr", "convex_support_acceleration", "has_generic_convex_pairs", "sparse_gjk_pairs",
            "split_gjk_mpr", "candidate_pair_work_estimate", "verify_buffers",
            "contact_reduction_hashtable_size_factor", "sdf_texture_paired_samples", "deterministic")}  # fmt: skip
        if kwargs.get("deterministic"):
            unsupported["deterministic"] = True
        if unsupported:
            raise NotImplementedError(f"NarrowPhase: options {sorted(unsupported)} are not implemented yet")
        self.max_candidate_pairs = int(max_candidate_pairs)
        if self.max_candidate_pairs < 0:
            raise ValueError("NarrowPhase: max_candidate_pairs must be >= 0")
        self.reduce_contacts = bool(reduce_contacts)
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
            self._no_count = wp.zeros(0, dtype=int)
        self._scratch = None
        self._shape_bufs = None
        self._checked_types = set()
        self._empty_geo = None

    # ------------------------------------------------------------------ helpers
    def _alloc_scratch(self, cap: int) -> ContactOut:
        cap = max(int(cap), 1)
        if self._scratch is not None and self._scratch.capacity >= cap:
            return self._scratch
        with wp.ScopedDevice(self.device):
            o = ContactOut()
            o.count = wp.zeros(1, dtype=int)
            o.shape0 = wp.zeros(cap, dtype=int)
            o.shape1 = wp.zeros(cap, dtype=int)
            o.point0 = wp.zeros(cap, dtype=wp.vec3)
            o.point1 = wp.zeros(cap, dtype=wp.vec3)
            o.offset0 = wp.zeros(cap, dtype=wp.vec3)
            o.offset1 = wp.zeros(cap, dtype=wp.vec3)
            o.normal = wp.zeros(cap, dtype=wp.vec3)
            o.margin0 = wp.zeros(cap, dtype=float)
            o.margin1 = wp.zeros(cap, dtype=float)
            o.point_id = wp.zeros(cap, dtype=int)
            o.sort_key = wp.zeros(0, dtype=wp.int64)
            o.sort_value = wp.zeros(0, dtype=int)
            o.capacity = cap
            o.key_shift = 0
        self._scratch = o
        return o

    def _shape_buffers(self, n: int):
        n = max(int(n), 1)
        if self._shape_bufs is None or self._shape_bufs[0].shape[0] != n:
            with wp.ScopedDevice(self.device):
                self._shape_bufs = (wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=float),
                                    wp.full(n, -1, dtype=int), wp.zeros(1, dtype=wp.transform),
                                    wp.zeros(1, dtype=wp.spatial_vector), wp.zeros(1, dtype=wp.vec3))  # fmt: skip
        return self._shape_bufs

    def _geo(self, shape_types, model):
        if model is not None:
            return build_geo_buffers(model)
        key = (shape_types.ptr, shape_types.shape[0])
        if key not in self._checked_types:
            types = shape_types.numpy()
            bad = [int(t) for t in np.unique(types) if int(t) in _MODEL_BUFFER_TYPES]
            if bad:
                raise NotImplementedError(f"NarrowPhase: {GeoType(bad[0]).name} shapes need the model's geometry "
                                          "buffers; pass model=... to launch()")  # fmt: skip
            self._checked_types.add(key)
        if self._empty_geo is None:
            with wp.ScopedDevice(self.device):
                g = GeoBuffers()
                g.verts = wp.zeros(1, dtype=wp.vec3)
                g.vstart = wp.zeros(max(int(shape_types.shape[0]), 1), dtype=int)
                g.vcount = wp.zeros(max(int(shape_types.shape[0]), 1), dtype=int)
                g.mesh_id = wp.zeros(1, dtype=wp.uint64)
                g.hf_data = wp.zeros(1, dtype=float)
                g.hf_start = wp.zeros(1, dtype=int)
                g.hf_dims = wp.zeros(1, dtype=wp.vec4)
                g.tri_flags = wp.zeros(1, dtype=int)
                g.tri_start = wp.zeros(1, dtype=int)
            self._empty_geo = g
        if self._empty_geo.vstart.shape[0] < shape_types.shape[0]:
            self._empty_geo = None
            return self._geo(shape_types, model)
        return self._empty_geo

    def _run(self, candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform, shape_gap,
             cap, model, device):  # fmt: skip
        dev = wp.get_device(device) if device is not None else self.device
        if candidate_pair.shape[0] > self._pairs.shape[0]:
            raise ValueError(f"NarrowPhase: candidate_pair holds {candidate_pair.shape[0]} pairs, more than "
                             f"max_candidate_pairs={self.max_candidate_pairs}")  # fmt: skip
        n = int(shape_types.shape[0])
        scale, margin, body, body_q, body_qd, body_com = self._shape_buffers(n)
        geo = self._geo(shape_types, model)
        out = self._alloc_scratch(cap)
        self._pair_count.zero_()
        self.skipped_pair_count.zero_()
        out.count.zero_()
        pdim = grid_dim(dev, max(n, candidate_pair.shape[0]))
        wp.launch(_prepare_kernel, dim=pdim,
                  inputs=[candidate_pair, candidate_pair_count, shape_types, shape_data, self._pair_ok, self._pairs,
                          self._pair_count, self.skipped_pair_count, scale, margin, pdim],
                  device=dev, record_tape=False)  # fmt: skip
        ndim = grid_dim(dev, self._pairs.shape[0])
        wp.launch(narrow_phase_kernel, dim=ndim,
                  inputs=[self._pairs, self._pair_count, shape_types, body, shape_transform, scale, margin, shape_gap,
                          body_q, body_qd, body_com, 0, 0.0, 0.0, out, ndim, geo],
                  device=dev, record_tape=False)  # fmt: skip
        return out, dev

    # ------------------------------------------------------------------ public API
    def launch(self, *, candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform,
               shape_gap, contact_pair, contact_position, contact_normal, contact_penetration, contact_count,
               shape_source=None, shape_collision_radius=None, shape_flags=None, shape_voxel_resolution=None,
               contact_tangent=None, device=None, model=None, **kwargs) -> None:  # fmt: skip
        """Generate contacts for ``candidate_pair[:candidate_pair_count[0]]`` into flat arrays.

        ``shape_data`` holds scale (xyz) and margin (w) per shape, ``shape_transform`` the
        world transforms, ``shape_gap`` the per-shape contact gaps. Per contact: the shape pair,
        the midpoint of the two surface points, the normal from the first to the second shape
        and ``contact_penetration``, the signed distance between the margin-padded surfaces
        (negative when penetrating). ``contact_count[0]`` is set to the number written (at
        most the length of the output arrays). Geometry arrays this implementation does not
        need (``shape_source``, ``shape_collision_radius``, ...) are accepted and ignored.
        """
        if contact_tangent is not None:
            raise NotImplementedError("NarrowPhase.launch: contact_tangent output is not implemented yet")
        if kwargs.get("shape_linear_velocity") is not None or float(kwargs.get("collision_update_dt", 0.0)) != 0.0:
            raise NotImplementedError("NarrowPhase.launch: speculative contacts are not implemented yet")
        cap = int(contact_pair.shape[0])
        out, dev = self._run(candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform,
                             shape_gap, max(cap, self.contact_max), model, device)  # fmt: skip
        data = FlatContactWriterData()
        data.contact_pair = contact_pair
        data.contact_position = contact_position
        data.contact_normal = contact_normal
        data.contact_penetration = contact_penetration
        wdim = grid_dim(dev, out.capacity)
        wp.launch(self._flat_kernel, dim=wdim, inputs=[out, data, cap, contact_count, wdim], device=dev,
                  record_tape=False)  # fmt: skip

    def launch_custom_write(self, *, candidate_pair, candidate_pair_count, shape_types, shape_data,
                            shape_transform, shape_gap, writer_data, shape_source=None, shape_collision_radius=None,
                            shape_flags=None, shape_voxel_resolution=None, device=None, model=None,
                            **kwargs) -> None:  # fmt: skip
        """Like :meth:`launch`, but every contact goes through the constructor's
        ``contact_writer_warp_func`` as ``writer(contact, writer_data, output_index)``
        (``output_index`` in ``0 .. n-1``; at most ``contact_max`` contacts)."""
        if self._custom_kernel is None:
            raise ValueError("NarrowPhase.launch_custom_write: construct the NarrowPhase with "
                             "contact_writer_warp_func=... first")  # fmt: skip
        if kwargs.get("shape_linear_velocity") is not None or float(kwargs.get("collision_update_dt", 0.0)) != 0.0:
            raise NotImplementedError("NarrowPhase.launch_custom_write: speculative contacts are not implemented yet")
        out, dev = self._run(candidate_pair, candidate_pair_count, shape_types, shape_data, shape_transform,
                             shape_gap, self.contact_max, model, device)  # fmt: skip
        wdim = grid_dim(dev, out.capacity)
        wp.launch(self._custom_kernel, dim=wdim, inputs=[out, writer_data, out.capacity, self._no_count, wdim],
                  device=dev, record_tape=False)  # fmt: skip
