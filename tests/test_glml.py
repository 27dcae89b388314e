"""Tests of GLMLField (Noh, Zhang & Lee, 2010): oracles for B, the closed form of A_opt, invariances, accuracy."""

import re

import numpy as np
import pytest
from scipy.stats import multivariate_normal, ortho_group

from riemlocal.datasets import make_rotated_gaussians
from riemlocal.fields import GLMLField
from riemlocal.manifold import LearnedMetricManifold


def gaussian_classes(rng, n_classes=3, dim=3, n_per_class=40):
    """Classes with distinct random means and random anisotropic covariances."""
    X, y = [], []
    for c in range(n_classes):
        basis = ortho_group.rvs(dim, random_state=rng) if dim > 1 else np.ones((1, 1))
        cov = basis @ np.diag(rng.uniform(0.2, 2.0, dim)) @ basis.T
        X.append(rng.multivariate_normal(rng.normal(scale=1.5, size=dim), cov, size=n_per_class))
        y += [c] * n_per_class
    return np.vstack(X), np.array(y)


def joint_densities_and_hessians(field, x, step=1e-4):
    """p_c(x) with scipy and their Hessians by central differences (an oracle independent of eq. 14)."""
    pdfs = [
        lambda z, c=c: field.priors_[c] * multivariate_normal(field.means_[c], field.covariances_[c]).pdf(z)
        for c in range(field.n_classes)
    ]
    eye = np.eye(field.dim) * step
    hessians = np.array(
        [
            [
                [(p(x + a + b) - p(x + a - b) - p(x - a + b) + p(x - a - b)) / (4 * step**2) for b in eye]
                for a in eye
            ]
            for p in pdfs
        ]
    )
    return np.array([p(x) for p in pdfs]), hessians


@pytest.fixture
def data():
    return gaussian_classes(np.random.default_rng(0))


def test_class_gaussians_follow_the_paper_regularization(data):
    X, y = data
    field = GLMLField(X, y, reg_covar=0.3)
    for c in range(3):
        Xc = X[y == c]
        np.testing.assert_allclose(field.means_[c], Xc.mean(0))
        np.testing.assert_allclose(field.covariances_[c], np.cov(Xc.T, bias=True) + 0.3 * np.eye(3))
    np.testing.assert_allclose(field.priors_, [1 / 3] * 3)


def test_two_class_bias_matrix_is_eq9_over_total_density_cubed():
    X, y = gaussian_classes(np.random.default_rng(1), n_classes=2)
    field = GLMLField(X, y)
    for x in np.random.default_rng(2).normal(size=(4, 3)):
        (p1, p2), (h1, h2) = joint_densities_and_hessians(field, x)
        eq9 = p1**2 * h2 + p2**2 * h1 - p1 * p2 * (h1 + h2)
        np.testing.assert_allclose(field.bias_matrix(x), eq9 / (p1 + p2) ** 3, rtol=1e-5, atol=1e-8)


def test_multiclass_bias_matrix_is_the_derivative_of_the_nn_error(data):
    # tr(W B) / S^2 = d/de sum_i p_i (1 - pt_i / sum pt) with pt_c = p_c + e tr(W H_c)
    X, y = data
    field = GLMLField(X, y)
    rng = np.random.default_rng(3)
    for x in X[rng.choice(len(X), 4)] + 0.3 * rng.normal(size=(4, 3)):
        p, hess = joint_densities_and_hessians(field, x)
        W = rng.normal(size=(3, 3))
        W = W + W.T
        dp = np.einsum("ij,cij->c", W, hess)

        def error(eps, p=p, dp=dp):
            tilde = p + eps * dp
            return np.sum(p * (1 - tilde / tilde.sum()))

        h = 1e-4 * p.sum() / np.abs(dp).max()
        derivative = (error(h) - error(-h)) / (2 * h)
        expected = derivative / p.sum()  # tr(W B) / S^3
        np.testing.assert_allclose(np.sum(W * field.bias_matrix(x)), expected, rtol=1e-4, atol=1e-9)


def test_posteriors_match_scipy(data):
    X, y = data
    field = GLMLField(X, y)
    x = X[:5] + 0.1
    p = np.array([joint_densities_and_hessians(field, xi)[0] for xi in x])
    np.testing.assert_allclose(field.posteriors(x), p / p.sum(1, keepdims=True), rtol=1e-10)


