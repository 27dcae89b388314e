import re

import numpy as np
import pytest
from scipy.optimize import check_grad, minimize
from sklearn.datasets import load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from riemlocal.learners import LMNNMetric
from riemlocal.learners._lmnn import _LargeMarginObjective, target_neighbors

EXPECTED_FAILED = {
    "check_sample_weight_equivalence_on_dense_data": "LMNN weights scale the loss terms anchored at "
    "a sample (Ramanan & Baker, eq. LMNN); a repeated sample is also its own target neighbour "
    "and impostor, so integer weights are not repetitions",
}


@parametrize_with_checks(
    [LMNNMetric(), LMNNMetric(per_class=True, n_components=2, init="pca")],
    expected_failed_checks=lambda _: EXPECTED_FAILED,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def noisy_problem(rng, n=120, n_noise=4):
    """Two classes separated along one axis, hidden under high-variance noise axes."""
    y = np.arange(n) % 2
    X = np.c_[y + 0.2 * rng.normal(size=n), 3 * rng.normal(size=(n, n_noise))]
    return X, y


def make_objective(X, y, w, per_class, n_targets=3):
    """The exact objective: every differently labelled pair is a candidate impostor."""
    classes, index = np.unique(y, return_inverse=True)
    n_groups = len(classes) if per_class else 1
    groups = index if per_class else np.zeros(len(y), dtype=int)
    targets, valid = target_neighbors(X, index, n_targets)
    objective = _LargeMarginObjective(X, w, index, groups, n_groups, X.shape[1], targets, valid, 0.5)
    objective.set_candidates(*np.nonzero(index[:, None] != index[None, :]))
    return objective


def brute_force_loss(X, y, w, factors, per_class, k=3):
    """Triple loop over (i, j, l); a pair (a, b) is measured with the metric of b's class."""
    classes = np.unique(y)

    def dist(a, b):
        L = factors[np.searchsorted(classes, y[b])] if per_class else factors[0]
        return np.sum((L @ (X[a] - X[b])) ** 2)

    loss = 0.0
    for i in range(len(y)):
        same = np.flatnonzero((y == y[i]) & (np.arange(len(y)) != i))
        for j in same[np.argsort(((X[same] - X[i]) ** 2).sum(1))][:k]:
            loss += 0.5 * w[i] * dist(i, j)
            for m in np.flatnonzero(y != y[i]):
                loss += 0.5 * w[i] * max(0.0, 1.0 + dist(i, j) - dist(i, m))
    return loss


@pytest.mark.parametrize("per_class", [False, True])
def test_loss_matches_brute_force_and_gradient_is_exact(per_class):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 3)), rng.integers(0, 3, 30)
    w = rng.uniform(0.5, 2.0, 30)
    objective = make_objective(X, y, w, per_class)
    params = rng.normal(size=objective.factors(np.zeros((3 if per_class else 1) * 9)).size)
    loss, grad = objective.loss_grad(params)
    np.testing.assert_allclose(loss, brute_force_loss(X, y, w, objective.factors(params), per_class), rtol=1e-12)
    error = check_grad(lambda p: objective.loss_grad(p)[0], lambda p: objective.loss_grad(p)[1], params)
    assert error < 1e-5 * np.linalg.norm(grad)


