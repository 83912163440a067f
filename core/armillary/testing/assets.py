"""Where the shared robot-model corpus (``shared/assets``, see its REFERENCE.md) lives.

Tests of the core and of plugins compare against the real models and MuJoCo
reference data in that corpus, which sits next to the repository checkout
(``<checkout>/../shared/assets``) on developer machines and in CI. Set
``ARMILLARY_ASSETS`` to point elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path


def shared_assets_dir(start: str | os.PathLike | None = None) -> Path | None:
    """The ``shared/assets`` folder, or ``None`` when it cannot be found.

    Looks at ``$ARMILLARY_ASSETS`` first, then for ``shared/assets/catalog.json`` beside every
    ancestor of ``start`` (default: this file, i.e. the source checkout). In CI (``CI`` set) a
    missing corpus is an error rather than ``None``, so asset tests cannot silently skip there.
    """
    env = os.environ.get("ARMILLARY_ASSETS")
    if env:
        return Path(env)
    here = Path(start if start is not None else __file__).resolve()
    for ancestor in here.parents:
        candidate = ancestor / "shared" / "assets"
        if (candidate / "catalog.json").is_file():
            return candidate
    if os.environ.get("CI"):
        raise FileNotFoundError(
            f"shared/assets (the robot-model corpus) was not found beside any ancestor of {here}; "
            "set ARMILLARY_ASSETS to its path"
        )
    return None
