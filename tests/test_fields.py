"""Metric fields: analytic derivatives against autodiff, batching, stability, validation."""

import autograd.numpy as anp
import numpy as np
import pytest

from helpers import random_spd
from riemlocal.fields import ConstantField, MetricField, NearestLocalField, RBFLocalField, SmoothLocalField


@pytest.fixture
def smooth_field():
    rng = np.random.default_rng(0)
    return SmoothLocalField(rng.normal(size=(4, 3)), random_spd(rng, 4, 3), rho=0.8)


class AutogradSmoothField(MetricField):
    """The smooth local field written only through ``metric_matrix`` with autograd.numpy."""

    def __init__(self, centers, metrics, rho):
        super().__init__(centers.shape[1])
        self.centers, self.metrics, self.rho = centers, metrics, rho

    def metric_matrix(self, base_point):
        diff = base_point[..., None, :] - self.centers
        logits = -0.5 * self.rho * anp.einsum("...ri,rij,...rj->...r", diff, self.metrics, diff)
        weights = anp.exp(logits - anp.max(logits, axis=-1, keepdims=True))
        weights = weights / anp.sum(weights, axis=-1, keepdims=True)
        return anp.einsum("...r,rij->...ij", weights, self.metrics)


class NumpyOnlyField(AutogradSmoothField):
    """Same field, but not traceable by autograd: derivatives fall back to central differences."""

    def metric_matrix(self, base_point):
        return np.asarray(super().metric_matrix(np.asarray(base_point, dtype=float)), dtype=float)


def test_analytic_derivative_matches_autograd_and_finite_differences(smooth_field):
    x = np.random.default_rng(1).normal(size=(5, 3))
    args = (smooth_field.centers, smooth_field.metrics, smooth_field.rho)
    analytic = smooth_field.metric_derivative(x)
    np.testing.assert_allclose(AutogradSmoothField(*args).metric_derivative(x), analytic, atol=1e-12)
    np.testing.assert_allclose(NumpyOnlyField(*args).metric_derivative(x), analytic, atol=1e-7)
    np.testing.assert_allclose(AutogradSmoothField(*args).metric_matrix(x), smooth_field.metric_matrix(x), atol=1e-12)