@pytest.mark.parametrize("per_class", [False, True])
def test_impostor_search_matches_brute_force(per_class):
    rng = np.random.default_rng(14)
    X, y = rng.normal(size=(40, 3)), rng.integers(0, 3, 40)
    objective = make_objective(X, y, np.ones(40), per_class)
    factors = rng.normal(size=(3 if per_class else 1, 3, 3))
    L = factors[y] if per_class else np.repeat(factors, 40, axis=0)  # metric of each point's class
    dist = (np.einsum("bij,abj->abi", L, X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    targets, valid = objective.target_cols.reshape(40, -1), objective.valid
    radius = 1 + np.array([dist[i, targets[i]].max() for i in range(40)])
    for slack in (0.0, 0.5):
        expected = np.argwhere((y[:, None] != y[None, :]) & (dist < (1 + slack) * radius[:, None]))
        found = np.c_[objective.impostor_pairs(factors.ravel(), slack)]
        np.testing.assert_array_equal(found, expected)
    assert valid.all()


def test_per_class_objective_with_equal_factors_is_the_global_one():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(25, 3)), rng.integers(0, 3, 25)
    w = rng.uniform(0.5, 2.0, 25)
    L = rng.normal(size=(3, 3))
    loss, grad = make_objective(X, y, w, False).loss_grad(L.ravel())
    loss_pc, grad_pc = make_objective(X, y, w, True).loss_grad(np.tile(L, (3, 1, 1)).ravel())
    np.testing.assert_allclose(loss_pc, loss, rtol=1e-12)
    np.testing.assert_allclose(grad_pc.reshape(3, 3, 3).sum(0), grad.reshape(3, 3), rtol=1e-10)


@pytest.mark.parametrize("per_class", [False, True])
def test_fit_decreases_exact_loss_and_metric_is_psd(per_class):
    rng = np.random.default_rng(2)
    X, y = noisy_problem(rng)
    lmnn = LMNNMetric(per_class=per_class).fit(X, y)
    objective = make_objective(X, y, np.ones(len(y)), per_class)
    factors = lmnn.class_components_ if per_class else lmnn.components_[None]
    final, _ = objective.loss_grad(factors.ravel())
    initial, _ = objective.loss_grad(np.tile(np.eye(5), (len(factors), 1, 1)).ravel())
    assert final < 0.2 * initial
    np.testing.assert_allclose(lmnn.metric_, lmnn.components_.T @ lmnn.components_, atol=1e-12)
    assert np.linalg.eigvalsh(lmnn.metric_).min() > -1e-10
    assert 0 < lmnn.n_iter_ <= lmnn.max_iter
    if per_class:
        assert lmnn.metrics_.shape == (2, 5, 5)
        np.testing.assert_allclose(lmnn.metrics_, np.einsum("cdi,cdj->cij", factors, factors))
        assert np.linalg.eigvalsh(lmnn.metrics_).min() > -1e-10
        np.testing.assert_allclose(lmnn.metric_, lmnn.metrics_.mean(0), atol=1e-10)


def test_final_metric_has_no_missed_impostor():
    # the fit must end at a point where the candidate set holds every active impostor: restarting
    # L-BFGS on the exact objective cannot decrease the loss noticeably
    rng = np.random.default_rng(3)
    X, y = noisy_problem(rng)
    lmnn = LMNNMetric(tol=1e-9).fit(X, y)
    objective = make_objective(X, y, np.ones(len(y)), False)
    loss, _ = objective.loss_grad(lmnn.components_.ravel())
    polished = minimize(objective.loss_grad, lmnn.components_.ravel(), jac=True, method="L-BFGS-B")
    assert polished.fun > (1 - 1e-3) * loss


def test_beats_euclidean_knn():
    rng = np.random.default_rng(4)
    X, y = noisy_problem(rng, n=300)
    train, test = slice(0, 200), slice(200, None)
    lmnn = LMNNMetric().fit(X[train], y[train])

    def error(Z):
        return 1 - KNeighborsClassifier(3).fit(Z[train], y[train]).score(Z[test], y[test])

    assert error(lmnn.transform(X)) < 0.05 < 0.25 < error(X)
    assert lmnn.metric_[0, 0] > 0.9 * np.trace(lmnn.metric_)


def test_wine_error_is_below_euclidean():
    X, y = load_wine(return_X_y=True)
    learned, euclidean = [], []
    for train, test in StratifiedShuffleSplit(n_splits=3, test_size=0.3, random_state=0).split(X, y):
        scaler = StandardScaler().fit(X[train])
        X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
        lmnn = LMNNMetric().fit(X_train, y[train])
        knn = KNeighborsClassifier(3)
        learned.append(1 - knn.fit(lmnn.transform(X_train), y[train]).score(lmnn.transform(X_test), y[test]))
        euclidean.append(1 - knn.fit(X_train, y[train]).score(X_test, y[test]))
    assert np.mean(learned) <= 0.029 < np.mean(euclidean)


@pytest.mark.parametrize("per_class", [False, True])
def test_zero_weight_equals_dropping(per_class):
    rng = np.random.default_rng(5)
    X, y = noisy_problem(rng, n=80)
    w = rng.uniform(0.5, 2.0, len(y)) * (rng.uniform(size=len(y)) > 0.3)
    full = LMNNMetric(per_class=per_class).fit(X, y, sample_weight=w)
    dropped = LMNNMetric(per_class=per_class).fit(X[w > 0], y[w > 0], sample_weight=w[w > 0])
    np.testing.assert_allclose(full.metric_, dropped.metric_, atol=1e-12)
    assert full.n_iter_ == dropped.n_iter_


def test_sample_weight_changes_the_fit():
    rng = np.random.default_rng(6)
    X, y = noisy_problem(rng, n=80)
    w = np.where(X[:, 1] > 0, 5.0, 0.2)
    assert not np.allclose(LMNNMetric().fit(X, y, sample_weight=w).metric_, LMNNMetric().fit(X, y).metric_)


def test_per_class_metrics_follow_their_class():
    # class 0 is tight along axis 0 and spread along axis 1, class 1 the other way round;
    # only class-specific metrics can shrink each class's own spread direction
    rng = np.random.default_rng(7)
    n = 60
    X0 = np.c_[0.1 * rng.normal(size=n), 2.0 * rng.normal(size=n)] + [-1.0, 0.0]
    X1 = np.c_[2.0 * rng.normal(size=n), 0.1 * rng.normal(size=n)] + [0.0, -1.0]
    X, y = np.r_[X0, X1], np.repeat([0, 1], n)
    metrics = LMNNMetric(per_class=True).fit(X, y).metrics_
    assert metrics[0, 0, 0] > metrics[0, 1, 1]
    assert metrics[1, 1, 1] > metrics[1, 0, 0]


def test_init_options():
    rng = np.random.default_rng(8)
    X, y = noisy_problem(rng, n=60)
    assert LMNNMetric(init="pca", n_components=2).fit(X, y).components_.shape == (2, 5)
    a = LMNNMetric(init="random", random_state=0).fit(X, y).metric_
    np.testing.assert_allclose(LMNNMetric(init="random", random_state=0).fit(X, y).metric_, a)
    L0 = rng.normal(size=(3, 5))
    assert LMNNMetric(init=L0).fit(X, y).components_.shape == (3, 5)


def test_single_class_keeps_initial_metric():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(20, 3))
    lmnn = LMNNMetric().fit(X, np.zeros(20, dtype=int))
    np.testing.assert_allclose(lmnn.metric_, np.eye(3))
    assert lmnn.n_iter_ == 0


