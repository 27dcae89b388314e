"""LearnedMetricManifold: closed forms, invariants, the corrected geodesic equation, geomstats agreement."""

import warnings

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp
from sklearn.exceptions import ConvergenceWarning

from helpers import random_field_3d
from riemlocal import ConstantField, LearnedMetricManifold, MetricField, NearestLocalField, SmoothLocalField, connection
from riemlocal.geodesics import curve_energy, laplacian_inverse_sqrt, solve_boundary_value
from riemlocal.numerics import EnergyLogSolver, ODEExpSolver


class HalfSpace(MetricField):
    """Poincaré half-space, M = I / x_D^2 (only ``metric_matrix``: derivatives by autodiff)."""

    def metric_matrix(self, base_point):
        return anp.eye(self.dim) / base_point[..., -1:, None] ** 2


class Ball(MetricField):
    """Poincaré ball, M = 4 I / (1 - |x|^2)^2."""

    def metric_matrix(self, base_point):
        factor = 4.0 / (1.0 - anp.sum(base_point**2, axis=-1)) ** 2
        return factor[..., None, None] * anp.eye(self.dim)


class StereographicSphere(MetricField):
    """Unit sphere in stereographic coordinates, M = 4 I / (1 + |x|^2)^2."""

    def metric_matrix(self, base_point):
        factor = 4.0 / (1.0 + anp.sum(base_point**2, axis=-1)) ** 2
        return factor[..., None, None] * anp.eye(self.dim)


class Exponential1D(MetricField):
    """1-D metric M(x) = exp(2x): distance |e^y - e^x|."""

    def metric_matrix(self, base_point):
        return anp.exp(2.0 * base_point)[..., None]


def half_space_dist(x, y):
    return np.arccosh(1 + np.sum((x - y) ** 2, -1) / (2 * x[..., -1] * y[..., -1]))


def ball_dist(x, y):
    nx, ny = np.sum(x**2, -1), np.sum(y**2, -1)
    return np.arccosh(1 + 2 * np.sum((x - y) ** 2, -1) / ((1 - nx) * (1 - ny)))


def sphere_dist(x, y):
    nx, ny = np.sum(x**2, -1), np.sum(y**2, -1)
    return 2 * np.arcsin(np.sqrt(np.sum((x - y) ** 2, -1) / ((1 + nx) * (1 + ny))))


@pytest.fixture(scope="module")
def two_metric_space():
    """Hauberg et al.'s 2-D example: M1 = 2I at (2, 2), M2 = I at (4, 4)."""
    field = SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2 * np.eye(2), np.eye(2)], rho=1.0)
    return LearnedMetricManifold(field)


@pytest.fixture(scope="module")
def random_space():
    return LearnedMetricManifold(random_field_3d())


def test_constant_metric_is_mahalanobis():
    metric = np.array([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]])
    space = LearnedMetricManifold(ConstantField(metric))
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(2, 5, 3))
    np.testing.assert_allclose(space.metric.log(y, x), y - x, atol=1e-10)
    np.testing.assert_allclose(space.metric.dist(x, y), np.sqrt(np.einsum("ni,ij,nj->n", y - x, metric, y - x)), rtol=1e-10)
    np.testing.assert_allclose(space.metric.exp(y - x, x), y, atol=1e-10)


def test_one_dimensional_closed_form():
    space = LearnedMetricManifold(Exponential1D(1))
    x, y = np.array([[-1.0], [0.5], [0.0]]), np.array([[1.0], [-0.5], [0.3]])
    np.testing.assert_allclose(space.metric.dist(x, y), np.abs(np.exp(y) - np.exp(x))[:, 0], rtol=1e-6)
    # 1-D geodesic: e^c = e^x + t (e^y - e^x), so c'(0) = (e^y - e^x) / e^x
    np.testing.assert_allclose(space.metric.log(y, x), (np.exp(y) - np.exp(x)) / np.exp(x), rtol=1e-5)


