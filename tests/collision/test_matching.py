"""Contact matching ("latest" / "sticky"), match-index codes, contact reports and history reset.

Expected sequences were compared with the reference engine on the same scenes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary as newton


def _box_and_sphere():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    box = b.add_body(xform=wp.transform((0.0, 0.0, 0.099), wp.quat_identity()))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1)
    ball = b.add_body(xform=wp.transform((1.0, 0.0, 0.099), wp.quat_identity()))
    b.add_shape_sphere(ball, radius=0.1)
    m = b.finalize(device="cpu")
    return m, m.state()


class _Runner:
    def __init__(self, mode, **kw):
        self.model, self.state = _box_and_sphere()
        self.p = newton.CollisionPipeline(self.model, contact_matching=mode, contact_report=True,
                                          contact_matching_pos_threshold=0.005, **kw)  # fmt: skip
        self.c = self.p.contacts()

    def frame(self, x=0.0, z2=0.099, rot=None):
        q = self.state.body_q.numpy()
        q[0, :3] = (x, 0.0, 0.099)
        q[1, :3] = (1.0, 0.0, z2)
        if rot is not None:
            q[0, 3:] = rot
        self.state.body_q.assign(q)
        self.p.collide(self.state, self.c)
        c = self.c
        n = int(c.rigid_contact_count.numpy()[0])
        nn, nb = int(c.rigid_contact_new_count.numpy()[0]), int(c.rigid_contact_broken_count.numpy()[0])
        return (c.rigid_contact_match_index.numpy()[: n + 1].tolist(), c.rigid_contact_new_indices.numpy()[:nn].tolist(),
                c.rigid_contact_broken_indices.numpy()[:nb].tolist())  # fmt: skip


@pytest.mark.parametrize("mode", ["latest", "sticky"])
def test_match_index_and_reports_sequence(mode):
    r = _Runner(mode)
    assert r.p.deterministic  # any matching mode implies deterministic sorting
    assert r.c.contact_matching_mode == mode
    assert r.frame() == ([-1] * 6, [0, 1, 2, 3, 4], [])  # first frame: everything new
    assert r.frame() == ([0, 1, 2, 3, 4, -1], [], [])
    assert r.frame(x=0.002) == ([0, 1, 2, 3, 4, -1], [], [])  # midpoints move 1 mm < 5 mm
    assert r.frame(x=0.05) == ([-2, -2, -2, -2, 4, -1], [0, 1, 2, 3], [0, 1, 2, 3])  # moved too far: broken
    assert r.frame(x=0.05, z2=0.5) == ([0, 1, 2, 3, -1], [], [4])  # sphere lifted off
    assert r.frame(x=0.05) == ([0, 1, 2, 3, -1, -1], [4], [])  # back: new, no history for the pair
    r.p.reset_contact_matching()
    assert r.frame(x=0.05) == ([-1] * 6, [0, 1, 2, 3, 4], [])
    a = 0.3
    assert r.frame(x=0.05, rot=(math.sin(a / 2), 0.0, 0.0, math.cos(a / 2))) == \
        ([-2, -2, -2, -2, 4, -1], [0, 1, 2, 3], [0, 1, 2, 3])  # fmt: skip


def test_latest_keeps_fresh_geometry_sticky_replays_anchor():
    for mode, expect_x in (("latest", -0.098), ("sticky", -0.1)):
        r = _Runner(mode)
        r.frame()
        r.frame(x=0.002)
        p0 = r.c.rigid_contact_point0.numpy()[0]  # on the static ground: world frame
        assert p0[0] == pytest.approx(expect_x, abs=1e-6), mode
        if mode == "sticky":
            r.frame(x=0.004)  # the anchor persists across frames while within the threshold
            assert r.c.rigid_contact_point0.numpy()[0][0] == pytest.approx(-0.1, abs=1e-6)
            r.frame(x=0.05)  # broken: fresh geometry passes through
            assert r.c.rigid_contact_point0.numpy()[0][0] == pytest.approx(-0.05, abs=1e-6)


def test_sticky_witness_threshold_keeps_fresh_geometry():
    # a sphere resting on a box that slides underneath it: the world midpoint does not move
    # (the contact stays under the sphere) but the box-frame witness point does
    b = newton.ModelBuilder()
    box = b.add_body(xform=wp.transform((0.0, 0.0, 0.0), wp.quat_identity()))
    b.add_shape_box(box, hx=0.5, hy=0.5, hz=0.1)
    ball = b.add_body(xform=wp.transform((0.0, 0.0, 0.199), wp.quat_identity()))
    b.add_shape_sphere(ball, radius=0.1)
    m = b.finalize(device="cpu")
    s = m.state()
    p = newton.CollisionPipeline(m, contact_matching="sticky", contact_matching_pos_threshold=0.005)
    c = p.contacts()
    p.collide(s, c)
    assert c.rigid_contact_shape1.numpy()[0] == 0  # pairs are ordered by geometry type: the box is shape 1

    def slide(dx):
        q = s.body_q.numpy()
        q[0, 0] = dx
        s.body_q.assign(q)
        p.collide(s, c)
        assert c.rigid_contact_match_index.numpy()[0] == 0
        return c.rigid_contact_point1.numpy()[0][0]  # box-frame x of the witness on the box

    assert slide(0.002) == pytest.approx(0.0, abs=1e-6)  # witness moved 2 mm < 5 mm: anchor replayed
    assert slide(0.012) == pytest.approx(-0.012, abs=1e-6)  # 12 mm > 5 mm: fresh geometry


def test_normal_dot_threshold():
    def run(dot):
        b = newton.ModelBuilder()
        b1 = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
        b.add_shape_sphere(b1, radius=0.1)
        b2 = b.add_body(xform=wp.transform((0.19, 0.0, 1.0), wp.quat_identity()))
        b.add_shape_sphere(b2, radius=0.1)
        m = b.finalize(device="cpu")
        s = m.state()
        p = newton.CollisionPipeline(m, contact_matching="latest", contact_matching_pos_threshold=0.1,
                                     contact_matching_normal_dot_threshold=dot)  # fmt: skip
        c = p.contacts()
        p.collide(s, c)
        q = s.body_q.numpy()
        ang = 0.05  # rotate sphere 2 around sphere 1: normal turns by 0.05 rad, midpoint moves ~5 mm
        q[1, :3] = (0.19 * math.cos(ang), 0.19 * math.sin(ang), 1.0)
        s.body_q.assign(q)
        p.collide(s, c)
        return int(c.rigid_contact_match_index.numpy()[0])

    assert run(0.99) == 0
    assert run(0.9999) == -2


def test_world_mask_reset():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    for w in range(2):
        b.begin_world()
        body = b.add_body(xform=wp.transform((3.0 * w, 0.0, 0.099), wp.quat_identity()))
        b.add_shape_sphere(body, radius=0.1)
        b.end_world()
    m = b.finalize(device="cpu")
    s = m.state()
    p = newton.CollisionPipeline(m, contact_matching="latest", contact_report=True)
    c = p.contacts()

    def step():
        p.collide(s, c)
        n, nn = int(c.rigid_contact_count.numpy()[0]), int(c.rigid_contact_new_count.numpy()[0])
        nb = int(c.rigid_contact_broken_count.numpy()[0])
        return c.rigid_contact_match_index.numpy()[:n].tolist(), c.rigid_contact_new_indices.numpy()[:nn].tolist(), \
            c.rigid_contact_broken_indices.numpy()[:nb].tolist()  # fmt: skip

    step()
    assert step() == ([0, 1], [], [])
    p.reset_contact_matching(wp.array([True, False, False], dtype=wp.bool, device="cpu"))
    assert step() == ([-1, 1], [0], [])  # dropped history is neither matched nor reported broken
    assert step() == ([0, 1], [], [])
    p.reset_contact_matching(wp.array([False, False, True], dtype=wp.bool, device="cpu"))  # global shapes
    assert step() == ([-1, -1], [0, 1], [])
    with pytest.raises(ValueError):
        p.reset_contact_matching(wp.array([True], dtype=wp.bool, device="cpu"))


def test_buffers_and_errors():
    m, s = _box_and_sphere()
    p = newton.CollisionPipeline(m)
    c = p.contacts()
    assert c.rigid_contact_match_index is None and c.rigid_contact_new_indices is None
    assert c.contact_matching_mode == "disabled"
    p.reset_contact_matching()  # no-op without matching
    p = newton.CollisionPipeline(m, contact_matching="latest")
    c = p.contacts()
    assert c.rigid_contact_match_index is not None and c.rigid_contact_new_indices is None
    with pytest.raises(ValueError, match="rigid_contact_match_index"):
        p.collide(s, newton.Contacts(p.rigid_contact_max, 0))
    with pytest.raises(ValueError):
        newton.CollisionPipeline(m, contact_report=True)


def test_spec_example_contact_matching():
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    builder.add_shape_sphere(body, radius=0.5)
    model = builder.finalize()
    state = model.state()
    pipeline = newton.CollisionPipeline(model, contact_matching="latest", contact_matching_pos_threshold=0.005,
                                        contact_matching_normal_dot_threshold=0.9)  # fmt: skip
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    pipeline = newton.CollisionPipeline(model, contact_matching="latest", contact_report=True)
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    n_new = contacts.rigid_contact_new_count.numpy()[0]
    contacts.rigid_contact_new_indices.numpy()[:n_new]
    n_broken = contacts.rigid_contact_broken_count.numpy()[0]
    contacts.rigid_contact_broken_indices.numpy()[:n_broken]
    assert n_new == 0 and n_broken == 0


@pytest.mark.skipif(not wp.is_cuda_available(), reason="graph capture needs CUDA")
def test_graph_capture_sticky_with_report():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    box = b.add_body(xform=wp.transform((0.0, 0.0, 0.099), wp.quat_identity()))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1)
    m = b.finalize(device="cuda:0")
    s = m.state()
    p = newton.CollisionPipeline(m, contact_matching="sticky", contact_report=True)
    c = p.contacts()
    p.collide(s, c)  # warm up (module loads) outside capture
    with wp.ScopedCapture(device="cuda:0") as cap:
        p.collide(s, c)
    wp.capture_launch(cap.graph)
    wp.capture_launch(cap.graph)
    assert c.rigid_contact_match_index.numpy()[:4].tolist() == [0, 1, 2, 3]
    assert c.rigid_contact_new_count.numpy()[0] == 0 and c.rigid_contact_broken_count.numpy()[0] == 0