def test_fused_products_match_derivative_contractions(smooth_field):
    rng = np.random.default_rng(2)
    x, v = rng.normal(size=(2, 6, 3))
    derivative = smooth_field.metric_derivative(x)
    metric = smooth_field.metric_matrix(x)
    mv, grad = smooth_field.energy_terms(v, x)
    np.testing.assert_allclose(mv, np.einsum("nij,nj->ni", metric, v), atol=1e-12)
    np.testing.assert_allclose(grad, np.einsum("nijk,ni,nj->nk", derivative, v, v), atol=1e-12)
    dvp = np.einsum("nijk,nj,nk->ni", derivative, v, v)
    np.testing.assert_allclose(smooth_field.derivative_vector_product(v, x), dvp, atol=1e-12)
    expected = np.linalg.solve(metric, (0.5 * grad - dvp)[..., None])[..., 0]
    np.testing.assert_allclose(smooth_field.geodesic_acceleration(v, x), expected, atol=1e-10)
    generic = NumpyOnlyField(smooth_field.centers, smooth_field.metrics, smooth_field.rho)
    np.testing.assert_allclose(generic.geodesic_acceleration(v, x), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("proximity", [None, np.diag([1.0, 2.0, 0.5])])
def test_segment_terms_reuse_node_products(smooth_field, proximity):
    field = RBFLocalField(smooth_field.centers, smooth_field.metrics, sigma=1.3, proximity=proximity)
    curves = np.random.default_rng(8).normal(size=(2, 3, 6, 3))
    steps, midpoints = np.diff(curves, axis=-2), 0.5 * (curves[..., 1:, :] + curves[..., :-1, :])
    for fast, slow in zip(field.segment_energy_terms(curves), field.energy_terms(steps, midpoints)):
        assert fast.shape == (2, 3, 5, 3)
        np.testing.assert_allclose(fast, slow, atol=1e-12)
    generic = MetricField.segment_energy_terms(field, curves)
    np.testing.assert_allclose(field.segment_energy_terms(curves)[1], generic[1], atol=1e-12)
    ends = field.segment_end_quadratics(curves)  # from the same node products: d_i^T M(c_i) d_i, d_i^T M(c_i+1) d_i
    assert ends.shape == (2, 3, 5, 2)
    for side, nodes in enumerate((curves[..., :-1, :], curves[..., 1:, :])):
        expected = np.einsum("...ij,...i,...j->...", field.metric_matrix(nodes), steps, steps)
        np.testing.assert_allclose(ends[..., side], expected, rtol=1e-12)
    np.testing.assert_allclose(MetricField.segment_end_quadratics(field, curves), ends, rtol=1e-12)


@pytest.mark.parametrize("proximity", [None, np.diag([1.0, 2.0, 0.5])])
def test_energy_hessian_matches_differences_of_the_gradient(smooth_field, proximity):
    """f = v^T M(x) v: the x-Hessian and the mixed block against central differences of first derivatives."""
    field = RBFLocalField(smooth_field.centers, smooth_field.metrics, sigma=1.3, proximity=proximity)
    x, v = np.random.default_rng(9).normal(size=(2, 5, 3))
    hessian_x, mixed, hessian_v = field.energy_hessian(v, x)
    h = 1e-6
    for k in range(3):
        step = h * np.eye(3)[k]
        gradient_x = (field.energy_terms(v, x + step)[1] - field.energy_terms(v, x - step)[1]) / (2 * h)
        np.testing.assert_allclose(hessian_x[:, :, k], gradient_x, atol=1e-7)
        gradient_v = (field.metric_vector_product(v, x + step) - field.metric_vector_product(v, x - step)) / h  # of 2 M v
        np.testing.assert_allclose(mixed[:, k, :], gradient_v, atol=1e-7)
    np.testing.assert_allclose(hessian_v, 2 * field.metric_matrix(x), atol=1e-13)
    np.testing.assert_allclose(hessian_x, np.swapaxes(hessian_x, -1, -2), atol=1e-12)
    for analytic, generic in zip((hessian_x, mixed, hessian_v), MetricField.energy_hessian(field, v, x)):
        np.testing.assert_allclose(generic, analytic, atol=1e-6)
    curves = np.random.default_rng(10).normal(size=(2, 4, 3))
    steps, midpoints = np.diff(curves, axis=-2), 0.5 * (curves[..., 1:, :] + curves[..., :-1, :])
    fused = field.segment_energy_terms(curves, hessian=True)
    expected = field.energy_terms(steps, midpoints) + field.energy_hessian(steps, midpoints)
    assert len(fused) == 5
    for fast, slow in zip(fused, expected):
        np.testing.assert_allclose(fast, slow, atol=1e-12)


class HalfPlane(MetricField):
    """M = I / y^2, given by ``metric_matrix`` only."""

    def metric_matrix(self, base_point):
        return anp.eye(2) / base_point[..., -1:, None] ** 2


def test_default_energy_hessian_closed_form():
    """f = |v|^2 / y^2: Hessian diag(0, 6 |v|^2 / y^4), mixed -4 v / y^3 in the y row, 2 I / y^2."""
    x, v = np.array([[0.3, 0.7], [-1.0, 2.0]]), np.array([[1.0, -0.5], [0.2, 0.4]])
    hessian_x, mixed, hessian_v = HalfPlane(2).energy_hessian(v, x)
    y, squared = x[:, 1], np.sum(v**2, axis=1)
    np.testing.assert_allclose(hessian_x[:, 1, 1], 6 * squared / y**4, rtol=1e-6)
    np.testing.assert_allclose(hessian_x[:, [0, 0, 1], [0, 1, 0]], 0.0, atol=1e-6)
    np.testing.assert_allclose(mixed[:, 1], -4 * v / y[:, None] ** 3, rtol=1e-7)
    np.testing.assert_allclose(mixed[:, 0], 0.0, atol=1e-7)
    np.testing.assert_allclose(hessian_v, 2 * np.eye(2) / y[:, None, None] ** 2, rtol=1e-12)


def test_batching_over_leading_axes(smooth_field):
    x = np.random.default_rng(3).normal(size=(2, 4, 3))
    batched = smooth_field.metric_matrix(x)
    assert batched.shape == (2, 4, 3, 3)
    for i in range(2):
        for j in range(4):
            np.testing.assert_allclose(batched[i, j], smooth_field.metric_matrix(x[i, j]), atol=1e-13)
    assert smooth_field.metric_derivative(x).shape == (2, 4, 3, 3, 3)


def test_log_space_weights_far_from_every_center(smooth_field):
    far = np.array([[1e6, -1e6, 3e5], [1e150, 0.0, 0.0]])
    metric = smooth_field.metric_matrix(far)
    assert np.all(np.isfinite(metric))
    np.testing.assert_allclose(smooth_field.weights(far).sum(-1), 1.0)
    assert np.all(np.isfinite(smooth_field.metric_derivative(far[:1])))
    np.linalg.cholesky(metric)


def test_smooth_is_rbf_with_own_metrics(smooth_field):
    rbf = RBFLocalField(smooth_field.centers, smooth_field.metrics, sigma=2.0 / smooth_field.rho)
    x = np.random.default_rng(4).normal(size=(7, 3))
    np.testing.assert_allclose(rbf.metric_matrix(x), smooth_field.metric_matrix(x), atol=1e-14)


def test_rbf_global_proximity_weights_and_derivative():
    rng = np.random.default_rng(5)
    centers, metrics, proximity = rng.normal(size=(3, 2)), random_spd(rng, 3, 2), random_spd(rng, 1, 2)[0]
    field = RBFLocalField(centers, metrics, sigma=0.7, proximity=proximity)
    x = rng.normal(size=(4, 2))
    diff = x[:, None] - centers
    logits = -np.einsum("nri,ij,nrj->nr", diff, proximity, diff) / 0.7
    expected = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(field.weights(x), expected, atol=1e-13)
    fd = MetricField._central_difference_derivative(field, x)
    np.testing.assert_allclose(field.metric_derivative(x), fd, atol=1e-7)


def test_nearest_field_is_anisotropic_voronoi():
    rng = np.random.default_rng(6)
    centers, metrics = rng.normal(size=(5, 3)), random_spd(rng, 5, 3)
    field = NearestLocalField(centers, metrics)
    x = rng.normal(size=(50, 3))
    diff = x[:, None] - centers
    expected = np.argmin(np.einsum("nri,rij,nrj->nr", diff, metrics, diff), axis=1)
    np.testing.assert_array_equal(field.nearest_center(x), expected)
    np.testing.assert_array_equal(field.metric_matrix(x), field.metrics[expected])
    np.testing.assert_array_equal(field.nearest_center(centers), np.arange(5))
    assert not field.is_smooth
    global_field = NearestLocalField(centers, metrics, proximity=np.eye(3))
    np.testing.assert_array_equal(global_field.nearest_center(x), np.argmin((diff**2).sum(-1), axis=1))


def test_affine_equivariance_of_smooth_field(smooth_field):
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(3, 3)) + 3 * np.eye(3), rng.normal(size=3)
    a_inv = np.linalg.inv(a)
    moved = SmoothLocalField(
        smooth_field.centers @ a.T + b, np.einsum("ji,rjk,kl->ril", a_inv, smooth_field.metrics, a_inv), smooth_field.rho
    )
    x = rng.normal(size=(4, 3))
    np.testing.assert_allclose(
        moved.metric_matrix(x @ a.T + b), np.einsum("ji,njk,kl->nil", a_inv, smooth_field.metric_matrix(x), a_inv), atol=1e-10
    )