@pytest.mark.parametrize(
    "field, points, closed_form",
    [
        (HalfSpace(2), ([[0.0, 1.0], [-1.0, 0.5]], [[2.0, 3.0], [1.5, 2.0]]), half_space_dist),
        (HalfSpace(3), ([[0.0, 0.3, 1.0]], [[1.0, -0.5, 2.0]]), half_space_dist),
        (Ball(2), ([[0.1, 0.2], [-0.5, 0.1]], [[-0.4, 0.5], [0.6, -0.2]]), ball_dist),
        (Ball(3), ([[0.1, 0.2, -0.3]], [[-0.4, 0.3, 0.2]]), ball_dist),
        (StereographicSphere(2), ([[0.3, -0.2], [1.0, 0.5]], [[-0.5, 1.2], [-0.3, 0.4]]), sphere_dist),
    ],
)
@pytest.mark.parametrize("method", ["newton", "lbfgs"])
def test_closed_form_distances(field, points, closed_form, method):
    x, y = (np.array(p) for p in points)
    space = LearnedMetricManifold(field, method=method)
    expected = closed_form(x, y)
    np.testing.assert_allclose(space.metric.dist(x, y), expected, rtol=1e-6)
    v = space.metric.log(y, x)
    np.testing.assert_allclose(space.metric.norm(v, x), expected, rtol=1e-5)
    np.testing.assert_allclose(space.metric.exp(v, x), y, atol=1e-4)
    precise = LearnedMetricManifold(field, n_segments=32, tol=1e-10, rtol=1e-10, method=method)
    np.testing.assert_allclose(precise.metric.exp(precise.metric.log(y, x), x), y, atol=1e-7)


def test_half_plane_christoffels():
    space = LearnedMetricManifold(HalfSpace(2))
    gamma = space.metric.christoffels(np.array([0.3, 2.0]))
    expected = np.zeros((2, 2, 2))  # Gamma^x_xy = Gamma^x_yx = -1/y, Gamma^y_xx = 1/y, Gamma^y_yy = -1/y
    expected[0, 0, 1] = expected[0, 1, 0] = -0.5
    expected[1, 0, 0], expected[1, 1, 1] = 0.5, -0.5
    np.testing.assert_allclose(gamma, expected, atol=1e-12)


def test_christoffels_match_autodiff(random_space):
    field = random_space.field
    x = np.array([0.2, -0.4, 0.7])

    def metric(point):
        diff = point - field.centers
        logits = -0.5 * field.rho * anp.einsum("ri,rij,rj->r", diff, field.metrics, diff)
        weights = anp.exp(logits - anp.max(logits))
        return anp.einsum("r,rij->ij", weights / anp.sum(weights), field.metrics)

    derivative = autograd.jacobian(metric)(x)
    inverse = np.linalg.inv(metric(x))
    expected = 0.5 * (
        np.einsum("kl,lji->kij", inverse, derivative)
        + np.einsum("kl,lij->kij", inverse, derivative)
        - np.einsum("kl,ijl->kij", inverse, derivative)
    )
    np.testing.assert_allclose(random_space.metric.christoffels(x), expected, atol=1e-12)
    v = np.array([0.3, 1.0, -0.5])
    np.testing.assert_allclose(field.geodesic_acceleration(v, x), -np.einsum("kij,i,j->k", expected, v, v), atol=1e-12)


def printed_equation_acceleration(field, x, v):
    """Hauberg et al. eq. (8) as printed: M c'' = -1/2 [d vec M / dc]^T (c' (x) c')."""
    rhs = -0.5 * np.einsum("ijk,i,j->k", field.metric_derivative(x), v, v)
    return np.linalg.solve(field.metric_matrix(x), rhs)


def shoot(acceleration, x, v):
    sol = solve_ivp(lambda _, s: np.concatenate([s[2:], acceleration(s[:2], s[2:])]), (0, 1), np.r_[x, v], rtol=1e-10, atol=1e-12)
    return sol.y[:2, -1]


def test_printed_equation_8_is_wrong_in_2d_and_ours_is_right(two_metric_space):
    field = two_metric_space.metric.field
    x, y = np.array([1.0, 3.0]), np.array([5.0, 3.0])
    v = two_metric_space.metric.log(y, x)
    ours = shoot(lambda p, u: field.geodesic_acceleration(u, p), x, v)
    printed = shoot(lambda p, u: printed_equation_acceleration(field, p, u), x, v)
    assert np.linalg.norm(ours - y) < 1e-4
    assert np.linalg.norm(printed - y) > 0.1  # misses the endpoint by a wide margin


