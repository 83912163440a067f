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


def test_launch_cache_under_a_tape_launches_directly_and_records_nothing():
    """While a wp.Tape records, LaunchCache.launch is a plain wp.launch: the tape sees it (gradients
    flow) and no entry is recorded (taped rollouts use fresh arrays every step, so entries would
    never be replayed)."""
    import numpy as np
    import warp as wp

    from armillary.launch import LaunchCache

    @wp.kernel
    def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = 3.0 * x[i]

    cache = LaunchCache()
    x = wp.array(np.ones(4, np.float32), requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        cache.launch(scale, 4, [x], [y])
    assert len(cache._entries) == 0
    tape.backward(grads={y: wp.array(np.ones(4, np.float32))})
    np.testing.assert_allclose(x.grad.numpy(), 3.0)
    cache.launch(scale, 4, [x], [y])  # untaped: launched, recorded the second time, then replayed
    assert len(cache._entries) == 0
    cache.launch(scale, 4, [x], [y])
    assert len(cache._entries) == 1
    y.zero_()
    cache.launch(scale, 4, [x], [y])
    np.testing.assert_allclose(y.numpy(), 3.0)


def test_launch_cache_records_only_argument_sets_that_come_back():
    """A rollout over fresh arrays every step records nothing; ping-pong arrays are recorded once each."""
    import numpy as np
    import warp as wp

    from armillary.launch import LaunchCache

    @wp.kernel
    def add_one(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] + 1.0

    cache = LaunchCache(max_entries=4)
    states = [wp.zeros(2, dtype=float)]
    for _ in range(20):  # fresh output array every step
        states.append(wp.zeros(2, dtype=float))
        cache.launch(add_one, 2, [states[-2]], [states[-1]])
    assert len(cache._entries) == 0 and len(cache._seen) <= 16
    np.testing.assert_allclose(states[-1].numpy(), 20.0)
    a, b = wp.zeros(2, dtype=float), wp.zeros(2, dtype=float)
    for _ in range(5):  # ping-pong
        cache.launch(add_one, 2, [a], [b])
        a, b = b, a
    assert len(cache._entries) == 2
    np.testing.assert_allclose(a.numpy(), 5.0)


def test_launch_cache_keeps_kernels_without_adjoints_off_the_tape():
    """A kernel compiled without adjoints (the collision pipeline's) launched through LaunchCache under
    a tape runs but is not recorded: its outputs are constants for the gradients either way, and a
    recorded one makes every tape.backward warn."""
    import warnings

    import numpy as np
    import warp as wp

    from armillary.launch import LaunchCache, has_adjoint

    def fill(y: wp.array(dtype=float)):
        y[wp.tid()] = 2.0

    no_adjoint = wp.kernel(fill, enable_backward=False, module="unique")
    with_adjoint = wp.kernel(fill, module="unique")
    assert not has_adjoint(no_adjoint) and has_adjoint(with_adjoint)
    cache = LaunchCache()
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        cache.launch(no_adjoint, 3, [], [y])
    np.testing.assert_allclose(y.numpy(), 2.0)
    assert len(tape.launches) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tape.backward(grads={y: wp.ones(3, dtype=float)})
    with tape:
        cache.launch(with_adjoint, 3, [], [y])
    assert len(tape.launches) == 1
