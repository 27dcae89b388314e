"""Sphinx configuration of the riemlocal documentation.

Build (warnings are errors)::

    python -m pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

The tutorials in ``tutorials/`` are executed by sphinx-gallery during the build.
"""

import os

# Before numpy is imported: the tutorials run in this process, one BLAS thread each.
os.environ.setdefault("MPLBACKEND", "Agg")
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

import riemlocal  # noqa: E402

project = "riemlocal"
author = "riemlocal developers"
copyright = "2026, riemlocal developers"
release = riemlocal.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # copies MathJax 3 into _static and points mathjax_path there: formulas render offline
    "sphinx_gallery.gen_gallery",
]

exclude_patterns = ["_build", "auto_tutorials/*.ipynb", "auto_tutorials/*.py", "auto_tutorials/*.zip"]
templates_path = []
html_theme = "alabaster"
html_static_path = ["_static"]  # alabaster links _static/custom.css itself: code blocks wrap long lines

# scikit-learn adds set_*_request methods to every estimator class; they are not riemlocal's API.
_SKLEARN_MEMBERS = [f"set_{method}_request" for method in ("fit", "score", "transform", "predict", "partial_fit")]
autodoc_default_options = {
    "members": True,
    "exclude-members": ",".join(_SKLEARN_MEMBERS + ["get_metadata_routing"]),
}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# numpydoc turns each docstring's References into citations; a reference listed but not
# cited inline is normal numpydoc style, not a defect.
suppress_warnings = ["ref.citation"]

sphinx_gallery_conf = {
    "examples_dirs": "../tutorials",
    "gallery_dirs": "auto_tutorials",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "write_computation_times": False,
    "abort_on_example_error": False,
    "capture_repr": (),  # a cell's last expression (e.g. an Axes.set_title) prints no repr
}
