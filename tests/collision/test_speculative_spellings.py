"""``speculative_config=SpeculativeContactConfig(max_speculative_extension=e)`` (the Collisions page)
and ``speculative_contact_gap_max=e`` (the reference engine 1.8's flat keyword) spell one setting."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton

Config = newton.CollisionPipeline.SpeculativeContactConfig


@pytest.fixture(scope="module")
def falling_sphere():
    b = newton.ModelBuilder()
    b.add_ground_plane(cfg=b.ShapeConfig(gap=0.0))
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.8), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.5, cfg=b.ShapeConfig(gap=0.0))
    m = b.finalize(device="cpu")
    state = m.state()
    state.body_qd.assign(np.array([[0.0, 0.0, -5.0, 0.0, 0.0, 0.0]], dtype=np.float32))
    return m, state


def _counts(pipe, state):
    c = pipe.contacts()
    out = []
    for dt in (0.1, 0.05, 0.0):  # v dt = 0.5 (capped at 0.4) / 0.25 / 0 against a 0.3 separation
        pipe.collide(state, c, dt=dt)
        out.append(int(c.rigid_contact_count.numpy()[0]))
    return out


def test_both_spellings_are_the_same_setting(falling_sphere):
    m, state = falling_sphere
    flat = newton.CollisionPipeline(m, speculative_contact_gap_max=0.4)
    cfg = newton.CollisionPipeline(m, speculative_config=Config(max_speculative_extension=0.4))
    both = newton.CollisionPipeline(m, speculative_contact_gap_max=0.4,
                                    speculative_config=Config(max_speculative_extension=0.4))  # fmt: skip
    assert flat.speculative_contact_gap_max == cfg.speculative_contact_gap_max == both.speculative_contact_gap_max == 0.4
    assert _counts(flat, state) == _counts(cfg, state) == _counts(both, state) == [1, 0, 0]
    # a smaller cap through either spelling drops the contact at dt 0.1
    assert _counts(newton.CollisionPipeline(m, speculative_config=Config(max_speculative_extension=0.2)), state)[0] == 0
    assert _counts(newton.CollisionPipeline(m, speculative_contact_gap_max=0.2), state)[0] == 0
    assert newton.CollisionPipeline(m).speculative_contact_gap_max is None


def test_disagreeing_spellings_raise(falling_sphere):
    m, _ = falling_sphere
    with pytest.raises(ValueError, match=r"speculative_contact_gap_max=0\.3 disagrees with .*max_speculative_extension=0\.1"):
        newton.CollisionPipeline(m, speculative_contact_gap_max=0.3, speculative_config=Config(max_speculative_extension=0.1))
    with pytest.raises(ValueError, match="non-negative"):
        newton.CollisionPipeline(m, speculative_config=Config(max_speculative_extension=-1.0))
    with pytest.raises(TypeError, match="SpeculativeContactConfig"):
        newton.CollisionPipeline(m, speculative_config=0.1)