def test_constant_field():
    metric = np.array([[2.0, 0.5], [0.5, 1.0]])
    field = ConstantField(metric)
    x = np.zeros((3, 2))
    np.testing.assert_array_equal(field.metric_matrix(x), np.broadcast_to(metric, (3, 2, 2)))
    np.testing.assert_array_equal(field.metric_derivative(x), 0.0)
    np.testing.assert_array_equal(field.geodesic_acceleration(np.ones((3, 2)), x), 0.0)
    hessian_x, mixed, hessian_v = field.energy_hessian(np.ones((3, 2)), x)
    np.testing.assert_array_equal(hessian_x, 0.0)
    np.testing.assert_array_equal(mixed, 0.0)
    np.testing.assert_array_equal(hessian_v, np.broadcast_to(2 * metric, (3, 2, 2)))


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: SmoothLocalField(np.zeros((2, 2)), np.stack([np.eye(2)] * 2), rho=0.0), "rho"),
        (lambda: SmoothLocalField(np.zeros((2, 2)), np.stack([np.eye(2)] * 2), rho=-1.0), "rho"),
        (lambda: SmoothLocalField(np.zeros((2, 2)), np.stack([np.eye(2)] * 3)), "metrics"),
        (lambda: SmoothLocalField(np.zeros((2, 3)), np.stack([np.eye(2)] * 2)), "metrics"),
        (lambda: SmoothLocalField(np.array([[0.0, np.nan]]), np.eye(2)[None]), "centers"),
        (lambda: SmoothLocalField(np.zeros((1, 2)), np.array([[[1.0, 2.0], [0.0, 1.0]]])), "symmetric"),
        (lambda: SmoothLocalField(np.zeros((1, 2)), np.array([[[1.0, 0.0], [0.0, -1.0]]])), "positive definite"),
        (lambda: NearestLocalField(np.zeros((1, 2)), np.eye(2)[None], proximity=np.eye(3)), "proximity"),
        (lambda: RBFLocalField(np.zeros((1, 2)), np.eye(2)[None], sigma=-2), "sigma"),
        (lambda: ConstantField(np.ones((2, 3))), "square"),
        (lambda: SmoothLocalField(np.zeros((1, 2)), np.eye(2)[None]).metric_matrix(np.zeros(3)), "dim=2"),
        (lambda: SmoothLocalField(np.zeros((1, 2)), np.eye(2)[None]).metric_matrix([np.inf, 0]), "base_point"),
    ],
)
def test_bad_input(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_bad_input_types():
    with pytest.raises(TypeError, match="rho"):
        SmoothLocalField(np.zeros((1, 2)), np.eye(2)[None], rho="big")
    with pytest.raises(ValueError, match="dim"):
        MetricField(0)
    with pytest.raises(NotImplementedError, match="metric_matrix"):
        MetricField(2).metric_matrix(np.zeros(2))


def test_blends_of_many_centers_are_evaluated_in_chunks_of_at_least_min_chunk_points():
    """R * dim = 9000: the cache budget alone would give chunks of 7 points; they hold MIN_CHUNK_POINTS, and the
    chunked products, metrics and energy terms equal those of one point at a time."""
    from riemlocal.fields._local import MIN_CHUNK_POINTS

    rng = np.random.default_rng(3)
    n_centers, dim, n_points = 300, 30, 40
    factors = rng.normal(size=(n_centers, dim, 4))
    field = SmoothLocalField(rng.normal(size=(n_centers, dim)), factors @ factors.transpose(0, 2, 1) + np.eye(dim), rho=0.05)
    chunks = field._chunks(n_points)
    assert [c.stop - c.start for c in chunks[:-1]] == [MIN_CHUNK_POINTS] * (len(chunks) - 1) and len(chunks) == 3
    x, v = rng.normal(size=(2, n_points, dim))
    together = field.metric_vector_product(v, x), field.metric_matrix(x), field.energy_terms(v, x)[1]
    alone = [np.array([f(v[k : k + 1], x[k : k + 1])[0] for k in range(n_points)]) for f in (
        field.metric_vector_product, lambda v, x: field.metric_matrix(x), lambda v, x: field.energy_terms(v, x)[1])]
    for chunked, single in zip(together, alone):
        np.testing.assert_allclose(chunked, single, rtol=1e-12, atol=1e-12 * np.abs(single).max())
