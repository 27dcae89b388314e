"""Geodesic distances that never exceed the straight segment, on every call path (issue 20).

The pinned case: the wine pair of the geodesic-vs-line tutorial, where ``distance(rule="geodesic")``
(coarsest level 6 segments) returned 17.02, a minimizer whose first segment jumps across a sharp
blend transition, while the straight segment is 2.96 long and the manifold (8 segments) certified 2.748.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from riemlocal import LearnedMetricManifold, SmoothLocalField
from riemlocal.distances import distance
from riemlocal.learners import LDAMetric
from riemlocal.numerics import EnergyLogSolver, polyline_length
from riemlocal.placement import LocalMetrics


@pytest.fixture(scope="module")
def wine_pair():
    X, y = load_wine(return_X_y=True)
    X = PCA(n_components=5).fit_transform(StandardScaler().fit_transform(X))
    field = LocalMetrics(LDAMetric(), where="reference", n_references=10, random_state=0).fit(X, y).smooth_field(rho=1.0)
    return field, X[75], X[73]  # the tutorial's query 5 and candidate 8


def test_both_call_paths_agree_on_the_wine_pair_and_stay_below_the_line(wine_pair):
    field, a, b = wine_pair
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # certified on both paths: no warning
        by_rule = distance(field, a, b, rule="geodesic")
        space = LearnedMetricManifold(field)
        by_manifold = space.metric.dist(a, b)
    line = distance(field, a, b, rule="line_length")
    np.testing.assert_allclose(by_rule, 2.7478134, rtol=1e-6)
    np.testing.assert_allclose(by_rule, by_manifold, rtol=2e-6)
    assert by_rule < line
    result = space.metric.log_solver.last_result_
    assert result.converged and result.length <= polyline_length(field, result.curves[()][None])[0] + 1e-12


def test_the_retry_certifies_the_pair_that_a_six_segment_start_missed(wine_pair):
    field, a, b = wine_pair
    solver = EnergyLogSolver(field, n_segments=6)
    first = solver._solve_chunk(b[None], a[None], np.inf)
    assert first[1][0] > 10  # the jump minimizer of the coarse start: 17.0
    result = solver.solve(b, a, log_rtol=np.inf)
    assert result.converged and abs(result.length - 2.7478134) < 1e-5


def _corrupting(solver, lengths, errors):
    """``solver._solve_chunk`` with the returned lengths and error estimates replaced (a solver gone wrong)."""
    solve_chunk = solver._solve_chunk

    def corrupted(point, base_point, log_rtol):
        velocity, _, _, log_error, *rest = solve_chunk(point, base_point, log_rtol)
        return (velocity, np.full(len(point), lengths), np.full(len(point), errors), log_error, *rest)

    return corrupted


@pytest.mark.parametrize(
    "length, error",
    [(17.0, 1e-2), (-16.79, 0.0), (np.nan, 0.0), (np.inf, np.inf)],
    ids=["longer, uncertified", "negative, estimate 0", "nan", "inf"],
)
def test_no_distance_above_the_straight_segment_and_no_negative_one(length, error):
    field = SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2 * np.eye(2), np.eye(2)])
    x, y = np.array([1.0, 3.0]), np.array([5.0, 3.0])
    solver = EnergyLogSolver(field, max_segments=32)  # no retry: 4 x 4 x 8 segments exceed the cap
    solver._solve_chunk = _corrupting(solver, length, error)
    with pytest.warns(ConvergenceWarning, match="no shorter than the straight segment"):
        result = solver.solve(y, x)
    straight = distance(field, x, y, rule="line_length")
    np.testing.assert_allclose(result.length, straight, rtol=1e-10)
    assert not result.converged and result.error_estimate == np.inf
    np.testing.assert_array_equal(result.initial_velocity, y - x)
    np.testing.assert_array_equal(result.curves[()], [x, y])
