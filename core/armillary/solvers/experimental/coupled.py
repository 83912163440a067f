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
    if name == "ModelView":  # not a solver: the coupling distribution's own class
        try:
            from armillary_coupling.model_view import ModelView
        except ImportError:
            raise ImportError("ModelView is provided by the coupling plugin: pip install armillary-coupling") from None
        return ModelView
    from ...plugins import get_registry

    return get_registry().solvers.resolve(name)