def test_exp_has_constant_speed(random_space):
    x, v = np.array([0.1, 0.2, -0.3]), np.array([1.5, -1.0, 0.8])
    t = np.linspace(0.1, 1.0, 10)
    h = 1e-4
    path = random_space.metric.geodesic(x, initial_tangent_vec=v)
    velocity = (path(t + h) - path(t - h)) / (2 * h)
    speed = random_space.metric.norm(velocity, path(t))
    # the dense output at the default rtol=1e-6 keeps the speed to ~1e-6; a wrong factor on either term makes it drift
    np.testing.assert_allclose(speed, random_space.metric.norm(v, x), rtol=1e-5)


def straight_line_length(field, x, y):
    nodes, weights = np.polynomial.legendre.leggauss(64)
    t = 0.5 * (nodes + 1)
    step = y - x
    speeds = np.sqrt(np.einsum("i,nij,j->n", step, field.metric_matrix(x + t[:, None] * step), step))
    return 0.5 * weights @ speeds


point3 = st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3).map(np.array)


@pytest.fixture(scope="module")
def precise_space(random_space):
    # Log vectors certified to 1e-7 of the distance: Exp of a Log vector off by that misses its end point by
    # that times the spreading of nearby geodesics (6x on one pair 12.7 apart; log_rtol = 1e-4 let it miss by 3e-4)
    return LearnedMetricManifold(random_space.field, n_segments=32, tol=1e-9, log_rtol=1e-7)


@settings(max_examples=30, deadline=None, derandomize=True)  # the same examples on every run and machine
@given(point3, point3, point3)
def test_metric_axioms_and_log_exp_inverse(precise_space, x, y, z):
    metric = precise_space.metric
    d_xy, d_yx = metric.dist(x, y), metric.dist(y, x)
    np.testing.assert_allclose(d_xy, d_yx, rtol=1e-6, atol=1e-9)
    assert metric.dist(x, z) <= d_xy + metric.dist(y, z) + 1e-7
    assert d_xy <= straight_line_length(precise_space.field, x, y) + 1e-8
    v = metric.log(y, x)
    np.testing.assert_allclose(metric.norm(v, x), d_xy, rtol=2e-5, atol=1e-8)
    np.testing.assert_allclose(metric.exp(v, x), y, atol=2e-5 * (1 + d_xy))


def test_geodesic_is_shorter_than_perturbed_curves(two_metric_space):
    metric = two_metric_space.metric
    x, y = np.array([1.0, 3.0]), np.array([5.0, 3.0])
    t = np.linspace(0, 1, 401)
    curve = metric.geodesic(x, end_point=y)(t)

    def length(c):
        steps = np.diff(c, axis=0)
        mid = 0.5 * (c[1:] + c[:-1])
        return np.sum(np.sqrt(np.einsum("ni,nij,nj->n", steps, metric.metric_matrix(mid), steps)))

    geodesic_length = length(curve)
    np.testing.assert_allclose(geodesic_length, metric.dist(x, y), rtol=1e-4)
    bump = np.sin(np.pi * t)[:, None]
    for direction in ([0.0, 0.2], [0.0, -0.2], [0.2, 0.1]):
        assert length(curve + bump * np.array(direction)) > geodesic_length


def test_batches_broadcast_and_parallel_equal_sequential(two_metric_space):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0, 6, size=(2, 3, 2)), rng.uniform(0, 6, size=(2,))
    dist = two_metric_space.metric.dist(x, y)
    assert dist.shape == (2, 3)
    assert two_metric_space.metric.log(y, x).shape == (2, 3, 2)
    np.testing.assert_allclose(dist[1, 2], two_metric_space.metric.dist(x[1, 2], y), rtol=1e-10)
    parallel = LearnedMetricManifold(two_metric_space.field, n_jobs=2, chunk_size=2)
    np.testing.assert_allclose(parallel.metric.dist(x, y), dist, rtol=1e-6)


