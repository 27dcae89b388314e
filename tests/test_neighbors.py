"""Tests of riemlocal.neighbors.LocalMetricKNN."""

import re

import numpy as np
import pytest
from helpers import CovarianceLearner
from sklearn.neighbors import KNeighborsClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from riemlocal.distances import RULES, distance, pairwise_distances, rules_for
from riemlocal.fields import LazyField
from riemlocal.neighbors import (
    GlobalShortlist,
    LocalMetricKNN,
    ccknn_scores,
    check_where_rule,
    field_structure,
    knn_votes,
)
from riemlocal.placement import fit_local_metric


def two_regime_data(n_samples, seed):
    """Left half (classes 0, 1): the label is in feature 1, feature 2 is loud noise; right half (2, 3): the reverse."""
    rng = np.random.default_rng(seed)
    bit, side = rng.integers(0, 2, size=(2, n_samples))
    signal = (2 * bit - 1) + rng.normal(scale=0.3, size=n_samples)
    noise = rng.normal(scale=8.0, size=n_samples)
    X = np.c_[np.where(side == 0, -20.0, 20.0), np.where(side == 0, signal, noise), np.where(side == 0, noise, signal)]
    X = np.c_[X, rng.normal(scale=4.0, size=(n_samples, 3))]  # shared noise, removed by any learned metric
    return X, 2 * side + bit


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 25)
    X = rng.normal(size=(75, 3)) * [1.0, 2.0, 0.5] + np.c_[y, -y, 0.3 * y]
    return X, y


@pytest.mark.parametrize("rule", ["test", "train", "line", "line_length", "geodesic"])
def test_global_placement_is_global_mahalanobis_knn(data, rule):
    X, y = data
    Xq = np.random.default_rng(1).normal(size=(30, 3)) * 2
    clf = LocalMetricKNN(CovarianceLearner(), where="global", rule=rule, n_neighbors=3).fit(X, y)
    np.testing.assert_allclose(clf.global_metric_, CovarianceLearner().fit(X, y).metric_, rtol=1e-5)
    mapping = np.linalg.cholesky(clf.global_metric_)
    oracle = KNeighborsClassifier(n_neighbors=3).fit(X @ mapping, y)
    np.testing.assert_array_equal(clf.predict(Xq), oracle.predict(Xq @ mapping))
    np.testing.assert_allclose(clf.predict_proba(Xq), oracle.predict_proba(Xq @ mapping))


def test_class_placement_train_rule_uses_the_class_metric_of_the_training_point(data):
    X, y = data
    Xq = np.random.default_rng(2).normal(size=(20, 3)) * 2
    clf = LocalMetricKNN(CovarianceLearner(), where="class", rule="train", shortlist=75, n_neighbors=3).fit(X, y)
    metrics = clf.placement_.class_metrics_[y]  # (n_train, D, D)
    diff = X[None] - Xq[:, None]
    sq = np.einsum("nti,tij,ntj->nt", diff, metrics, diff)
    nearest = np.argsort(sq, axis=1)[:, :3]
    votes = np.stack([np.bincount(y[row], minlength=3) for row in nearest])
    np.testing.assert_array_equal(clf.predict(Xq), np.argmax(votes, axis=1))


def test_lazy_test_rule_uses_the_metric_learned_at_the_query(data):
    X, y = data
    Xq = np.random.default_rng(3).normal(size=(5, 3))
    clf = LocalMetricKNN(CovarianceLearner(), where="lazy", rule="test", n_local=30, shortlist=75).fit(X, y)
    assert isinstance(clf.field_, LazyField)
    mapping = np.linalg.cholesky(clf.global_metric_)
    candidates, distances = clf.local_distances(Xq)
    for query, cand, dist in zip(Xq, candidates, distances):
        near = np.argsort((((X - query) @ mapping) ** 2).sum(-1))[:30]
        metric = fit_local_metric(CovarianceLearner(), X[near], y[near], fallback=clf.global_metric_)
        np.testing.assert_allclose(dist, np.einsum("si,ij,sj->s", X[cand] - query, metric, X[cand] - query))


