"""The Levi-Civita connection: second derivatives, curvature, parallel transport, Jacobi fields."""

import sys
from pathlib import Path

import autograd.numpy as anp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from riemlocal import connection
from riemlocal.fields import ConstantField, MetricField, RBFLocalField, SmoothLocalField
from riemlocal.geodesics import integrate_geodesic
from riemlocal.numerics import INTEGRATION_RTOL, ODEExpSolver


class ConformalField(MetricField):
    r"""User field :math:`M(x) = \lambda(x)^2 I` written with ``autograd.numpy`` (derivatives by autodiff)."""

    def __init__(self, dim, factor):
        super().__init__(dim)
        self.factor = factor

    def metric_matrix(self, base_point):
        scale = self.factor(base_point) ** 2
        return scale[..., None, None] * anp.eye(self.dim)


def sphere(dim):
    """Stereographic unit sphere: :math:`M = 4 I / (1 + |x|^2)^2`, K = +1."""
    return ConformalField(dim, lambda x: 2.0 / (1.0 + anp.sum(x**2, axis=-1)))


def ball(dim):
    """Poincaré ball: :math:`M = 4 I / (1 - |x|^2)^2`, K = -1."""
    return ConformalField(dim, lambda x: 2.0 / (1.0 - anp.sum(x**2, axis=-1)))


def half_space(dim):
    """Poincaré half-space: :math:`M = I / x_D^2`, K = -1."""
    return ConformalField(dim, lambda x: 1.0 / x[..., -1])


def _random_smooth(rng, dim=3, n_centers=4, proximity=False):
    factors = rng.normal(size=(n_centers, dim, dim))
    metrics = factors @ factors.transpose(0, 2, 1) + 0.5 * np.eye(dim)
    centers = rng.uniform(-1.0, 1.0, size=(n_centers, dim))
    if proximity:
        return RBFLocalField(centers, metrics, sigma=1.5, proximity=metrics[0])
    return SmoothLocalField(centers, metrics, rho=0.8)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# -- second derivatives -------------------------------------------------------------------------
@pytest.mark.parametrize("proximity", [False, True])
def test_second_derivative_is_the_difference_of_the_analytic_first(rng, proximity):
    field = _random_smooth(rng, proximity=proximity)
    x = rng.normal(size=(2, 5, 3))
    second = field.metric_second_derivative(x)
    assert second.shape == (2, 5, 3, 3, 3, 3)
    h = 1e-5
    columns = [(field.metric_derivative(x + e) - field.metric_derivative(x - e)) / (2 * h) for e in h * np.eye(3)]
    assert_allclose(second, np.stack(columns, axis=-1), atol=1e-7 * np.abs(second).max())
    assert_allclose(second, np.swapaxes(second, -1, -2), atol=1e-12)  # symmetric in (k, l)
    assert_allclose(second, np.swapaxes(second, -3, -4), atol=1e-12)  # and in (i, j)


def test_second_derivative_of_a_user_field_by_autodiff_and_differences(rng):
    field = sphere(3)
    x = rng.normal(size=(4, 3))
    r2 = np.sum(x**2, axis=-1)
    # d^2/dx_k dx_l of 4 / (1 + r^2)^2 = -16 delta_kl / (1 + r^2)^3 + 96 x_k x_l / (1 + r^2)^4
    expected = -16 * np.eye(3) / (1 + r2[:, None, None]) ** 3 + 96 * np.einsum("nk,nl->nkl", x, x) / (1 + r2[:, None, None]) ** 4
    assert_allclose(field.metric_second_derivative(x), np.einsum("ij,nkl->nijkl", np.eye(3), expected), atol=1e-8)
    assert_allclose(ConstantField(np.eye(2) * 3).metric_second_derivative(x[:, :2]), 0.0)


@pytest.mark.parametrize("proximity", [False, True])
def test_fused_acceleration_derivative_matches_the_tensor_form_and_differences(rng, proximity):
    field = _random_smooth(rng, proximity=proximity)
    x, v, dx, dv = rng.normal(size=(4, 6, 3))
    fused = field.acceleration_derivative(v, x, dx, dv)
    assert_allclose(fused, MetricField.acceleration_derivative(field, v, x, dx, dv), atol=1e-10)
    h = 1e-5
    forward = field.geodesic_acceleration(v + h * dv, x + h * dx)
    differences = (forward - field.geodesic_acceleration(v - h * dv, x - h * dx)) / (2 * h)
    assert_allclose(fused, differences, atol=1e-8)
    # the velocity part is -2 Gamma(v, dv)
    gamma = connection.christoffels(field, x)
    assert_allclose(field.acceleration_derivative(v, x, 0 * dx, dv), -2 * np.einsum("nkij,ni,nj->nk", gamma, v, dv), atol=1e-10)


