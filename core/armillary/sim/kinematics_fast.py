"""Forward-only forward kinematics: the kernel :func:`armillary.eval_fk` launches outside a tape.

Same contract and conventions as :func:`~armillary.sim.kinematics_kernels.eval_fk_kernel` (one
thread per selected articulation, joints parent-first, ``body_qd = (v_com, w)`` in world
coordinates), results equal to float32 round-off, but cheaper per joint:

* the parent's pose, twist and world COM stay in registers when a joint's parent is the body the
  previous joint wrote (every joint of a chain), instead of being read back and the parent COM
  transformed again;
* revolute, prismatic and fixed joints compose their rotation / translation directly (no joint
  transform built and multiplied, no zero vector rotated); the child pose is
  ``X_WPJ * X_j * inverse(X_c)`` with the inverse folded into one rotation;
* joint frames with an identity rotation (``X_p``, ``X_c``) or a zero offset (``X_c``), the common
  case of imported robots, skip those products (exactly: a product with the identity is exact);
* the module is compiled with fused multiply-adds on the CPU and without adjoints
  (``enable_backward=False``), so it is never used where gradients are needed:
  :func:`armillary.eval_fk` takes it only when no ``wp.Tape`` records and no input or output
  array requires grad.

Parents that are read back from ``body_q`` (not written just before by the same thread) are
assumed to have unit quaternions, as every pose FK writes has.
"""

from __future__ import annotations

import warp as wp

from . import kinematics_kernels as kk
from .spatial import spatial

# no adjoints; on the CPU, fused multiply-adds (Clang contracts none across Warp's generated statements
# by default): about 8 % of this kernel's time
_cpu_flags = wp.config.cpu_compiler_flags
wp.set_module_options({
    "enable_backward": False,
    "cpu_compiler_flags": ("-march=native" if _cpu_flags is None else _cpu_flags) + " -ffp-contract=fast",
})  # fmt: skip


@wp.func
def is_identity(q: wp.quat) -> bool:
    """Whether ``q`` is exactly the identity rotation (its product with it can be skipped)."""
    return q[3] == 1.0 and q[0] == 0.0 and q[1] == 0.0 and q[2] == 0.0


@wp.kernel
def eval_fk_fast_kernel(
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    art_count: int,
    joint_order: wp.array(dtype=wp.int32),
    joint_type: wp.array(dtype=wp.int32),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_dof_dim: wp.array2d(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    body_com: wp.array(dtype=wp.vec3),
    body_flags: wp.array(dtype=wp.int32),
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    sel_mode: int,
    mask: wp.array(dtype=wp.bool),
    indices: wp.array(dtype=wp.int32),
    use_joint_mask: int,
    joint_mask: wp.array(dtype=wp.bool),
    flag_filter: int,
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    a = kk.selected_articulation(wp.tid(), sel_mode, mask, indices, art_count)
    if a < 0:
        return
    # the last body written by this thread: its pose, COM twist and world COM
    last = int(-1)
    t_L = wp.vec3(0.0)
    q_L = wp.quat_identity()
    v_L = wp.vec3(0.0)
    w_L = wp.vec3(0.0)
    com_L = wp.vec3(0.0)
    for jj in range(art_start[a], art_end[a]):
        j = joint_order[jj]
        if use_joint_mask != 0:
            if not joint_mask[j]:
                continue
        c = joint_child[j]
        if (body_flags[c] & flag_filter) == 0:
            continue
        p = joint_parent[j]
        t_P = t_L
        q_P = q_L
        v_P = v_L
        w_P = w_L
        com_P = com_L
        if p != last:
            t_P = wp.vec3(0.0)
            q_P = wp.quat_identity()
            v_P = wp.vec3(0.0)
            w_P = wp.vec3(0.0)
            com_P = wp.vec3(0.0)
            if p >= 0:
                X_WP = body_q[p]
                tw = body_qd[p]
                t_P = wp.transform_get_translation(X_WP)
                q_P = wp.transform_get_rotation(X_WP)
                v_P = wp.vec3(tw[0], tw[1], tw[2])
                w_P = wp.vec3(tw[3], tw[4], tw[5])
                com_P = t_P + wp.quat_rotate(q_P, body_com[p])
        # joint parent anchor frame in world
        X_p = joint_X_p[j]
        q_Xp = wp.transform_get_rotation(X_p)
        t_PJ = t_P + wp.quat_rotate(q_P, wp.transform_get_translation(X_p))
        q_PJ = q_P
        if not is_identity(q_Xp):
            q_PJ = q_P * q_Xp
        # joint child anchor frame in world; relative twist in world (v of the child anchor origin,
        # or of the child COM for FREE-like joints)
        q_CJ = q_PJ
        t_CJ = t_PJ
        v_rel = wp.vec3(0.0)
        w_rel = wp.vec3(0.0)
        at_com = False
        jt = joint_type[j]
        if jt == kk.JT_REVOLUTE:
            ds = joint_qd_start[j]
            ax = joint_axis[ds]
            q_CJ = q_PJ * wp.quat_from_axis_angle(ax, joint_q[joint_q_start[j]])
            w_rel = wp.quat_rotate(q_PJ, ax) * joint_qd[ds]
        elif jt == kk.JT_PRISMATIC:
            ds = joint_qd_start[j]
            ax_W = wp.quat_rotate(q_PJ, joint_axis[ds])
            t_CJ = t_PJ + ax_W * joint_q[joint_q_start[j]]
            v_rel = ax_W * joint_qd[ds]
        elif jt != kk.JT_FIXED:
            X_j, v_j, w_j, com_ref = kk.joint_relative(
                jt, joint_q_start[j], joint_qd_start[j], joint_dof_dim[j, 0], joint_dof_dim[j, 1], joint_q, joint_qd,
                joint_axis,
            )
            q_CJ = q_PJ * wp.transform_get_rotation(X_j)
            t_CJ = t_PJ + wp.quat_rotate(q_PJ, wp.transform_get_translation(X_j))
            v_rel = wp.quat_rotate(q_PJ, v_j)
            w_rel = wp.quat_rotate(q_PJ, w_j)
            at_com = com_ref
        # child body frame: X_WCJ * inverse(X_c)
        X_c = joint_X_c[j]
        q_Xc = wp.transform_get_rotation(X_c)
        t_Xc = wp.transform_get_translation(X_c)
        q_C = q_CJ
        if not is_identity(q_Xc):
            q_C = q_CJ * wp.quat_inverse(q_Xc)
        t_C = t_CJ
        if t_Xc[0] != 0.0 or t_Xc[1] != 0.0 or t_Xc[2] != 0.0:
            t_C = t_CJ - wp.quat_rotate(q_C, t_Xc)
        com_C = t_C + wp.quat_rotate(q_C, body_com[c])
        if not at_com:
            v_rel = v_rel + wp.cross(w_rel, com_C - t_CJ)
        v_C = v_P + wp.cross(w_P, com_C - com_P) + v_rel
        w_C = w_P + w_rel
        body_q[c] = wp.transform(t_C, q_C)
        body_qd[c] = spatial(v_C, w_C)
        last = c
        t_L = t_C
        q_L = q_C
        v_L = v_C
        w_L = w_C
        com_L = com_C
