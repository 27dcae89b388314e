import itertools
import re
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp
from sklearn.datasets import load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from riemlocal.learners import BoostMetric
from riemlocal.learners._boostmetric import _bisect_weight, _weight_derivative


def brute_force_triplets(X, y, k):
    """Oracle: every (i, j, l) with j among i's k nearest same-class and l among its k nearest other-class points."""
    sq = ((X[:, None] - X[None]) ** 2).sum(-1)
    triplets = []
    for i in range(len(X)):
        same = [j for j in np.argsort(sq[i], kind="stable") if y[j] == y[i] and j != i][:k]
        other = [j for j in np.argsort(sq[i], kind="stable") if y[j] != y[i]][:k]
        triplets += [(i, j, l) for j, l in itertools.product(same, other)]
    return np.array(triplets)


def triplet_matrices(X, triplets):
    i, j, k = triplets.T
    d_ik, d_ij = X[i] - X[k], X[i] - X[j]
    return d_ik[:, :, None] * d_ik[:, None, :] - d_ij[:, :, None] * d_ij[:, None, :]


def blobs(n_per_class=15, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3 * n_per_class, dim))
    y = np.repeat([0, 1, 2], n_per_class)
    X[:, 0] += 1.5 * y
    return X, y


def test_metric_is_psd_sum_of_weighted_rank_one_bases():
    X, y = blobs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        learner = BoostMetric(max_iter=30).fit(X, y)
    expected = sum(w * np.outer(b, b) for w, b in zip(learner.weights_, learner.bases_))
    np.testing.assert_allclose(learner.metric_, expected, atol=1e-10 * np.abs(expected).max())
    np.testing.assert_allclose(learner.components_.T @ learner.components_, learner.metric_)
    np.testing.assert_allclose(np.linalg.norm(learner.bases_, axis=1), 1.0)
    assert np.all(learner.weights_ > 0)
    assert np.linalg.eigvalsh(learner.metric_).min() >= -1e-10 * np.abs(learner.metric_).max()
    np.testing.assert_allclose(learner.transform(X), X @ learner.components_.T)


def test_objective_matches_brute_force_and_never_increases():
    X, y = blobs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        learner = BoostMetric(nu=1e-3, max_iter=40).fit(X, y)
    objective = learner.objective_
    assert objective.shape == (learner.n_iter_ + 1,) and objective[0] == 0.0
    assert np.all(np.diff(objective) <= 1e-12)
    assert objective[-1] < objective[1] < 0
    triplets = brute_force_triplets(X, y, 3)
    assert learner.n_triplets_ == len(triplets)
    margins = np.einsum("rab,ab->r", triplet_matrices(X, triplets), learner.metric_)
    expected = logsumexp(-margins) - np.log(len(triplets)) + 1e-3 * learner.weights_.sum()
    np.testing.assert_allclose(objective[-1], expected, rtol=1e-8)


@pytest.mark.parametrize("seed", range(5))
def test_bisection_returns_root_of_weight_derivative(seed):
    rng = np.random.default_rng(seed)
    h = (rng.normal(size=200) + 0.5) * 10.0 ** rng.uniform(-3, 3)  # both signs, any scale
    u = rng.dirichlet(np.ones(200))
    nu = 1e-7
    assert _weight_derivative(0.0, h, np.log(u), nu) > 0
    w = _bisect_weight(h, u, nu, rtol=1e-12)
    # eq. (8) of Shen et al., written out directly
    lhs = np.sum((h - nu) * u * np.exp(-w * h))
    assert abs(lhs) <= 1e-9 * np.sum(np.abs(h - nu) * u * np.exp(-w * h))
    # and w minimizes the 1-D primal objective C_p(w) = log sum_r u_r exp(-w H_r) + nu w
    oracle = minimize_scalar(lambda t: logsumexp(-t * h, b=u) + nu * t, bounds=(0, 4 * w), method="bounded",
                             options={"xatol": 1e-12 * w})
    np.testing.assert_allclose(w, oracle.x, rtol=1e-5)


def test_bisection_without_root_stays_finite():
    h = np.array([1.0, 2.0, 3.0])  # every triplet gains margin: the loss decreases without bound
    w = _bisect_weight(h, np.full(3, 1 / 3), 0.0, rtol=1e-10)
    assert np.isfinite(w) and w > 1e10


