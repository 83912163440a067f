"""Where the real-robot test corpus lives.

The corpus is a folder laid out as ``<fmt>/<name>/...`` with a ``catalog.json`` index (see
:mod:`armillary.testing.corpus`). Tests find it with :func:`shared_assets_dir`, in this order:

1. ``$ARMILLARY_ASSETS``, when set: a corpus folder of your own;
2. the corpus assembled from the installed model packages (``scripts/robot-models.txt``, which
   ``scripts/setup.sh`` installs), with the UsdPhysics robots of an external corpus linked in when
   one is found (3.);
3. a ``shared/assets`` folder (with ``catalog.json``) beside an ancestor of the checkout.

In CI (``CI`` set) a missing corpus, or missing model packages, is an error rather than ``None``,
so the real-robot tests cannot silently skip there.
"""

from __future__ import annotations

import os
from pathlib import Path


def _beside_checkout(start: str | os.PathLike | None) -> Path | None:
    here = Path(start if start is not None else __file__).resolve()
    for ancestor in here.parents:
        candidate = ancestor / "shared" / "assets"
        if (candidate / "catalog.json").is_file():
            return candidate
    return None


def shared_assets_dir(start: str | os.PathLike | None = None) -> Path | None:
    """The robot-model corpus folder, or ``None`` when there is none (outside CI).

    ``start``: where to begin looking for a ``shared/assets`` folder beside the checkout
    (default: this file). See the module docstring for the order.
    """
    env = os.environ.get("ARMILLARY_ASSETS")
    if env:
        return Path(env)
    from armillary.testing.corpus import missing_packages, package_corpus_dir

    external = _beside_checkout(start)
    built = package_corpus_dir(external=external)
    if built is not None:
        return built
    if os.environ.get("CI"):
        raise FileNotFoundError(
            "the robot models the tests run on are not installed: "
            f"{', '.join(missing_packages())}; install them with "
            "`.venv/bin/python -m pip install --no-deps -r scripts/robot-models.txt` "
            "(scripts/setup.sh does), or set ARMILLARY_ASSETS to a corpus folder"
        )
    return external


def corpus_file(relative: str, start: str | os.PathLike | None = None) -> Path:
    """``relative`` (e.g. ``"usd/cartpole_usd/cartpole.usda"``) inside the corpus, for a test.

    Skips the calling test when the corpus or the file is missing on a developer machine; in CI
    (``CI`` set) raises ``FileNotFoundError`` instead, so a test cannot pass by skipping there.
    """
    root = shared_assets_dir(start)
    path = None if root is None else root / relative
    if path is not None and path.is_file():
        return path
    where = "no robot-model corpus was found" if root is None else f"{relative} is not in the corpus at {root}"
    if os.environ.get("CI"):
        raise FileNotFoundError(f"{where}; set ARMILLARY_ASSETS to a corpus folder that has it")
    import pytest

    pytest.skip(f"{where} (set ARMILLARY_ASSETS to a corpus folder that has it; required in CI)")