def test_closed_form_on_a_known_spectrum(data):
    field = GLMLField(*data)
    basis = ortho_group.rvs(3, random_state=4)
    field._bias_matrix = lambda x: basis @ np.diag([3.0, 1.0, -2.0]) @ basis.T
    # d+ = 2, d- = 1: diag(2*3, 2*1, 1*2) scaled to unit determinant
    expected = basis @ np.diag([6.0, 2.0, 2.0]) @ basis.T / 24 ** (1 / 3)
    np.testing.assert_allclose(field.optimal_metric(np.zeros(3)), expected, atol=1e-12)
    np.testing.assert_allclose(field.metric_matrix(np.zeros(3)), field.gamma * np.eye(3) + expected, atol=1e-12)
    field._bias_matrix = lambda x: np.zeros((3, 3))
    np.testing.assert_allclose(field.optimal_metric(np.zeros(3)), np.eye(3))


def test_optimal_metric_cancels_the_bias(data):
    # tr(A^{-1} B) = 0, det A = 1, [A, B] = 0, and A^{-1} B has eigenvalues 1/d+ and -1/d-
    X, y = data
    field = GLMLField(X, y)
    x = np.random.default_rng(5).normal(scale=2.0, size=(50, 3))
    A, B = field.optimal_metric(x), field.bias_matrix(x)
    signs = np.sign(np.linalg.eigvalsh(B))
    mixed = (signs > 0).any(-1) & (signs < 0).any(-1)
    assert mixed.sum() > 25
    np.testing.assert_allclose(np.trace(np.linalg.solve(A[mixed], B[mixed]), axis1=-2, axis2=-1), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.linalg.det(A), 1.0, rtol=1e-8)
    np.testing.assert_allclose(A @ B, B @ A, atol=1e-10 * np.abs(B).max())
    ratios = np.sort(np.linalg.eigvals(np.linalg.solve(A[mixed], B[mixed])).real, axis=-1)
    for r, k in zip(ratios, (signs[mixed] > 0).sum(-1)):
        expected = np.r_[np.full(3 - k, -1.0 / (3 - k)), np.full(k, 1.0 / k)]
        np.testing.assert_allclose(r / (r[-1] * k), expected, rtol=1e-8)


def test_metric_is_spd_and_batched(data):
    X, y = data
    field = GLMLField(X, y, gamma=0.05)
    x = np.random.default_rng(6).normal(scale=3.0, size=(2, 4, 3))
    M = field.metric_matrix(x)
    assert M.shape == (2, 4, 3, 3)
    np.testing.assert_allclose(M, np.swapaxes(M, -1, -2))
    assert np.all(np.linalg.eigvalsh(M) >= 0.05 - 1e-10)
    loop = np.array([[field.metric_matrix(point) for point in row] for row in x])
    np.testing.assert_allclose(M, loop, rtol=1e-12, atol=1e-12)
    assert field.metric_matrix(x[0, 0]).shape == (3, 3)
    assert field(x).shape == (2, 4, 3, 3)


def test_far_from_all_classes_is_finite(data):
    field = GLMLField(*data)
    M = field.metric_matrix(np.array([[1e4, -1e4, 1e4], [0.0, 0.0, 0.0]]))
    assert np.all(np.isfinite(M))
    np.linalg.cholesky(M)


def test_similarity_equivariance(data):
    # X -> s R X + b (reg_covar -> s^2 reg_covar): A_opt(s R x + b) = R A_opt(x) R^T (unit determinant removes s)
    X, y = data
    rng = np.random.default_rng(7)
    R, b, s = ortho_group.rvs(3, random_state=rng), rng.normal(size=3), 2.5
    field = GLMLField(X, y, reg_covar=0.1)
    moved = GLMLField(s * X @ R.T + b, y, reg_covar=0.1 * s**2)
    x = rng.normal(size=(10, 3))
    np.testing.assert_allclose(
        moved.optimal_metric(s * x @ R.T + b), R @ field.optimal_metric(x) @ R.T, rtol=1e-7, atol=1e-9
    )


def test_is_not_smooth_the_metric_jumps_where_b_changes_signature(data):
    # when an eigenvalue of B changes sign, d+ and d- change, so A_opt jumps (is_smooth must be False)
    field = GLMLField(*data)
    assert field.is_smooth is False

    def n_positive(x):
        return int((np.linalg.eigvalsh(field.bias_matrix(x)) > 0).sum())

    points = np.random.default_rng(8).normal(scale=2.0, size=(40, 3))
    counts = [n_positive(x) for x in points]
    a, b = points[0], points[next(i for i, c in enumerate(counts) if c != counts[0])]
    for _ in range(60):
        middle = 0.5 * (a + b)
        a, b = (middle, b) if n_positive(middle) == counts[0] else (a, middle)
    assert np.linalg.norm(b - a) < 1e-12
    A_a, A_b = field.optimal_metric(a), field.optimal_metric(b)
    assert np.linalg.norm(A_a - A_b) > 0.1 * np.linalg.norm(A_a)


