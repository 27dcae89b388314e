import re

import numpy as np
import pytest
import scipy.linalg
from sklearn.neighbors import KNeighborsClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from riemlocal.learners import LDAMetric


@parametrize_with_checks(
    [LDAMetric(), LDAMetric(form="scatter", subsample=1.0)]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def blobs(rng, n_per_class=(30, 40, 25), dim=4):
    centers = 3 * rng.normal(size=(len(n_per_class), dim))
    X = np.concatenate([c + rng.normal(size=(m, dim)) * rng.uniform(0.5, 2, dim) for c, m in zip(centers, n_per_class)])
    y = np.repeat(np.arange(len(n_per_class)), n_per_class)
    return X, y


def scatter_matrices(X, y, w, reg):
    """Direct transcription of eq. (LDA): weighted means, S_W, unbagged S_B and lambda."""
    classes = np.unique(y)
    means = np.array([np.average(X[y == c], axis=0, weights=w[y == c]) for c in classes])
    within = sum(w[i] * np.outer(X[i] - means[c], X[i] - means[c]) for i, c in enumerate(np.searchsorted(classes, y)))
    within /= w.sum()
    between = sum(np.outer(m - means.mean(0), m - means.mean(0)) for m in means) / len(classes)
    total = np.average(((X - np.average(X, axis=0, weights=w)) ** 2).sum(1), weights=w) / X.shape[1]
    return within, between, reg * total


def test_two_classes_metric_is_projector_on_fisher_direction():
    rng = np.random.default_rng(0)
    X, y = blobs(rng, (30, 40))
    w = rng.uniform(0.2, 3.0, len(y))
    lda = LDAMetric(subsample=1.0, reg=0.3).fit(X, y, sample_weight=w)
    within, _, lam = scatter_matrices(X, y, w, 0.3)
    mu = [np.average(X[y == c], axis=0, weights=w[y == c]) for c in (0, 1)]
    v = np.linalg.solve(within + lam * np.eye(4), mu[1] - mu[0])
    np.testing.assert_allclose(lda.metric_, 4 * np.outer(v, v) / (v @ v), atol=1e-10)
    assert lda.components_.shape == (1, 4)


def test_basis_spans_top_generalized_eigenvectors_and_is_orthonormal():
    rng = np.random.default_rng(1)
    X, y = blobs(rng, (20, 20, 20, 20), dim=6)
    lda = LDAMetric(subsample=1.0, trace_to_dim=False).fit(X, y)
    within, between, lam = scatter_matrices(X, y, np.ones(len(y)), 1.0)
    _, vecs = scipy.linalg.eigh(between, within + lam * np.eye(6))
    top = vecs[:, -3:]
    M = lda.metric_
    np.testing.assert_allclose(M @ M, M, atol=1e-10)  # orthogonal projector (V_G orthonormal)
    np.testing.assert_allclose(np.trace(M), 3.0)  # default rank: C - 1
    np.testing.assert_allclose(M @ top, top, atol=1e-10)  # onto the span of the top d eigenvectors
    np.testing.assert_allclose(lda.components_ @ lda.components_.T, np.eye(3), atol=1e-10)


def test_scatter_form_matches_formula():
    rng = np.random.default_rng(2)
    X, y = blobs(rng)
    lda = LDAMetric(form="scatter", subsample=1.0, trace_to_dim=False).fit(X, y)
    within, between, lam = scatter_matrices(X, y, np.ones(len(y)), 1.0)
    inverse = np.linalg.inv(within + lam * np.eye(4))
    np.testing.assert_allclose(lda.metric_, inverse @ between @ inverse, rtol=1e-8, atol=1e-12)


def test_closed_form_bagging_equals_mean_of_subsampled_scatter():
    # The paper averages S_B over sub-sampled data; the closed form is the limit of many bags.
    rng = np.random.default_rng(3)
    X, y = blobs(rng, (400, 400, 400), dim=3)
    lda = LDAMetric(form="scatter", trace_to_dim=False, reg=0.5, subsample=0.25).fit(X, y)
    within, between, lam = scatter_matrices(X, y, np.ones(len(y)), 0.5)
    regularized = within + lam * np.eye(3)
    bagged = regularized @ lda.metric_ @ regularized  # recover E[S_B^bag]
    # E[S_B^bag] - S_B is the scatter of the subsample-mean errors e_j (the cross terms average to zero)
    full_means = np.array([X[y == c].mean(0) for c in range(3)])
    excess = []
    for _ in range(2000):
        errors = np.array([X[rng.choice(np.flatnonzero(y == c), 100, replace=False)].mean(0) for c in range(3)])
        errors -= full_means
        errors -= errors.mean(0)
        excess.append(errors.T @ errors / 3)
    mc_excess = np.mean(excess, axis=0)
    assert np.linalg.norm(bagged - between - mc_excess) < 0.05 * np.linalg.norm(mc_excess)
    assert np.linalg.matrix_rank(bagged) == 3 > np.linalg.matrix_rank(between)


@pytest.mark.parametrize("form", ["basis", "scatter"])
def test_zero_weight_equals_dropping_and_integer_weight_equals_repeating(form):
    rng = np.random.default_rng(4)
    X, y = blobs(rng)
    w = rng.integers(0, 4, len(y)).astype(float)
    full = LDAMetric(form=form).fit(X, y, sample_weight=w)
    dropped = LDAMetric(form=form).fit(X[w > 0], y[w > 0], sample_weight=w[w > 0])
    repeated = LDAMetric(form=form).fit(np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int)))
    np.testing.assert_allclose(full.metric_, dropped.metric_, atol=1e-12)
    np.testing.assert_allclose(full.metric_, repeated.metric_, atol=1e-10)


