"""``use_mujoco_contacts=False`` on the MuJoCo Warp backend: armillary contacts written into
MuJoCo Warp's contact arrays (device work only, graph-capturable).

The MuJoCo Warp model runs with ``opt.run_collision_detection = False`` (its documented switch for
user-populated contacts); before each step :class:`WarpContactInjector` clears ``d.nacon`` and one
kernel (a thread per armillary contact) appends each contact whose two shapes map to MuJoCo geoms,
with the same conversion as the C engine's :mod:`.contacts`: normal = armillary's (shape 0 ->
shape 1, the first row of MuJoCo's contact frame), ``dist`` = signed distance between the two
margin-offset surfaces, ``pos`` = their midpoint, ``includemargin = 0``, and the two geoms'
MuJoCo parameters mixed as MuJoCo mixes them (priority, else max condim / friction and
``solmix``-weighted solref / solimp).
"""

from __future__ import annotations

import numpy as np
import warp as wp

vec5 = wp.types.vector(length=5, dtype=wp.float32)


@wp.struct
class GeomParams:
    """Per-geom MuJoCo contact parameters of each world's ``MjModel`` (index ``world * ngeom +
    geom``) and the per-shape geom/world maps."""

    ngeom: int
    shape_geom: wp.array(dtype=wp.int32)  # MuJoCo geom of each armillary shape (-1: none)
    shape_world: wp.array(dtype=wp.int32)  # world of each shape (-1: global, -2: not converted)
    priority: wp.array(dtype=wp.int32)
    condim: wp.array(dtype=wp.int32)
    friction: wp.array(dtype=wp.vec3)  # sliding, torsional, rolling
    solref: wp.array(dtype=wp.vec2)
    solimp: wp.array(dtype=vec5)
    solmix: wp.array(dtype=float)


@wp.func
def _tangent_frame(n: wp.vec3):
    """Rows: the normal and two unit tangents (a right-handed contact frame)."""
    a = wp.vec3(1.0, 0.0, 0.0)
    if wp.abs(n[0]) >= 0.5:
        a = wp.vec3(0.0, 1.0, 0.0)
    t1 = wp.normalize(wp.cross(n, a))
    t2 = wp.cross(n, t1)
    return wp.mat33(n[0], n[1], n[2], t1[0], t1[1], t1[2], t2[0], t2[1], t2[2])


@wp.kernel
def inject_contacts_kernel(
    # Model:
    geoms: GeomParams,
    shape_body: wp.array(dtype=wp.int32),
    # State in:
    body_q: wp.array(dtype=wp.transform),
    # Contacts in (armillary):
    rigid_contact_count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),  # body frame [m]
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),  # world, shape 0 -> shape 1
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    naconmax: int,
    # MuJoCo Warp contacts out:
    nacon: wp.array(dtype=int),
    dist_out: wp.array(dtype=float),
    pos_out: wp.array(dtype=wp.vec3),
    frame_out: wp.array(dtype=wp.mat33),
    includemargin_out: wp.array(dtype=float),
    friction_out: wp.array(dtype=vec5),
    solref_out: wp.array(dtype=wp.vec2),
    solreffriction_out: wp.array(dtype=wp.vec2),
    solimp_out: wp.array(dtype=vec5),
    dim_out: wp.array(dtype=int),
    geom_out: wp.array(dtype=wp.vec2i),
    flex_out: wp.array(dtype=wp.vec2i),
    elem_out: wp.array(dtype=wp.vec2i),
    vert_out: wp.array(dtype=wp.vec2i),
    worldid_out: wp.array(dtype=int),
    type_out: wp.array(dtype=int),
    geomcollisionid_out: wp.array(dtype=int),
):
    k = wp.tid()
    if k >= wp.min(rigid_contact_count[0], shape0.shape[0]):
        return
    a = shape0[k]
    b = shape1[k]
    if a < 0 or b < 0:
        return
    ga = geoms.shape_geom[a]
    gb = geoms.shape_geom[b]
    if ga < 0 or gb < 0:
        return
    world = geoms.shape_world[a]
    if world < 0:
        world = geoms.shape_world[b]
    if world < 0:
        return
    n = normal[k]
    pa = point0[k]
    ba = shape_body[a]
    if ba >= 0:
        pa = wp.transform_point(body_q[ba], pa)
    pb = point1[k]
    bb = shape_body[b]
    if bb >= 0:
        pb = wp.transform_point(body_q[bb], pb)
    xa = pa + n * margin0[k]
    xb = pb - n * margin1[k]
    slot = wp.atomic_add(nacon, 0, 1)
    if slot >= naconmax:
        return  # buffer full: MuJoCo Warp reports the overflow through nacon > naconmax
    # MuJoCo's parameter mixing of the two geoms (this world's parameters)
    ia = world * geoms.ngeom + ga
    ib = world * geoms.ngeom + gb
    prio_a = geoms.priority[ia]
    prio_b = geoms.priority[ib]
    condim = int(0)
    fr = wp.vec3()
    solref = wp.vec2()
    solimp = vec5()
    if prio_a != prio_b:
        g = ia
        if prio_b > prio_a:
            g = ib
        condim = geoms.condim[g]
        fr = geoms.friction[g]
        solref = geoms.solref[g]
        solimp = geoms.solimp[g]
    else:
        condim = wp.max(geoms.condim[ia], geoms.condim[ib])
        fr = wp.max(geoms.friction[ia], geoms.friction[ib])
        s1 = geoms.solmix[ia]
        s2 = geoms.solmix[ib]
        mix = float(0.5)
        if s1 + s2 >= 1.0e-15:
            mix = s1 / (s1 + s2)
        r1 = geoms.solref[ia]
        r2 = geoms.solref[ib]
        if r1[0] > 0.0 and r2[0] > 0.0:
            solref = mix * r1 + (1.0 - mix) * r2
        else:
            solref = wp.min(r1, r2)
        solimp = mix * geoms.solimp[ia] + (1.0 - mix) * geoms.solimp[ib]
    dist_out[slot] = wp.dot(n, xb - xa)
    pos_out[slot] = 0.5 * (xa + xb)
    frame_out[slot] = _tangent_frame(n)
    includemargin_out[slot] = 0.0  # dist already runs between the margin-offset surfaces
    friction_out[slot] = vec5(fr[0], fr[0], fr[1], fr[2], fr[2])
    solref_out[slot] = solref
    solreffriction_out[slot] = wp.vec2(0.0, 0.0)
    solimp_out[slot] = solimp
    dim_out[slot] = condim
    geom_out[slot] = wp.vec2i(ga, gb)
    if flex_out.shape[0] > 0:  # allocated only for models with flexes
        flex_out[slot] = wp.vec2i(-1, -1)
        elem_out[slot] = wp.vec2i(-1, -1)
        vert_out[slot] = wp.vec2i(-1, -1)
    worldid_out[slot] = world
    type_out[slot] = 1  # ContactType.CONSTRAINT
    geomcollisionid_out[slot] = k


