"""The coupling framework's public names, resolved from the ``armillary-coupling`` plugin.

``armillary.solvers.experimental.coupled.SolverCoupledADMM`` (and the other
coupled solvers) resolve through the solver registry on first access, like
every solver; when the coupling plugin is not installed the error names the
distribution to install.
"""

from __future__ import annotations


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in ("CouplingInterface", "ENDPOINT_BODY", "ENDPOINT_PARTICLE"):
        from .. import coupling  # the hook mixin lives in core

        return getattr(coupling, name)
    if name == "ModelView":  # not a solver: a core class every coupler uses
        from ...sim.model_view import ModelView

        return ModelView
    from ...plugins import get_registry

    return get_registry().solvers.resolve(name)