def nearest_neighbor_accuracy(X_train, y_train, X_test, y_test, metrics=None):
    diff = X_train[None] - X_test[:, None]
    if metrics is None:
        scores = np.einsum("qni,qni->qn", diff, diff)
    else:
        scores = np.einsum("qni,qij,qnj->qn", diff, metrics, diff)
    return np.mean(y_train[scores.argmin(1)] == y_test)


def test_glml_beats_euclidean_nearest_neighbor_on_fig3a_data():
    gains = []
    for seed in range(3):
        X_train, y_train, X_test, y_test = make_rotated_gaussians(20, 300, 300, np.random.default_rng(seed))
        field = GLMLField(X_train, y_train, gamma=1.0)
        glml = nearest_neighbor_accuracy(X_train, y_train, X_test, y_test, field.metric_matrix(X_test))
        gains.append(glml - nearest_neighbor_accuracy(X_train, y_train, X_test, y_test))
    assert np.mean(gains) >= 0.08, gains


def test_bad_input(data):
    X, y = data
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        GLMLField(bad, y)
    with pytest.raises(ValueError, match=re.escape("X must have shape (n_samples, dim)")):
        GLMLField(X[None], y)
    with pytest.raises(ValueError, match="y must have shape"):
        GLMLField(X, y[:-1])
    for gamma in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="gamma must be > 0"):
            GLMLField(X, y, gamma=gamma)
    for reg_covar in (-1e-3, np.inf, np.nan):
        with pytest.raises(ValueError, match="reg_covar must be >= 0"):
            GLMLField(X, y, reg_covar=reg_covar)
    with pytest.raises(TypeError, match="gamma must be a real number"):
        GLMLField(X, y, gamma="1")
    with pytest.raises(ValueError, match="y must contain at least two classes"):
        GLMLField(X, np.zeros(len(X)))
    lonely = y.copy()
    lonely[0] = 7
    with pytest.raises(ValueError, match="y: every class needs at least 2 points .*; class 7 has 1"):
        GLMLField(X, lonely)
    few = np.r_[np.zeros(3), np.ones(len(X) - 3)]  # 3 points in 3-D: singular covariance
    with pytest.raises(ValueError, match="reg_covar=0.0 leaves a singular class covariance"):
        GLMLField(X, few, reg_covar=0.0)
    GLMLField(X, few, reg_covar=1e-3)
    field = GLMLField(X, y)
    with pytest.raises(ValueError, match="base_point must have last axis of length dim=3"):
        field.metric_matrix(np.zeros(2))
    with pytest.raises(ValueError, match="base_point contains NaN"):
        field.metric_matrix(np.full(3, np.nan))


def two_gaussians_2d():
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(size=(15, 2)) * [1.0, 0.4], rng.normal(size=(15, 2)) * [0.4, 1.0] + [1.5, 0.5]])
    return X, np.repeat([0, 1], 15)


def test_smooth_form_is_a_smooth_blend_of_the_glml_metrics_at_its_centers():
    X, y = two_gaussians_2d()
    field = GLMLField(X, y, gamma=0.5)
    smooth = field.smooth_field(X[::3], rho=2.0)
    assert smooth.is_smooth and not field.is_smooth
    np.testing.assert_allclose(smooth.metrics, field.metric_matrix(X[::3]))
    sharp = field.smooth_field(X[::3], rho=1e4)  # tends to the GLML metric of the nearest center
    np.testing.assert_allclose(sharp.metric_matrix(X[::3]), field.metric_matrix(X[::3]), rtol=1e-8)
    with pytest.raises(ValueError, match="centers must have last axis of length dim=2"):
        field.smooth_field(np.zeros((3, 3)))


def test_exp_of_log_is_the_identity_on_the_smooth_glml_manifold():
    X, y = two_gaussians_2d()
    # Log vectors certified to 1e-6 (the default log_rtol=1e-4 allows endpoint errors of a few 1e-5 here)
    metric = LearnedMetricManifold(GLMLField(X, y, gamma=0.5).smooth_field(X[::3]), log_rtol=1e-6).metric
    base_point, point = np.array([[-0.5, 0.2], [0.3, 1.2]]), np.array([[1.8, 0.4], [0.9, -0.6]])
    tangent_vec = metric.log(point, base_point)
    np.testing.assert_allclose(metric.exp(tangent_vec, base_point), point, atol=1e-5)
    assert not np.allclose(tangent_vec, point - base_point, atol=1e-3)  # curved: Log is not the chord
