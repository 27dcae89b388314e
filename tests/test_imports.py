"""Imports run one way, through the layers of :data:`LAYERS` (utils first, the command line last).

Every riemlocal module is given a layer; a module may import riemlocal modules
of its own package or of a layer above it (smaller number), never below; it
never imports a private name or a private module of another package, and it
never imports riemlocal modules inside a function (to dodge a cycle).
"""

import ast
from pathlib import Path

import pytest

import riemlocal

PACKAGE = Path(riemlocal.__file__).parent

#: top-level unit (package or module) -> layer; a new module must be placed here
LAYERS = {
    "utils": 1,
    "learners": 2,
    "fields": 3,
    "placement": 4,
    "numerics": 2.5,
    "geodesics": 5,
    "connection": 5,
    "manifold": 6,
    "distances": 5.5,
    "learning": 7,
    "neighbors": 8,
    "datasets": 9,
    "plotting": 9,
    "io": 9,
    "experiments": 9.5,
    "cli": 10,
    "__init__": 10,
}


def _unit(module):
    """Top-level unit of a dotted module name inside riemlocal (``fields._local`` -> ``fields``)."""
    return module.split(".")[0]


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        yield ".".join(parts), path


def _resolve(module, node):
    """Absolute riemlocal-relative name imported by ``node`` (None when outside riemlocal)."""
    if node.level == 0:
        name = node.module or ""
        return name[len("riemlocal.") :] if name.startswith("riemlocal.") else ("" if name == "riemlocal" else None)
    package = module.split(".")[:-1]  # "fields._lazy" and "fields.__init__" both live in "fields"
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module, path):
    """(target, imported names, inside a function) for every riemlocal import of a module."""
    tree = ast.parse(path.read_text())
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    nested = {id(inner) for f in functions for inner in ast.walk(f) if inner is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            if target is not None:
                yield target, [alias.name for alias in node.names], id(node) in nested
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("riemlocal"):
                    yield alias.name[len("riemlocal.") :], [], id(node) in nested


def test_every_module_has_a_layer():
    missing = sorted({_unit(module) for module, _ in _modules()} - set(LAYERS))
    assert not missing, f"give these modules a layer in tests/test_imports.py: {missing}"


@pytest.mark.parametrize("module, path", list(_modules()), ids=[m for m, _ in _modules()])
def test_imports_run_one_way(module, path):
    source = _unit(module)
    for target, names, in_function in _imports(module, path):
        if target == "":  # "from . import __version__" and the like: the package itself
            assert source in ("cli", "__init__"), f"{module} imports the riemlocal package"
            continue
        unit = _unit(target)
        assert not in_function, f"{module} imports riemlocal.{target} inside a function"
        if unit == source:
            continue
        assert LAYERS[unit] <= LAYERS[source], f"{module} (layer {LAYERS[source]}) imports {target} (layer {LAYERS[unit]})"
        private_module = [part for part in target.split(".")[1:] if part.startswith("_")]
        assert not private_module, f"{module} imports the private module riemlocal.{target}"
        private = [name for name in names if name.startswith("_")]
        assert not private, f"{module} imports private names {private} from riemlocal.{target}"


def test_the_checker_catches_violations(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ..fields._local import _LocalField\n\ndef f():\n    from ..manifold import LearnedMetric\n")
    found = list(_imports("utils.bad", bad))
    assert ("fields._local", ["_LocalField"], False) in found
    assert ("manifold", ["LearnedMetric"], True) in found
