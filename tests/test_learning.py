"""Statistics on manifolds: Fréchet mean, PGA, geodesic and tangent-space regression."""

import warnings

import numpy as np
import pytest
from geomstats.geometry.euclidean import Euclidean
from geomstats.geometry.hypersphere import Hypersphere
from numpy.testing import assert_allclose
from scipy.optimize import minimize
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, Ridge

from riemlocal.fields import ConstantField, SmoothLocalField
from riemlocal.learning import FrechetMean, GeodesicRegression, PrincipalGeodesicAnalysis, TangentSpaceRegression
from riemlocal.manifold import LearnedMetricManifold


def _spd(rng, dim):
    a = rng.normal(size=(dim, dim))
    return a @ a.T + dim * np.eye(dim)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def constant_space(rng):
    return LearnedMetricManifold(ConstantField(_spd(rng, 3)))


@pytest.fixture
def curved_space():
    """Two local metrics in 2-D: a genuinely curved smooth field."""
    centers = np.array([[-1.0, 0.0], [1.0, 0.5]])
    metrics = np.array([[[4.0, 0.5], [0.5, 1.0]], [[1.0, -0.3], [-0.3, 3.0]]])
    return LearnedMetricManifold(SmoothLocalField(centers, metrics, rho=1.0))


def _sphere_data(rng, n=20):
    sphere = Hypersphere(2)
    return sphere, sphere.projection(rng.normal(size=(n, 3)) + [0.0, 0.0, 2.5])


# -- Fréchet mean ------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["karcher", "joint"])
def test_frechet_mean_of_constant_metric_is_weighted_mean(constant_space, rng, method):
    X = rng.normal(size=(12, 3))
    w = rng.uniform(0.5, 2.0, size=12)
    w[3] = 0.0  # weight 0 = absent, even for a far outlier
    X[3] = 1e3
    mean = FrechetMean(constant_space, method=method).fit(X, sample_weight=w)
    assert_allclose(mean.estimate_, w @ X / w.sum(), atol=1e-8)
    assert mean.grad_norm_ < 1e-6


def test_frechet_mean_karcher_matches_geomstats_on_sphere(rng):
    from geomstats.learning.frechet_mean import FrechetMean as GeomstatsFrechetMean

    sphere, X = _sphere_data(rng)
    ours = FrechetMean(sphere, tol=1e-8).fit(X)
    theirs = GeomstatsFrechetMean(sphere)
    theirs.optimizer.max_iter, theirs.optimizer.epsilon = 500, 1e-12
    theirs.fit(X)
    assert_allclose(ours.estimate_, theirs.estimate_, atol=1e-6)
    assert_allclose(np.linalg.norm(ours.estimate_), 1.0)  # stays on the sphere


