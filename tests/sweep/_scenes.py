"""Scene callables of the sweep tests (loaded as ``_scenes.py:<name>`` from the study's folder)."""

from armillary.sweep.scenes import two_link_pendulum


def pendulum(theta2: float = 0.3, fail: bool = False):
    """The two-link pendulum; ``fail=True`` raises (a deliberately failing run)."""
    if fail:
        raise RuntimeError("deliberate failure of the test scene")
    return two_link_pendulum(theta2=theta2)
