"""Exact PGA (Sommer et al. 2010) by gradient ascent on the sphere of directions, with the implicit-function gradient."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning

from riemlocal.fields import ConstantField, SmoothLocalField
from riemlocal.learning import PrincipalGeodesicAnalysis, _tangent
from riemlocal.learning._pga import _SLACK, _radii
from riemlocal.manifold import LearnedMetricManifold


def _rotation(angle):
    return np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


@pytest.fixture(scope="module")
def curved():
    """Three rotated metrics of anisotropy 3, 4 and 2.5 (rho = 1), 15 points spread along a line across them."""
    metrics = np.array([_rotation(a) @ np.diag([c, 1.0]) @ _rotation(a).T for a, c in [(0.3, 3.0), (1.2, 4.0), (2.4, 2.5)]])
    space = LearnedMetricManifold(SmoothLocalField(np.array([[-1.0, 0.0], [0.5, 0.8], [1.0, -0.7]]), metrics, rho=1.0))
    X = np.random.default_rng(0).normal(size=(15, 2)) * [1.0, 0.3] @ _rotation(0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        exact = PrincipalGeodesicAnalysis(space, n_components=1, method="exact").fit(X)
    assert exact.converged_
    return space, X, exact


def _variance_and_slope(pga, X, angle):
    """Projected variance sum |a*|^2 along the whitened direction (cos, sin)(angle), and its slope in angle."""
    factor = np.linalg.cholesky(pga.metric_matrix_)
    direction = np.linalg.solve(factor.T, [np.cos(angle), np.sin(angle)])[None]
    tangent = pga.space.metric.log(X, pga.mean_) @ pga.metric_matrix_ @ direction.T
    a, converged = pga._project(tangent, direction, X)
    assert converged.all()
    step = 1e-3 * np.sqrt(pga.explained_variance_.sum())
    slope = pga._variance_gradient(a, direction, X, step) @ np.linalg.solve(factor.T, [-np.sin(angle), np.cos(angle)])
    return np.sum(a**2), slope


def _angle(pga, direction):
    whitened = np.linalg.cholesky(pga.metric_matrix_).T @ direction
    return np.arctan2(whitened[1], whitened[0])


def test_variance_gradient_matches_central_differences(curved):
    space, X, exact = curved
    angle, step = _angle(exact, exact.components_[0]) + 0.3, 1e-4
    _, slope = _variance_and_slope(exact, X, angle)
    difference = (_variance_and_slope(exact, X, angle + step)[0] - _variance_and_slope(exact, X, angle - step)[0]) / (2 * step)
    # the Gauss--Newton Hessian alone would be 5% off here; the differences carry the projections' tol=1e-5
    assert_allclose(slope, difference, rtol=1e-3)
    flat = PrincipalGeodesicAnalysis(LearnedMetricManifold(ConstantField(np.array([[2.0, 0.5], [0.5, 1.0]]))), 1).fit(X)
    _, slope = _variance_and_slope(flat, X, 0.7)
    difference = (_variance_and_slope(flat, X, 0.7 + step)[0] - _variance_and_slope(flat, X, 0.7 - step)[0]) / (2 * step)
    assert_allclose(slope, difference, rtol=1e-7)  # exact on a flat field


def test_exact_pga_maximizes_the_projected_variance(curved):
    space, X, exact = curved
    tangent = PrincipalGeodesicAnalysis(space, n_components=1, mean=exact.mean_).fit(X)
    best, _ = _variance_and_slope(exact, X, _angle(exact, exact.components_[0]))
    assert_allclose(exact.explained_variance_[0], best / (len(X) - 1), rtol=1e-5)  # projections to tol=1e-5
    assert best > _variance_and_slope(exact, X, _angle(exact, tangent.components_[0]))[0] * (1 + 1e-4)
    # a dense scan of the angle, +-0.01 rad: the vertex of its parabola is the fitted direction
    offsets = np.linspace(-0.01, 0.01, 21)
    scan = np.array([_variance_and_slope(exact, X, _angle(exact, exact.components_[0]) + t)[0] for t in offsets])
    curve = np.polyfit(offsets, scan, 2)
    assert abs(curve[1] / (2 * curve[0])) < 1e-4
    assert best >= scan.max() * (1 - 1e-6)


def test_exact_pga_on_a_flat_field_is_tangent_pca(curved):
    _, X, _ = curved
    space = LearnedMetricManifold(ConstantField(np.array([[2.0, 0.5], [0.5, 1.0]])))
    tangent = PrincipalGeodesicAnalysis(space).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        exact = PrincipalGeodesicAnalysis(space, method="exact").fit(X)
    assert exact.converged_ and np.all(exact.direction_n_iter_ == 0)  # the tangent start is the optimum
    assert_allclose(exact.components_, tangent.components_, atol=1e-8)
    assert_allclose(exact.explained_variance_, tangent.explained_variance_, rtol=1e-8)


def test_exact_pga_warns_with_the_gradient_norm(curved):
    space, X, exact = curved
    with pytest.warns(ConvergenceWarning, match="variance gradient norm"):
        early = PrincipalGeodesicAnalysis(space, n_components=1, method="exact", mean=exact.mean_, max_iter=1).fit(X)
    assert not early.converged_ and early.direction_n_iter_[0] <= 1


def test_exp_derivative_is_the_differential_of_exp_along_the_directions(curved):
    space, X, _ = curved
    directions, vectors = np.array([[1.0, 0.5], [-0.3, 1.0], [0.2, 0.2]]), 0.5 * X[:4]
    initial = np.random.default_rng(1).normal(size=(4, 2))
    for base in (np.zeros(2), X[4:8]):  # one base point, and one per vector
        d_v, _ = space.metric.exp_differential(vectors, base)
        assert_allclose(_tangent.exp_derivative(space, vectors, base, directions), d_v @ directions.T, rtol=1e-5, atol=1e-6)
        assert_allclose(_tangent.jacobi_end(space, vectors, base, initial), np.einsum("nij,nj->ni", d_v, initial), rtol=1e-5, atol=1e-6)
    assert np.abs(d_v - np.eye(2)).max() > 1e-2


@pytest.mark.parametrize("n_components", [1, 2])
def test_projections_converge_to_the_accuracy_of_their_logs_where_the_full_step_overshoots(n_components):
    """A 6-D field whose projections overshoot with the full Gauss--Newton step, solved with Logs certified to 1e-4.

    Comparing values that differ by less than their Log errors rejected good steps, and halving the
    step four times stopped 2 (one direction) and 6 (two directions) of these 30 points unconverged;
    with the noise-aware acceptance and the interpolated step fraction, one point of the plane still
    crawled along a flat direction until Newton steps took over. All 30 converge, to the projection a
    tight solver finds.
    """
    rng = np.random.default_rng(1)
    factors = rng.normal(size=(6, 6, 6))
    metrics = np.einsum("rij,rkj->rik", factors, factors) + 0.3 * np.eye(6)
    metrics *= 6 / np.trace(metrics, axis1=1, axis2=2)[:, None, None]
    field = SmoothLocalField(rng.normal(size=(6, 6)), metrics, rho=1.0)
    X = rng.normal(size=(30, 6)) * 1.5
    pga = PrincipalGeodesicAnalysis(LearnedMetricManifold(field, rtol=1e-4), n_components).fit(X)
    start = pga.space.metric.log(X, pga.mean_) @ pga.metric_matrix_ @ pga.components_.T
    a, converged = pga._project(start, pga.components_, X)
    assert converged.all()
    pga.space, pga.tol = LearnedMetricManifold(field, rtol=1e-10), 1e-9
    reference, tight = pga._project(start, pga.components_, X, max_iter=400)
    assert tight.all()
    assert np.abs(a - reference).max() < 2e-4  # tol = 1e-5 of |a| ~ 3, amplified by flat directions of d^2


@pytest.fixture(scope="module")
def winding():
    """Six metrics of anisotropy 20--60 at random angles (rho = 1); on its first principal geodesic the closest
    points to two of the data (rows 3 and 5) lie 5.3 and 2.1 along it, where their tangent coordinates are -0.12 and 0.27."""
    rng = np.random.default_rng([3, 7])
    angles, anisotropies = rng.uniform(0, np.pi, 6), rng.uniform(20, 60, 6)
    metrics = np.array([_rotation(a) @ np.diag([c, 1.0]) @ _rotation(a).T for a, c in zip(angles, anisotropies)])
    space = LearnedMetricManifold(SmoothLocalField(rng.uniform(-1.5, 1.5, (6, 2)), metrics, rho=1.0))
    return space, rng.uniform(-1.5, 1.5, (8, 2))


def _closest_on_a_grid(space, base, direction, X, radii, residuals, spacing=0.1):
    """Smallest distance from each row of ``X`` to ``Exp(t direction)`` on a grid of t in the bands ||t| - d(base, x)| <= residual.

    Outside them, and short of the geodesic's cut point, the triangle inequality rules out a closer point.
    """
    path = space.metric.geodesic(base, initial_tangent_vec=np.stack([direction, -direction]))
    closest = []
    for x, radius, residual in zip(X, radii, residuals):
        times = np.arange(max(radius - residual, 0.0), radius + residual + spacing, spacing)
        points = np.concatenate(path(times), axis=0)  # both signs
        closest.append(space.metric.dist(points, x[None]).min())
    return np.array(closest)


def test_projections_onto_the_first_principal_geodesic_are_global(winding):
    space, X = winding
    pga = PrincipalGeodesicAnalysis(space, n_components=1).fit(X)
    logs, lengths, errors, certified = _tangent.certified_log(space, X, pga.mean_)
    local, converged = pga._project(logs @ pga.metric_matrix_ @ pga.components_.T, pga.components_, X)
    found, converged, moved, unscanned = pga._global_projection(local, converged, pga.components_[0], X, _radii(lengths, errors, certified))
    assert converged.all() and moved and unscanned == 0

    def residuals(a):
        return space.metric.dist(space.metric.exp(a @ pga.components_, pga.mean_), X)

    before, after = residuals(local), residuals(found)
    grid = _closest_on_a_grid(space, pga.mean_, pga.components_[0], X, lengths, after)
    # no point of the bands is closer than (1 - _SLACK) r (the grid's points are real points of the geodesic) ...
    assert np.all((1 - _SLACK) * after <= grid + 1e-6)
    # ... every projection is at least as close as the grid's best (row 1 lies beyond the band, past the cut point),
    # while the local projections of rows 3 and 5 were far off
    assert np.all(after <= grid + 0.1 / 2)
    np.testing.assert_array_equal(np.flatnonzero(before > grid + 0.1), [3, 5])
    assert np.all(before[[3, 5]] > 1.25 * grid[[3, 5]])


def test_exact_pga_finds_the_variance_that_global_projections_give(winding):
    space, X = winding
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        exact = PrincipalGeodesicAnalysis(space, n_components=1, method="exact").fit(X)
    a = exact.transform(X)
    assert exact.converged_
    assert_allclose(exact.explained_variance_[0], np.sum(a**2) / (len(X) - 1), rtol=1e-5)
    assert abs(a[3, 0]) > 4.0 and abs(a[5, 0]) > 1.5  # the far basins, not the tangent coordinates' near ones


def test_a_scan_stops_at_an_uncertified_log_and_says_so(curved, monkeypatch):
    space, X, exact = curved
    logs, lengths, errors, certified = _tangent.certified_log(space, X, exact.mean_)
    a = exact.transform(X)[:, 0]
    start, finished = exact._scan(a, exact.components_[0], X, _radii(lengths, errors, certified))
    assert finished.all() and np.isnan(start).all()  # the fitted projections are global
    calls, original = [], _tangent.certified_log

    def uncertified(*args):  # every Log after the residuals' is uncertified
        calls.append(1)
        logs, lengths, errors, certified = original(*args)
        return logs, lengths, errors, certified & (len(calls) == 1)

    monkeypatch.setattr(_tangent, "certified_log", uncertified)
    start, finished = exact._scan(a, exact.components_[0], X, _radii(lengths, errors, certified))
    assert not finished.any() and np.isnan(start).all() and len(calls) == 2  # no bisection through bounds it cannot trust
    with pytest.warns(ConvergenceWarning, match="15 could not be shown global"):
        exact.transform(X)