def test_agrees_with_geomstats_solvers(two_metric_space):
    """geomstats' own ODE solvers, with Christoffel symbols from autodiff, on the same metric."""
    from geomstats.geometry.euclidean import Euclidean
    from geomstats.geometry.riemannian_metric import RiemannianMetric
    from geomstats.numerics.geodesic import ExpODESolver, LogODESolver
    from geomstats.numerics.ivp import ScipySolveIVP

    field = two_metric_space.field

    def metric(point):
        diff = point - field.centers
        logits = -0.5 * field.rho * anp.einsum("ri,rij,rj->r", diff, field.metrics, diff)
        weights = anp.exp(logits - anp.max(logits))
        return anp.einsum("r,rij->ij", weights / anp.sum(weights), field.metrics)

    jacobian = autograd.jacobian(metric)

    class GeomstatsMetric(RiemannianMetric):
        def metric_matrix(self, base_point=None):
            return np.array([metric(p) for p in np.atleast_2d(base_point)]).reshape(np.shape(base_point) + (2,))

        def inner_product_derivative_matrix(self, base_point=None):
            return np.array([jacobian(p) for p in np.atleast_2d(base_point)]).reshape(np.shape(base_point) + (2, 2))

    space = Euclidean(2, equip=False)
    space.equip_with_metric(GeomstatsMetric)
    space.metric.exp_solver = ExpODESolver(space, integrator=ScipySolveIVP(rtol=1e-10, atol=1e-12))
    space.metric.log_solver = LogODESolver(space, n_nodes=100, use_jac=False)
    x, y = np.array([1.0, 3.0]), np.array([5.0, 3.0])
    ours = two_metric_space.metric
    np.testing.assert_allclose(ours.log(y, x), space.metric.log(y, x), rtol=2e-3)
    v, theirs = np.array([1.0, -2.0]), space.metric.exp(np.array([1.0, -2.0]), x)
    np.testing.assert_allclose(ours.exp(v, x), theirs, rtol=1e-6)  # the default rtol
    np.testing.assert_allclose(LearnedMetricManifold(field, rtol=1e-9).metric.exp(v, x), theirs, rtol=1e-9)


def test_transport_and_jacobi_fields_are_integrated_by_the_exp_solver(two_metric_space):
    """A replaced ``exp_solver`` (here counting, at a tighter rtol than the space's) is the integrator they use."""
    field = two_metric_space.field

    class Counting(ODEExpSolver):
        calls = 0

        def integrate_with(self, *args):
            Counting.calls += 1
            return super().integrate_with(*args)

    space = LearnedMetricManifold(field)  # rtol=1e-6
    space.metric.exp_solver = Counting(field, rtol=1e-11)
    v, x, w = np.array([1.5, 1.0]), np.array([1.0, 3.0]), np.array([-0.5, 1.0])
    precise = ODEExpSolver(field, rtol=1e-11)
    np.testing.assert_array_equal(space.metric.parallel_transport(w, x, direction=v), connection.parallel_transport(field, w, x, v, precise))
    jacobi = space.metric.jacobi_field(v, x, np.zeros(2), w)
    np.testing.assert_array_equal(jacobi, connection.jacobi_field(field, v, x, np.zeros(2), w, exp_solver=precise))
    np.testing.assert_array_equal(space.metric.exp_differential(v, x), connection.exp_differential(field, v, x, precise))
    assert Counting.calls == 3
    loose = LearnedMetricManifold(field).metric.jacobi_field(v, x, np.zeros(2), w)  # the space's own solver, rtol=1e-6
    assert 1e-10 < np.abs(loose - jacobi).max() < 1e-4


def test_non_convergence_warns_with_residual(random_space):
    impatient = LearnedMetricManifold(random_space.field, max_iter=1, tol=1e-12)
    with pytest.warns(ConvergenceWarning, match="gradient norm"):
        impatient.metric.dist(np.array([-2.0, 0.0, 1.0]), np.array([2.0, 1.0, -1.0]))


def test_converged_solves_do_not_warn(random_space):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        random_space.metric.log(np.array([2.0, 1.0, -1.0]), np.array([-2.0, 0.0, 1.0]))