def test_stops_exactly_when_lambda_max_below_nu():
    X, y = blobs(dim=2)
    nu, tol = 0.05, 1e-6
    learner = BoostMetric(nu=nu, max_iter=200, tol=tol).fit(X, y)  # no ConvergenceWarning
    assert 0 < learner.n_iter_ < 200
    triplets = brute_force_triplets(X, y, 3)
    A = triplet_matrices(X, triplets)
    lambda_0 = np.linalg.eigvalsh(A.mean(axis=0))[-1]
    margins = np.einsum("rab,ab->r", A, learner.metric_)
    u = np.exp(-margins - logsumexp(-margins))
    lambda_max = np.linalg.eigvalsh(np.einsum("r,rab->ab", u, A))[-1]
    np.testing.assert_allclose(learner.lambda_max_[[0, -1]], [lambda_0, lambda_max], rtol=1e-6)
    assert lambda_max < nu + tol * lambda_0
    assert np.all(learner.lambda_max_[:-1] >= nu + tol * lambda_0)
    with pytest.warns(ConvergenceWarning, match="lambda_max"):
        early = BoostMetric(nu=nu, max_iter=learner.n_iter_ - 1, tol=tol).fit(X, y)
    np.testing.assert_allclose(early.weights_, learner.weights_[:-1])


def test_arpack_operator_matches_dense_eigensolver():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 60))
    y = np.repeat([0, 1], 20)
    X[:, :3] += y[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = [BoostMetric(max_iter=8, eigen_solver=s).fit(X, y) for s in ("arpack", "dense")]
    np.testing.assert_allclose(fits[0].weights_, fits[1].weights_, rtol=1e-6)
    np.testing.assert_allclose(fits[0].metric_, fits[1].metric_, atol=1e-8 * np.abs(fits[1].metric_).max())


def test_beats_euclidean_on_noisy_dimensions():
    rng = np.random.default_rng(0)
    n = 150
    y = rng.integers(0, 3, n)
    angle = 2 * np.pi * y / 3 + rng.normal(scale=0.2, size=n)
    signal = np.c_[np.cos(angle), np.sin(angle)]
    X = np.c_[signal, 3.0 * rng.normal(size=(n, 6))]
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        learner = BoostMetric(max_iter=100).fit(Xtr, ytr)
    euclidean = 1 - KNeighborsClassifier(3).fit(Xtr, ytr).score(Xte, yte)
    learned = 1 - KNeighborsClassifier(3).fit(learner.transform(Xtr), ytr).score(learner.transform(Xte), yte)
    assert euclidean > 0.3 and learned < 0.1


def test_wine_unscaled_error_close_to_paper():
    # Shen et al., Table 1: 3-NN error 2.64 +- 1.59 % (Euclidean 26.23 %); benchmark: 10 splits.
    X, y = load_wine(return_X_y=True)
    errors = []
    for seed in range(2):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            learner = BoostMetric(max_iter=300).fit(Xtr, ytr)
        knn = KNeighborsClassifier(3).fit(learner.transform(Xtr), ytr)
        errors.append(1 - knn.score(learner.transform(Xte), yte))
    assert np.mean(errors) <= 0.07


def test_zero_sample_weight_equals_dropping_samples():
    X, y = blobs()
    weights = np.ones(len(X))
    weights[::4] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = BoostMetric(max_iter=15).fit(X, y, sample_weight=weights)
        dropped = BoostMetric(max_iter=15).fit(X[weights > 0], y[weights > 0])
    np.testing.assert_allclose(weighted.metric_, dropped.metric_, rtol=1e-10, atol=1e-12)


def test_sample_weights_reweight_triplets():
    X, y = blobs()
    weights = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        learner = BoostMetric(max_iter=10).fit(X, y, sample_weight=weights)
    triplets = brute_force_triplets(X, y, 3)
    c = weights[triplets].prod(axis=1)
    margins = np.einsum("rab,ab->r", triplet_matrices(X, triplets), learner.metric_)
    expected = logsumexp(-margins, b=c / c.sum()) + 1e-7 * learner.weights_.sum()
    np.testing.assert_allclose(learner.objective_[-1], expected, rtol=1e-8)


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"nu": -1.0}, ValueError, "nu must be >= 0, got -1.0"),
        ({"nu": "small"}, TypeError, "nu must be a real number"),
        ({"max_iter": 0}, ValueError, "max_iter must be an int >= 1, got 0"),
        ({"n_targets": 2.5}, TypeError, "n_targets must be an int, got 2.5"),
        ({"eigen_solver": "lobpcg"}, ValueError, "eigen_solver must be one of"),
        ({"tol": 0.0}, ValueError, "tol must be > 0"),
    ],
)
def test_bad_parameters(params, error, message):
    X, y = blobs()
    with pytest.raises(error, match=re.escape(message)):
        BoostMetric(**params).fit(X, y)


def test_bad_data():
    X, y = blobs()
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BoostMetric().fit(X_nan, y)
    with pytest.raises(ValueError, match="at least one triplet"):
        BoostMetric().fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="Unknown label type"):
        BoostMetric().fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match="sample_weight must have shape"):
        BoostMetric().fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="features"):
        BoostMetric(tol=1.0).fit(X, y).transform(X[:, :2])


@parametrize_with_checks(
    [BoostMetric(max_iter=20)],
    expected_failed_checks=lambda estimator: {
        "check_sample_weight_equivalence_on_dense_data": (
            "a repeated sample is its own nearest target neighbour, so integer weights differ from repetition"
        ),
    },
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)
