"""Rigid half of :class:`~armillary_solver_vbd.solver.SolverVBD`: augmented vertex block descent (AVBD).

CONTRACT (SolverVBD calls exactly these; keep the signatures):

    r = RigidAVBD(model, *, friction_epsilon, compliant_alm, avbd (an AVBDConfig))
    r.refresh(flags)
    r.begin_step(state_in, state_out, control, contacts, dt)
    r.iterate(state_in, state_out, control, contacts, dt, ext_f, ext_h_ll, ext_h_la, ext_h_aa, iteration)
    r.end_step(state_in, state_out, dt)
    r.body_q_prev                # wp.array(transform): begin-of-step poses (valid after begin_step)
    r.contact_body_wrench        # wp.array(spatial_vector): rigid-contact wrench on each body at the
                                 # final iterate of the last step (world, at the COM) [N, N m]

Method (Giles, Diaz, Yuksel 2025): every body takes one regularised 6x6 Newton step per sweep on
its block of the incremental potential (inertia ``M/dt^2 |x - x~|^2 / 2`` plus the rotational
``theta^T I_w theta / (2 dt^2)``, ``theta = log(q q~^-1)``), colour by colour
(``model.body_color_groups``; bodies in no group form one extra group). Structural joint rows
use the compliant augmented Lagrangian (``k_eff = k rho / (k + rho)``, multiplier retained
across steps with ``gamma``) or the legacy penalty/hard path; drives, limits and ROD rows are
material springs (``kd`` absolute). Rigid contacts are compliant (shape ``ke``) or hard rows
with ``lambda <= 0`` and smoothed Coulomb friction (``friction_epsilon * dt`` of slip per step).
Kinematic bodies and bodies with ``inv_mass == 0`` move with their velocity and act as infinite
mass. See ``rigid_kernels.py`` for the conventions.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary.flags import ModelFlags
from armillary.sim.enums import JointType

from . import rigid_kernels as K


class RigidAVBD:
    def __init__(self, model, *, friction_epsilon: float, compliant_alm: bool, avbd):
        self.model = model
        self.device = model.device
        self.friction_epsilon = float(friction_epsilon)
        self.compliant = 1 if compliant_alm else 0
        self.avbd = avbd
        self.body_count = int(model.body_count)
        self.joint_count = int(getattr(model, "joint_count", 0) or 0)
        dev = self.device
        nb = max(self.body_count, 1)
        self.body_q_prev = wp.zeros(nb, dtype=wp.transform, device=dev)
        self.contact_body_wrench = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._x_pred = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._v_pred = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._q_pred = wp.zeros(nb, dtype=wp.quat, device=dev)
        self._v_last = wp.zeros(nb, dtype=wp.vec3, device=dev)  # last step's begin velocity (initial iterate)
        self._v_last_valid = wp.zeros(nb, dtype=wp.int32, device=dev)
        self._acc_f = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._body_f = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)  # body_f + Control.joint_f
        self._acc_ll = wp.zeros(nb, dtype=wp.mat33, device=dev)
        self._acc_la = wp.zeros(nb, dtype=wp.mat33, device=dev)
        self._acc_aa = wp.zeros(nb, dtype=wp.mat33, device=dev)
        self._acc_al = wp.zeros(nb, dtype=wp.mat33, device=dev)  # H_al - H_la^T (non-symmetric contact rows)
        nj = max(self.joint_count, 1)
        self._lam_lin = wp.zeros(nj, dtype=wp.vec3, device=dev)
        self._lam_ang = wp.zeros(nj, dtype=wp.vec3, device=dev)
        self._C0_lin = wp.zeros(nj, dtype=wp.vec3, device=dev)
        self._C0_ang = wp.zeros(nj, dtype=wp.vec3, device=dev)
        pen0 = np.tile([avbd.joint_linear_k_start, avbd.joint_angular_k_start], (nj, 1)).astype(np.float32)
        self._pen = wp.array(pen0, dtype=wp.vec2, device=dev)
        self._c_lam = wp.zeros(1, dtype=float, device=dev)
        self._c_pen = wp.zeros(1, dtype=float, device=dev)
        # per-body contact lists (CSR): counts, offsets (nb + 1), fill cursors, contact ids
        self._c_n = wp.zeros(nb, dtype=wp.int32, device=dev)
        self._c_offs = wp.zeros(nb + 1, dtype=wp.int32, device=dev)
        self._c_cursor = wp.zeros(nb, dtype=wp.int32, device=dev)
        self._c_list = wp.zeros(2, dtype=wp.int32, device=dev)
        # the CPU launch runs its threads in order, so a colour sweeps in place (exact
        # Gauss-Seidel, also between same-colour bodies in contact); on CUDA same-colour bodies
        # read the previous iterate (Jacobi) through a scratch copy
        self._in_place = wp.get_device(dev).is_cpu
        self._q_scratch = wp.zeros(nb, dtype=wp.transform, device=dev)
        self._empty_f = wp.zeros(0, dtype=float, device=dev)
        self._empty_s = wp.zeros(0, dtype=wp.spatial_vector, device=dev)
        self._empty_i = wp.zeros(0, dtype=wp.int32, device=dev)
        self._empty_v = wp.zeros(0, dtype=wp.vec3, device=dev)
        self._groups: list = []
        # mimic corrections accumulated per body (COM displacement, rotation vector, count)
        self._m_dx = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._m_dth = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._m_cnt = wp.zeros(nb, dtype=float, device=dev)
        self._has_mimic = False
        self.refresh(int(ModelFlags.ALL))

    # ------------------------------------------------------------------ host tables
    def refresh(self, flags: int) -> None:
        """Rebuild the host-derived tables (colour groups, joint layout, ROD material and rest
        rotations). Masses, inertias, drive gains, limits and ``joint_enabled`` are read live."""
        m, dev = self.model, self.device
        nb, nj = self.body_count, self.joint_count
        # colour groups; bodies in no group form one extra group
        color = np.full(max(nb, 1), -1, dtype=np.int32)
        groups = []
        for g in getattr(m, "body_color_groups", None) or []:
            idx = g.numpy().astype(np.int32) if isinstance(g, wp.array) else np.asarray(g, dtype=np.int32)
            if len(idx):
                color[idx] = len(groups)
                groups.append(idx)
        rest = np.nonzero(color[:nb] < 0)[0].astype(np.int32)
        if len(rest):
            color[rest] = len(groups)
            groups.append(rest)
        self._groups = [wp.array(g, dtype=wp.int32, device=dev) for g in groups]
        self._body_color = wp.array(color, dtype=wp.int32, device=dev)
        nj1 = max(nj, 1)
        nlin = np.zeros(nj1, np.int32)
        nang = np.zeros(nj1, np.int32)
        rod_ke = np.zeros((nj1, 6), np.float32)
        rod_kd = np.zeros((nj1, 6), np.float32)
        rod_rest = np.tile(np.array([0, 0, 0, 1], np.float32), (nj1, 1))
        if nj:
            jt = m.joint_type.numpy()
            dim = m.joint_dof_dim.numpy().reshape(nj, 2)
            nlin[:nj] = dim[:, 0]
            nang[:nj] = dim[:, 1]
            rods = np.nonzero(jt == int(JointType.ROD))[0]
            if len(rods):
                qd0 = m.joint_qd_start.numpy()
                q0 = m.joint_q_start.numpy()
                tke = m.joint_target_ke.numpy()
                tkd = m.joint_target_kd.numpy()
                rq = m.joint_rest_q.numpy()
                for j in rods:
                    s = int(qd0[j])
                    rod_ke[j] = tke[s:s + 6]
                    rod_kd[j] = tkd[s:s + 6]
                    r = np.asarray(rq[int(q0[j]) + 3:int(q0[j]) + 7], dtype=np.float64)
                    nrm = np.linalg.norm(r)
                    rod_rest[j] = (r / nrm) if nrm > 1e-12 else (0, 0, 0, 1)
        self._nlin = wp.array(nlin, dtype=wp.int32, device=dev)
        self._nang = wp.array(nang, dtype=wp.int32, device=dev)
        self._rod_ke = wp.array(rod_ke, dtype=wp.spatial_vector, device=dev)
        self._rod_kd = wp.array(rod_kd, dtype=wp.spatial_vector, device=dev)
        self._rod_rest = wp.array(rod_rest, dtype=wp.quat, device=dev)
        # mimic followers (coefficients and enabled flags are read live by the kernel)
        mj = getattr(m, "joint_mimic_joint", None)
        self._has_mimic = bool(nj and self.body_count and mj is not None and mj.shape[0] == nj
                               and getattr(m, "joint_mimic_coeffs", None) is not None
                               and np.any(mj.numpy() >= 0))  # fmt: skip

    def reset(self, world_mask=None) -> None:
        """Clear the warm starts of the selected worlds (all with ``world_mask=None``): joint
        multipliers, legacy penalties and stabilisation offsets (``joint_world``), the velocity
        history of the adaptive initial iterate (``body_world``) and the contact multipliers
        touching a selected body. Mask semantics as :meth:`SolverBase.reset` (world ``-1``
        entities: the mask's last entry, or any world selected). No host synchronisation."""
        from armillary.sim.reset import validate_world_mask

        m, dev, a = self.model, self.device, self.avbd
        wc = int(getattr(m, "world_count", 1) or 1)
        mask, mode = validate_world_mask(world_mask, wc, device=dev)
        if mask is None:
            mask = wp.zeros(1, dtype=wp.bool, device=dev)
        body_world = getattr(m, "body_world", None)
        body_world = body_world if body_world is not None else self._empty_i
        if self.body_count:
            wp.launch(K.reset_bodies_kernel, dim=self.body_count,
                      inputs=[mask, mode, wc, body_world, self._v_last, self._v_last_valid], device=dev)  # fmt: skip
        if self.joint_count:
            jw = getattr(m, "joint_world", None)
            wp.launch(K.reset_joints_kernel, dim=self.joint_count,
                      inputs=[mask, mode, wc, jw if jw is not None else self._empty_i, a.joint_linear_k_start,
                              a.joint_angular_k_start, self._lam_lin, self._lam_ang, self._pen, self._C0_lin,
                              self._C0_ang], device=dev)  # fmt: skip
        c = getattr(self, "_last_contacts_shapes", None)
        if c is not None and self._c_lam.shape[0] == c[0].shape[0]:
            wp.launch(K.reset_contacts_kernel, dim=c[0].shape[0],
                      inputs=[mask, mode, wc, c[0], c[1], m.shape_body, body_world, a.contact_k_start, self._c_lam,
                              self._c_pen], device=dev)  # fmt: skip

    def notify_input_state_update(self, state, flags, iteration_restart) -> None:
        pass  # multipliers stay valid across external pose updates (they are forces)

    # ------------------------------------------------------------------ step
    def _contact_buffers(self, contacts):
        n = int(contacts.rigid_contact_shape0.shape[0]) if contacts is not None else 0
        if self._c_lam.shape[0] != max(n, 1):
            self._c_lam = wp.zeros(max(n, 1), dtype=float, device=self.device)
            self._c_pen = wp.zeros(max(n, 1), dtype=float, device=self.device)
            self._c_list = wp.zeros(2 * max(n, 1), dtype=wp.int32, device=self.device)
        return n

    def begin_step(self, state_in, state_out, control, contacts, dt) -> None:
        m, dev, a = self.model, self.device, self.avbd
        nb = self.body_count
        body_f = getattr(state_in, "body_f", None)
        joint_f = getattr(control, "joint_f", None) if control is not None else None
        if self.joint_count and joint_f is not None and joint_f.shape[0]:
            # Control.joint_f: the input body_f plus the joint wrenches (state_in is not modified)
            if body_f is not None and body_f.shape[0] == nb:
                wp.copy(self._body_f, body_f)
            else:
                self._body_f.zero_()
            wp.launch(K.joint_force_kernel, dim=self.joint_count,
                      inputs=[m.joint_type, m.joint_enabled, m.joint_parent, m.joint_child, m.joint_X_p, m.joint_X_c,
                              m.joint_qd_start, self._nlin, self._nang, m.joint_axis, joint_f, state_in.body_q,
                              m.body_com], outputs=[self._body_f], device=dev)  # fmt: skip
            body_f = self._body_f
        wp.launch(K.begin_step_kernel, dim=nb,
                  inputs=[dt, m.gravity, m.body_world, state_in.body_q, state_in.body_qd,
                          body_f if body_f is not None else self._empty_s, m.body_com, m.body_inv_mass,
                          m.body_inertia, m.body_inv_inertia, m.body_flags, self._v_last, self._v_last_valid],
                  outputs=[self.body_q_prev, self._x_pred, self._q_pred, self._v_pred, state_out.body_q],
                  device=dev)  # fmt: skip
        if self.joint_count:
            wp.launch(K.scale_joint_duals_kernel, dim=self.joint_count,
                      inputs=[a.gamma, a.joint_linear_k_start, a.joint_angular_k_start],
                      outputs=[self._lam_lin, self._lam_ang, self._pen], device=dev)  # fmt: skip
            if not self.compliant:
                self._joint_dual(state_in.body_q, dt, init=1)
        n = self._contact_buffers(contacts)
        if n:
            wp.launch(K.contact_reset_kernel, dim=n, inputs=[a.contact_k_start, self._c_lam, self._c_pen],
                      device=dev)  # fmt: skip
            self._build_contact_lists(contacts, n)
            self._last_contacts_shapes = (contacts.rigid_contact_shape0, contacts.rigid_contact_shape1)

    def _build_contact_lists(self, contacts, n) -> None:
        m, dev, c = self.model, self.device, contacts
        ids = [c.rigid_contact_count, c.rigid_contact_shape0, c.rigid_contact_shape1, m.shape_body, m.body_inv_mass,
               m.body_flags]  # fmt: skip
        self._c_n.zero_()
        wp.launch(K.contact_count_kernel, dim=n, inputs=ids, outputs=[self._c_n], device=dev)
        wp.launch(K.contact_scan_kernel, dim=1, inputs=[self.body_count, self._c_n, self._c_offs, self._c_cursor],
                  device=dev)  # fmt: skip
        wp.launch(K.contact_fill_kernel, dim=n, inputs=ids + [self._c_cursor], outputs=[self._c_list], device=dev)
        wp.launch(K.contact_sort_kernel, dim=self.body_count, inputs=[self._c_offs, self._c_list], device=dev)

    def _joint_dual(self, body_q, dt, init: int, rod_pass: int = 0) -> None:
        m, a = self.model, self.avbd
        wp.launch(K.joint_dual_kernel, dim=self.joint_count,
                  inputs=[init, rod_pass, dt, self.compliant, a.joint_alpha, a.joint_linear_ke, a.joint_angular_ke,
                          a.linear_beta, a.angular_beta, m.joint_type, m.joint_enabled, m.joint_parent,
                          m.joint_child, m.joint_X_p, m.joint_X_c, m.joint_qd_start, self._nlin, self._nang,
                          m.joint_axis, self._rod_ke, self._rod_rest, body_q, m.body_inv_mass, m.body_inertia, m.body_flags, self._lam_lin,
                          self._lam_ang, self._pen, self._C0_lin, self._C0_ang], device=self.device)  # fmt: skip

    def _contact_rows(self, contacts):
        m, c = self.model, contacts

        def opt(name):
            v = getattr(c, name, None)
            return v if v is not None else self._empty_f

        return [c.rigid_contact_shape0, c.rigid_contact_shape1, c.rigid_contact_point0, c.rigid_contact_point1,
                c.rigid_contact_normal, c.rigid_contact_margin0, c.rigid_contact_margin1,
                opt("rigid_contact_stiffness"), opt("rigid_contact_damping"), opt("rigid_contact_friction"),
                m.shape_body, m.shape_material_ke, m.shape_material_kd, m.shape_material_mu]  # fmt: skip

    def _contact_inputs(self, mode, dt, contacts, body_q):
        m, a = self.model, self.avbd
        beta = max(a.linear_beta, 0.0)
        return ([mode, dt, self.compliant, 1 if a.contact_hard else 0, self.friction_epsilon,
                 contacts.rigid_contact_count] + self._contact_rows(contacts)
                + [body_q, self.body_q_prev, m.body_com, m.body_inv_mass, m.body_flags, self._c_lam, self._c_pen,
                   beta])  # fmt: skip

    def _solve_contact_inputs(self, contacts, n_c):
        a = self.avbd
        if n_c:
            rows = self._contact_rows(contacts)
            offs, lst = self._c_offs, self._c_list
        else:  # no contacts: empty lists (the gather loop does not run)
            e_i, e_v, f = self._empty_i, self._empty_v, self._empty_f
            rows = [e_i, e_i, e_v, e_v, e_v, f, f, f, f, f, e_i, f, f, f]
            offs, lst = e_i, e_i
        return [offs, lst, self.compliant, 1 if a.contact_hard else 0, self.friction_epsilon] + rows + \
            [self.body_q_prev, self._c_lam, self._c_pen, self._body_color, 1.0 if self._in_place else 0.5]  # fmt: skip

    def iterate(self, state_in, state_out, control, contacts, dt, ext_f, ext_h_ll, ext_h_la, ext_h_aa,
                iteration) -> None:  # fmt: skip
        m, dev, a = self.model, self.device, self.avbd
        body_q = state_out.body_q
        acc = [self._acc_f, self._acc_ll, self._acc_la, self._acc_aa]
        n_c = self._contact_buffers(contacts)
        if self.joint_count:
            tq = getattr(control, "joint_target_q", None) if control is not None else None
            tqd = getattr(control, "joint_target_qd", None) if control is not None else None
            tq = m.joint_target_q if tq is None else tq
            tqd = m.joint_target_qd if tqd is None else tqd
            jin = [dt, self.compliant, a.joint_alpha, a.joint_linear_ke, a.joint_angular_ke, a.joint_linear_kd,
                   a.joint_angular_kd, self._body_color, m.joint_type, m.joint_enabled, m.joint_parent,
                   m.joint_child, m.joint_X_p, m.joint_X_c, m.joint_q_start, m.joint_qd_start, self._nlin,
                   self._nang, m.joint_axis, tq if tq is not None else self._empty_f,
                   tqd if tqd is not None else self._empty_f, m.joint_target_ke, m.joint_target_kd,
                   m.joint_limit_lower, m.joint_limit_upper, m.joint_limit_ke, m.joint_limit_kd, self._rod_ke,
                   self._rod_kd, self._rod_rest, self._lam_lin, self._lam_ang, self._pen, self._C0_lin,
                   self._C0_ang, body_q, self.body_q_prev, m.body_com, m.body_inv_mass, m.body_inertia,
                   m.body_flags]  # fmt: skip
        cin = self._solve_contact_inputs(contacts, n_c)
        q_out = body_q if self._in_place else self._q_scratch
        for color, group in enumerate(self._groups):
            if self.joint_count:
                wp.launch(K.joint_accumulate_kernel, dim=self.joint_count, inputs=[color] + jin, outputs=acc,
                          device=dev)  # fmt: skip
            wp.launch(K.solve_bodies_kernel, dim=group.shape[0],
                      inputs=[dt, group, self._x_pred, self._q_pred, m.body_com, m.body_inv_mass, m.body_inertia,
                              m.body_flags, ext_f, ext_h_ll, ext_h_la, ext_h_aa] + acc + [self._acc_al] + cin
                      + [body_q], outputs=[q_out], device=dev)  # fmt: skip
            if not self._in_place:
                wp.launch(K.copy_group_kernel, dim=group.shape[0], inputs=[group, q_out], outputs=[body_q],
                          device=dev)  # fmt: skip
        if self._has_mimic:
            self._mimic(body_q)
        # dual / penalty updates
        if self.joint_count:
            self._joint_dual(body_q, dt, init=0)
            if self.compliant:
                self._joint_dual(body_q, dt, init=0, rod_pass=1)
        if n_c:
            wp.launch(K.contact_kernel, dim=n_c, inputs=self._contact_inputs(1, dt, contacts, body_q),
                      outputs=[self._acc_f], device=dev)  # fmt: skip
        self._last_contacts = contacts

    def _mimic(self, body_q) -> None:
        """One coupled maximal-coordinate mimic correction of the pose iterate ``body_q``
        (PRISMATIC / REVOLUTE / D6 followers and references; see ``rigid_kernels``)."""
        m, dev = self.model, self.device
        wp.launch(K.mimic_correct_kernel, dim=self.joint_count,
                  inputs=[m.joint_type, m.joint_enabled, m.joint_mimic_joint, m.joint_mimic_coeffs, m.joint_parent,
                          m.joint_child, m.joint_X_p, m.joint_X_c, m.joint_qd_start, self._nlin, self._nang,
                          m.joint_axis, body_q, m.body_com, m.body_inv_mass, m.body_inv_inertia, m.body_flags],
                  outputs=[self._m_dx, self._m_dth, self._m_cnt], device=dev)  # fmt: skip
        wp.launch(K.mimic_apply_kernel, dim=self.body_count, inputs=[m.body_com, self._m_dx, self._m_dth, self._m_cnt],
                  outputs=[body_q], device=dev)  # fmt: skip

    def end_step(self, state_in, state_out, dt) -> None:
        m, dev = self.model, self.device
        wp.launch(K.end_step_kernel, dim=self.body_count,
                  inputs=[dt, state_out.body_q, self.body_q_prev, state_in.body_qd, m.body_com, m.body_inv_mass,
                          m.body_flags, self._x_pred, self._v_pred], outputs=[state_out.body_qd],
                  device=dev)  # fmt: skip
        self.contact_body_wrench.zero_()
        contacts = getattr(self, "_last_contacts", None)
        n_c = self._contact_buffers(contacts)
        if n_c:
            # report mode: the wrench is written into the first accumulator argument
            wp.launch(K.contact_kernel, dim=n_c, inputs=self._contact_inputs(2, dt, contacts, state_out.body_q),
                      outputs=[self.contact_body_wrench], device=dev)  # fmt: skip
        self._last_contacts = None
