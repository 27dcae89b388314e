"""The tutorials are sphinx-gallery scripts; the docs build (``.ci/run``) executes all of them.

Here: every tutorial has the gallery layout and imports only public riemlocal
modules, and the fastest one runs end to end as a plain script.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIALS = sorted((Path(__file__).parents[1] / "tutorials").glob("plot_*.py"))


def test_the_five_tutorials_are_there():
    assert {f"plot_{i}" for i in range(1, 6)} <= {path.name[:6] for path in TUTORIALS}


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda path: path.name)
def test_tutorial_has_gallery_layout_and_public_imports(path):
    tree = ast.parse(path.read_text())
    title, underline = ast.get_docstring(tree).strip().splitlines()[:2]
    assert set(underline) == {"="} and len(underline) >= len(title), "docstring must open with an rst title"
    assert "# %%" in path.read_text()
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    private = [name for name in modules if name.startswith("riemlocal") and any(p.startswith("_") for p in name.split("."))]
    assert not private, f"tutorials must use public modules, got {private}"


def test_custom_field_tutorial_runs_and_matches_the_closed_form():
    path = next(path for path in TUTORIALS if "custom_field" in path.name)
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])  # this checkout
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    errors = [float(line.split("error ")[1].split(",")[0]) for line in result.stdout.splitlines() if "relative error" in line]
    assert len(errors) == 2 and max(errors) < 1e-5
    # the piecewise-constant user field: exact line rules agree with a 100,000-point midpoint sum
    exact, midpoint = (
        [float(value) for value in re.findall(r"(?:energy|length) ([0-9.]+)", line)]
        for line in result.stdout.splitlines()
        if line.startswith(("exact:", "midpoint:"))
    )
    assert len(exact) == 2
    assert exact == pytest.approx(midpoint, rel=1e-4)