def test_frechet_mean_joint_agrees_with_karcher_and_geomstats(curved_space, rng):
    from geomstats.learning.frechet_mean import FrechetMean as GeomstatsFrechetMean

    X = rng.normal(size=(10, 2)) * [1.5, 1.0]
    joint = FrechetMean(curved_space, method="joint", n_segments=8).fit(X)
    # Karcher's tol=1e-6 needs Logs more accurate than the default ~1e-5: finer curves, tighter tol
    precise = LearnedMetricManifold(curved_space.field, n_segments=16, tol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        karcher = FrechetMean(precise, method="karcher", tol=1e-6).fit(X)
    euclidean = X.mean(axis=0)
    assert np.linalg.norm(joint.estimate_ - euclidean) > 0.05  # the metric matters here
    assert_allclose(joint.estimate_, karcher.estimate_, atol=1e-5)
    coarse = FrechetMean(curved_space).fit(X)  # default n_segments=4
    assert_allclose(coarse.estimate_, karcher.estimate_, atol=2e-4)
    theirs = GeomstatsFrechetMean(curved_space)
    theirs.optimizer.max_iter, theirs.optimizer.epsilon = 200, 1e-8
    theirs.fit(X)
    assert_allclose(joint.estimate_, theirs.estimate_, atol=1e-4)
    # first-order optimality checked with the manifold's own Log maps
    logs = curved_space.metric.log(X, joint.estimate_)
    assert np.linalg.norm(logs.mean(axis=0)) < 1e-5 * np.sqrt((logs**2).sum(axis=1).mean())


def test_frechet_mean_is_permutation_invariant_and_deterministic(curved_space, rng):
    X = rng.normal(size=(8, 2))
    first = FrechetMean(curved_space).fit(X).estimate_
    assert_allclose(FrechetMean(curved_space).fit(X).estimate_, first, rtol=0, atol=0)
    assert_allclose(FrechetMean(curved_space).fit(X[rng.permutation(8)]).estimate_, first, atol=1e-6)


def test_frechet_mean_affine_equivariance(rng):
    metric, A, b = _spd(rng, 3), rng.normal(size=(3, 3)) + 3 * np.eye(3), rng.normal(size=3)
    inv = np.linalg.inv(A)
    X = rng.normal(size=(9, 3))
    centers, metrics = rng.normal(size=(2, 3)), np.array([metric, _spd(rng, 3)])
    field = SmoothLocalField(centers, metrics, rho=0.5)
    moved = SmoothLocalField(centers @ A.T + b, inv.T @ metrics @ inv, rho=0.5)
    mean = FrechetMean(LearnedMetricManifold(field)).fit(X).estimate_
    moved_mean = FrechetMean(LearnedMetricManifold(moved)).fit(X @ A.T + b).estimate_
    assert_allclose(moved_mean, A @ mean + b, atol=1e-5)


def test_frechet_mean_restarts_from_the_line_medoid_or_the_coordinate_mean_to_leave_a_worse_basin():
    """A high-cost blob at the origin; 6 + 4 points left and right above it and one far below, in a region cheap vertically.

    The Fréchet function has a minimum above the blob and a worse one below it (a start below ends there).
    """
    ring = [[a, b] for a in (-3.0, 0.0, 3.0) for b in (-3.0, 0.0, 3.0) if (a, b) != (0.0, 0.0)]
    centers = np.array([[0.0, 0.0]] + ring + [[-2.0, -5.0], [0.0, -5.0], [2.0, -5.0]])
    metrics = np.array([200 * np.eye(2)] + [np.eye(2)] * len(ring) + [np.diag([1.0, 0.01])] * 3)
    space = LearnedMetricManifold(SmoothLocalField(centers, metrics, rho=0.5))
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal([-1.8, 0.9], 0.15, size=(6, 2)), rng.normal([1.8, 0.9], 0.15, size=(4, 2)), [[-0.5, -6.0]]])

    def rms(points):
        points = np.atleast_2d(points)
        squared = space.metric.squared_dist(np.repeat(points, len(X), axis=0), np.tile(X, (len(points), 1)))
        return np.sqrt(squared.reshape(len(points), len(X)).mean(axis=1))

    below = np.array([-0.4, -0.5])
    mean = FrechetMean(space, init=below).fit(X)
    assert mean.converged_ and mean.n_starts_ >= 2 and not np.array_equal(mean.start_, below)
    assert mean.estimate_[1] > 0.2  # above the blob
    grid = np.stack(np.meshgrid(np.linspace(-1.4, 0.6, 9), np.linspace(-1.0, 1.0, 9)), axis=-1).reshape(-1, 2)
    best = rms(grid).min()
    assert rms(mean.estimate_)[0] <= best
    with pytest.MonkeyPatch.context() as patch:  # the first run alone stays below the blob, above the grid's best
        patch.setattr(FrechetMean, "_other_starts", lambda self, X, weights, first: [])
        single = FrechetMean(space, init=below).fit(X)
    assert single.n_starts_ == 1 and single.estimate_[1] < -0.2
    assert rms(single.estimate_)[0] > best * 1.02


def test_frechet_mean_runs_one_start_when_no_other_can_do_better(constant_space, rng):
    X = rng.normal(size=(12, 3))
    mean = FrechetMean(constant_space).fit(X)
    assert mean.n_starts_ == 1
    assert_allclose(mean.start_, X.mean(axis=0), atol=1e-14)


def test_frechet_mean_warns_when_not_converged(rng):
    sphere, X = _sphere_data(rng)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        FrechetMean(sphere, max_iter=1, init=np.array([1.0, 0.0, 0.0])).fit(X)