def test_zero_weight_class_is_absent():
    rng = np.random.default_rng(5)
    X, y = blobs(rng)
    w = (y != 2).astype(float)
    lda = LDAMetric().fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(lda.classes_, [0, 1])
    assert lda.components_.shape[0] == 1  # rank C - 1 over the classes with positive weight


def test_rotation_equivariance_and_scale_invariance():
    rng = np.random.default_rng(6)
    X, y = blobs(rng)
    R = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    M = LDAMetric().fit(X, y).metric_
    np.testing.assert_allclose(LDAMetric().fit(X @ R.T, y).metric_, R @ M @ R.T, atol=1e-10)
    np.testing.assert_allclose(LDAMetric().fit(7.0 * X + 3.0, y).metric_, M, atol=1e-10)


def test_one_class_falls_back_to_regularized_within_class_metric():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(30, 3)) * [1.0, 2.0, 4.0]
    y = np.zeros(30, dtype=int)
    lda = LDAMetric(reg=0.5).fit(X, y)
    within, _, lam = scatter_matrices(X, y, np.ones(30), 0.5)
    expected = np.linalg.inv(within + lam * np.eye(3))
    np.testing.assert_allclose(lda.metric_, 3 * expected / np.trace(expected), atol=1e-10)
    # the same when the other classes are present with weight 0
    X2, y2 = np.r_[X, rng.normal(size=(5, 3))], np.r_[y, np.ones(5, dtype=int)]
    lda2 = LDAMetric(reg=0.5).fit(X2, y2, sample_weight=np.r_[np.ones(30), np.zeros(5)])
    np.testing.assert_allclose(lda2.metric_, lda.metric_, atol=1e-12)


def test_beats_euclidean_with_noise_dimensions():
    rng = np.random.default_rng(8)
    n = 300
    y = rng.integers(0, 2, n)
    X = np.c_[y + 0.25 * rng.normal(size=n), 4 * rng.normal(size=(n, 5))]
    train, test = slice(0, 200), slice(200, None)
    lda = LDAMetric(reg=0.01).fit(X[train], y[train])

    def error(Z):
        return 1 - KNeighborsClassifier(3).fit(Z[train], y[train]).score(Z[test], y[test])

    assert lda.metric_[0, 0] > 0.9 * np.trace(lda.metric_)
    assert error(lda.transform(X)) < 0.1 < 0.3 < error(X)


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"form": "full"}, ValueError, "form must be one of ['basis', 'scatter'], got 'full'"),
        ({"reg": -1.0}, ValueError, "reg must be >= 0, got -1.0"),
        ({"subsample": 0.0}, ValueError, "subsample must be > 0, got 0.0"),
        ({"subsample": 1.5}, ValueError, "subsample must be in (0, 1], got 1.5"),
        ({"n_components": 5}, ValueError, "n_components must be in [1, n_features=4], got 5"),
        ({"n_components": 1.5}, TypeError, "n_components must be an int or None, got 1.5"),
    ],
)
def test_bad_parameters(params, error, message):
    X, y = blobs(np.random.default_rng(9))
    with pytest.raises(error, match=re.escape(message)):
        LDAMetric(**params).fit(X, y)


def test_bad_data():
    X, y = blobs(np.random.default_rng(10))
    with pytest.raises(ValueError, match="sample_weight must not be all zero weights"):
        LDAMetric().fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match=re.escape("sample_weight must have shape (95,)")):
        LDAMetric().fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        LDAMetric().fit(np.where(X > 2, np.nan, X), y)
    with pytest.raises(ValueError, match="Unknown label type"):
        LDAMetric().fit(X, X[:, 0])
    with pytest.raises(ValueError, match=re.escape("within-class scatter is singular with reg=0.0")):
        LDAMetric(reg=0.0).fit(np.c_[X, np.zeros(len(y))], y)