def test_log_of_the_base_point_is_zero_without_warning(two_metric_space):
    x = np.array([[1.0, 3.0], [2.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        np.testing.assert_array_equal(two_metric_space.metric.log(x, x), 0.0)
        np.testing.assert_array_equal(two_metric_space.metric.dist(x, x), 0.0)


def test_results_do_not_depend_on_how_a_batch_is_split(two_metric_space):
    rng = np.random.default_rng(4)
    x, y = rng.uniform(0, 6, size=(2, 6, 2))
    y[0] = x[0] + 1e-3  # a short geodesic next to long ones
    one_by_one = LearnedMetricManifold(two_metric_space.field, chunk_size=1).metric.log(y, x)
    together = LearnedMetricManifold(two_metric_space.field, chunk_size=6).metric.log(y, x)
    np.testing.assert_allclose(together, one_by_one, rtol=1e-6, atol=1e-12)


def test_geodesic_accepts_unsorted_and_repeated_times(two_metric_space):
    path = two_metric_space.metric.geodesic(np.array([1.0, 3.0]), end_point=np.array([5.0, 3.0]))
    t = np.array([0.5, 0.0, 1.0, 0.5])
    points = path(t)
    np.testing.assert_array_equal(points[0], points[3])
    np.testing.assert_allclose(points[[1, 2]], [[1.0, 3.0], [5.0, 3.0]], atol=1e-4)


def test_bad_input(two_metric_space):
    with pytest.raises(ValueError, match="smooth"):
        LearnedMetricManifold(NearestLocalField(np.zeros((1, 2)), np.eye(2)[None]))
    with pytest.raises(TypeError, match="field"):
        LearnedMetricManifold(np.eye(2))
    with pytest.raises(ValueError, match="point_b"):
        two_metric_space.metric.dist(np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="point_a"):
        two_metric_space.metric.dist(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="base_point"):
        two_metric_space.metric.log(np.zeros(2), np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match="n_segments"):
        LearnedMetricManifold(two_metric_space.field, n_segments=1)
    with pytest.raises(ValueError, match="tol"):
        LearnedMetricManifold(two_metric_space.field, tol=0)
    with pytest.raises(ValueError, match="at least one point"):
        two_metric_space.metric.log(np.zeros((0, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="exactly one"):
        two_metric_space.metric.geodesic(np.zeros(2))
    with pytest.raises(ValueError, match="method"):
        LearnedMetricManifold(two_metric_space.field, method="bfgs")
    with pytest.raises(ValueError, match="method"):
        solve_boundary_value(two_metric_space.field, np.ones((1, 2)), np.zeros((1, 2)), method="newtons")


@pytest.mark.parametrize("method", ["newton", "lbfgs"])
def test_log_converges_at_sixth_order_under_tight_tolerances(random_space, method):
    """Three levels N, 2N, 4N, Romberg extrapolated: doubling N divides the Log error by ~64, down to ~1e-10."""
    x, y = np.array([-2.0, 0.0, 1.0]), np.array([2.0, 1.0, -1.0])

    def log(n_segments):
        solver = EnergyLogSolver(random_space.field, n_segments, 1.0, 1.0, 4 * n_segments, tol=1e-11, max_iter=20000, method=method)
        return solver.log(y, x)

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        reference = log(128)
        errors = [np.linalg.norm(log(n) - reference) / np.linalg.norm(reference) for n in (8, 16, 32)]
    assert errors[0] < 2e-5
    assert errors[0] / errors[1] > 25 and errors[1] / errors[2] > 25  # fourth order would give 16
    assert errors[2] < 5e-10


@pytest.mark.parametrize("n_segments", [2, 3, 16, 33, 2048])
def test_laplacian_inverse_sqrt_squares_to_the_inverse_laplacian(n_segments):
    root, square_root = laplacian_inverse_sqrt(n_segments), laplacian_inverse_sqrt(n_segments, inverse=True)
    laplacian = 2 * np.eye(n_segments - 1) - np.eye(n_segments - 1, k=1) - np.eye(n_segments - 1, k=-1)
    np.testing.assert_allclose(root, root.T, atol=1e-14)
    assert np.all(np.linalg.eigvalsh(root) > 0)
    np.testing.assert_allclose(square_root @ square_root, laplacian, atol=1e-13)  # the dense product S Lambda S: 7e-13 at 2048
    np.testing.assert_allclose(root @ square_root, np.eye(n_segments - 1), atol=1e-12)
    np.testing.assert_allclose(root @ root @ laplacian, np.eye(n_segments - 1), atol=1e-10 * n_segments)


@pytest.mark.parametrize(
    "field, curves",
    [
        (SmoothLocalField([[0.0, 0.0, 0.0], [1.0, -1.0, 0.5]], [2 * np.eye(3), np.diag([1.0, 3.0, 0.5])], rho=0.7), None),
        (HalfSpace(2), np.array([[[0.0, 1.0], [0.4, 1.6], [1.1, 2.0], [1.5, 1.9], [2.0, 1.5], [2.2, 1.0]]])),
    ],
)
def test_curve_energy_hessian_matches_differences_of_the_gradient(field, curves):
    if curves is None:
        curves = np.random.default_rng(5).normal(size=(2, 6, 3))
    energy, gradient, diagonal, upper = curve_energy(field, curves, hessian=True)
    np.testing.assert_allclose(energy, curve_energy(field, curves)[0], rtol=1e-14)
    batch, n_nodes, dim = curves.shape
    n = (n_nodes - 2) * dim
    dense = np.zeros((batch, n_nodes - 2, dim, n_nodes - 2, dim))
    for k in range(n_nodes - 2):
        dense[:, k, :, k] = diagonal[:, k]
        if k < n_nodes - 3:
            dense[:, k, :, k + 1] = upper[:, k]
            dense[:, k + 1, :, k] = np.swapaxes(upper[:, k], -1, -2)
    dense = dense.reshape(batch, n, n)
    h = 1e-6
    for j in range(n):
        step = np.zeros_like(curves)
        step[:, 1 + j // dim, j % dim] = h
        column = (curve_energy(field, curves + step)[1] - curve_energy(field, curves - step)[1])[:, 1:-1] / (2 * h)
        np.testing.assert_allclose(dense[:, :, j], column.reshape(batch, n), rtol=1e-5, atol=1e-5 * np.abs(dense).max())


def test_constant_metric_energy_hessian_is_the_weighted_laplacian():
    metric = np.array([[2.0, 0.3], [0.3, 1.0]])
    curves = np.random.default_rng(6).normal(size=(1, 5, 2))
    _, _, diagonal, upper = curve_energy(ConstantField(metric), curves, hessian=True)
    np.testing.assert_allclose(diagonal, np.broadcast_to(2 * 4 * 2 * metric, (1, 3, 2, 2)), rtol=1e-14)  # 2N * 2 M
    np.testing.assert_allclose(upper, np.broadcast_to(-2 * 4 * metric, (1, 2, 2, 2)), rtol=1e-14)  # 2N * (-1) M


def test_newton_and_lbfgs_find_the_same_geodesics(random_space):
    rng = np.random.default_rng(7)
    x, y = 1.5 * rng.normal(size=(2, 6, 3))
    newton = solve_boundary_value(random_space.field, y, x, tol=1e-10, method="newton")
    lbfgs = solve_boundary_value(random_space.field, y, x, tol=1e-10, method="lbfgs")
    np.testing.assert_allclose(newton.length, lbfgs.length, rtol=1e-12)
    np.testing.assert_allclose(newton.initial_velocity, lbfgs.initial_velocity, rtol=1e-7, atol=1e-9)
    assert newton.converged.all() and lbfgs.converged.all()
    assert newton.n_iter_all_levels <= 30 < 2 * newton.n_iter_all_levels < lbfgs.n_iter_all_levels  # quadratic against superlinear convergence, over 3 levels


def test_newton_goes_around_a_hill_where_the_hessian_is_indefinite(monkeypatch):
    """Straight lines across a costly center are near saddles: damped Newton steps still find the L-BFGS geodesic."""
    from riemlocal.numerics import _minimize

    centers = np.array([[0.0, 0.0], [3.0, 3.0], [-3.0, 3.0], [3.0, -3.0], [-3.0, -3.0]])
    field = SmoothLocalField(centers, np.array([30 * np.eye(2)] + [0.2 * np.eye(2)] * 4), rho=1.0)
    x, y = np.array([[-2.0, 0.05], [-2.5, 0.3]]), np.array([[2.0, -0.02], [2.5, 0.1]])
    indefinite = []
    solve = _minimize._solve_band_spd

    def recording(band, rhs):
        solution, failed = solve(band, rhs)
        indefinite.append(failed.any())
        return solution, failed

    monkeypatch.setattr(_minimize, "_solve_band_spd", recording)
    newton = solve_boundary_value(field, y, x, method="newton", compiled=False)
    assert any(indefinite)
    compiled = solve_boundary_value(field, y, x, method="newton")  # the same damped steps in compiled code
    np.testing.assert_allclose(compiled.initial_velocity, newton.initial_velocity, rtol=1e-12)
    np.testing.assert_array_equal(compiled.n_segments, newton.n_segments)
    assert compiled.n_iter_all_levels == newton.n_iter_all_levels
    lbfgs = solve_boundary_value(field, y, x, method="lbfgs")
    assert newton.converged.all()
    np.testing.assert_allclose(newton.length, lbfgs.length, rtol=1e-7)
    for a, b in zip(newton.curves, lbfgs.curves):
        np.testing.assert_allclose(a, b, atol=1e-5)
        assert a[len(a) // 2, 1] > 0.5  # around the hill, not through it
    assert np.all(newton.length < np.linalg.norm(y - x, axis=1) * np.sqrt(field.metric_matrix(np.zeros(2))[0, 0]))
