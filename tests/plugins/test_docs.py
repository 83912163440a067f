"""Documentation generated from code stays complete and current (datasette-style)."""

import inspect
import re
from pathlib import Path

import pytest

from armillary import docsgen, hookspecs
from armillary.plugins import isolated_registry

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("Called:", "Args:", "Returns:", "Implemented by:", "Example::")


@pytest.mark.parametrize("hook", docsgen.hook_specs(), ids=lambda f: f.__name__)
def test_every_hook_is_documented(hook):
    doc = inspect.getdoc(hook) or ""
    missing = [s for s in SECTIONS if s not in doc]
    assert not missing, f"{hook.__name__} docstring lacks {missing}"
    for param in inspect.signature(hook).parameters:
        assert re.search(rf"^\s*{param}\b", doc, re.M), f"{hook.__name__}: argument {param!r} is undocumented"


def test_every_hookspec_is_in_the_module_index():
    specs = {f.__name__ for f in docsgen.hook_specs()}
    declared = {n for n in dir(hookspecs) if n.startswith("armillary_")}
    assert specs == declared and len(specs) >= 5


def test_generated_docs_are_current():
    with isolated_registry(autoload=True):
        stale = docsgen.write_docs(ROOT / "docs", check=True)
    assert not stale, f"regenerate with `armillary docs`: {stale}"


def test_readme_feature_table_is_generated_from_declarations():
    readme = (ROOT / "README.md").read_text()
    block = docsgen.readme_feature_block(readme)
    assert block is not None, "README lacks the generated feature table markers"
    with isolated_registry(autoload=True):
        assert block == docsgen.feature_table_markdown(docsgen.repository_distributions(ROOT)), (
            "README feature table is stale: run `armillary features --markdown` (without third-party plugins)"
        )


class _ThirdPartyPlugin:
    """A solver plugin from outside this repository, registered at run time."""

    @staticmethod
    def solver_class():
        from armillary.solvers import Coordinates, SolverBase, SolverCapabilities

        class SolverThirdParty(SolverBase):
            capabilities = SolverCapabilities(coordinates=Coordinates.MAXIMAL, joint_types={"FREE"},
                                              features={"rigid_bodies"})  # fmt: skip

            def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
                pass

        return SolverThirdParty

    @hookspecs.hookimpl
    def armillary_register_solvers(self, registry):
        registry.add("SolverThirdParty", self.solver_class(), summary="a third-party solver installed next to ours")


def test_repository_distributions_are_read_from_the_checkout():
    names = docsgen.repository_distributions(ROOT)
    assert {"armillary", "armillary-solver-xpbd", "armillary-example-symplectic"} <= names
    assert docsgen.repository_distributions(ROOT / "docs") is None  # not a checkout


def test_doc_comparisons_ignore_a_third_party_plugin(tmp_path):
    """With a third-party solver installed, the generated pages and the README table still compare
    equal: core's doc tests look at this repository's distributions only."""
    readme_block = docsgen.readme_feature_block((ROOT / "README.md").read_text())
    with isolated_registry(autoload=True) as registry:
        registry.register(_ThirdPartyPlugin(), name="third_party", distribution="third-party-solver", version="1.0")
        assert "SolverThirdParty" in registry.solvers.names()
        assert "`SolverThirdParty`" in docsgen.feature_table_markdown()  # unrestricted: every installed solver
        assert docsgen.feature_table_markdown(docsgen.repository_distributions(ROOT)) == readme_block
        assert docsgen.write_docs(ROOT / "docs", check=True) == []
        # written into a folder that is not in a checkout, the pages list every installed solver
        docsgen.write_docs(tmp_path, check=False)
        assert "`SolverThirdParty`" in (tmp_path / "features.md").read_text()


def _documented(cls, name: str) -> bool:
    docs = (inspect.getdoc(cls) or "") + "\n" + (inspect.getdoc(cls.__init__) or "")
    return re.search(rf"^\s*{re.escape(name)}\b.*:", docs, re.M) is not None


def test_every_public_solver_option_is_documented():
    with isolated_registry(autoload=True) as registry:
        names = registry.solvers.names()
        assert names, "no solver plugin installed in the test environment"
        for name in names:
            cls = registry.solvers.resolve(name)
            params = [p for p in inspect.signature(cls.__init__).parameters.values()
                      if p.name not in ("self", "model") and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
            undocumented = [p.name for p in params if not _documented(cls, p.name)]
            assert not undocumented, f"{name}: constructor options without documentation: {undocumented}"


def test_every_registered_capability_has_a_summary_and_legend():
    from armillary.solvers.capabilities import FEATURES

    with isolated_registry(autoload=True) as registry:
        for reg in (registry.solvers, registry.importers, registry.actuators, registry.scenes):
            for entry in reg.entries():
                assert len(entry.summary) >= 10, f"{entry.kind} {entry.name}: summary too short"
        for name in registry.solvers.names():
            caps = registry.solvers.resolve(name).capabilities
            assert caps.features <= FEATURES.keys()
    for feature, meaning in FEATURES.items():
        assert meaning and feature in docsgen.features_markdown()
