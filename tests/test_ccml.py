import re
import warnings

import numpy as np
import pytest
from scipy.optimize import check_grad
from scipy.special import log_softmax
from sklearn.datasets import load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import pairwise_distances
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from riemlocal.learners import CCMLMetric
from riemlocal.learners._ccml import _CCMLProblem
from riemlocal.neighbors import ccknn_predict, ccknn_scores


def blobs(n_per_class=12, dim=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3 * n_per_class, dim))
    y = np.repeat([0, 1, 2], n_per_class)
    X[:, 0] += 1.5 * y
    return X, y


def brute_force_loss(L, X, y, weights, k, objective, alpha):
    """Oracle: eq. (10)/(15) and (11) of Im & Taylor, written with explicit loops."""
    Z = X @ L.T
    sq = ((Z[:, None] - Z[None]) ** 2).sum(-1)
    active = weights > 0
    total, norm = 0.0, 0.0
    for i in np.flatnonzero(active):
        own = np.flatnonzero(active & (y == y[i]) & (np.arange(len(y)) != i))
        if own.size == 0:
            continue
        if objective == "local":
            groups = [own, np.flatnonzero(active & (y != y[i]))]
        else:
            groups = [own] + [np.flatnonzero(active & (y == c)) for c in np.unique(y[active]) if c != y[i]]
        means = np.array([np.sort(sq[i, g])[:k].mean() for g in groups])
        total += weights[i] * np.exp(log_softmax(-means)[0])
        norm += weights[i]
    return -total / norm + alpha * np.sum(L**2)


@pytest.mark.parametrize("objective", ["local", "class_conditional"])
@pytest.mark.parametrize("seed", range(3))
def test_loss_matches_brute_force_and_gradient_matches_finite_differences(objective, seed):
    rng = np.random.default_rng(seed)
    X, y = blobs(seed=seed)
    weights = rng.uniform(0.5, 2.0, len(X))
    weights[:3] = 0.0
    L = rng.normal(size=(3, X.shape[1])) * 0.5
    problem = _CCMLProblem(X, y, weights, 3, objective, alpha=0.05)
    loss, _ = problem.loss_and_gradient(L.ravel())
    np.testing.assert_allclose(loss, brute_force_loss(L, X, y, weights, 3, objective, 0.05), rtol=1e-12)
    error = check_grad(lambda v: problem.loss_and_gradient(v)[0], lambda v: problem.loss_and_gradient(v)[1],
                       L.ravel(), epsilon=1e-7)
    assert error <= 1e-6 * max(1.0, np.linalg.norm(problem.loss_and_gradient(L.ravel())[1]))


def test_ccknn_scores_and_predict_match_brute_force():
    rng = np.random.default_rng(0)
    distances_sq = rng.uniform(size=(20, 15))
    y_train = np.array(list("aabbbbcccccaaac"))
    scores = ccknn_scores(distances_sq, y_train, 3)
    for q in range(20):
        for c, label in enumerate("abc"):
            np.testing.assert_allclose(scores[q, c], np.sort(distances_sq[q, y_train == label])[:3].sum())
    np.testing.assert_array_equal(ccknn_predict(distances_sq, y_train, 3), np.array(list("abc"))[scores.argmin(1)])
    # classes fix the column order
    np.testing.assert_allclose(ccknn_scores(distances_sq, y_train, 3, classes=["c", "a"]), scores[:, [2, 0]])