def contact_buffers(capacity: int, device):
    """Stand-in for a MuJoCo Warp ``Data`` (``nacon`` and ``contact.*`` of ``capacity`` rows) that
    :meth:`WarpContactInjector.inject` can fill: the C engine's injection reads its rows from it."""
    import types

    def z(dtype, shape=capacity):
        return wp.zeros(shape, dtype=dtype, device=device)

    contact = types.SimpleNamespace(
        dist=z(float), pos=z(wp.vec3), frame=z(wp.mat33), includemargin=z(float), friction=z(vec5),
        solref=z(wp.vec2), solreffriction=z(wp.vec2), solimp=z(vec5), dim=z(int), geom=z(wp.vec2i),
        flex=z(wp.vec2i, 0), elem=z(wp.vec2i, 0), vert=z(wp.vec2i, 0), worldid=z(int), type=z(int),
        geomcollisionid=z(int),
    )  # fmt: skip
    return types.SimpleNamespace(nacon=z(int, 1), contact=contact)


class WarpContactInjector:
    """Tables and the per-step launch writing armillary contacts into a MuJoCo Warp ``Data`` (or
    the host buffers of :func:`contact_buffers`, for the C engine)."""

    def __init__(self, solver, mjw_model=None):
        from .contacts import ContactInjector

        host = ContactInjector(solver)  # the shape -> geom / world maps of the C path
        models, dev = solver.mj_models, wp.get_device(solver.model.device)
        self.device = dev

        def stacked(name, dtype, np_dtype):
            return wp.array(np.concatenate([np.asarray(getattr(mw, name)) for mw in models]).astype(np_dtype),
                            dtype=dtype, device=dev)  # fmt: skip

        p = GeomParams()
        p.ngeom = int(models[0].ngeom)
        p.shape_geom = wp.array(host.shape_geom.astype(np.int32), dtype=wp.int32, device=dev)
        p.shape_world = wp.array(host.shape_world.astype(np.int32), dtype=wp.int32, device=dev)
        p.priority = stacked("geom_priority", wp.int32, np.int32)
        p.condim = stacked("geom_condim", wp.int32, np.int32)
        p.friction = stacked("geom_friction", wp.vec3, np.float32)
        p.solref = stacked("geom_solref", wp.vec2, np.float32)
        p.solimp = stacked("geom_solimp", vec5, np.float32)
        p.solmix = stacked("geom_solmix", float, np.float32)
        self.params = p
        self.models = models  # the per-world MjModel list the tables were read from
        if mjw_model is not None:
            mjw_model.opt.run_collision_detection = False

    def inject(self, solver, state_in, contacts, d) -> None:
        """Replace ``d``'s contacts by ``contacts`` (``None``: no contacts) at ``state_in``."""
        d.nacon.zero_()
        if contacts is None or int(getattr(contacts, "rigid_contact_max", 0) or 0) == 0:
            return
        c = d.contact
        solver._launches.launch(
            inject_contacts_kernel, dim=int(contacts.rigid_contact_max),
            inputs=[self.params, solver.model.shape_body, state_in.body_q, contacts.rigid_contact_count,
                    contacts.rigid_contact_shape0, contacts.rigid_contact_shape1, contacts.rigid_contact_point0,
                    contacts.rigid_contact_point1, contacts.rigid_contact_normal, contacts.rigid_contact_margin0,
                    contacts.rigid_contact_margin1, int(c.dist.shape[0])],
            outputs=[d.nacon, c.dist, c.pos, c.frame, c.includemargin, c.friction, c.solref, c.solreffriction,
                     c.solimp, c.dim, c.geom, c.flex, c.elem, c.vert, c.worldid, c.type, c.geomcollisionid],
            device=self.device,
        )  # fmt: skip
