"""Tests of ``LocalMetrics(max_condition=...)``: bounded learned metrics and geodesics on their fields."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from riemlocal.distances import distance
from riemlocal.learners import LDAMetric, LMNNMetric, bound_condition, condition_numbers
from riemlocal.manifold import LearnedMetricManifold
from riemlocal.neighbors import LocalMetricKNN
from riemlocal.numerics import EnergyLogSolver
from riemlocal.placement import CONDITION_WARNING, LocalMetrics


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def test_bound_condition_floors_the_spectrum_and_keeps_the_eigenvectors():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    spectrum = np.array([1e-7, 1e-3, 0.5, 2.0])
    well_conditioned = np.diag([1.0, 2.0, 3.0, 4.0])
    bounded, n_clipped = bound_condition(np.stack([(q * spectrum) @ q.T, well_conditioned]), 100.0)
    expected = np.array([0.02, 0.02, 0.5, 2.0])  # floored at 2.0 / 100
    assert_allclose(np.linalg.eigvalsh(bounded[0]), expected, rtol=1e-12)
    assert_allclose(bounded[0] @ q, q * expected, atol=1e-14)
    assert_array_equal(bounded[0], bounded[0].T)
    assert_array_equal(bounded[1], well_conditioned)  # within the bound: untouched
    assert_array_equal(n_clipped, [2, 0])
    assert_allclose(condition_numbers(bounded), [100.0, 4.0], rtol=1e-12)


def test_max_condition_bounds_the_learned_metrics_and_records_it(iris):
    X, y = iris
    learned = LocalMetrics(LMNNMetric(), where="class").fit(X, y)
    bounded = LocalMetrics(LMNNMetric(), where="class", max_condition=100).fit(X, y)
    expected, n_clipped = bound_condition(learned.class_metrics_, 100)
    assert_allclose(bounded.class_metrics_, expected, rtol=1e-12)
    assert_array_equal(bounded.metrics_, bounded.class_metrics_[y])
    assert_array_equal(bounded.n_clipped_eigenvalues_, n_clipped[y])
    assert bounded.n_clipped_eigenvalues_.max() == 3  # class 0: LMNN keeps one direction
    assert_allclose(bounded.learned_condition_numbers_, learned.condition_numbers_)
    assert learned.condition_numbers_.max() > 1e6
    assert bounded.condition_numbers_.max() == pytest.approx(100.0, rel=1e-9)
    assert_array_equal(bounded.global_metric_, learned.global_metric_)  # proximity is not bounded
    between = np.random.default_rng(1).normal(size=(50, 4))
    for field in (bounded.smooth_field(), bounded.rbf_field()):  # blends of bounded metrics are bounded
        assert condition_numbers(field.metric_matrix(between)).max() <= 100.0 * (1 + 1e-9)


@pytest.mark.parametrize("where", ["exemplar", "reference"])
def test_max_condition_bounds_every_placement(iris, where):
    X, y = iris
    placement = LocalMetrics(where=where, max_condition=30, random_state=0).fit(X, y)
    assert placement.learned_condition_numbers_.max() > 1e5  # LDA: rank below the dimension
    assert placement.condition_numbers_.max() == pytest.approx(30.0, rel=1e-9)
    assert placement.n_clipped_eigenvalues_.sum() > 0


def test_smooth_fields_of_ill_conditioned_metrics_warn_and_nothing_else_does(iris):
    X, y = iris
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        placement = LocalMetrics(LMNNMetric(), where="class").fit(X, y)  # k-NN rules do not mind: no warning
        placement.nearest_field()
    for build in (placement.smooth_field, placement.rbf_field):
        with pytest.warns(UserWarning, match=r"100 of 150 local metrics have condition numbers above 1000 \(worst 4e\+06\).*max_condition") as record:
            build()
        assert record[0].filename == __file__  # points at the user's call
    quiet = {
        "bounded": LocalMetrics(LMNNMetric(), where="class", max_condition=100),
        "ridged": LocalMetrics(LDAMetric(), where="class", ridge=1e-2),  # conditions below dim / ridge = 400
        "global": LocalMetrics(LMNNMetric(), where="global"),  # one metric: a constant field, straight geodesics
    }
    for placement in quiet.values():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            placement.fit(X, y).smooth_field()
    assert quiet["bounded"].condition_numbers_.max() < CONDITION_WARNING
    assert quiet["ridged"].condition_numbers_.max() < CONDITION_WARNING
    assert quiet["global"].condition_numbers_.max() > CONDITION_WARNING


def test_max_condition_is_an_estimator_parameter():
    assert "max_condition=100" in repr(LocalMetrics(max_condition=100))
    assert "max_condition" not in repr(LocalMetrics())
    assert LocalMetrics(max_condition=10).get_params()["max_condition"] == 10


@pytest.mark.parametrize("value", [1, 0.5, 0, -10, np.inf, np.nan])
def test_bad_max_condition_raises_value_error(iris, value):
    X, y = iris
    with pytest.raises(ValueError, match="max_condition must be None or a finite number > 1"):
        LocalMetrics(max_condition=value).fit(X, y)
    with pytest.raises(ValueError, match="max_condition"):
        bound_condition(np.eye(2), value)


@pytest.mark.parametrize("value", ["100", True, [100]])
def test_max_condition_of_the_wrong_type_raises_type_error(iris, value):
    X, y = iris
    with pytest.raises(TypeError, match="max_condition must be None or a real number"):
        LocalMetrics(max_condition=value).fit(X, y)


def test_geodesics_on_a_bounded_iris_field_are_certified_symmetric_and_below_the_line(iris):
    X, y = iris
    field = LocalMetrics(LMNNMetric(), where="class", max_condition=100).fit(X, y).smooth_field(rho=1.0)
    solver = LearnedMetricManifold(field).metric.log_solver
    points = X[np.random.default_rng(0).choice(len(X), 8, replace=False)]
    i, j = np.triu_indices(8, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        forward, backward = solver.solve(points[j], points[i]), solver.solve(points[i], points[j])
    assert forward.converged.all() and backward.converged.all()
    assert np.all(np.abs(forward.length - backward.length) <= solver.rtol * (forward.length + backward.length))
    line = distance(field, points[i], points[j], rule="line_length")
    assert np.all(forward.length <= line * (1 + solver.rtol))
    assert np.any(forward.length < line * (1 - 1e-3))  # the field is curved: some geodesics bend


def test_uncertified_warning_names_the_fields_conditioning(iris):
    X, y = iris
    with pytest.warns(UserWarning, match="max_condition"):
        field = LocalMetrics(LMNNMetric(), where="class").fit(X, y).smooth_field(rho=1.0)
    solver = EnergyLogSolver(field, n_segments=2, max_segments=4)
    with pytest.warns(ConvergenceWarning, match=r"condition numbers up to 4e\+06.*LocalMetrics\(max_condition=\.\.\.\)"):
        solver.solve(X[100], X[0])


def test_the_classifier_passes_max_condition_to_its_placement(iris):
    X, y = iris
    knn = LocalMetricKNN(LMNNMetric(), where="class", interpolation="smooth", max_condition=100).fit(X, y)
    assert knn.placement_.condition_numbers_.max() <= 100 * (1 + 1e-9)
    assert knn.placement_.learned_condition_numbers_.max() > 1e4
    with pytest.raises(ValueError, match="max_condition.*lazy"):
        LocalMetricKNN(where="lazy", max_condition=100).fit(X, y)