# -- PGA ---------------------------------------------------------------------------------------------


def test_pga_of_constant_metric_is_pca_in_metric_inner_product(constant_space, rng):
    X = rng.normal(size=(30, 3)) * [3.0, 1.0, 0.3] + 5.0
    pga = PrincipalGeodesicAnalysis(constant_space).fit(X)
    metric = constant_space.field.metric
    factor = np.linalg.cholesky(metric)
    pca = PCA().fit(X @ factor)
    assert_allclose(pga.explained_variance_, pca.explained_variance_, rtol=1e-8)
    assert_allclose(pga.explained_variance_ratio_, pca.explained_variance_ratio_, rtol=1e-8)
    assert_allclose(pga.components_ @ metric @ pga.components_.T, np.eye(3), atol=1e-10)
    # same directions up to sign: e_k = L^{-T} u_k
    directions = np.linalg.solve(factor.T, pca.components_.T).T
    assert_allclose(np.abs(np.diag(pga.components_ @ metric @ directions.T)), 1.0, atol=1e-8)
    coords = pga.transform(X)
    assert_allclose(np.abs(coords), np.abs(pca.transform(X @ factor)), atol=1e-8)
    assert_allclose(pga.inverse_transform(coords), X, atol=1e-8)
    assert_allclose(pga.fit_transform(X), coords, atol=1e-10)


def test_pga_principal_geodesic_in_standard_deviations(constant_space, rng):
    X = rng.normal(size=(20, 3))
    pga = PrincipalGeodesicAnalysis(constant_space, n_components=2).fit(X)
    t = np.array([-2.0, 0.0, 1.5])
    points = pga.principal_geodesic(1, t)
    expected = pga.mean_ + t[:, None] * np.sqrt(pga.explained_variance_[1]) * pga.components_[1]
    assert_allclose(points, expected, atol=1e-8)
    assert_allclose(pga.transform(points)[:, 1], t * np.sqrt(pga.explained_variance_[1]), atol=1e-8)
    with pytest.raises(ValueError, match="index"):
        pga.principal_geodesic(2, t)


def test_pga_on_curved_manifold_round_trips(curved_space, rng):
    X = rng.normal(size=(12, 2))
    pga = PrincipalGeodesicAnalysis(curved_space).fit(X)
    metric = curved_space.metric.metric_matrix(pga.mean_)
    assert_allclose(pga.components_ @ metric @ pga.components_.T, np.eye(2), atol=1e-10)
    coords = pga.transform(X)
    assert_allclose(pga.inverse_transform(coords), X, atol=5e-5)  # Exp(Log(x)) = x, to the solvers' accuracy
    # total variance = mean squared geodesic distance to the mean (times n/(n-1))
    dist2 = curved_space.metric.squared_dist(X, pga.mean_)
    assert_allclose(pga.explained_variance_.sum(), dist2.sum() / 11, rtol=1e-5)


def _projected_variance(space, mean, direction, X):
    """Oracle: sum over X of d(mean, closest point of the geodesic Exp_mean(a direction))^2 / (n - 1), by Brent on a."""
    from scipy.optimize import minimize_scalar

    def squared_dist(a, x):
        return float(space.metric.squared_dist(space.metric.exp(a * direction, mean), x))

    start = (space.metric.log(X, mean) @ space.metric.metric_matrix(mean) @ direction) / (direction @ space.metric.metric_matrix(mean) @ direction)
    scale = np.sqrt(direction @ space.metric.metric_matrix(mean) @ direction)
    best = [minimize_scalar(squared_dist, bracket=(a - 0.1, a + 0.1), args=(x,), options=dict(xtol=1e-10)).x for a, x in zip(start, X)]
    return np.sum((np.array(best) * scale) ** 2) / (len(X) - 1)