# -- curvature ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, point, expected",
    [
        (sphere, [0.3, -0.7], 1.0),
        (sphere, [1.5, 0.4], 1.0),
        (ball, [0.3, -0.4], -1.0),
        (half_space, [0.3, 0.8], -1.0),
        (half_space, [-2.0, 3.0], -1.0),
    ],
)
def test_sectional_curvature_closed_forms(make, point, expected):
    field = make(2)
    a, b = np.array([[1.0, 0.2], [0.3, -1.0]]), np.array([[0.1, 1.0], [2.0, 0.5]])
    assert_allclose(connection.sectional_curvature(field, a, b, np.array(point)), expected, atol=1e-6)


@pytest.mark.parametrize("make, expected", [(sphere, 1.0), (ball, -1.0)])
def test_constant_curvature_in_three_dimensions(rng, make, expected):
    field = make(3)
    x = 0.4 * rng.uniform(-1, 1, size=(4, 3))
    a, b = rng.normal(size=(2, 4, 3))
    assert_allclose(connection.sectional_curvature(field, a, b, x), expected, atol=1e-6)
    # constant curvature K: R(a, b)c = K (<b, c> a - <a, c> b), Ric = 2K M, S = 6K
    c = rng.normal(size=(4, 3))
    metric = field.metric_matrix(x)
    inner = lambda u, w: np.einsum("ni,nij,nj->n", u, metric, w)  # noqa: E731
    expected_curvature = expected * (inner(b, c)[:, None] * a - inner(a, c)[:, None] * b)
    assert_allclose(connection.curvature(field, a, b, c, x), expected_curvature, atol=1e-6 * np.abs(expected_curvature).max())
    assert_allclose(connection.ricci_tensor(field, x), 2 * expected * metric, atol=1e-6 * np.abs(metric).max())
    assert_allclose(connection.scalar_curvature(field, x), 6 * expected, atol=1e-6)


def test_constant_metric_is_flat(rng):
    field = ConstantField(np.array([[2.0, 0.5], [0.5, 1.0]]))
    x = rng.normal(size=(3, 2))
    assert_allclose(connection.riemann_tensor(field, x), 0.0)
    assert_allclose(connection.scalar_curvature(field, x), 0.0)


@pytest.mark.parametrize("proximity", [False, True])
def test_riemann_symmetries_and_bianchi_on_a_smooth_local_field(rng, proximity):
    field = _random_smooth(rng, dim=3, proximity=proximity)
    x = rng.normal(size=(5, 3))
    riemann = connection.riemann_tensor(field, x)
    covariant = np.einsum("...im,...jklm->...ijkl", field.metric_matrix(x), riemann)  # geomstats' R_ijkl
    scale = np.abs(covariant).max()
    assert scale > 1e-2  # genuinely curved
    assert_allclose(covariant, -np.swapaxes(covariant, -1, -2), atol=1e-9 * scale)
    assert_allclose(covariant, -np.swapaxes(covariant, -3, -4), atol=1e-9 * scale)
    assert_allclose(covariant, np.einsum("...ijkl->...klij", covariant), atol=1e-9 * scale)
    bianchi = covariant + np.einsum("...ijkl->...iklj", covariant) + np.einsum("...ijkl->...iljk", covariant)
    assert_allclose(bianchi, 0.0, atol=1e-9 * scale)
    # the analytic second derivatives agree with differences of the first through the whole pipeline
    generic = MetricField.metric_second_derivative(field, x)
    assert_allclose(field.metric_second_derivative(x), generic, atol=1e-6 * np.abs(generic).max())


def test_christoffel_product_is_the_bilinear_form(rng):
    field = _random_smooth(rng)
    x, a, b = rng.normal(size=(3, 4, 3))
    gamma = connection.christoffels(field, x)
    assert_allclose(connection.christoffel_product(field, a, 1e-6 * b, x), np.einsum("nkij,ni,nj->nk", gamma, a, 1e-6 * b), atol=1e-17)
    assert_allclose(connection.christoffel_product(field, a, 0 * b, x), 0.0)
    h = 1e-5
    differences = np.stack([(connection.christoffels(field, x + e) - connection.christoffels(field, x - e)) / (2 * h) for e in h * np.eye(3)], -1)
    assert_allclose(connection.christoffel_derivative(field, x), differences, atol=1e-7 * np.abs(differences).max())


