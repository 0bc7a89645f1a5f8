"""guard.extras.EXTRA_OF_MODULE agrees with pyproject.toml's extras, both ways.

The installed metadata maps a module to its distribution (``packages_distributions``), so this test
runs where every extra is installed (CI installs ``.[test]``); the table itself cannot be built from
that metadata at run time, when the module it is asked about is missing.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from scidmz.guard.extras import EXTRA_OF_MODULE

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: Extras that only gather others (all) or tools for the tests: no runtime module should need them.
AGGREGATES = {"all", "test"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(reqs: list[str]) -> set[str]:
    """The distributions ``reqs`` install, with what they require in turn (as installed here)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in reqs]
    while todo:
        req = todo.pop()
        name = _norm(req.name)
        if name == "scidmz":
            for extra in req.extras:
                todo += [Requirement(r) for r in PYPROJECT["optional-dependencies"][extra]]
            continue
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.distribution(req.name).requires or []
        except md.PackageNotFoundError:
            continue
        for r in map(Requirement, requires):
            envs = [{"extra": e} for e in (req.extras or {""})]
            if r.marker is None or any(r.marker.evaluate(e) for e in envs):
                todo.append(r)
    return seen


def _dists_of_module() -> dict[str, set[str]]:
    return {mod: {_norm(d) for d in dists} for mod, dists in md.packages_distributions().items()}


def _imported_top_modules() -> set[str]:
    mods: set[str] = set()
    for path in (ROOT / "src" / "scidmz").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods.add(node.module.split(".")[0])
    return mods - set(sys.stdlib_module_names) - {"scidmz"}


def test_every_entry_names_an_extra_that_installs_the_module() -> None:
    by_module = _dists_of_module()
    extras = PYPROJECT["optional-dependencies"]
    wrong = {}
    for mod, extra in EXTRA_OF_MODULE.items():
        if extra not in extras or extra in AGGREGATES or not by_module.get(mod, set()) & _closure(extras[extra]):
            wrong[mod] = extra
    assert not wrong, f"EXTRA_OF_MODULE sends these modules to an extra that does not install them: {wrong}"


def test_every_optional_module_scidmz_imports_is_in_the_table() -> None:
    by_module = _dists_of_module()
    core = _closure(PYPROJECT["dependencies"])
    runtime = {name: _closure(reqs) for name, reqs in PYPROJECT["optional-dependencies"].items()
               if name not in AGGREGATES}
    missing, undeclared = {}, []
    for mod in sorted(_imported_top_modules()):
        dists = by_module.get(mod, set())
        if dists & core:
            continue
        homes = sorted(name for name, closure in runtime.items() if dists & closure)
        if not homes:
            undeclared.append(mod)
        elif mod not in EXTRA_OF_MODULE:
            missing[mod] = homes
    assert not undeclared, f"src/scidmz imports modules no runtime dependency or extra installs: {undeclared}"
    assert not missing, f"optional modules missing from EXTRA_OF_MODULE (module: extras that install it): {missing}"
