#!/usr/bin/env bash
# Create .venv (if missing) and install the core and every plugin of this
# repository, editable, with the test dependencies. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
packages=(-e ".[test]")
for dir in plugins/*/ examples/*/; do
  if [ -f "$dir/pyproject.toml" ]; then
    packages+=(-e "$dir")
  fi
done
# pip's notes about unavailable local mirrors are noise here; real errors still fail the script
.venv/bin/python -m pip install --disable-pip-version-check -q "${packages[@]}" 2>&1 \
  | { grep -v "^WARNING: Location .* is ignored" || true; }
exit "${PIPESTATUS[0]}"
