"""Model builders shared by the ArticulationView tests (CPU device only)."""

from __future__ import annotations

import pytest
import warp as wp

import armillary as newton

wp.config.log_level = wp.LOG_WARNING


@pytest.fixture(scope="session", autouse=True)
def _warp_init():
    wp.init()
    yield


def robots_builder(n: int = 2) -> newton.ModelBuilder:
    """The spec's two floating-base robots (FREE root + REVOLUTE tip), labels ``robot_{i}``."""
    builder = newton.ModelBuilder()
    for i in range(n):
        root = builder.add_link(xform=wp.transform(wp.vec3(float(i) * 2.0, 0.0, 0.0), wp.quat_identity()))
        tip = builder.add_link(xform=wp.transform(wp.vec3(float(i) * 2.0 + 1.0, 0.0, 0.0), wp.quat_identity()))
        builder.add_shape_box(root, hx=0.1, hy=0.1, hz=0.1)
        builder.add_shape_box(tip, hx=0.1, hy=0.1, hz=0.1)
        j_root = builder.add_joint_free(parent=-1, child=root)
        j_tip = builder.add_joint_revolute(
            parent=root,
            child=tip,
            axis=wp.vec3(0.0, 0.0, 1.0),
            parent_xform=wp.transform(wp.vec3(1.0, 0.0, 0.0), wp.quat_identity()),
            child_xform=wp.transform_identity(),
        )
        builder.add_articulation([j_root, j_tip], label=f"robot_{i}")
    return builder


def arm_builder(root: str = "fixed", label: str = "arm") -> newton.ModelBuilder:
    """A two-link arm: ``root`` joint (fixed / revolute / free) then an ``elbow``; 1 + 2 shapes."""
    b = newton.ModelBuilder()
    base = b.add_link(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), label="base")
    tip = b.add_link(xform=wp.transform((1.0, 0.0, 1.0), wp.quat_identity()), label="tip")
    b.add_shape_box(base, hx=0.1, hy=0.1, hz=0.1)
    b.add_shape_sphere(tip, radius=0.1)
    b.add_shape_sphere(tip, radius=0.05)
    px = wp.transform((0.0, 0.0, 1.0), wp.quat_identity())
    if root == "fixed":
        j0 = b.add_joint_fixed(-1, base, parent_xform=px, label="root")
    elif root == "revolute":
        j0 = b.add_joint_revolute(-1, base, axis=(0.0, 0.0, 1.0), parent_xform=px, label="root")
    else:
        j0 = b.add_joint_free(base, label="root")
    j1 = b.add_joint_revolute(
        base, tip, axis=(0.0, 1.0, 0.0), parent_xform=wp.transform((1.0, 0.0, 0.0), wp.quat_identity()), label="elbow"
    )
    b.add_articulation([j0, j1], label=label)
    return b


def chain(b: newton.ModelBuilder, n: int, label: str, shapes: int = 1) -> None:
    """Append a revolute chain of ``n`` links labelled ``label`` to ``b``."""
    prev, joints = -1, []
    for k in range(n):
        link = b.add_link(label=f"{label}_l{k}")
        for _ in range(shapes):
            b.add_shape_sphere(link, radius=0.1)
        joints.append(b.add_joint_revolute(prev, link, axis=(0.0, 0.0, 1.0), label=f"{label}_j{k}"))
        prev = link
    b.add_articulation(joints, label=label)


def replicated(src: newton.ModelBuilder, count: int):
    scene = newton.ModelBuilder()
    scene.replicate(src, count)
    return scene.finalize()


@pytest.fixture(scope="session")
def mk():
    """Namespace of the builders above (tests run with ``--import-mode=importlib``)."""
    import types

    return types.SimpleNamespace(robots=robots_builder, arm=arm_builder, chain=chain, replicated=replicated)