def test_ccknn_differs_from_knn_and_rescales_small_classes():
    # one very close "b" point, but class "a" has three moderately close points
    distances_sq = np.array([[1.0, 1.0, 1.0, 0.1, 5.0, 5.0]])
    y_train = np.array([0, 0, 0, 1, 1, 1])
    assert ccknn_predict(distances_sq, y_train, 3)[0] == 0
    assert ccknn_predict(distances_sq, y_train, 1)[0] == 1
    # class 1 has a single point: its score is k times its distance, not the distance alone
    scores = ccknn_scores(np.array([[1.0, 1.0, 0.5]]), np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(scores, [[2.0, 1.0]])


def test_ccknn_bad_input():
    with pytest.raises(ValueError, match="distances_sq must have shape"):
        ccknn_scores(np.zeros((2, 3, 4)), np.zeros(3), 1)
    with pytest.raises(ValueError, match=re.escape("y_train must have shape (3,)")):
        ccknn_scores(np.zeros((2, 3)), np.zeros(4), 1)
    with pytest.raises(ValueError, match="NaN"):
        ccknn_scores(np.full((2, 3), np.nan), np.zeros(3), 1)
    with pytest.raises(ValueError, match="n_neighbors must be an int >= 1"):
        ccknn_predict(np.zeros((2, 3)), np.zeros(3), 0)
    with pytest.raises(ValueError, match="does not occur in y_train"):
        ccknn_scores(np.zeros((2, 3)), np.zeros(3), 1, classes=[0, 1])


@pytest.mark.parametrize("objective", ["local", "class_conditional"])
def test_fit_improves_objective_and_gives_psd_metric(objective):
    X, y = blobs()
    learner = CCMLMetric(2, objective=objective, alpha=0.01, max_iter=200).fit(X, y)
    assert learner.components_.shape == (2, X.shape[1])
    np.testing.assert_allclose(learner.metric_, learner.components_.T @ learner.components_)
    assert np.linalg.eigvalsh(learner.metric_).min() >= -1e-12 * np.abs(learner.metric_).max()
    np.testing.assert_allclose(learner.transform(X), X @ learner.components_.T)
    weights = np.ones(len(X))
    initial = learner._initial_components(X, weights, 2)
    before = brute_force_loss(initial, X, y, weights, 3, objective, 0.01)
    after = brute_force_loss(learner.components_, X, y, weights, 3, objective, 0.01)
    np.testing.assert_allclose(learner.objective_value_, after, rtol=1e-10)
    assert after < before - 0.05
    assert 0 < learner.n_iter_ <= 200


def test_wine_standardized_error_close_to_paper():
    # Im & Taylor, Table I: wine 3-NN error 2.13 % (Euclidean 3.99 %); benchmark: repeated 10-fold CV.
    X, y = load_wine(return_X_y=True)
    errors = []
    for train, test in list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y)):
        scaler = StandardScaler().fit(X[train])
        X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
        learner = CCMLMetric().fit(X_train, y[train])
        Z_train, Z_test = learner.transform(X_train), learner.transform(X_test)
        errors.append(1 - KNeighborsClassifier(3).fit(Z_train, y[train]).score(Z_test, y[test]))
        predicted = ccknn_predict(pairwise_distances(Z_test, Z_train) ** 2, y[train], 3)
        errors.append(np.mean(predicted != y[test]))
    assert np.mean(errors) <= 0.035


def test_convergence_warning_reports_gradient():
    X, y = blobs()
    with pytest.warns(ConvergenceWarning, match="max \\|gradient\\|"):
        CCMLMetric(max_iter=1).fit(X, y)


def test_random_init_is_reproducible():
    X, y = blobs()
    fits = [CCMLMetric(2, init="random", random_state=3, max_iter=20).fit(X, y) for _ in range(2)]
    np.testing.assert_array_equal(fits[0].components_, fits[1].components_)


def test_array_init_is_used():
    X, y = blobs()
    pca = CCMLMetric(2, init="pca", max_iter=20).fit(X, y)
    start = pca._initial_components(X, np.ones(len(X)), 2)
    np.testing.assert_array_equal(CCMLMetric(2, init=start, max_iter=20).fit(X, y).components_, pca.components_)
    other = CCMLMetric(2, init=start[::-1].copy(), max_iter=20).fit(X, y)
    assert not np.allclose(other.components_, pca.components_)


def test_zero_sample_weight_equals_dropping_samples():
    X, y = blobs()
    weights = np.ones(len(X))
    weights[::5] = 0.0
    weighted = CCMLMetric(2, max_iter=30).fit(X, y, sample_weight=weights)
    dropped = CCMLMetric(2, max_iter=30).fit(X[weights > 0], y[weights > 0])
    np.testing.assert_allclose(weighted.components_, dropped.components_, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"n_components": 9}, ValueError, "n_components must be <= n_features=4, got 9"),
        ({"n_components": 0}, ValueError, "n_components must be an int >= 1, got 0"),
        ({"n_neighbors": "3"}, TypeError, "n_neighbors must be an int, got '3'"),
        ({"objective": "global"}, ValueError, "objective must be one of"),
        ({"alpha": -0.1}, ValueError, "alpha must be >= 0, got -0.1"),
        ({"init": "lda"}, ValueError, "init must be one of"),
        ({"init": np.eye(3)}, ValueError, "init must have last axis of length dim=4"),
        ({"n_components": 2, "init": np.eye(3, 4)}, ValueError, "init must have shape (2, 4), got (3, 4)"),
        ({"max_iter": 0}, ValueError, "max_iter must be an int >= 1, got 0"),
        ({"tol": -1.0}, ValueError, "tol must be > 0"),
        ({"init": "random", "random_state": "seed"}, TypeError, "random_state must be"),
    ],
)
def test_bad_parameters(params, error, message):
    X, y = blobs()
    with pytest.raises(error, match=re.escape(message)):
        CCMLMetric(**params).fit(X, y)


def test_bad_data():
    X, y = blobs()
    X_inf = X.copy()
    X_inf[1, 2] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        CCMLMetric().fit(X_inf, y)
    with pytest.raises(ValueError, match="at least two classes"):
        CCMLMetric().fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="Unknown label type"):
        CCMLMetric().fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match="sample_weight must be finite"):
        CCMLMetric().fit(X, y, sample_weight=-np.ones(len(X)))


@parametrize_with_checks(
    [CCMLMetric(max_iter=30)],
    expected_failed_checks=lambda estimator: {
        "check_sample_weight_equivalence_on_dense_data": (
            "a repeated sample is its own nearest same-class neighbour, so integer weights differ from repetition"
        ),
    },
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)
