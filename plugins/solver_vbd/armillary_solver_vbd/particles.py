"""Particle half of :class:`~armillary_solver_vbd.solver.SolverVBD`: vertex block descent (VBD).

CONTRACT (SolverVBD calls exactly these; keep the signatures):

    p = ParticleVBD(model, *, friction_epsilon, membrane_model, self_contact (a SelfContactConfig
                    or None), collision_detection_interval)
    p.refresh(flags)                                  # model arrays changed (ModelFlags int)
    p.begin_step(state_in, state_out, contacts, dt)   # prediction + initial guess + detection
    p.iterate(state_in, state_out, contacts, dt, body_q, body_q_prev, iteration)
    p.accumulate_body_reactions(state_out, contacts, dt, body_q, body_q_prev,
                                out_f, out_h_ll, out_h_la, out_h_aa)
    p.end_step(state_in, state_out, dt)               # velocities

Method: every step minimises ``sum m/(2 dt^2) |x - y|^2 + E(x)`` (``y = x + dt v + dt^2 (g + f/m)``)
by sweeps of per-vertex 3x3 Newton steps (with a determinant guard), colour by colour. The
iterate lives in a private buffer; ``state_out`` receives positions and velocities
``(x - x_begin) / dt`` in ``end_step``. Particles with ``inv_mass == 0`` or without
``ParticleFlags.ACTIVE`` keep their position and get zero velocity (as the reference does).

Energies (per vertex force and Hessian): triangle membrane StVK (``tri_ke``/``tri_ka`` the Lame
``mu``/``lambda`` [Pa m], Hessian's stress term clamped >= 0) or neo-Hookean
(``mu/2 (I_C - 2) - mu (J - 1) + lambda/2 (J - 1)^2``); dihedral bending
``ke * L0 / 2 (theta - theta0)^2``; springs ``k/2 (l - L)^2`` (projected Hessian); tetrahedra
stable neo-Hookean ``mu/2 (I_C - 3) - mu (J - 1) + lambda/2 (J - 1)^2``; particle-shape contacts
``ke/2 d^2`` with IPC-smoothed friction (slip smoothing ``friction_epsilon * dt`` of relative
displacement); particle-particle contacts (below); particle-body attachments as springs to the
body point (infinite stiffness:
``1e3 x`` the largest finite one, or ``1e6`` N/m). On the CPU one launch over the colour-ordered
vertex list is an exact Gauss-Seidel sweep; on CUDA one launch per colour
(``_sequential_cpu_sweep = False`` forces that path on the CPU).

Damping and contact material, in the reference engine's units (each measured against it by
sweeping the coefficient on the same scene; ``tests/test_reference_parity.py`` pins the figures):

- ``spring_kd`` [N s/m]: force ``kd * dl/dt`` along the spring.
- ``edge_kd`` [N m s / (rad m)]: force ``kd * L0 * dtheta/dt`` on the dihedral angle.
- ``tri_kd`` [Pa s m]: membrane viscosity, stress ``kd * dE/dt`` (Green strain rate).
- tet ``k_damp`` [Pa s]: viscosity, second Piola stress ``4 k_damp dE/dt``; independent of
  ``k_mu``/``k_lambda``. None of the three element dampings resists rigid motion.
- contacts: stiffness ``(soft_contact_ke + shape_material_ke) / 2`` [N/m], damping
  ``(soft_contact_kd + shape_material_kd) / 2`` [N s/m] on the approach speed (while the gap
  closes), friction ``mu = sqrt(soft_contact_mu * shape_material_mu)``.

Particle-particle contacts (``Model.particle_ke/kd/mu/cohesion``, read at every step; none when
``particle_ke`` and ``particle_kd`` are both 0): between ACTIVE particles of the same world (or
world -1) unless both are used by elements (springs, triangles, bending edges, tetrahedra: those
pairs are self-contact's). Candidates once per step (``begin_step``): a ``wp.HashGrid`` over the
start positions, pairs whose gap is at most ``max(cohesion, 0) + 2 (d_v + d_u)`` (``d``: each
particle's predicted displacement of the step), the ``PP_CAPACITY`` nearest per particle. In the
vertex solve each pair adds ``-ke c n`` (gap ``c = |x_v - x_u| - r_v - r_u <= max(cohesion, 0)``),
damping ``kd / dt`` times the penetration gained over the step, and IPC-smoothed friction
``mu ke max(-c, 0)``, with their 3x3 Hessians (:func:`particle_kernels.particle_pair_add`).
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from . import particle_kernels as K
from .self_contact import SelfContactDetector, _csr

CONTACT_CAPACITY = 8  # body contacts kept per particle per step
PP_CAPACITY = 16  # particle-particle candidates kept per particle per step (the nearest)


def _n(model, name):
    return int(getattr(model, name, 0) or 0)


class ParticleVBD:
    #: On the CPU device, sweep all colours in one launch (Warp runs CPU threads in order: an exact
    #: Gauss-Seidel sweep). ``False`` forces the CUDA path (one launch per colour, every vertex of a
    #: colour from the same iterate of its neighbours) on the CPU too, so that path is testable
    #: without a GPU. Private; read at every ``iterate``.
    _sequential_cpu_sweep = True
    #: Visit each colour's vertices in reverse order (testing only: with a valid colouring and no
    #: self-contact, a per-colour sweep must not change by a single bit).
    _reverse_within_colour = False

    def __init__(self, model, *, friction_epsilon: float, membrane_model: str = "stvk", self_contact=None,
                 collision_detection_interval: int = -1):  # fmt: skip
        self.model = model
        self.device = model.device
        self.friction_epsilon = float(friction_epsilon)
        self.membrane_model = K.MEMBRANE_NEO_HOOKEAN if membrane_model == "neo_hookean" else K.MEMBRANE_STVK
        self.self_contact = self_contact
        self.interval = -1 if collision_detection_interval is None else int(collision_detection_interval)
        self.N = int(model.particle_count)
        dev = self.device
        self._is_cpu = wp.get_device(dev).is_cpu
        N = self.N
        self.x = wp.zeros(N, dtype=wp.vec3, device=dev)
        self.x_prev = wp.zeros(N, dtype=wp.vec3, device=dev)
        self.y = wp.zeros(N, dtype=wp.vec3, device=dev)
        self.v_pred = wp.zeros(N, dtype=wp.vec3, device=dev)
        self.contact_count = wp.zeros(N, dtype=wp.int32, device=dev)
        self.contact_list = wp.zeros(max(N * CONTACT_CAPACITY, 1), dtype=wp.int32, device=dev)
        self._empty_i = wp.zeros(1, dtype=wp.int32, device=dev)
        self._empty_v = wp.zeros(1, dtype=wp.vec3, device=dev)
        self._empty_f = wp.zeros(1, dtype=float, device=dev)
        self._empty_tf = wp.zeros(0, dtype=wp.transform, device=dev)
        self._zero_count = wp.zeros(1, dtype=wp.int32, device=dev)
        self._sc = SelfContactDetector(model, self_contact, dev) if self_contact is not None else None
        self._launches = None
        self._grid = None
        self._pp = False
        self._pp_on = False  # candidates detected this step
        self.refresh(0)

    # ------------------------------------------------------------------ host-side setup
    def refresh(self, flags: int) -> None:
        """Re-read topology, colouring and attachment data (materials, masses and rest shapes are
        read from the model arrays at every launch)."""
        m, dev, N = self.model, self.device, self.N

        def csr(name, count, width, stride):
            if count:
                idx = getattr(m, name).numpy().reshape(count, width).astype(np.int64)
                keys = idx.reshape(-1)
                vals = (np.arange(count)[:, None] * stride + np.arange(width)[None, :]).reshape(-1)
                ok = keys >= 0
                off, flat = _csr(N, keys[ok], vals[ok])
            else:
                off, flat = np.zeros(N + 1, np.int32), np.zeros(0, np.int32)
            return (wp.array(off, dtype=wp.int32, device=dev),
                    wp.array(np.append(flat, 0).astype(np.int32), dtype=wp.int32, device=dev))  # fmt: skip

        self.adj_tri = csr("tri_indices", _n(m, "tri_count"), 3, 3)
        self.adj_edge = csr("edge_indices", _n(m, "edge_count"), 4, 4)
        self.adj_tet = csr("tet_indices", _n(m, "tet_count"), 4, 4)
        self.adj_spr = csr("spring_indices", _n(m, "spring_count"), 2, 2)

        # colour order: the model's groups, then uncoloured particles as one extra group
        groups = [np.asarray(g.numpy() if hasattr(g, "numpy") else g, dtype=np.int32).reshape(-1)
                  for g in (getattr(m, "particle_color_groups", None) or [])]  # fmt: skip
        seen = np.zeros(N, dtype=bool)
        for g in groups:
            seen[g] = True
        rest = np.nonzero(~seen)[0].astype(np.int32)
        if len(rest):
            groups.append(rest)
        groups = [g for g in groups if len(g)]
        order = np.concatenate(groups) if groups else np.zeros(0, np.int32)
        self.order = wp.array(np.append(order, 0).astype(np.int32), dtype=wp.int32, device=dev)
        # the same colours, each one's vertices in reverse (a race check: with a valid colouring
        # the order inside a colour cannot change a per-colour sweep)
        rev = np.concatenate([g[::-1] for g in groups]) if groups else np.zeros(0, np.int32)
        self._order_reversed = wp.array(np.append(rev, 0).astype(np.int32), dtype=wp.int32, device=dev)
        offs = np.cumsum([0] + [len(g) for g in groups])
        self._one_sweep = [(0, int(len(order)))] if len(order) else []
        self._color_sweeps = [(int(offs[i]), int(offs[i + 1] - offs[i])) for i in range(len(groups))]

        # particle-body attachments
        A = _n(m, "attachment_particle_body_count")
        self.att_count = A
        if A:
            part = m.attachment_particle_body_particle.numpy().astype(np.int64).reshape(-1)
            body = m.attachment_particle_body_body.numpy().astype(np.int32).reshape(-1)
            point = np.asarray(m.attachment_particle_body_body_point.numpy(), dtype=np.float32).reshape(-1, 3)
            ke = np.asarray(m.attachment_particle_body_stiffness.numpy(), dtype=np.float64).reshape(-1)
            kd = np.asarray(m.attachment_particle_body_damping.numpy(), dtype=np.float64).reshape(-1)
            en = np.asarray(m.attachment_particle_body_enabled.numpy()).astype(np.int32).reshape(-1)
            finite = ke[np.isfinite(ke)]
            kinf = 1.0e3 * float(finite.max()) if len(finite) and finite.max() > 0 else 1.0e6
            ke = np.where(np.isfinite(ke), ke, kinf)
            kd = np.where(np.isfinite(kd), kd, 0.0)
            off, flat = _csr(N, part, np.arange(A))
            self.att_off = wp.array(off, dtype=wp.int32, device=dev)
            self.att_adj = wp.array(np.append(flat, 0).astype(np.int32), dtype=wp.int32, device=dev)
            self.att_particle = wp.array(part.astype(np.int32), dtype=wp.int32, device=dev)
            self.att_body = wp.array(body, dtype=wp.int32, device=dev)
            self.att_point = wp.array(point, dtype=wp.vec3, device=dev)
            self.att_ke = wp.array(ke.astype(np.float32), dtype=float, device=dev)
            self.att_kd = wp.array(kd.astype(np.float32), dtype=float, device=dev)
            self.att_enabled = wp.array(en, dtype=wp.int32, device=dev)
        else:
            self.att_off = wp.zeros(N + 1, dtype=wp.int32, device=dev)
            self.att_adj = self.att_particle = self.att_body = self.att_enabled = self._empty_i
            self.att_point = self._empty_v
            self.att_ke = self.att_kd = self._empty_f

        self.shape_body = getattr(m, "shape_body", None)
        if self.shape_body is None or _n(m, "shape_count") == 0:
            self.shape_body = self._empty_i
        self.shape_mu = getattr(m, "shape_material_mu", None)
        self.shape_ke = getattr(m, "shape_material_ke", None)
        self.shape_kd = getattr(m, "shape_material_kd", None)
        if self.shape_mu is None or self.shape_ke is None or self.shape_kd is None or _n(m, "shape_count") == 0:
            # no per-shape material: the model's soft_contact_* values alone
            self.shape_mu = self.shape_ke = self.shape_kd = wp.zeros(0, dtype=float, device=dev)
        # particle-particle contacts: particles not used by elements, with each other and with element particles
        used = np.zeros(N, dtype=bool)
        for name, count in (("tri_indices", "tri_count"), ("edge_indices", "edge_count"), ("tet_indices", "tet_count"),
                            ("spring_indices", "spring_count")):  # fmt: skip
            if _n(m, count):
                idx = getattr(m, name).numpy().reshape(-1).astype(np.int64)
                used[idx[(idx >= 0) & (idx < N)]] = True
        radius = m.particle_radius.numpy() if N else np.zeros(0)
        self.max_radius = float(radius.max()) if N else 0.0
        self._pp = N > 1 and self.max_radius > 0.0 and not bool(used.all())
        if self._pp:
            if self._grid is None:
                self._grid = wp.HashGrid(64, 64, 64, device=dev)
            self.in_element = wp.array(used.astype(np.int32), dtype=wp.int32, device=dev)
            self.pp_count = wp.zeros(N, dtype=wp.int32, device=dev)
            self.pp_list = wp.zeros(N * PP_CAPACITY, dtype=wp.int32, device=dev)
            self.pp_gap = wp.zeros(N * PP_CAPACITY, dtype=float, device=dev)
            self.pp_bound = wp.zeros(1, dtype=float, device=dev)
        self.contact_ke = float(getattr(m, "soft_contact_ke", 1.0e3))
        self.contact_kd = float(getattr(m, "soft_contact_kd", 0.0))
        self.contact_mu = float(getattr(m, "soft_contact_mu", 0.5))
        self._launches = None

    # ------------------------------------------------------------------ step
    def begin_step(self, state_in, state_out, contacts, dt) -> None:
        m = self.model
        f_ext = state_in.particle_f if state_in.particle_f is not None else self._empty_v
        wp.launch(K.predict_kernel, dim=self.N,
                  inputs=[float(dt), m.gravity, m.particle_world, state_in.particle_q, state_in.particle_qd, f_ext,
                          m.particle_inv_mass, m.particle_flags],
                  outputs=[self.x_prev, self.y, self.x, self.v_pred, self.contact_count], device=self.device)  # fmt: skip
        if contacts is not None and int(getattr(contacts, "soft_contact_max", 0) or 0) > 0:
            wp.launch(K.bucket_contacts_kernel, dim=contacts.soft_contact_max,
                      inputs=[contacts.soft_contact_count, contacts.soft_contact_particle, CONTACT_CAPACITY],
                      outputs=[self.contact_count, self.contact_list], device=self.device)  # fmt: skip
        self._pp_on = False
        if self._pp:
            ke, kd, _, cohesion = self._pp_params()
            if ke > 0.0 or kd > 0.0:
                self._detect_pairs(cohesion)
        if self._sc is not None:
            self._sc.detect(self.x_prev)
            wp.launch(K.truncate_initial_kernel, dim=self.N, inputs=[self.x, self._sc.x_detect, self._sc.bound],
                      device=self.device)  # fmt: skip

    def _pp_params(self):
        """``(particle_ke, particle_kd, particle_mu, particle_cohesion)`` of the model (read every step)."""
        m = self.model
        return tuple(float(getattr(m, name, 0.0) or 0.0)
                     for name in ("particle_ke", "particle_kd", "particle_mu", "particle_cohesion"))  # fmt: skip

    def _detect_pairs(self, cohesion: float) -> None:
        """Particle-particle candidates of the step from the start positions (``K.pp_detect_kernel``)."""
        m, dev = self.model, self.device
        self.pp_bound.zero_()
        wp.launch(K.pp_motion_bound_kernel, dim=self.N, inputs=[self.x_prev, self.y], outputs=[self.pp_bound],
                  device=dev)  # fmt: skip
        self._grid.build(self.x_prev, radius=2.0 * self.max_radius + max(cohesion, 0.0))
        wp.launch(K.pp_detect_kernel, dim=self.N,
                  inputs=[self._grid.id, self.x_prev, self.y, m.particle_radius, m.particle_inv_mass, m.particle_flags,
                          m.particle_world, self.in_element, self.max_radius, cohesion, self.pp_bound, PP_CAPACITY],
                  outputs=[self.pp_count, self.pp_list, self.pp_gap], device=dev)  # fmt: skip
        self._pp_on = True

    def _contact_arrays(self, contacts):
        if contacts is None or int(getattr(contacts, "soft_contact_max", 0) or 0) == 0:
            return self._empty_i, self._empty_v, self._empty_v, self._empty_v
        return (contacts.soft_contact_shape, contacts.soft_contact_body_pos, contacts.soft_contact_body_vel,
                contacts.soft_contact_normal)  # fmt: skip

    def iterate(self, state_in, state_out, contacts, dt, body_q, body_q_prev, iteration) -> None:
        sc = self._sc
        if sc is not None and iteration > 0:
            k = self.interval
            if (k == 0 and iteration == 1) or (k >= 1 and iteration % k == 0):
                sc.detect(self.x)
        m = self.model
        if body_q is None:
            body_q = body_q_prev = self._empty_tf
        elif body_q_prev is None:
            body_q_prev = body_q
        cshape, cpos, cvel, cnorm = self._contact_arrays(contacts)
        eps_u = self.friction_epsilon * float(dt)
        if sc is not None:
            scfg = self.self_contact
            sc_args = [1, sc.tris, sc.edges, sc.adj_tri_off, sc.adj_tri, sc.adj_edge_off, sc.adj_edge,
                       sc.vt_cap, sc.vt_count, sc.vt_list, sc.tv_cap, sc.tv_count, sc.tv_list, sc.ee_cap,
                       sc.ee_count, sc.ee_list, float(scfg.margin), float(scfg.contact_ke), float(scfg.contact_kd),
                       float(scfg.contact_mu), float(scfg.edge_parallel_epsilon), sc.x_detect, float(sc.bound)]  # fmt: skip
        else:
            ei = self._empty_i
            e2 = self._empty_i2
            sc_args = [0, e2, e2, ei, ei, ei, ei, 1, ei, ei, 1, ei, ei, 1, ei, ei, 0.0, 0.0, 0.0, 0.0, 0.0,
                       self._empty_v, 0.0]  # fmt: skip
        if self._pp_on:
            pp_ke, pp_kd, pp_mu, pp_coh = self._pp_params()
            pp_args = [PP_CAPACITY, self.pp_count, self.pp_list, pp_ke, pp_kd, pp_mu, pp_coh]
        else:
            pp_args = [0, self._empty_i, self._empty_i, 0.0, 0.0, 0.0, 0.0]
        order = self._order_reversed if self._reverse_within_colour else self.order
        for off, cnt in self.sweeps:  # one launch per colour (CUDA), or one for all (CPU)
            wp.launch(K.solve_kernel, dim=cnt,
                      inputs=[float(dt), order, off, self.x, self.x_prev, self.y, m.particle_mass,
                              m.particle_inv_mass, m.particle_flags, m.particle_radius,
                              m.tri_indices, m.tri_poses, m.tri_materials, m.tri_areas, self.membrane_model,
                              m.edge_indices, m.edge_rest_angle, m.edge_rest_length, m.edge_bending_properties,
                              m.tet_indices, m.tet_poses, m.tet_materials,
                              m.spring_indices, m.spring_rest_length, m.spring_stiffness, m.spring_damping,
                              *self.adj_tri, *self.adj_edge, *self.adj_tet, *self.adj_spr,
                              CONTACT_CAPACITY, self.contact_count, self.contact_list, cshape, cpos, cvel, cnorm,
                              self.shape_body, self.shape_ke, self.shape_kd, self.shape_mu, body_q, body_q_prev,
                              self.contact_ke, self.contact_kd, self.contact_mu, eps_u,
                              self.att_off, self.att_adj, self.att_body, self.att_point, self.att_ke, self.att_kd,
                              self.att_enabled, *sc_args, *pp_args],
                      device=self.device)  # fmt: skip

    @property
    def sweeps(self):
        """``(offset, count)`` launches into ``order`` for one sweep."""
        if self._sequential_cpu_sweep and self._is_cpu:
            return self._one_sweep
        return self._color_sweeps

    @property
    def _empty_i2(self):
        a = getattr(self, "_e2", None)
        if a is None:
            a = self._e2 = wp.zeros((1, 3), dtype=wp.int32, device=self.device)
        return a

    def accumulate_body_reactions(self, state_out, contacts, dt, body_q, body_q_prev, out_f, out_h_ll, out_h_la,
                                  out_h_aa) -> None:  # fmt: skip
        if body_q is None:
            return
        if body_q_prev is None:
            body_q_prev = body_q
        m = self.model
        if contacts is not None and int(getattr(contacts, "soft_contact_max", 0) or 0) > 0:
            cshape, cpos, cvel, cnorm = self._contact_arrays(contacts)
            wp.launch(K.contact_reaction_kernel, dim=contacts.soft_contact_max,
                      inputs=[float(dt), self.x, self.x_prev, m.particle_radius, m.particle_inv_mass, m.particle_flags,
                              contacts.soft_contact_count, contacts.soft_contact_particle, cshape, cpos, cvel, cnorm,
                              self.shape_body, self.shape_ke, self.shape_kd, self.shape_mu, body_q, body_q_prev,
                              m.body_com, m.body_inv_mass, self.contact_ke, self.contact_kd, self.contact_mu,
                              self.friction_epsilon * float(dt)],
                      outputs=[out_f, out_h_ll, out_h_la, out_h_aa], device=self.device)  # fmt: skip
        if self.att_count:
            wp.launch(K.attachment_reaction_kernel, dim=self.att_count,
                      inputs=[float(dt), self.x, self.x_prev, self.att_particle, self.att_body, self.att_point,
                              self.att_ke, self.att_kd, self.att_enabled, body_q, body_q_prev, m.body_com,
                              m.body_inv_mass],
                      outputs=[out_f, out_h_ll, out_h_la, out_h_aa], device=self.device)  # fmt: skip

    def end_step(self, state_in, state_out, dt) -> None:
        wp.launch(K.finish_kernel, dim=self.N, inputs=[float(dt), self.x, self.y, self.v_pred],
                  outputs=[state_out.particle_q, state_out.particle_qd], device=self.device)  # fmt: skip

    # ------------------------------------------------------------------ caches
    def reset(self, world_mask=None) -> None:
        if self._sc is not None:
            self._sc.clear()

    def notify_input_state_update(self, state, flags, iteration_restart=False) -> None:
        if self._sc is not None:
            self._sc.clear()
