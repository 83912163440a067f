"""SolverFeatherstone throughput: a 32-link revolute chain (one world) and a 256-world cartpole
batch, in steps per second, next to newton's SolverFeatherstone (the reference engine, used as a
black box) and raw MuJoCo C on the same systems when they are installed.

Both engines get identical builder calls; MuJoCo gets the equivalent MJCF (Euler integrator,
same time step; the cartpole batch steps 256 ``MjData`` in a Python loop, i.e. what a user of
the plain bindings does, and with ``mujoco.rollout`` when available). Passive systems, no
contacts (``contacts=None``).

Run: ``python benchmarks/bench_featherstone.py [--steps N] [--worlds N] [--links N] [--quick] [--json PATH]
[--cpu-time]`` (the last two: ``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import warp as wp

import _protocol as protocol

DT = 1.0e-3


def make_chain(nt, links):
    b = nt.ModelBuilder()
    parent, joints = -1, []
    inertia = wp.mat33(np.eye(3, dtype=np.float32) * 1.0e-3)
    for i in range(links):
        link = b.add_link(mass=0.1, com=(0.05, 0.0, 0.0), inertia=inertia)
        joints.append(b.add_joint_revolute(
            parent, link, axis=(0.0, 1.0, 0.0),
            parent_xform=wp.transform((0.1 if i else 0.0, 0.0, 0.0), wp.quat_identity()),
        ))  # fmt: skip
        parent = link
    b.add_articulation(joints)
    return b


def make_cartpole(nt):
    b = nt.ModelBuilder()
    cart = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
    pole = b.add_link(mass=0.1, com=(0.0, 0.0, 0.5), inertia=wp.mat33(np.diag([0.01, 0.01, 1e-4]).astype(np.float32)))
    j0 = b.add_joint_prismatic(-1, cart, axis=(1.0, 0.0, 0.0))
    j1 = b.add_joint_revolute(cart, pole, axis=(0.0, 1.0, 0.0))
    b.add_articulation([j0, j1])
    return b


def chain_mjcf(links):
    body = ""
    for i in range(links):
        pos = "0.1 0 0" if i else "0 0 0"
        body += (f'<body pos="{pos}"><joint type="hinge" axis="0 1 0"/>'
                 f'<inertial pos="0.05 0 0" mass="0.1" diaginertia="1e-3 1e-3 1e-3"/>')  # fmt: skip
    body += "</body>" * links
    return f'<mujoco><option timestep="{DT}" integrator="Euler"/><worldbody>{body}</worldbody></mujoco>'


CARTPOLE_MJCF = f"""<mujoco><option timestep="{DT}" integrator="Euler"/><worldbody>
<body><joint type="slide" axis="1 0 0"/><inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
<body><joint type="hinge" axis="0 1 0"/><inertial pos="0 0 0.5" mass="0.1" diaginertia="0.01 0.01 1e-4"/>
</body></body></worldbody></mujoco>"""


def run_engine(nt, solver_cls, builder, worlds, steps, q0):
    if worlds > 1:
        b = nt.ModelBuilder()
        b.replicate(builder, worlds)
    else:
        b = builder
    model = b.finalize(device="cpu")
    s0, s1 = model.state(), model.state()
    s0.joint_q.assign(np.tile(q0, worlds).astype(np.float32))
    nt.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    control = model.control()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solver = solver_cls(model, angular_damping=0.0)
    for _ in range(20):  # compile + warm up
        solver.step(s0, s1, control, None, DT)
        s0, s1 = s1, s0
    wp.synchronize()
    t = protocol.clock()
    for _ in range(steps):
        solver.step(s0, s1, control, None, DT)
        s0, s1 = s1, s0
    wp.synchronize()
    return steps / (protocol.clock() - t), s0.joint_q.numpy()


def run_mujoco(xml, worlds, steps, q0):
    import mujoco

    m = mujoco.MjModel.from_xml_string(xml)
    datas = [mujoco.MjData(m) for _ in range(worlds)]
    for d in datas:
        d.qpos[:] = q0
    t = protocol.clock()
    for _ in range(steps):
        for d in datas:
            mujoco.mj_step(m, d)
    loop = steps / (protocol.clock() - t)
    rollout_rate = None
    try:
        from mujoco import rollout

        state0 = np.zeros((worlds, mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)))
        for i, d in enumerate(datas):
            mujoco.mj_getState(m, d, state0[i], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        t = protocol.clock()
        rollout.rollout(m, datas[0], state0, nstep=steps)
        rollout_rate = steps / (protocol.clock() - t)
    except Exception:  # noqa: BLE001 - optional baseline
        pass
    return loop, rollout_rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--worlds", type=int, default=256)
    parser.add_argument("--links", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="200 steps, 16 worlds: a smoke run")
    protocol.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.worlds = 200, 16
    results = protocol.Results.from_args(__file__, args)
    wp.config.log_level = wp.LOG_WARNING
    import armillary
    from armillary.solvers import SolverFeatherstone

    protocol.reference_on_path()
    try:
        import newton
        from newton.solvers import SolverFeatherstone as NewtonFeatherstone
    except Exception:  # noqa: BLE001 - newton is an optional black-box baseline
        newton = None

    cases = [
        (f"{args.links}-link revolute chain, 1 world", lambda nt: make_chain(nt, args.links), 1,
         chain_mjcf(args.links), np.full(args.links, 0.1)),
        (f"cartpole x {args.worlds} worlds", make_cartpole, args.worlds, CARTPOLE_MJCF, np.array([0.0, 0.3])),
    ]  # fmt: skip
    for title, make, worlds, xml, q0 in cases:
        print(f"\n== {title} ({args.steps} steps of {DT * 1e3:.0f} ms)")
        ours, q_ours = run_engine(armillary, SolverFeatherstone, make(armillary), worlds, args.steps, q0)
        print(f"armillary SolverFeatherstone: {ours:10.0f} steps/s ({ours * worlds:.3g} world-steps/s)")
        results.add(title, "armillary", ours, ratio_vs="newton" if newton is not None else "mujoco")
        if newton is not None:
            theirs, q_theirs = run_engine(newton, NewtonFeatherstone, make(newton), worlds, args.steps, q0)
            diff = float(np.abs(q_ours - q_theirs).max())
            print(f"newton    SolverFeatherstone: {theirs:10.0f} steps/s   ratio armillary/newton = {ours / theirs:.2f}"
                  f"   (max |q diff| after the run: {diff:.1e})")  # fmt: skip
            results.add(title, "newton", theirs)
        try:
            loop, roll = run_mujoco(xml, worlds, max(args.steps // 10, 50), q0)
            print(f"mujoco C (python loop over MjData): {loop:10.0f} steps/s   ratio armillary/mujoco = {ours / loop:.2f}")
            results.add(title, "mujoco", loop)
            results.add(title, "mujoco rollout", roll)
            if roll is not None:
                print(f"mujoco C (rollout, threaded):       {roll:10.0f} steps/s   ratio armillary/mujoco = {ours / roll:.2f}")
        except ImportError:
            print("mujoco not installed: no MuJoCo baseline")


if __name__ == "__main__":
    main()