# -- parallel transport -------------------------------------------------------------------------
def test_parallel_transport_is_an_isometry_on_a_curved_field(rng):
    field = _random_smooth(rng)
    x, d = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    u, w = rng.normal(size=(2, 4, 3))
    pu, pw = connection.parallel_transport(field, u, x, d), connection.parallel_transport(field, w, x, d)
    end = integrate_geodesic(field, d, x, (1.0,), 1e-12, 1e-14)[:, 0]
    inner = lambda a, b, p: np.einsum("ni,nij,nj->n", a, field.metric_matrix(p), b)  # noqa: E731
    assert_allclose(inner(pu, pw, end), inner(u, w, x), atol=1e-8)
    assert_allclose(inner(pu, pu, end), inner(u, u, x), atol=1e-8)
    assert np.abs(pu - u).max() > 1e-2  # not the identity
    # the velocity is transported to the velocity
    velocity = connection.parallel_transport(field, d, x, d)
    h = 1e-5
    ends = integrate_geodesic(field, d, x, (1.0 - h, 1.0 + h), 1e-12, 1e-14)
    assert_allclose(velocity, (ends[:, 1] - ends[:, 0]) / (2 * h), atol=1e-6)


def test_parallel_transport_is_the_identity_for_a_constant_metric(rng):
    field = ConstantField(np.array([[2.0, 0.5], [0.5, 1.0]]))
    u, x, d = rng.normal(size=(3, 5, 2))
    assert_allclose(connection.parallel_transport(field, u, x, d), u, atol=1e-12)


def _sphere_point(p):
    """Stereographic coordinates of a unit vector of R^3 (projection from the south pole)."""
    return p[..., :2] / (1.0 + p[..., 2:])


def test_holonomy_around_a_geodesic_triangle_is_its_area():
    field = sphere(2)
    # the octant triangle (area pi/2) and a small scalene one (area by van Oosterom & Strackee)
    small = np.array([[0.1, 0.0, 1.0], [0.5, 0.2, 1.0], [0.2, 0.6, 1.0]])
    small /= np.linalg.norm(small, axis=1, keepdims=True)
    a, b, c = small
    excess = 2 * np.arctan(abs(a @ np.cross(b, c)) / (1 + a @ b + b @ c + c @ a))
    for vertices, area in [(np.eye(3), np.pi / 2), (small, excess)]:
        points = _sphere_point(vertices)
        vector = np.array([1.0, 0.3])
        start = vector.copy()
        for i in range(3):
            p, q = vertices[i], vertices[(i + 1) % 3]
            angle = np.arccos(np.clip(p @ q, -1, 1))
            # initial velocity of the great circle from p to q, pushed to the chart by the differential of the projection
            tangent = (q - (p @ q) * p) / np.sin(angle) * angle
            base = points[i]
            h = 1e-6
            direction = (_sphere_point(p + h * tangent) - _sphere_point(p - h * tangent)) / (2 * h)
            direction = direction / np.linalg.norm(direction) * angle * (1 + base @ base) / 2
            vector = connection.parallel_transport(field, vector, base, direction)
        metric = field.metric_matrix(points[0])
        cos = (start @ metric @ vector) / (start @ metric @ start)
        sin = (start[0] * vector[1] - start[1] * vector[0]) * metric[0, 0] / (start @ metric @ start)
        assert_allclose(abs(np.arctan2(sin, cos)), area, atol=1e-6)


# -- Jacobi fields and the differential of Exp --------------------------------------------------
@pytest.mark.parametrize("proximity", [False, True])
def test_exp_differential_matches_differences_of_exp(rng, proximity):
    field = _random_smooth(rng, proximity=proximity)
    x, v = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    d_v, d_x = connection.exp_differential(field, v, x)
    h = 1e-5

    def exp(v, x):
        return integrate_geodesic(field, v, x, (1.0,), 1e-12, 1e-14)[:, 0]

    fd_v = np.stack([(exp(v + e, x) - exp(v - e, x)) / (2 * h) for e in h * np.eye(3)], axis=-1)
    fd_x = np.stack([(exp(v, x + e) - exp(v, x - e)) / (2 * h) for e in h * np.eye(3)], axis=-1)
    assert_allclose(d_v, fd_v, atol=1e-6)
    assert_allclose(d_x, fd_x, atol=1e-6)
    assert np.abs(d_v - np.eye(3)).max() > 1e-2


