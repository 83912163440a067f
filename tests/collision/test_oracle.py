"""Primitive narrow phase vs MuJoCo's collision functions (the oracle).

For each implemented pair type, 1000 seeded random relative poses and sizes (separated
within the detection range, touching and penetrating) run through one armillary
``collide`` call; MuJoCo's ``mj_geomDistance`` evaluates the same geoms.

Stated tolerances (float32 engine vs float64 oracle, sizes 0.05-0.6 m):
* signed distance of the deepest contact: |d - d_mj| <= 1e-5 m (box-box: 1e-4 m, the
  separating-axis test prefers a face axis over an edge axis within 1e-4 x box size so
  near-ties give a stable face manifold);
* normal of the deepest contact: dot(n, n_mj) >= 0.999 where |d_mj| > 1e-4 m;
* admission: a contact exists iff d_mj <= gap_a + gap_b (+-1e-4 m);
* deepest contact points lie on both surfaces within 1e-5 m; no contact point lies outside
  either shape by more than 1e-5 m;
* contact count per pair within the reference table bound.
Capsule-box: MuJoCo's routine under-reports depth once the capsule axis enters the box
(it evaluates the capsule ends); there the deepest-point depth of the segment (dense
numpy reference) is the oracle and MuJoCo an upper bound.
"""

from __future__ import annotations

import numpy as np
import pytest

from . import oracle

PAIRS = [("plane", "sphere"), ("plane", "capsule"), ("plane", "box"), ("sphere", "sphere"), ("sphere", "capsule"),
         ("sphere", "box"), ("capsule", "capsule"), ("capsule", "box"), ("box", "box")]  # fmt: skip
TABLE = {("plane", "sphere"): 1, ("plane", "capsule"): 2, ("plane", "box"): 4, ("sphere", "sphere"): 1,
         ("sphere", "capsule"): 1, ("sphere", "box"): 1, ("capsule", "capsule"): 2, ("capsule", "box"): 5,
         ("box", "box"): 5}  # fmt: skip
N = 1000
D_TOL = 1.0e-5


def _segment_box_depth(sa, pa, qa, sb, pb, qb):
    ax = oracle._rot(qa)[:, 2] * sa[1]
    ts = np.linspace(0.0, 1.0, 4001)
    pts = (pa - ax)[None] + ts[:, None] * (2 * ax)[None]
    local = (pts - pb) @ oracle._rot(qb)
    q = np.abs(local) - sb
    f = np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)
    return f.min() - sa[0]


@pytest.mark.parametrize("ka,kb", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_pair_against_mujoco(ka, kb):
    r = oracle.compare(ka, kb, N, seed=PAIRS.index((ka, kb)) + 11)
    g = 2 * oracle.GAP
    ours, mj = r["d"], r["mj_d"]
    found = np.isfinite(ours)
    assert not np.any(~found & (mj <= g - 1e-4)), f"{ka}-{kb}: missed contacts"
    assert not np.any(found & (mj > g + 1e-4)), f"{ka}-{kb}: contacts beyond the gap"
    assert found.sum() > N // 3, "sampling should produce many admitted poses"
    assert (mj[found] < 0).sum() > N // 5, "sampling should produce many penetrating poses"
    dots = np.einsum("ij,ij->i", r["n"], r["mj_n"])
    if (ka, kb) == ("capsule", "box"):
        exact = found & (mj > -0.02)
        assert np.all(ours[found] <= mj[found] + D_TOL)
        sa, sb = r["sizes"]
        rng = np.random.default_rng(PAIRS.index((ka, kb)) + 11)
        _sa, _sb, pa, qa, pb, qb = oracle.sample_poses(rng, ka, kb, N)
        for i in np.nonzero(found)[0][:300]:
            ref = _segment_box_depth(sa[i], pa[i], qa[i], sb[i], pb[i], qb[i])
            assert abs(ours[i] - ref) < 1e-3, (i, ours[i], ref)
    else:
        exact = found
    err = np.abs(ours[exact] - mj[exact])
    tol = 1.0e-4 if (ka, kb) == ("box", "box") else D_TOL
    assert err.max() <= tol, f"{ka}-{kb}: max distance error {err.max():.3e}"
    well = exact & (np.abs(mj) > 1e-4)
    assert dots[well].min() >= 0.999, f"{ka}-{kb}: normal mismatch {dots[well].min():.5f}"
    assert r["counts"].max() <= TABLE[(ka, kb)]
    assert r["deepest_surface"][exact].max() <= D_TOL, f"{ka}-{kb}: deepest contact off-surface {r['deepest_surface'].max()}"
    assert r["outside"].max() <= D_TOL, f"{ka}-{kb}: contact point outside a shape {r['outside'].max()}"


def test_multi_point_manifolds():
    """Resting configurations produce the documented manifolds: box on plane 4, capsule on plane/box 2."""
    import warp as wp

    import armillary as newton

    b = newton.ModelBuilder()
    b.add_ground_plane()
    box = b.add_body(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()))
    b.add_shape_box(box, hx=0.5, hy=0.5, hz=0.5)
    lying = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.5 * np.pi)
    cap = b.add_body(xform=wp.transform((3.0, 0.0, 0.2), lying))
    b.add_shape_capsule(cap, radius=0.2, half_height=0.5)
    cap2 = b.add_body(xform=wp.transform((0.0, 0.0, 1.2), lying))
    b.add_shape_capsule(cap2, radius=0.2, half_height=0.3)
    box2 = b.add_body(xform=wp.transform((6.0, 0.0, 0.5), wp.quat_identity()))
    b.add_shape_box(box2, hx=0.5, hy=0.5, hz=0.5)
    box3 = b.add_body(xform=wp.transform((6.2, 0.1, 1.5), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.3)))
    b.add_shape_box(box3, hx=0.4, hy=0.4, hz=0.5)
    m = b.finalize(device="cpu")
    res = oracle.armillary_contacts(m, m.state())
    pairs = list(zip(res["shape0"].tolist(), res["shape1"].tolist()))
    assert pairs.count((0, 1)) == 4  # box on plane
    assert pairs.count((0, 2)) == 2  # capsule lying on plane
    assert pairs.count((3, 1)) == 2  # capsule lying on the box (capsule is shape 0: lower type)
    assert pairs.count((4, 5)) == 4  # box face on box face
    assert pairs.count((0, 4)) == 4
    assert np.all(np.abs(res["d"]) < 1e-5)
