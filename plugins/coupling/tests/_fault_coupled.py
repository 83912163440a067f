"""Coupled configurations of the fault harness's scene (``armillary.testing.faults``), built from
the model alone so that the harness can construct them as ``cls(model)`` in its child process.

The scene holds boxes ``box_*`` (free) and a three-link revolute chain ``link_0..2``: the boxes go
to an XPBD entry, the chain to a Featherstone entry (:class:`FaultCoupled`); with ADMM the last
link goes to the XPBD entry, so ``hinge_2`` is a coupled cross-entry joint (:class:`FaultADMM`);
with the proxy coupler box 0 is proxied into the chain's entry (:class:`FaultProxy`)."""

from __future__ import annotations

from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, SolverCapabilities
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_admm import SolverCoupledADMM
from armillary_coupling.solver_coupled_proxy import SolverCoupledProxy

_CAPS = SolverCapabilities(coordinates=Coordinates.MAXIMAL, joint_types={JointType.FREE, JointType.REVOLUTE},
                           features={"rigid_bodies", "rigid_contacts"}, collision_pipeline=True)  # fmt: skip


def _xpbd(v):
    from armillary.solvers import SolverXPBD

    return SolverXPBD(v, iterations=4)


def _featherstone(v):
    from armillary.solvers import SolverFeatherstone

    return SolverFeatherstone(v)


def _split(model, links_to_xpbd=()):
    labels = list(model.body_label or ())
    boxes = [i for i, name in enumerate(labels) if name.startswith("box_")]
    links = [i for i, name in enumerate(labels) if name.startswith("link_")]
    soft = boxes + [links[k] for k in links_to_xpbd if k < len(links)]
    rigid = [b for b in links if b not in soft]
    entries = []
    if soft:
        entries.append(SolverCoupled.Entry("boxes", _xpbd, bodies=soft))
    if rigid:
        entries.append(SolverCoupled.Entry("chain", _featherstone, bodies=rigid))
    return entries


class FaultCoupled(SolverCoupled):
    """:class:`SolverCoupled`: boxes in XPBD, the chain in Featherstone."""

    capabilities = _CAPS

    def __init__(self, model):
        super().__init__(model, _split(model))


class FaultADMM(SolverCoupledADMM):
    """:class:`SolverCoupledADMM`: boxes and the last link in XPBD, the other links in Featherstone."""

    capabilities = _CAPS

    def __init__(self, model):
        super().__init__(model, _split(model, links_to_xpbd=(2,)), SolverCoupledADMM.Config(iterations=2))


class FaultProxy(SolverCoupledProxy):
    """:class:`SolverCoupledProxy`: boxes in XPBD, the chain in Featherstone, box 0 proxied into it."""

    capabilities = _CAPS

    def __init__(self, model):
        entries = _split(model)
        P = SolverCoupledProxy.Proxy
        proxies = [P("boxes", "chain", bodies=[entries[0].bodies[0]])] if len(entries) == 2 else []
        super().__init__(model, entries, SolverCoupledProxy.Config(proxies=proxies))
