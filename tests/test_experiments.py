"""The experiments' own pieces: deskewing, the leakage-free protocol, tables and figures."""

import json

import matplotlib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.utils import Bunch

from helpers import assert_figure_is_labelled
from riemlocal.datasets import make_body_shapes
from riemlocal.distances import distance
from riemlocal.experiments.bodyshape import plot_embeddings, plot_errors, plot_principal_geodesics, run_bodyshape
from riemlocal.experiments.taxonomy import (
    CELLS,
    N_REFERENCES,
    PAPER_MNIST,
    SHORTLIST,
    WHEN,
    WHERE,
    SolverRecord,
    _batch,
    _classifier,
    _datasets,
    deskew,
    plot_taxonomy,
    render_taxonomy,
    run_taxonomy,
)
from riemlocal.learners import LDAMetric


def _moments(image):
    rows, cols = np.indices(image.shape, dtype=float)
    mass = image.sum()
    r, c = (rows * image).sum() / mass, (cols * image).sum() / mass
    return r, c, ((rows - r) * (cols - c) * image).sum() / mass


def test_deskew_removes_the_row_column_covariance_and_centres():
    image = np.zeros((28, 28))
    for row in range(6, 22):  # a stroke leaning right by 0.5 column per row, off centre
        image[row, 6 + (row - 6) // 2 : 8 + (row - 6) // 2] = 255.0
    assert abs(_moments(image)[2]) > 5.0
    (upright,) = deskew(image[None])
    r, c, covariance = _moments(upright)
    assert abs(covariance) < 0.05 * abs(_moments(image)[2])
    assert_allclose([r, c], [13.5, 13.5], atol=0.3)
    assert upright.sum() == pytest.approx(image.sum(), rel=0.02)  # shear preserves area
    blank = np.zeros((1, 28, 28))
    assert_allclose(deskew(blank), blank)
    with pytest.raises(ValueError, match="images must have shape"):
        deskew(np.zeros((28, 28)))


def test_leakage_free_protocol_does_not_see_the_target():
    rng = np.random.default_rng(0)
    shape = rng.normal(size=(90, 4))
    data = Bunch(data=shape, target=rng.normal(size=(90, 1)), measurement_names=["noise"], units={"noise": "a.u."})
    result = run_bodyshape(quick=True, data=data, verbose=False, seed=0)
    entry = result["measurements"]["noise"]
    # a target independent of the shape: no fold-trained model can beat the spread of the target (~0.8 for N(0,1))
    assert min(entry["mae_cross_validated"]["riemannian"]) > 0.75
    assert min(entry["mae_cross_validated"]["euclidean"]) > 0.75
    assert result["settings"]["max_dim"] == 4 and "noise in a.u." in result["markdown"]
    assert "Leakage-free: 3-fold" in result["markdown"] and "Paper's protocol" in result["markdown"]


def test_bodyshape_folds_in_parallel_equal_the_sequential_run_and_report_progress(capsys):
    """Folds run through joblib (``n_jobs``) give the same errors; one bar counts every fit (1 + n_folds per measurement)."""
    full = make_body_shapes(n_samples=80, random_state=1)
    data = Bunch(data=full.data[:, :6], target=full.target, measurement_names=full.measurement_names)
    options = dict(data=data, measurements=["shoulder_breadth", "waist"], n_clusters=2, n_folds=3, max_dim=3)
    sequential = run_bodyshape(verbose=True, **options)
    progress = capsys.readouterr().err
    assert "8/8" in progress and "waist, fold 3/3 (leakage-free)" in progress
    parallel = run_bodyshape(verbose=False, n_jobs=2, **options)
    for name in options["measurements"]:
        assert_allclose(parallel["measurements"][name]["mae_cross_validated"]["riemannian"],
                        sequential["measurements"][name]["mae_cross_validated"]["riemannian"], rtol=1e-12)
    assert run_bodyshape(verbose=False, thorough=True, **{**options, "n_folds": None})["settings"]["n_folds"] == 10


def _taxonomy_result():
    cells = {"mnist/Euclidean/3-NN": {"accuracy": 92.0, "accuracy_std": 0.5, "time": 0.1}}
    cells["mnist/LDA/global fit"] = {"accuracy": None, "accuracy_std": None, "time": 0.1}
    for offset, (where, when) in enumerate(CELLS):
        cells[f"mnist/LDA/{where}/{when}"] = {"accuracy": 92.0 + offset, "accuracy_std": 0.4, "time": 1.0}
    return {
        "n_batches": 2,
        "datasets": {"mnist": {"n_train": 10, "n_test": 10, "preprocessing": "deskew + pca"}},
        "hows": ["LDA"],
        "n_online_lmnn": 0,
        "cells": cells,
        "checks": {},
        "paper": {"mnist": {"LDA": {"/".join(cell): rate for cell, rate in PAPER_MNIST["LDA"].items()}}},
    }


def test_taxonomy_table_has_the_baseline_and_the_paper_beside_ours():
    markdown = render_taxonomy(_taxonomy_result())
    assert "| Euclidean 3-NN (baseline) | 92.0 ± 0.5 (0.10 s) |" in markdown
    assert "| Global offline | 92.0 ± 0.4 | 92.4 ± 0.9 | -0.4 |" in markdown  # within 1.5: unmarked
    assert "| Line interp | 98.0 ± 0.4 | 92.6 ± 0.7 | +5.4 ** |" in markdown


def test_taxonomy_table_counts_uncertified_geodesics():
    result = _taxonomy_result()
    result["cells"]["mnist/LDA/Geodesic/interp"].update(n_pairs=400, n_uncertified=2)
    assert "| 99.0 ± 0.4 (1.00 s; 2 of 400 uncertified) |" in render_taxonomy(result)


def test_taxonomy_quick_run_has_a_geodesic_column(tmp_path):
    """One quick batch: the Geodesic cell is in the JSON, a rate of correct predictions, timed and certified."""
    result = run_taxonomy(quick=True, n_batches=1, verbose=False, out=tmp_path)
    cells = json.loads((tmp_path / "taxonomy.json").read_text())["cells"]
    n_test = result["datasets"]["digits"]["n_test"]
    for how in result["hows"]:
        cell = cells[f"digits/{how}/Geodesic/interp"]
        correct = cell["accuracy"] / 100 * n_test  # one batch: the count of correct predictions
        assert 0 <= correct <= n_test and correct == pytest.approx(round(correct), abs=1e-9)
        assert np.isfinite(cell["time"]) and cell["time"] > 0
        assert cell["n_pairs"] == n_test * SHORTLIST and cell["n_uncertified"] == 0
        assert f"({cell['time']:.2f} s; 0 of {cell['n_pairs']} uncertified) |" in result["markdown"]
    assert not any(key.startswith("wine/") and "/Geodesic/" in key for key in cells)  # NO_GEODESIC
    assert "| not run |" in result["markdown"] and (tmp_path / "taxonomy_digits.png").exists()


def test_taxonomy_geodesic_cell_reranks_the_line_shortlist_on_the_smooth_blend_of_its_metrics():
    X_train, X_test, y_train, _ = _batch(_datasets("digits-wine", quick=True)["digits"], batch=0, seed=0)
    global_metric = LDAMetric().fit(X_train, y_train).metric_
    record = SolverRecord()
    line, geodesic = (
        _classifier(global_metric, LDAMetric(), CELLS[(where, "interp")], N_REFERENCES, 0, solver).fit(X_train, y_train)
        for where, solver in (("Line", None), ("Geodesic", record))
    )
    assert_allclose(geodesic.placement_.metrics_, line.placement_.metrics_)  # the same local metrics
    queries = X_test[:3]
    candidates, geodesic_sq = geodesic.local_distances(queries)
    assert_array_equal(candidates, line.local_distances(queries)[0])  # the same shortlist
    assert record.counts() == (3 * SHORTLIST, 0)
    field = line.placement_.rbf_field()
    points = X_train[candidates]
    assert_allclose(geodesic_sq, distance(field, queries[:, None], points, rule="geodesic", squared=True), rtol=1e-5)
    ratio = np.sqrt(geodesic_sq) / distance(field, queries[:, None], points, rule="line_length")
    assert ratio.max() <= 1 + 1e-6 and ratio.min() < 0.99  # no longer than the straight segment, and shorter


def test_figures_leave_the_backend_alone_and_label_everything():
    backend = matplotlib.get_backend()
    figure = plot_taxonomy(_taxonomy_result(), "mnist")
    (ax,) = figure.axes
    assert ax.get_ylabel() == "recognition rate (%)" and ax.get_xlabel() == "where the metrics are placed"
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["Euclidean 3-NN", *WHEN, "Ramanan & Baker (paper)"]
    assert [tick.get_text() for tick in ax.get_xticklabels()] == list(WHERE)
    rng = np.random.default_rng(1)
    dims = [1, 2]
    entry = {"dims": dims, "mae": {"euclidean": [2, 1], "riemannian": [1, 1]}}
    entry["mae_cross_validated"] = entry["mae"]
    result = {
        "measurements": {"weight": entry},
        "units": {"weight": "kg"},
        "settings": {"n_folds": 3},
        "arrays": {"weight": {"measurement": rng.normal(size=9), "euclidean": rng.normal(size=(9, 2)),
                              "riemannian": rng.normal(size=(9, 2))}},
    }
    errors = plot_errors(result)
    assert errors.axes[0].get_xlabel() == "number of principal geodesics"
    assert errors.axes[0].get_ylabel() == "mean absolute error (kg)"
    embeddings = plot_embeddings(result)
    assert len(embeddings.axes) == 3 and embeddings.axes[-1].get_ylabel() == "weight (kg)"  # the colour bar
    assert matplotlib.get_backend() == backend


def _bodyshape_result():
    rng = np.random.default_rng(1)
    entry = {"dims": [1, 2], "mae": {"euclidean": [2, 1], "riemannian": [1, 1]}}
    entry["mae_cross_validated"] = entry["mae"]
    entry["along_first_direction"] = {"t": [-1.0, 0.0, 1.0], "euclidean": rng.normal(size=(3, 2)).tolist(),
                                      "riemannian": rng.normal(size=(3, 2)).tolist()}
    return {
        "measurements": {"weight": entry, "height": entry},
        "measurement_names": ["weight", "height"],
        "measurement_std": [10.0, 8.0],
        "units": {"weight": "kg", "height": "cm"},
        "settings": {"n_folds": 3},
        "arrays": {name: {"measurement": rng.normal(size=9), "euclidean": rng.normal(size=(9, 2)),
                          "riemannian": rng.normal(size=(9, 2))} for name in ("weight", "height")},
    }


@pytest.mark.parametrize("plot", [plot_errors, plot_embeddings, plot_principal_geodesics])
def test_bodyshape_figures_say_what_they_draw(plot):
    figure = plot(_bodyshape_result())
    assert_figure_is_labelled(figure)
    titles = [ax.get_title() for ax in figure.axes if ax.get_label() != "<colorbar>"]
    assert any("weight" in title for title in titles) and any("height" in title for title in titles)


def test_taxonomy_figure_explains_hybrid_and_shows_the_paper():
    result = _taxonomy_result()
    result["hows"] = ["LDA", "Hybrid"]
    for key, cell in list(result["cells"].items()):
        if key.startswith("mnist/LDA/"):
            result["cells"][key.replace("/LDA/", "/Hybrid/")] = cell
    result["paper"]["mnist"]["Hybrid"] = {"/".join(cell): rate for cell, rate in PAPER_MNIST["Hybrid"].items()}
    figure = plot_taxonomy(result, "mnist")
    assert_figure_is_labelled(figure)
    assert figure.axes[1].get_title() == "Hybrid: LMNN global metric, LDA local metrics"
    for ax, how in zip(figure.axes, ("LDA", "Hybrid")):
        (paper,) = [c for c in ax.containers if c.get_label() == "Ramanan & Baker (paper)"]
        assert sorted(paper.lines[0].get_ydata()) == sorted(mean for mean, _ in PAPER_MNIST[how].values())
    assert "Hybrid (LMNN global metric, LDA local metrics)" in render_taxonomy(result)
