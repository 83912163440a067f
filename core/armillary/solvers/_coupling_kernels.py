"""Warp kernels behind the default :class:`~armillary.solvers.CouplingInterface` hooks.

Private: imported lazily by :mod:`armillary.solvers.coupling` (``import armillary`` stays free of
warp) and by the coupling plugin, which reuses the contact compaction helpers.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from ..sim.gravity import gravity_of_world

BODY_KINEMATIC = wp.constant(2)  # armillary.sim.enums.BodyFlags.KINEMATIC
BODY_PROXY = wp.constant(4)  # BodyFlags.PROXY
PARTICLE_ACTIVE = wp.constant(1)  # ParticleFlags.ACTIVE
PARTICLE_PROXY = wp.constant(2)  # ParticleFlags.PROXY


@wp.func
def _world_gravity(gravity: wp.array(dtype=wp.vec3), world: int):
    # global entities (world -1) take the last row, the global world's gravity
    return gravity_of_world(gravity, world)


@wp.kernel
def body_gravity_kernel(
    gravity: wp.array(dtype=wp.vec3),
    body_world: wp.array(dtype=wp.int32),
    body_flags: wp.array(dtype=wp.int32),
    body_inv_mass: wp.array(dtype=float),
    out: wp.array(dtype=wp.vec3),
):
    b = wp.tid()
    g = wp.vec3(0.0)
    dynamic = body_inv_mass[b] > 0.0
    if body_flags.shape[0] > 0:
        if (body_flags[b] & BODY_KINEMATIC) != 0:
            dynamic = False
    if dynamic:
        w = int(-1)
        if body_world.shape[0] > 0:
            w = body_world[b]
        g = _world_gravity(gravity, w)
    out[b] = g


@wp.kernel
def particle_gravity_kernel(
    gravity: wp.array(dtype=wp.vec3),
    particle_world: wp.array(dtype=wp.int32),
    particle_flags: wp.array(dtype=wp.int32),
    particle_inv_mass: wp.array(dtype=float),
    out: wp.array(dtype=wp.vec3),
):
    p = wp.tid()
    g = wp.vec3(0.0)
    dynamic = particle_inv_mass[p] > 0.0
    if particle_flags.shape[0] > 0:
        if (particle_flags[p] & PARTICLE_ACTIVE) == 0:
            dynamic = False
    if dynamic:
        w = int(-1)
        if particle_world.shape[0] > 0:
            w = particle_world[p]
        g = _world_gravity(gravity, w)
    out[p] = g


@wp.func
def _to_world(X_WB: wp.transform, tensor_B: wp.mat33):
    """A body-frame inertia (or inverse inertia) tensor expressed in the world frame."""
    r = wp.quat_to_matrix(wp.transform_get_rotation(X_WB))
    return r * tensor_B * wp.transpose(r)


@wp.kernel
def rewind_body_kernel(
    local_to_proxy: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    coupling_forces: wp.array(dtype=wp.spatial_vector),
    gravity_acc: wp.array(dtype=wp.vec3),
    dt: float,
):
    b = wp.tid()
    p = local_to_proxy[b]
    if p < 0:
        return
    f = wp.spatial_top(coupling_forces[p])
    tau = wp.spatial_bottom(coupling_forces[p])
    if body_f.shape[0] > 0:
        f = f + wp.spatial_top(body_f[b])
        tau = tau + wp.spatial_bottom(body_f[b])
    g = wp.vec3(0.0)
    if gravity_acc.shape[0] > 0:
        g = gravity_acc[b]
    v = wp.spatial_top(body_qd[b]) - dt * (body_inv_mass[b] * f + g)
    w = wp.spatial_bottom(body_qd[b]) - dt * (_to_world(body_q[b], body_inv_inertia[b]) * tau)
    body_qd[b] = wp.spatial_vector(v, w)


@wp.kernel
def rewind_particle_kernel(
    local_to_proxy: wp.array(dtype=wp.int32),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_f: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    coupling_forces: wp.array(dtype=wp.vec3),
    gravity_acc: wp.array(dtype=wp.vec3),
    dt: float,
):
    i = wp.tid()
    p = local_to_proxy[i]
    if p < 0:
        return
    f = coupling_forces[p]
    if particle_f.shape[0] > 0:
        f = f + particle_f[i]
    g = wp.vec3(0.0)
    if gravity_acc.shape[0] > 0:
        g = gravity_acc[i]
    particle_qd[i] = particle_qd[i] - dt * (particle_inv_mass[i] * f + g)


@wp.kernel
def harvest_body_kernel(
    local_to_proxy: wp.array(dtype=wp.int32),
    body_qd_before: wp.array(dtype=wp.spatial_vector),
    body_q_after: wp.array(dtype=wp.transform),
    body_qd_after: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    body_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    gravity_acc: wp.array(dtype=wp.vec3),
    inv_dt: float,
    out_body_f: wp.array(dtype=wp.spatial_vector),
):
    b = wp.tid()
    p = local_to_proxy[b]
    if p < 0:
        return
    m = body_mass[b]
    dv = wp.spatial_top(body_qd_after[b]) - wp.spatial_top(body_qd_before[b])
    dw = wp.spatial_bottom(body_qd_after[b]) - wp.spatial_bottom(body_qd_before[b])
    f = m * dv * inv_dt
    tau = _to_world(body_q_after[b], body_inertia[b]) * dw * inv_dt
    if gravity_acc.shape[0] > 0:
        f = f - m * gravity_acc[b]
    if body_f.shape[0] > 0:
        f = f - wp.spatial_top(body_f[b])
        tau = tau - wp.spatial_bottom(body_f[b])
    wp.atomic_add(out_body_f, p, wp.spatial_vector(f, tau))


@wp.kernel
def harvest_particle_kernel(
    local_to_proxy: wp.array(dtype=wp.int32),
    particle_qd_before: wp.array(dtype=wp.vec3),
    particle_qd_after: wp.array(dtype=wp.vec3),
    particle_f: wp.array(dtype=wp.vec3),
    particle_mass: wp.array(dtype=float),
    gravity_acc: wp.array(dtype=wp.vec3),
    inv_dt: float,
    out_particle_f: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    p = local_to_proxy[i]
    if p < 0:
        return
    m = particle_mass[i]
    f = m * (particle_qd_after[i] - particle_qd_before[i]) * inv_dt
    if gravity_acc.shape[0] > 0:
        f = f - m * gravity_acc[i]
    if particle_f.shape[0] > 0:
        f = f - particle_f[i]
    wp.atomic_add(out_particle_f, p, f)


# ---------------------------------------------------------------------- contact filtering
@wp.func
def _body_immobile(b: int, body_flags: wp.array(dtype=wp.int32), body_inv_mass: wp.array(dtype=float)):
    if b < 0:
        return True
    if body_inv_mass[b] <= 0.0:
        return True
    if body_flags.shape[0] > 0:
        if (body_flags[b] & BODY_KINEMATIC) != 0:
            return True
    return False


@wp.func
def _body_proxy(b: int, body_flags: wp.array(dtype=wp.int32)):
    if b < 0 or body_flags.shape[0] == 0:
        return False
    return (body_flags[b] & BODY_PROXY) != 0


@wp.kernel
def proxy_rigid_keep_kernel(
    count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    body_flags: wp.array(dtype=wp.int32),
    body_inv_mass: wp.array(dtype=float),
    keep: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    k = int(0)
    if i < count[0]:
        s0 = shape0[i]
        s1 = shape1[i]
        if s0 >= 0 and s1 >= 0:
            b0 = shape_body[s0]
            b1 = shape_body[s1]
            p0 = _body_proxy(b0, body_flags)
            p1 = _body_proxy(b1, body_flags)
            k = 1
            # proxy-proxy and proxy-static rows would feed constraints between virtual objects back
            if p0 and (p1 or _body_immobile(b1, body_flags, body_inv_mass)):
                k = 0
            if p1 and (p0 or _body_immobile(b0, body_flags, body_inv_mass)):
                k = 0
    keep[i] = k


@wp.kernel
def proxy_soft_keep_kernel(
    count: wp.array(dtype=wp.int32),
    particle: wp.array(dtype=wp.int32),
    shape: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    body_flags: wp.array(dtype=wp.int32),
    body_inv_mass: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    keep: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    k = int(0)
    if i < count[0]:
        p = particle[i]
        s = shape[i]
        if p >= 0 and s >= 0:
            k = 1
            b = shape_body[s]
            pproxy = False
            if particle_flags.shape[0] > 0:
                pproxy = (particle_flags[p] & PARTICLE_PROXY) != 0
            if pproxy and (_body_proxy(b, body_flags) or _body_immobile(b, body_flags, body_inv_mass)):
                k = 0
    keep[i] = k


@wp.kernel
def compact_rows_kernel(
    keep: wp.array(dtype=wp.int32),
    offset: wp.array(dtype=wp.int32),
    src: wp.array(dtype=Any),
    dst: wp.array(dtype=Any),
):
    i = wp.tid()
    if keep[i] != 0:
        dst[offset[i]] = src[i]


@wp.kernel
def compact_count_kernel(keep: wp.array(dtype=wp.int32), offset: wp.array(dtype=wp.int32),
                         count: wp.array(dtype=wp.int32)):  # fmt: skip
    n = keep.shape[0]
    if n == 0:
        count[0] = 0
    else:
        count[0] = offset[n - 1] + keep[n - 1]


_SKIP_ROWS = {"rigid_contact_count", "soft_contact_count", "rigid_contact_max", "soft_contact_max",
              "rigid_contact_new_indices", "rigid_contact_new_count", "rigid_contact_broken_indices",
              "rigid_contact_broken_count", "rigid_contact_force"}  # fmt: skip


def contact_row_arrays(contacts, prefix: str, n: int) -> list[str]:
    """Names of ``contacts``' per-row arrays of one stream (``"rigid_contact_"``/``"soft_contact_"``)."""
    names = []
    for name, value in vars(contacts).items():
        if not name.startswith(prefix) or name in _SKIP_ROWS:
            continue
        if isinstance(value, wp.array) and value.ndim == 1 and value.shape[0] == n:
            names.append(name)
    return sorted(names)


