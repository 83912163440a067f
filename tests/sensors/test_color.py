"""armillary.utils colour helpers: the IEC 61966-2-1 curve, ColorSpace, Warp versions, laziness."""

import subprocess
import sys

import numpy as np
import pytest
import warp as wp
from hypothesis import given, settings
from hypothesis import strategies as st

import armillary
from armillary.utils import ColorSpace, color_linear_to_srgb, color_srgb_to_linear
from armillary.utils.color import linear_to_srgb_vec3_wp, srgb_to_linear_vec3_wp


def _ref_to_linear(c):
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def test_known_values_and_return_kind():
    out = color_srgb_to_linear((0.5, 0.04045, 1.0))
    assert isinstance(out, tuple) and len(out) == 3 and all(isinstance(v, float) for v in out)
    assert out == pytest.approx((0.21404114048223255, 0.04045 / 12.92, 1.0), abs=1e-15)
    assert color_linear_to_srgb((0.0031308, 0.21404114048223255, 1.0)) == pytest.approx(
        (0.0031308 * 12.92, 0.5, 1.0), abs=1e-12
    )
    # RGBA list: alpha dropped, like the reference engine
    assert color_srgb_to_linear([0.5, 0.2, 0.1, 0.9]) == pytest.approx(tuple(_ref_to_linear(c) for c in (0.5, 0.2, 0.1)))
    # negatives clamp to zero; values above one follow the curve
    assert color_srgb_to_linear((-0.3, 1.5, 0.0)) == pytest.approx((0.0, _ref_to_linear(1.5), 0.0))
    # float32 numpy 1-D input -> tuple too
    assert isinstance(color_linear_to_srgb(np.array([0.1, 0.2, 0.3], np.float32)), tuple)


def test_arrays_of_any_shape_convert_elementwise():
    rng = np.random.default_rng(0)
    img = rng.random((4, 5, 4))
    lin = color_srgb_to_linear(img)
    assert isinstance(lin, np.ndarray) and lin.shape == (4, 5, 3)
    expect = np.vectorize(_ref_to_linear)(img[..., :3])
    np.testing.assert_allclose(lin, expect, rtol=1e-12)
    np.testing.assert_allclose(color_linear_to_srgb(lin), img[..., :3], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", [0.5, (0.1, 0.2), "red", (0.1, float("nan"), 0.2)])
def test_bad_input_raises(bad):
    with pytest.raises(ValueError, match="color"):
        color_srgb_to_linear(bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3))
def test_round_trip(rgb):
    # the standard's two thresholds (0.04045 encoded, 0.0031308 linear) do not meet exactly: the pieces
    # disagree by < 3e-8 in a tiny band around the joint, elsewhere the round trip is exact to rounding
    back = color_linear_to_srgb(color_srgb_to_linear(rgb))
    assert back == pytest.approx(tuple(rgb), abs=5e-8)
    fwd = color_srgb_to_linear(color_linear_to_srgb(rgb))
    assert fwd == pytest.approx(tuple(rgb), abs=5e-9)
    far = [c for c in rgb if abs(c - 0.04045) > 1e-4]
    if far:
        assert color_linear_to_srgb(color_srgb_to_linear(far * 3)) == pytest.approx(tuple((far * 3)[:3]), abs=1e-12)


def test_monotonic_and_continuous_at_threshold():
    x = np.linspace(0.0, 1.0, 10001)
    y = color_srgb_to_linear(np.stack([x, x, x], axis=-1)[None])[0, :, 0]
    assert np.all(np.diff(y) > 0.0)
    eps = 1e-9
    lo = color_srgb_to_linear((0.04045 - eps,) * 3)[0]
    hi = color_srgb_to_linear((0.04045 + eps,) * 3)[0]
    assert abs(hi - lo) < 1e-7


def test_color_space_enum():
    assert ColorSpace.LINEAR == 0 and ColorSpace.SRGB == 1
    assert [c.name for c in ColorSpace] == ["LINEAR", "SRGB"]
    assert armillary.utils.ColorSpace is ColorSpace


@wp.kernel
def _convert_kernel(x: wp.array(dtype=wp.vec3), lin: wp.array(dtype=wp.vec3), srgb: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    lin[i] = srgb_to_linear_vec3_wp(x[i])
    srgb[i] = linear_to_srgb_vec3_wp(x[i])


def test_warp_functions_match_host():
    x = np.random.default_rng(1).random((257, 3)).astype(np.float32)
    x[0] = (0.0, 0.04045, 0.0031308)
    a = wp.array(x, dtype=wp.vec3, device="cpu")
    lin = wp.zeros_like(a)
    srgb = wp.zeros_like(a)
    wp.launch(_convert_kernel, dim=len(x), inputs=[a], outputs=[lin, srgb], device="cpu")
    np.testing.assert_allclose(lin.numpy(), color_srgb_to_linear(x[None].astype(np.float64))[0], rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(srgb.numpy(), color_linear_to_srgb(x[None].astype(np.float64))[0], rtol=2e-6, atol=1e-7)


def test_spec_example_runs_with_newton_alias():
    import armillary as newton

    display_color = (0.125, 0.125, 0.15)
    builder = newton.ModelBuilder()
    builder.add_ground_plane(color=display_color)
    linear_color = newton.utils.color_srgb_to_linear(display_color)
    assert linear_color == pytest.approx(tuple(_ref_to_linear(c) for c in display_color))
    model = builder.finalize(device="cpu")
    np.testing.assert_allclose(model.shape_color.numpy()[0], display_color, rtol=1e-6)
    cfg = newton.sensors.SensorTiledCamera.RenderConfig(output_color_space=newton.utils.ColorSpace.LINEAR)
    assert cfg.output_color_space == newton.utils.ColorSpace.LINEAR
    assert newton.sensors.SensorTiledCamera.RenderConfig().output_color_space == newton.utils.ColorSpace.SRGB


def test_import_armillary_stays_light():
    code = (
        "import sys, armillary; "
        "bad = [m for m in ('armillary.utils', 'armillary.sensors', 'armillary.utils.color') if m in sys.modules]; "
        "print(bad); assert not bad; "
        "armillary.utils.color_srgb_to_linear((0.5, 0.5, 0.5)); assert 'armillary.sensors' not in sys.modules"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