def test_reference_line_rule_matches_riemlocal_distances(data):
    X, y = data
    Xq = np.random.default_rng(4).normal(size=(6, 3))
    clf = LocalMetricKNN(CovarianceLearner(), where="reference", rule="line", n_references=8, random_state=0)
    clf.fit(X, y)
    candidates, distances = clf.local_distances(Xq)
    np.testing.assert_allclose(distances, distance(clf.field_, Xq[:, None], X[candidates], rule="line", squared=True))
    # the line energy is bounded by the largest cell metric along the segment, and differs from the test rule
    test_rule = distance(clf.field_, Xq[:, None], X[candidates], rule="test", squared=True)
    assert not np.allclose(distances, test_rule)


def test_ccknn_equals_the_class_conditional_rule_on_all_points(data):
    X, y = data
    Xq = np.random.default_rng(5).normal(size=(25, 3)) * 2
    clf = LocalMetricKNN(CovarianceLearner(), where="global", decision="ccknn", shortlist=25, n_neighbors=3).fit(X, y)
    mapping = np.linalg.cholesky(clf.global_metric_)
    sq = (((Xq[:, None] - X[None]) @ mapping) ** 2).sum(-1)
    np.testing.assert_allclose(clf.decision_scores(Xq), ccknn_scores(sq, y, 3))
    np.testing.assert_array_equal(clf.predict(Xq), np.argmin(ccknn_scores(sq, y, 3), axis=1))
    assert not hasattr(clf, "predict_proba")


@pytest.mark.parametrize(
    "params",
    [dict(where="class", rule="train"), dict(where="lazy", rule="test"), dict(where="reference", rule="test"),
     dict(where="lazy", rule="train", decision="ccknn")],
)
def test_local_metrics_beat_euclidean_on_two_regimes(params):
    X, y = two_regime_data(160, seed=0)
    Xq, yq = two_regime_data(200, seed=1)
    euclidean = KNeighborsClassifier(n_neighbors=3).fit(X, y).score(Xq, yq)
    global_ = LocalMetricKNN(CovarianceLearner(), where="global").fit(X, y).score(Xq, yq)
    local = LocalMetricKNN(CovarianceLearner(), n_references=20, random_state=0, **params).fit(X, y).score(Xq, yq)
    assert local > euclidean + 0.1
    assert local > global_ + 0.1


def test_n_jobs_gives_the_same_predictions(data):
    from joblib import parallel_config

    X, y = data
    Xq = np.random.default_rng(6).normal(size=(40, 3))
    one = LocalMetricKNN(CovarianceLearner(), where="lazy").fit(X, y).predict(Xq)
    with parallel_config(backend="threading"):
        two = LocalMetricKNN(CovarianceLearner(), where="lazy", n_jobs=2).fit(X, y).predict(Xq)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(where="cluster"), "where must be one of"),
        (dict(rule="geodesics"), "rule must be one of"),
        (dict(decision="vote"), "decision must be one of"),
        (dict(interpolation="cubic"), "interpolation must be one of"),
        (dict(where="reference", rule="geodesic"), "rule='geodesic' serves fields of structure 'constant' or 'smooth'"),
        (dict(where="lazy", rule="geodesic"), "rule='geodesic' serves fields of structure 'constant' or 'smooth'"),
        (dict(n_neighbors=0), "n_neighbors must be an int >= 1"),
        (dict(shortlist=2), "shortlist must be >= n_neighbors=3"),
        (dict(decision="ccknn", n_neighbors=6, shortlist=10), "larger than the smallest class"),
    ],
)
def test_bad_parameters(params, message):
    X = np.random.default_rng(0).normal(size=(12, 2))
    y = np.array([0] * 7 + [1] * 5)
    with pytest.raises(ValueError, match=re.escape(message)):
        LocalMetricKNN(CovarianceLearner(), **params).fit(X, y)


def test_bad_data(data):
    X, y = data
    with pytest.raises(ValueError, match="at least 2 classes"):
        LocalMetricKNN(CovarianceLearner()).fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="n_neighbors=3 must be <= n_samples=2"):
        LocalMetricKNN(CovarianceLearner()).fit(X[[0, 30]], [0, 1])
    clf = LocalMetricKNN(CovarianceLearner()).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :2])
    with pytest.raises(ValueError, match="NaN"):
        clf.predict(np.full((1, 3), np.nan))


