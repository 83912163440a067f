"""The real-robot corpus is assembled from the model packages (scripts/robot-models.txt)."""

import json
import os
from pathlib import Path

import pytest

from armillary.testing import corpus
from armillary.testing.assets import shared_assets_dir

REPO = Path(__file__).resolve().parents[2]


def test_pins_match_the_catalog():
    """scripts/robot-models.txt pins exactly the packages and versions the catalog names."""
    lines = (REPO / "scripts" / "robot-models.txt").read_text().splitlines()
    pins = {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}
    assert pins == {f"{m.dist}=={m.version}" for m in corpus.MODELS.values()}


@pytest.mark.skipif(bool(os.environ.get("ARMILLARY_ASSETS")), reason="ARMILLARY_ASSETS chooses the corpus")
def test_tests_run_on_the_package_corpus():
    """With the packages installed (setup.sh installs them; CI too), every model comes from them:
    its file lies inside the package, its licence files are there, and the catalog lists it."""
    missing = corpus.missing_packages()
    if missing and not os.environ.get("CI"):
        pytest.skip(f"model packages not installed: {missing}")
    assert missing == []
    root = shared_assets_dir()
    assert root == corpus.package_corpus_dir(external=_external())
    catalog = json.loads((root / "catalog.json").read_text())
    for name, m in corpus.MODELS.items():
        entry = catalog[name]
        assert (entry["fmt"], entry["path"]) == (m.fmt, m.path)
        model_file = root / m.path
        assert model_file.is_file(), name
        source = Path(entry["source"])
        assert model_file.resolve() == source.resolve(), name
        site = Path(str(source)[: -len(m.main)])
        for lic in m.license_files:
            assert (site / lic).is_file(), f"{name}: licence file {lic} missing"


def _external():
    from armillary.testing.assets import _beside_checkout

    return _beside_checkout(None)


def _fake_packages(tmp_path, monkeypatch):
    """Stand-in install roots: each model's main file (and one referenced file) under tmp_path."""
    site = tmp_path / "site"
    for m in corpus.MODELS.values():
        f = site / m.main
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"<{m.name}/>")
        (f.parent / "mesh.stl").write_text("solid")
    monkeypatch.setattr(corpus, "_installed_root", lambda m: site)
    return site


def test_layout_keeps_the_upstream_relative_paths(tmp_path, monkeypatch):
    site = _fake_packages(tmp_path, monkeypatch)
    root = corpus.package_corpus_dir(cache=tmp_path / "cache")
    for m in corpus.MODELS.values():
        assert (root / m.path).read_text() == f"<{m.name}/>"
        # files beside the model (meshes, includes) resolve relative to it
        assert (root / m.path).parent.joinpath("mesh.stl").read_text() == "solid"
        assert (root / m.path).resolve() == (site / m.main).resolve()
    # each model has its own folder: the corpus prefix is at least <fmt>/<name>
    assert sorted(p.name for p in (root / "mjcf").iterdir()) == sorted(
        m.name for m in corpus.MODELS.values() if m.fmt == "mjcf"
    )
    # built once: the second call returns the same folder without rebuilding
    stamp = (root / "catalog.json").stat().st_mtime_ns
    assert corpus.package_corpus_dir(cache=tmp_path / "cache") == root
    assert (root / "catalog.json").stat().st_mtime_ns == stamp


def test_external_usd_robots_are_linked_in(tmp_path, monkeypatch):
    _fake_packages(tmp_path, monkeypatch)
    ext = tmp_path / "ext"
    f = ext / corpus.EXTERNAL_USD["cartpole_usd"]
    f.parent.mkdir(parents=True)
    f.write_text("#usda 1.0")
    root = corpus.package_corpus_dir(external=ext, cache=tmp_path / "cache")
    catalog = json.loads((root / "catalog.json").read_text())
    assert catalog["cartpole_usd"]["fmt"] == "usd"
    assert (root / corpus.EXTERNAL_USD["cartpole_usd"]).read_text() == "#usda 1.0"
    assert "humanoid_usd" not in catalog  # not in the external corpus: not listed


def test_a_missing_package_gives_no_corpus_and_a_clear_ci_error(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "_installed_root", lambda m: None if m.dist == "robosuite" else tmp_path)
    assert corpus.missing_packages() == ["robosuite==1.5.2"]
    assert corpus.package_corpus_dir(cache=tmp_path / "cache") is None
    monkeypatch.delenv("ARMILLARY_ASSETS", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(FileNotFoundError, match=r"robosuite==1\.5\.2.*robot-models\.txt"):
        shared_assets_dir()


def test_a_package_at_another_version_counts_as_missing(monkeypatch):
    from importlib import metadata

    class Dist:
        version = "0.0.1"

        def locate_file(self, p):
            return Path("/nonexistent") / p

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist())
    assert corpus._installed_root(corpus.MODELS["ant"]) is None


def test_paths_that_share_no_folder_are_refused():
    with pytest.raises(ValueError, match="share no folder"):
        corpus._split_common_suffix("mjcf/x/a.xml", "pkg/b.xml")


def test_corpus_file_skips_outside_ci_and_fails_in_ci(tmp_path, monkeypatch):
    from armillary.testing.assets import corpus_file

    (tmp_path / "mjcf").mkdir()
    (tmp_path / "mjcf" / "a.xml").write_text("<mujoco/>")
    monkeypatch.setenv("ARMILLARY_ASSETS", str(tmp_path))
    assert corpus_file("mjcf/a.xml") == tmp_path / "mjcf" / "a.xml"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="usd/x.usda is not in the corpus"):
        corpus_file("usd/x.usda")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(FileNotFoundError, match="usd/x.usda is not in the corpus"):
        corpus_file("usd/x.usda")