def test_jacobi_field_on_the_sphere_is_sin(rng):
    field = sphere(2)
    x = np.array([0.2, -0.3])
    scale = 2.0 / (1.0 + x @ x)  # M = scale^2 I
    v = np.array([1.0, 0.0]) / scale  # unit speed
    normal = np.array([0.0, 1.0]) / scale  # unit, orthogonal
    t = np.linspace(0.1, 2.5, 7)
    jacobi = connection.jacobi_field(field, v, x, np.zeros(2), normal, t)
    path = integrate_geodesic(field, v[None], x[None], t, 1e-12, 1e-14)[0]
    norms = np.sqrt(np.einsum("ti,tij,tj->t", jacobi, field.metric_matrix(path), jacobi))
    assert_allclose(norms, np.sin(t), atol=1e-8)
    batch = connection.jacobi_field(field, np.stack([v, v]), x, np.zeros(2), np.stack([normal, 2 * normal]), 1.0)
    assert batch.shape == (2, 2)
    assert_allclose(batch[1], 2 * batch[0], atol=1e-9)


class _Recording(ODEExpSolver):
    """An Exp solver that records the riders it integrates."""

    def integrate_with(self, equation, tangent_vec, base_point, riders, t_eval=(1.0,)):
        self.riders = getattr(self, "riders", []) + [riders.shape]
        return super().integrate_with(equation, tangent_vec, base_point, riders, t_eval)


def test_fields_sharing_a_geodesic_ride_one_integration(rng):
    field = _random_smooth(rng)
    x, v = rng.normal(size=(2, 3, 3))
    initial = rng.normal(size=(3, 2, 2, 3))  # [geodesic, field, (J(0), J'(0)), :]
    solver = _Recording(field, rtol=INTEGRATION_RTOL)
    together = connection.jacobi_field(field, v[:, None], x[:, None], initial[:, :, 0], initial[:, :, 1], [0.5, 1.0], solver)
    transported = connection.parallel_transport(field, initial[:, :, 0], x[:, None], v[:, None], solver)
    assert solver.riders == [(3, 2 * 6), (3, 2 * 3)]  # 3 geodesics, each with its 2 fields
    for i in range(3):
        for k in range(2):
            alone = connection.jacobi_field(field, v[i], x[i], initial[i, k, 0], initial[i, k, 1], [0.5, 1.0])
            assert_allclose(together[i, k], alone, rtol=1e-8, atol=1e-10)
            assert_allclose(transported[i, k], connection.parallel_transport(field, initial[i, k, 0], x[i], v[i]), rtol=1e-8)
    assert np.abs(together[:, 0] - together[:, 1]).min() > 1e-2


def test_a_geodesic_does_not_depend_on_its_batch_mates(rng):
    """Each geodesic has its own steps (Dormand--Prince per row): batched and alone agree to rounding."""
    field = _random_smooth(rng)
    x, v, w = rng.normal(size=(3, 4, 3))
    batch = connection.jacobi_field(field, v * [[1.0], [2.0], [0.3], [1.5]], x, np.zeros(3), w)
    assert_allclose(batch[0], connection.jacobi_field(field, v[0], x[0], np.zeros(3), w[0]), rtol=1e-13)


def test_bad_input(rng):
    field = _random_smooth(rng)
    with pytest.raises(ValueError, match="base_point must have last axis"):
        connection.riemann_tensor(field, np.zeros(2))
    with pytest.raises(TypeError, match="field must be a riemlocal MetricField"):
        connection.scalar_curvature("sphere", np.zeros(3))
    with pytest.raises(ValueError, match="t must be"):
        connection.jacobi_field(field, np.ones(3), np.zeros(3), np.zeros(3), np.ones(3), t=-1.0)
    with pytest.raises(TypeError, match="exp_solver must have an integrate_with method"):
        connection.parallel_transport(field, np.ones(3), np.zeros(3), np.ones(3), exp_solver=object())


def test_the_connection_benchmark_runs(capsys):
    """``benchmarks/bench_connection.py`` with one repeat: its four rows, each beside an Exp (it had failed since the
    connection's functions take an Exp solver instead of tolerances)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_connection import main

    main(["--repeats", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and line[2].isalpha() and "operation" not in line]
    assert len(rows) == 4 and all(float(row.split("|")[-2]) > 0 for row in rows)