@parametrize_with_checks(
    [
        LocalMetricKNN(),  # the default learner, LDAMetric
        LocalMetricKNN(CovarianceLearner(), where="lazy", rule="train", n_local=10),
        LocalMetricKNN(CovarianceLearner(), where="reference", rule="line", n_references=5, random_state=0),
    ],
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_global_shortlist_is_the_brute_force_global_neighbourhood(data):
    X, y = data
    rng = np.random.default_rng(3)
    A = rng.normal(size=(3, 3))
    metric = A @ A.T + np.eye(3)
    Xq = rng.normal(size=(7, 3))
    sq = np.einsum("qni,ij,qnj->qn", X[None] - Xq[:, None], metric, X[None] - Xq[:, None])
    found = GlobalShortlist(X, metric, [np.arange(len(X))])(Xq, 5)
    np.testing.assert_array_equal(found, np.argsort(sq, axis=1)[:, :5])
    groups = [np.flatnonzero(y == c) for c in range(3)]
    per_class = GlobalShortlist(X, metric, groups)(Xq, 4)
    expected = np.concatenate([g[np.argsort(sq[:, g], axis=1)[:, :4]] for g in groups], axis=1)
    np.testing.assert_array_equal(per_class, expected)


def test_knn_votes_count_the_k_nearest_labels_with_stable_ties():
    distances_sq = np.array([[3.0, 1.0, 2.0, 1.0], [0.5, 0.5, 0.5, 9.0]])
    labels = np.array([[0, 1, 2, 2], [2, 0, 0, 1]])
    np.testing.assert_array_equal(knn_votes(distances_sq, labels, 3, 3), [[0, 1, 2], [2, 0, 1]])


@pytest.mark.parametrize("where", ["global", "class", "exemplar", "reference", "lazy"])
@pytest.mark.parametrize("interpolation", ["nearest", "rbf", "smooth"])
def test_the_table_of_legal_pairs_is_what_fits_and_predicts(where, interpolation):
    X = np.random.default_rng(0).normal(size=(12, 2))
    y = np.array([0] * 6 + [1] * 6)
    served = rules_for(field_structure(where, interpolation))
    for rule in RULES:
        params = dict(where=where, interpolation=interpolation, rule=rule, shortlist=3, n_local=6, n_references=4)
        if rule in served:
            check_where_rule(where, interpolation, rule)
            clf = LocalMetricKNN(CovarianceLearner(), random_state=0, **params).fit(X, y)
            assert np.all(np.isfinite(clf.local_distances(X[:2] + 0.1)[1]))
        else:
            with pytest.raises(ValueError, match=f"rule='{rule}' serves fields of structure"):
                LocalMetricKNN(CovarianceLearner(), **params).fit(X, y)


def test_geodesic_rule_is_brute_force_geodesic_knn_on_a_curved_field():
    """Per-class metrics blended smoothly: the classifier's votes are those of the exhaustive geodesic k-NN."""
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1, 2], 8)
    X = rng.normal(size=(24, 2)) * np.array([[2.0, 0.1], [0.1, 2.0], [0.5, 0.5]])[y] + np.c_[1.5 * y, np.zeros(24)]
    Xq = rng.uniform(-1.0, 3.5, size=(12, 2))
    clf = LocalMetricKNN(CovarianceLearner(), where="class", interpolation="smooth", rule="geodesic", shortlist=24, n_neighbors=3)
    clf.fit(X, y)
    geodesic = pairwise_distances(clf.field_, Xq, X, rule="geodesic")
    line = pairwise_distances(clf.field_, Xq, X, rule="line_length")
    assert np.all(geodesic <= line * (1 + 1e-6)) and np.any(geodesic < line * (1 - 1e-3))  # the field is curved
    nearest = np.argsort(geodesic, axis=1, kind="stable")[:, :3]
    votes = np.stack([np.bincount(y[row], minlength=3) for row in nearest])
    np.testing.assert_array_equal(clf.predict(Xq), np.argmax(votes, axis=1))
    np.testing.assert_allclose(clf.predict_proba(Xq), votes / 3)