class ContactCompactor:
    """Copies the rows of a :class:`~armillary.Contacts` buffer selected by per-row keep flags into a
    second buffer of the same capacity (order preserved, deterministic: an exclusive scan, no
    atomics, no host synchronisation, so it can run inside a captured graph)."""

    def __init__(self, contacts):
        from ..sim.contacts import Contacts

        self.device = contacts.device
        self.rigid_max = int(contacts.rigid_contact_max)
        self.soft_max = int(contacts.soft_contact_max)
        self.dst = Contacts(self.rigid_max, self.soft_max, device=self.device)
        self.rigid_keep = wp.zeros(self.rigid_max, dtype=wp.int32, device=self.device)
        self.soft_keep = wp.zeros(self.soft_max, dtype=wp.int32, device=self.device)
        self._rigid_off = wp.zeros(self.rigid_max, dtype=wp.int32, device=self.device)
        self._soft_off = wp.zeros(self.soft_max, dtype=wp.int32, device=self.device)
        self.rigid_names = contact_row_arrays(contacts, "rigid_contact_", self.rigid_max)
        self.soft_names = contact_row_arrays(contacts, "soft_contact_", self.soft_max)
        from ..launch import LaunchCache

        self._launches = LaunchCache(max_entries=4 * (len(self.rigid_names) + len(self.soft_names) + 2))

    def matches(self, contacts) -> bool:
        return (int(contacts.rigid_contact_max) == self.rigid_max and int(contacts.soft_contact_max) == self.soft_max
                and contacts.device == self.device)  # fmt: skip

    def compact(self, src, *, soft: bool = True):
        """Fill ``self.dst`` from ``src`` with the rows whose keep flags are set; returns ``self.dst``.
        ``soft=False``: every soft keep flag is known to be 0 (only the soft count is zeroed).
        The launches (one row-copy kernel per contact array) are recorded once per source buffer
        and replayed."""
        dst = self.dst
        for keep, off, n, names, count_name, on in (
            (self.rigid_keep, self._rigid_off, self.rigid_max, self.rigid_names, "rigid_contact_count", True),
            (self.soft_keep, self._soft_off, self.soft_max, self.soft_names, "soft_contact_count", soft),
        ):
            if n == 0 or not on:
                getattr(dst, count_name).zero_()
                continue
            wp.utils.array_scan(keep, off, inclusive=False)
            for name in names:
                s, d = getattr(src, name, None), getattr(dst, name, None)
                if s is None or d is None or s.dtype != d.dtype or d.shape[0] != n:
                    continue
                self._launches.launch(compact_rows_kernel, n, [keep, off, s, d], device=self.device)
            self._launches.launch(compact_count_kernel, 1, [keep, off], [getattr(dst, count_name)],
                                  device=self.device)  # fmt: skip
        return dst