def test_exact_pga_differs_from_tangent_pca_on_a_curved_field_and_agrees_on_a_flat_one(curved_space, rng):
    X = rng.normal(size=(10, 2)) * [1.2, 0.4] @ np.array([[0.8, 0.6], [-0.6, 0.8]])
    tangent = PrincipalGeodesicAnalysis(curved_space).fit(X)
    exact = PrincipalGeodesicAnalysis(curved_space, method="exact").fit(X)
    metric = exact.metric_matrix_
    assert_allclose(exact.components_ @ metric @ exact.components_.T, np.eye(2), atol=1e-10)
    assert abs(tangent.components_[0] @ metric @ exact.components_[0]) < 1 - 1e-4  # a different direction
    exact_variance = _projected_variance(curved_space, exact.mean_, exact.components_[0], X)
    assert_allclose(exact.explained_variance_[0], exact_variance, rtol=1e-5)  # projections to tol=1e-5 of d^2 + |a|^2
    # it maximizes the variance of the projections: more than along the tangent-PCA direction
    assert exact_variance > _projected_variance(curved_space, exact.mean_, tangent.components_[0], X) * (1 + 1e-4)
    assert_allclose(exact.transform(X[:3]), exact.fit_transform(X)[:3], atol=1e-6)

    flat_space = LearnedMetricManifold(ConstantField(np.array([[2.0, 0.5], [0.5, 1.0]])))
    flat_tangent = PrincipalGeodesicAnalysis(flat_space).fit(X)
    flat_exact = PrincipalGeodesicAnalysis(flat_space, method="exact").fit(X)
    assert_allclose(flat_exact.components_, flat_tangent.components_, atol=1e-4)
    assert_allclose(flat_exact.explained_variance_, flat_tangent.explained_variance_, rtol=1e-8)
    assert_allclose(flat_exact.transform(X), flat_tangent.transform(X), atol=1e-8)


def test_pga_on_sphere_components_are_tangent(rng):
    sphere, X = _sphere_data(rng)
    pga = PrincipalGeodesicAnalysis(sphere, n_components=2).fit(X)
    assert_allclose(pga.components_ @ pga.mean_, 0.0, atol=1e-8)
    assert_allclose(pga.components_ @ pga.components_.T, np.eye(2), atol=1e-8)
    assert pga.explained_variance_[0] >= pga.explained_variance_[1] > 0


# -- regression --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_covariates", [1, 2])
def test_geodesic_regression_on_constant_metric_is_ols(constant_space, rng, n_covariates):
    t = rng.normal(size=(25, n_covariates))
    Y = 1.0 + t @ rng.normal(size=(n_covariates, 3)) + 0.3 * rng.normal(size=(25, 3))
    w = rng.uniform(0.2, 1.0, size=25)
    reg = GeodesicRegression(constant_space).fit(t[:, 0] if n_covariates == 1 else t, Y, sample_weight=w)
    ols = LinearRegression().fit(t, Y, sample_weight=w)
    assert_allclose(reg.intercept_, ols.intercept_, atol=1e-8)
    assert_allclose(reg.coef_, ols.coef_, atol=1e-8)
    assert_allclose(reg.predict(t), ols.predict(t), atol=1e-8)


def test_geodesic_regression_on_sphere_is_near_optimal(rng):
    sphere = Hypersphere(2)
    t = np.linspace(-1.0, 1.0, 25)
    truth = sphere.metric.exp(t[:, None] * np.array([1.2, 0.3, 0.0]), np.array([0.0, 0.0, 1.0]))
    Y = sphere.projection(truth + 0.05 * rng.normal(size=truth.shape))
    reg = GeodesicRegression(sphere).fit(t, Y)

    def objective(z):
        base = sphere.projection(z[:3])
        return np.mean(sphere.metric.squared_dist(sphere.metric.exp(t[:, None] * sphere.to_tangent(z[3:], base), base), Y))

    fitted = np.r_[reg.intercept_, reg.coef_[:, 0]]
    assert_allclose(objective(fitted), reg.objective_, rtol=1e-8)
    best = minimize(objective, fitted, method="BFGS").fun
    assert objective(fitted) <= best * (1 + 1e-10)  # exact: Jacobians of the closed-form Exp by differences
    with pytest.warns(ConvergenceWarning, match="did not converge"):  # its linearized step stops descending
        flat = GeodesicRegression(sphere, method="flat").fit(t, Y)
    assert best * (1 + 1e-6) < flat.objective_ <= best * (1 + 1e-3)  # within the flat-Exp linearization error
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        init = GeodesicRegression(sphere, max_iter=1).fit(t, Y)
    assert reg.objective_ <= init.objective_
    assert_allclose(np.linalg.norm(reg.predict(t), axis=1), 1.0)


