"""CollisionPipeline.collide is graph-capture ready: after a warm-up call, collide neither reads an
array back to the host nor synchronises (the CPU stand-in for a CUDA graph capture)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.testing import forbid_host_sync


def _scene():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    rng = np.random.default_rng(3)
    for i in range(6):
        body = b.add_body(xform=wp.transform((0.3 * i, 0.0, 0.12 + 0.05 * (i % 2)), wp.quat_identity()))
        kind = i % 3
        if kind == 0:
            b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
        elif kind == 1:
            b.add_shape_sphere(body, radius=0.1)
        else:
            b.add_shape_capsule(body, radius=0.05, half_height=0.1)
    mesh = newton.Mesh.create_box(0.1)
    body = b.add_body(xform=wp.transform((0.0, 0.5, 0.11), wp.quat_identity()))
    b.add_shape_mesh(body, mesh=mesh)
    for p in rng.uniform([-0.2, -0.2, 0.02], [0.2, 0.2, 0.05], size=(8, 3)):
        b.add_particle(tuple(p), (0.0, 0.0, 0.0), mass=0.01, radius=0.02)
    return b.finalize(device="cpu")


@pytest.mark.parametrize("broad_phase", ["nxn", "sap", "explicit"])
def test_collide_does_not_synchronise_with_the_host(broad_phase, monkeypatch):
    model = _scene()
    pipeline = newton.CollisionPipeline(model, broad_phase=broad_phase)
    state = model.state()
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)  # warm-up: kernels compiled, buffers allocated
    count = int(contacts.rigid_contact_count.numpy()[0])
    assert count > 0
    forbid_host_sync(monkeypatch, "collide()")
    pipeline.collide(state, contacts)
    pipeline.collide(state, contacts)
    monkeypatch.undo()
    assert int(contacts.rigid_contact_count.numpy()[0]) == count
