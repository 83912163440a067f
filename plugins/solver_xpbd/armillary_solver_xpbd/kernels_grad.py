"""The kernels of :mod:`.kernels` compiled with their adjoints, for steps under a ``wp.Tape``.

:mod:`.kernels` builds without adjoints (``enable_backward=False``): an untaped step needs none, and
the adjoints multiply the module's compile time several times over. ``SolverXPBD.step`` launches
these copies instead while a tape records (imported, and compiled, on the first taped step). They
share the Python source (and every ``wp.func``) with :mod:`.kernels`, so both compute the same
forward values.
"""

from __future__ import annotations

import warp as wp

from . import kernels as _kernels

wp.set_module_options({"enable_backward": True})


def _with_adjoint(kernel):
    return wp.kernel(kernel.func, module=__name__, enable_backward=True)


integrate_kernel = _with_adjoint(_kernels.integrate_kernel)
joint_force_kernel = _with_adjoint(_kernels.joint_force_kernel)
solve_joints_kernel = _with_adjoint(_kernels.solve_joints_kernel)
solve_contacts_kernel = _with_adjoint(_kernels.solve_contacts_kernel)
apply_deltas_kernel = _with_adjoint(_kernels.apply_deltas_kernel)
update_velocities_kernel = _with_adjoint(_kernels.update_velocities_kernel)
restitution_kernel = _with_adjoint(_kernels.restitution_kernel)
apply_velocity_deltas_kernel = _with_adjoint(_kernels.apply_velocity_deltas_kernel)
friction_velocity_kernel = _with_adjoint(_kernels.friction_velocity_kernel)
contact_force_kernel = _with_adjoint(_kernels.contact_force_kernel)