def _rotation(angle):
    return np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


@pytest.fixture(scope="module")
def strongly_curved_regression():
    """Three rotated metrics of condition 30, 50 and 80, rho = 2, and 25 noisy points along one of its geodesics."""
    metrics = np.array([_rotation(a) @ np.diag([c, 1.0]) @ _rotation(a).T for a, c in [(0.3, 30), (1.2, 50), (2.4, 80)]]) / 10
    space = LearnedMetricManifold(SmoothLocalField(np.array([[-1.0, 0.0], [0.5, 0.8], [1.0, -0.7]]), metrics, rho=2.0))
    t = np.linspace(-1.0, 1.0, 25)
    truth = space.metric.exp(t[:, None] * np.array([0.6, 0.5]), np.array([0.0, 0.1]))
    return space, t, truth + 0.05 * np.random.default_rng(0).normal(size=truth.shape)


def test_exact_geodesic_regression_reaches_the_minimum_of_a_strongly_curved_field(strongly_curved_regression):
    space, t, Y = strongly_curved_regression
    exact = GeodesicRegression(space).fit(t, Y)
    with pytest.warns(ConvergenceWarning, match="did not converge"):  # its linearized step stops descending
        flat = GeodesicRegression(space, method="flat").fit(t, Y)

    def objective(z):
        return np.mean(space.metric.squared_dist(space.metric.exp(t[:, None] * z[2:], z[:2]), Y))

    fitted = np.r_[exact.intercept_, exact.coef_[:, 0]]
    assert_allclose(objective(fitted), exact.objective_, rtol=1e-12)
    simplex = fitted + np.vstack([np.zeros(4), 1e-4 * np.eye(4)])
    options = dict(initial_simplex=simplex, xatol=1e-8, fatol=1e-14, maxfev=80)
    best = minimize(objective, fitted, method="Nelder-Mead", options=options).fun
    assert abs(exact.objective_ - best) <= 1e-6 * best
    # the flat-chart approximation stops well above the minimum (5.7% here)
    assert flat.objective_ > 1.03 * exact.objective_


def test_geodesic_regression_recovers_a_geodesic_of_a_curved_manifold(curved_space):
    base, velocity, t = np.array([-0.5, 0.2]), np.array([0.8, 0.3]), np.linspace(-1.0, 1.5, 6)
    Y = curved_space.metric.exp(t[:, None] * velocity, base)
    assert np.abs(LinearRegression().fit(t[:, None], Y).predict(t[:, None]) - Y).max() > 0.05  # not a line
    reg = GeodesicRegression(curved_space).fit(t, Y)
    assert_allclose(reg.intercept_, base, atol=1e-6)
    assert_allclose(reg.coef_[:, 0], velocity, atol=1e-6)
    assert reg.objective_ < 1e-12


def test_tangent_space_regression_on_constant_metric(constant_space, rng):
    X = rng.normal(size=(40, 3)) * [2.0, 1.0, 0.5]
    y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=40)
    full = TangentSpaceRegression(constant_space).fit(X, y)
    assert_allclose(full.predict(X), LinearRegression().fit(X, y).predict(X), atol=1e-8)
    assert full.score(X, y) > 0.95
    factor = np.linalg.cholesky(constant_space.field.metric)
    pcr = PCA(1).fit(X @ factor)
    one = TangentSpaceRegression(constant_space, n_components=1).fit(X, y)
    expected = LinearRegression().fit(pcr.transform(X @ factor), y).predict(pcr.transform(X @ factor))
    assert_allclose(one.predict(X), expected, atol=1e-8)
    ridge = TangentSpaceRegression(constant_space, Ridge(alpha=1.0)).fit(X, y)
    assert isinstance(ridge.estimator_, Ridge)


# -- bad input ---------------------------------------------------------------------------------------


