"""docs/tutorial_solver_plugin.md, run as written: its files, its install and its commands.

The page's files (each fenced block preceded by ``<!-- file: PATH -->``) are written into a
temporary folder and installed with ``pip install --target`` into another one, which the commands
get on ``PYTHONPATH``: armillary discovers the plugin through its entry point there, and the suite's
own environment never sees it (the page's ``pip install -e .`` would leak it into every later
test). Every other command of the page's ``bash`` blocks then runs, in the page's order, in the
package folder, with this interpreter's ``bin`` first on ``PATH``; the checks below read their
output.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial_solver_plugin.md"
PACKAGE = "armillary-solver-damped"

# page commands the test does not run, and what it does instead
NOT_RUN = {
    "bash scripts/setup.sh && source .venv/bin/activate": "the suite runs in this checkout's environment already",
    f"mkdir {PACKAGE} && cd {PACKAGE}": "the page's files are written into a temporary folder",
    "mkdir armillary_solver_damped tests": "the page's files are written into a temporary folder",
    "pip install -e .": "pip install --target into a temporary folder on PYTHONPATH (the suite's venv stays clean)",
}
PLUGINS, FEATURES = "armillary plugins", "armillary features"
KIT, DEMO = "python -m pytest tests -v -rs", "python coupled_demo.py"
FILES = {
    "pyproject.toml", "armillary_solver_damped/__init__.py", "armillary_solver_damped/kernels.py",
    "armillary_solver_damped/solver.py", "armillary_solver_damped/plugin.py", "tests/test_conformance.py",
    "tests/test_drag.py", "coupled_demo.py",
}  # fmt: skip


def parse_page(text: str) -> tuple[dict[str, str], list[str]]:
    """``({path: content}, [bash command, ...])`` of the page, in page order."""
    files: dict[str, str] = {}
    commands: list[str] = []
    lines = text.splitlines()
    pending = None  # the path named by the last file marker, until its block is read
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = re.fullmatch(r"<!-- file: (\S+) -->", line.strip())
        if marker:
            pending = marker.group(1)
            i += 1
            continue
        fence = re.fullmatch(r"```(\w*)", line.strip())
        if not fence:
            assert pending is None or not line.strip(), f"file marker {pending!r} is not followed by a code block"
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"unclosed code block at line {i + 1} of {PAGE.name}"
        body = lines[i + 1:end]
        if pending is not None:
            path = Path(pending)
            assert not path.is_absolute() and ".." not in path.parts, f"file marker {pending!r} must be relative"
            assert pending not in files, f"{pending!r} appears twice on the page"
            files[pending] = "\n".join(body) + "\n"
            pending = None
        elif fence.group(1) == "bash":
            commands += [c.strip() for c in body if c.strip() and not c.strip().startswith("#")]
        i = end + 1
    assert pending is None, f"file marker {pending!r} at the end of the page has no code block"
    return files, commands


def _tail(result: subprocess.CompletedProcess, n: int = 4000) -> str:
    return f"exit status {result.returncode}\nstdout:\n{result.stdout[-n:]}\nstderr:\n{result.stderr[-n:]}"


@pytest.fixture(scope="module")
def page():
    return parse_page(PAGE.read_text())


@pytest.fixture(scope="module")
def tutorial(page, tmp_path_factory):
    """Write, install and run the page; ``{command: CompletedProcess}`` of every command run."""
    files, commands = page
    base = tmp_path_factory.mktemp("tutorial")
    package, site = base / PACKAGE, base / "site"
    for path, content in files.items():
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(content)
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "--no-index", "--target", str(site), str(package)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, f"pip could not install the page's package:\n{_tail(install)}"
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "armillary").is_file(), f"no `armillary` command next to {sys.executable}: install armillary"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ARMILLARY_PLUGINS", "ARMILLARY_DISABLE_PLUGIN_AUTOLOAD", "ARMILLARY_DEBUG")}
    env.update(PYTHONPATH=str(site), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")  # fmt: skip
    results = {}
    for command in commands:
        if command in NOT_RUN:
            continue
        results[command] = subprocess.run(["bash", "-c", command], cwd=package, env=env, capture_output=True,
                                          text=True, timeout=600)  # fmt: skip
    return results


def test_the_page_holds_the_whole_plugin(page):
    files, commands = page
    assert set(files) == FILES, f"files on the page: {sorted(files)}; expected {sorted(FILES)}"
    for command in (*NOT_RUN, PLUGINS, FEATURES, KIT, DEMO):
        assert command in commands, f"the page no longer shows `{command}`; update this test with it"
    pyproject = files["pyproject.toml"]
    assert re.search(r'^\[project\.entry-points\.armillary\]\n\w+ = "armillary_solver_damped\.plugin"$', pyproject,
                     re.M), "pyproject.toml lacks the `armillary` entry point"  # fmt: skip


def test_every_command_succeeds(tutorial):
    for command, result in tutorial.items():
        assert result.returncode == 0, f"`{command}` failed:\n{_tail(result)}"


def test_armillary_plugins_lists_the_plugin(tutorial):
    out = tutorial[PLUGINS].stdout
    section = re.search(rf"^damped: {PACKAGE} 0\.1\.0(?P<status>.*)\n(?P<body>(?:  .*\n?)*)", out, re.M)
    assert section, f"`{PLUGINS}` does not list {PACKAGE}:\n{out}"
    assert section["status"] == "", f"{PACKAGE} is listed as {section['status'].strip()}:\n{section[0]}"
    assert "error:" not in section["body"] and "  solvers: SolverDampedEuler" in section["body"], section[0]


def test_armillary_features_shows_the_declaration(tutorial):
    rows = [re.split(r"\s{2,}", line.strip()) for line in tutorial[FEATURES].stdout.splitlines()]
    header = next((r for r in rows if r[0] == "feature"), None)
    assert header and "SolverDampedEuler" in header, f"`{FEATURES}` has no SolverDampedEuler column:\n{rows}"
    column = header.index("SolverDampedEuler")
    table = {r[0]: r[column] for r in rows if len(r) == len(header)}
    expected = {"coordinates": "maximal", "deterministic": "yes", "takes CollisionPipeline contacts": "no",
                "particles": "yes", "particle_forces": "yes", "multiple_worlds": "yes", "reset_world_mask": "yes",
                "rigid_bodies": "—", "joint FREE": "—", "particle_contacts": "—", "springs": "—"}  # fmt: skip
    assert {k: table.get(k) for k in expected} == expected


def test_the_conformance_kit_passes(tutorial):
    result = tutorial[KIT]
    out = result.stdout
    summary = re.search(r"=+ (.*) in [\d.]+s", out)
    assert summary and result.returncode == 0, f"`{KIT}`:\n{_tail(result)}"
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (\w+)", summary.group(1))}
    assert not (set(counts) - {"passed", "skipped"}), f"`{KIT}`: {summary.group(1)}"
    passed = set(re.findall(r"::(\w+) PASSED", out))
    kit_checks = {
        "test_capabilities_are_well_formed", "test_step_leaves_state_in_untouched",
        "test_step_does_not_synchronise_with_the_host", "test_observables_contract",
        "test_notify_model_changed_accepts_all_and_custom_flags", "test_reset_restores_initial_state",
        "test_reset_with_world_mask_resets_only_selected_worlds", "test_unsupported_joint_type_is_rejected",
        "test_particle_free_fall", "test_particle_force", "test_multiple_worlds_are_independent",
        "test_global_world_gravity", "test_determinism",
    }  # fmt: skip
    own = {"test_drag_approaches_terminal_velocity", "test_bad_damping_is_rejected", "test_rigid_bodies_are_rejected"}
    assert kit_checks | own <= passed, f"checks that did not pass: {sorted((kit_checks | own) - passed)}"
    assert counts["passed"] >= 16, f"`{KIT}`: {summary.group(1)}"
    # undeclared features are skipped, naming what is missing
    assert "SolverDampedEuler does not declare feature(s) 'rigid_bodies'\n" in out, out[-3000:]


def test_the_coupled_demo_moves_as_physics_says(tutorial):
    out = tutorial[DEMO].stdout
    assert "alone: SolverFeatherstone does not support particles" in out, out
    assert "alone: SolverDampedEuler does not support joint type REVOLUTE" in out, out
    dust = re.search(r"dust \(damping ([\d.]+) 1/s\): vertical velocity (\S+) m/s after ([\d.]+) s "
                     r"\(spread (\S+)\), analytic (\S+) m/s", out)  # fmt: skip
    assert dust, f"no dust line in the demo's output:\n{out}"
    c, v, t, spread, analytic = (float(x) for x in dust.groups())
    exact = -(9.81 / c) * (1.0 - math.exp(-c * t))  # dv/dt = -g - c v from rest
    assert analytic == pytest.approx(exact, abs=1e-4)
    assert v == pytest.approx(exact, rel=2e-3) and v < -1.0 and spread < 1e-6
    pendulum = re.search(r"pendulum: hinge angle (\S+) rad after [\d.]+ s, SolverFeatherstone alone (\S+) rad", out)
    assert pendulum, f"no pendulum line in the demo's output:\n{out}"
    angle, alone = (float(x) for x in pendulum.groups())
    assert abs(angle) > 0.5, "the pendulum did not swing"
    assert angle == pytest.approx(alone, abs=1e-5), "the coupled pendulum differs from SolverFeatherstone alone"
