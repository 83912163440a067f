"""armillary.launch: recorded launches replayed with the argument block packed once."""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary.launch import LaunchCache, replayer


def test_replayer_matches_launch_and_keeps_arrays_alive():
    @wp.kernel
    def axpy(a: float, x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = a * x[i] + y[i]

    x = wp.array(np.arange(5, dtype=np.float32), device="cpu")
    y = wp.zeros(5, dtype=float, device="cpu")
    run = replayer(wp.launch(axpy, dim=5, inputs=[2.0, x], outputs=[y], device="cpu", record_cmd=True))
    del x
    run()
    run()
    np.testing.assert_array_equal(y.numpy(), 4.0 * np.arange(5))
    cache = LaunchCache()
    x2 = wp.ones(5, dtype=float, device="cpu")
    for _ in range(3):
        cache.launch(axpy, 5, [1.0, x2], [y], device="cpu")
    np.testing.assert_array_equal(y.numpy(), 4.0 * np.arange(5) + 3.0)