def test_bad_input(constant_space, curved_space, rng):
    X = rng.normal(size=(5, 3))
    with pytest.raises(ValueError, match="3 features"):
        FrechetMean(constant_space).fit(X[:, :2])
    with pytest.raises(ValueError, match="NaN|infinity"):
        FrechetMean(constant_space).fit(np.where(np.eye(5, 3) > 0, np.nan, X))
    with pytest.raises(ValueError, match="method"):
        FrechetMean(constant_space, method="newton").fit(X)
    with pytest.raises(ValueError, match="joint"):
        FrechetMean(Euclidean(3), method="joint").fit(X)
    with pytest.raises(ValueError, match="max_iter"):
        FrechetMean(constant_space, max_iter=0).fit(X)
    with pytest.raises(ValueError, match="sample_weight"):
        FrechetMean(constant_space).fit(X, sample_weight=np.ones(4))
    with pytest.raises(ValueError, match="init"):
        FrechetMean(constant_space, init=np.zeros(2)).fit(X)
    with pytest.raises(TypeError, match="space"):
        FrechetMean(object()).fit(X)
    with pytest.raises(ValueError, match="minimum of 2"):
        PrincipalGeodesicAnalysis(constant_space).fit(X[:1])
    with pytest.raises(ValueError, match="n_components"):
        PrincipalGeodesicAnalysis(constant_space, n_components=4).fit(X)
    with pytest.raises(ValueError, match="rank deficient"):
        GeodesicRegression(constant_space).fit(np.ones(5), X)
    with pytest.raises(ValueError, match="method must be one of"):
        GeodesicRegression(constant_space, method="approximate").fit(np.arange(5.0), X)
    with pytest.raises(ValueError, match="method must be one of"):
        PrincipalGeodesicAnalysis(constant_space, method="sommer").fit(X)
    with pytest.raises(ValueError, match="jacobi_field"):
        PrincipalGeodesicAnalysis(Hypersphere(2), method="exact").fit(Hypersphere(2).projection(X))
    with pytest.raises(ValueError, match="3 columns"):
        GeodesicRegression(constant_space).fit(np.arange(5.0), X[:, :2])
    pga = PrincipalGeodesicAnalysis(curved_space, n_components=1).fit(rng.normal(size=(4, 2)))
    with pytest.raises(ValueError, match="n_components=1"):
        pga.inverse_transform(np.zeros((2, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FrechetMean(constant_space).fit(X)  # converged: no warning


# -- body-shape experiment helpers ---------------------------------------------------------------------


def test_bodyshape_loo_closed_form_and_clusters(rng):
    from riemlocal.experiments.bodyshape import equal_size_clusters, loo_absolute_errors

    X, y = rng.normal(size=(15, 3)), rng.normal(size=15)
    brute = [
        abs(y[i] - LinearRegression().fit(np.delete(X, i, 0), np.delete(y, i)).predict(X[i : i + 1])[0]) for i in range(15)
    ]
    assert_allclose(loo_absolute_errors(X, y), brute, rtol=1e-10)
    labels = equal_size_clusters(np.array([5.0, 1.0, 3.0, 2.0, 4.0, 0.0]), 3)
    assert_allclose(labels, [2, 0, 1, 1, 2, 0])


def test_frechet_mean_joint_is_certified_or_warns(curved_space, rng):
    X = rng.normal(size=(8, 2)) * [1.5, 1.0]
    mean = FrechetMean(curved_space).fit(X)
    assert mean.error_estimate_ <= 1e-5  # the default rtol, met by refining the curves if needed
    with pytest.warns(ConvergenceWarning, match="estimated relative error"):
        capped = FrechetMean(curved_space, method="joint", rtol=1e-12, max_segments=16).fit(X)
    # levels 4, 8, 16 only: the estimate bounds the actual error, measured against the certified mean
    difference = capped.estimate_ - mean.estimate_
    rms = np.sqrt(np.mean(curved_space.metric.squared_dist(X, mean.estimate_)))
    error = np.sqrt(difference @ curved_space.metric.metric_matrix(mean.estimate_) @ difference) / rms
    assert 1e-6 < error <= capped.error_estimate_