def test_convergence_warning_when_max_iter_is_hit():
    X, y = noisy_problem(np.random.default_rng(10))
    message = r"did not converge in max_iter=2 iterations: relative loss decrease [0-9.e-]+ in the last"
    with pytest.warns(ConvergenceWarning, match=message):
        lmnn = LMNNMetric(max_iter=2).fit(X, y)
    assert lmnn.n_iter_ == 2


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"n_targets": 0}, ValueError, "n_targets must be an int >= 1, got 0"),
        ({"n_targets": 2.5}, TypeError, "n_targets must be an int, got 2.5"),
        ({"max_iter": 0}, ValueError, "max_iter must be an int >= 1, got 0"),
        ({"tol": -1.0}, ValueError, "tol must be >= 0, got -1.0"),
        ({"push_weight": 1.5}, ValueError, "push_weight must be in [0, 1], got 1.5"),
        ({"init": "lda"}, ValueError, "init must be one of ['identity', 'pca', 'random'], got 'lda'"),
        ({"init": np.eye(3)}, ValueError, "init must have last axis of length dim=5"),
        ({"init": np.eye(5), "n_components": 2}, ValueError, "init has 5 rows but n_components=2"),
        ({"n_components": 6}, ValueError, "n_components must be in [1, n_features=5], got 6"),
        ({"init": "random", "random_state": "x"}, TypeError, "random_state must be None"),
    ],
)
def test_bad_parameters(params, error, message):
    X, y = noisy_problem(np.random.default_rng(11), n=30)
    with pytest.raises(error, match=re.escape(message)):
        LMNNMetric(**params).fit(X, y)


def test_bad_data():
    X, y = noisy_problem(np.random.default_rng(12), n=30)
    with pytest.raises(ValueError, match="sample_weight must not be all zero weights"):
        LMNNMetric().fit(X, y, sample_weight=np.zeros(30))
    with pytest.raises(ValueError, match="sample_weight must be finite and non-negative"):
        LMNNMetric().fit(X, y, sample_weight=-np.ones(30))
    with pytest.raises(ValueError, match="NaN"):
        LMNNMetric().fit(np.where(X > 2, np.nan, X), y)
    with pytest.raises(ValueError, match="Unknown label type"):
        LMNNMetric().fit(X, X[:, 0])
    with pytest.raises(ValueError, match=re.escape("X has 4 features, but LMNNMetric is expecting 5")):
        LMNNMetric().fit(X, y).transform(X[:, :4])


def test_verbose_shows_a_progress_bar(capsys):
    X, y = noisy_problem(np.random.default_rng(13), n=40)
    LMNNMetric(verbose=True).fit(X, y)
    assert "LMNN" in capsys.readouterr().err
    LMNNMetric().fit(X, y)
    assert capsys.readouterr().err == ""
