"""Tests of riemlocal.placement (LocalMetrics) and the LazyField."""

import re

import numpy as np
import pytest
from joblib import parallel_config
from scipy.special import softmax

from helpers import CovarianceLearner
from riemlocal.fields import ConstantField, LazyField, NearestLocalField, RBFLocalField, SmoothLocalField
from riemlocal.learners import WEIGHT_FLOOR, condition_metric, fit_local_metric
from riemlocal.placement import LocalMetrics, interpolate, place_field
from riemlocal.placement._regions import class_weights

CALLS = {}


class SpyLearner(CovarianceLearner):
    """Records what each fit received in ``CALLS[tag]`` (clones share the tag)."""

    def __init__(self, reg=0.1, n_components=None, tag="spy"):
        super().__init__(reg)
        self.n_components = n_components
        self.tag = tag

    def fit(self, X, y, sample_weight=None):
        CALLS.setdefault(self.tag, []).append(
            dict(X=np.array(X), y=np.array(y), w=None if sample_weight is None else np.array(sample_weight),
                 n_components=self.n_components)
        )
        return super().fit(X, y, sample_weight)


class JointSpyLearner(CovarianceLearner):
    """Learner with a ``per_class`` option: one metric per class, each scaled by a class factor."""

    def __init__(self, reg=0.1, per_class=False):
        super().__init__(reg)
        self.per_class = per_class

    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight)
        if self.per_class:
            self.classes_ = np.unique(y)
            self.metrics_ = np.stack([(c + 1.0) * self.metric_ for c in range(len(self.classes_))])
        return self


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 20)
    X = rng.normal(size=(60, 3)) + np.c_[y, -y, 0.5 * y]
    return X, y


def test_condition_metric_unit_trace_and_spd():
    low_rank = np.outer([1.0, 2.0, 0.0], [1.0, 2.0, 0.0])
    metric = condition_metric(low_rank, normalize=True, ridge=1e-3)
    np.testing.assert_allclose(np.trace(metric), 1.0 + 1e-3)
    assert np.linalg.eigvalsh(metric).min() > 0
    np.testing.assert_allclose(metric - 1e-3 / 3 * np.eye(3), low_rank / 5.0)


@pytest.mark.parametrize(
    "where, kind, n_centers",
    [("global", ConstantField, 1), ("class", NearestLocalField, 60), ("exemplar", NearestLocalField, 60),
     ("reference", NearestLocalField, 7)],
)
def test_fields_have_right_types_and_shapes(data, where, kind, n_centers):
    X, y = data
    placement = LocalMetrics(CovarianceLearner(), where=where, n_references=7, random_state=0).fit(X, y)
    assert placement.metrics_.shape == (n_centers, 3, 3)
    assert placement.centers_.shape == (n_centers, 3)
    field = placement.nearest_field()
    assert isinstance(field, kind)
    assert field.metric_matrix(X[:5]).shape == (5, 3, 3)
    if where != "global":
        assert isinstance(placement.rbf_field(), RBFLocalField)
        assert isinstance(placement.smooth_field(2.0), SmoothLocalField)
        assert isinstance(placement.nearest_field("own"), NearestLocalField)
        np.testing.assert_allclose(placement.nearest_field().proximity, placement.global_metric_)
        # every local metric is trace-normalized (up to the ridge)
        np.testing.assert_allclose(np.trace(placement.metrics_, axis1=1, axis2=2), 1 + placement.ridge)


def test_global_metric_is_the_learner_metric(data):
    X, y = data
    placement = LocalMetrics(CovarianceLearner(), where="global", ridge=0.0).fit(X, y)
    np.testing.assert_allclose(placement.global_metric_, CovarianceLearner().fit(X, y).metric_)
    np.testing.assert_allclose(placement.nearest_field().metric, placement.global_metric_)


def test_class_field_reads_the_class_metric_of_training_points(data):
    X, y = data
    placement = LocalMetrics(CovarianceLearner(), where="class").fit(X, y)
    assert placement.class_metrics_.shape == (3, 3, 3)
    np.testing.assert_allclose(placement.nearest_field().metric_matrix(X), placement.class_metrics_[y])
    # different classes get different metrics
    assert not np.allclose(placement.class_metrics_[0], placement.class_metrics_[1])


def test_class_weights_are_class_members_and_their_neighbours(data):
    X, y = data
    calls = CALLS.setdefault("class", [])
    placement = LocalMetrics(SpyLearner(tag="class"), where="class", n_local=4).fit(X, y)
    local = calls[1:]  # calls[0] is the global fit on everything
    assert calls[0]["w"] is None and len(calls[0]["X"]) == 60
    assert len(local) == 3
    mapped = X @ np.linalg.cholesky(placement.global_metric_)
    sq = ((mapped[:, None] - mapped[None]) ** 2).sum(-1)
    for label, call in enumerate(local):
        expected = np.unique(np.argsort(sq[y == label], axis=1)[:, :4])
        np.testing.assert_allclose(np.sort(call["X"], axis=0), np.sort(X[expected], axis=0))
        # rank "auto": number of distinct classes among the weighted points
        assert call["n_components"] == len(np.unique(y[expected]))


def test_exemplar_fits_use_the_neighbourhood_of_each_point(data):
    X, y = data
    calls = CALLS.setdefault("exemplar", [])
    placement = LocalMetrics(SpyLearner(tag="exemplar"), where="exemplar", n_local=10).fit(X, y)
    mapped = X @ np.linalg.cholesky(placement.global_metric_)
    for i, call in enumerate(calls[1:]):
        sq = ((mapped - mapped[i]) ** 2).sum(-1)
        np.testing.assert_allclose(np.sort(call["X"], axis=0), np.sort(X[np.argsort(sq)[:10]], axis=0))
        expected = fit_local_metric(CovarianceLearner(), call["X"], call["y"])
        if len(np.unique(call["y"])) > 1:
            np.testing.assert_allclose(placement.metrics_[i], expected)


def test_reference_weights_are_eq15_and_reach_the_learner(data):
    X, y = data
    calls = CALLS.setdefault("reference", [])
    placement = LocalMetrics(
        SpyLearner(tag="reference"), where="reference", n_references=5, sigma=2.0, cv_smoothing=False, random_state=1
    ).fit(X, y)
    mapped = X @ np.linalg.cholesky(placement.global_metric_)
    references = mapped[placement.reference_indices_]
    weights = softmax(-((mapped[:, None] - references[None]) ** 2).sum(-1) / 2.0, axis=1)
    for j, call in enumerate(calls[1:]):
        keep = weights[:, j] >= WEIGHT_FLOOR * weights[:, j].max()
        np.testing.assert_allclose(call["w"], weights[keep, j])
        np.testing.assert_allclose(call["X"], X[keep])
    np.testing.assert_allclose(placement.centers_, X[placement.reference_indices_])


def test_cross_validated_smoothing_is_eq16(data):
    X, y = data
    options = dict(where="reference", n_references=6, sigma=3.0, random_state=2)
    raw = LocalMetrics(CovarianceLearner(), cv_smoothing=False, **options).fit(X, y)
    smoothed = LocalMetrics(CovarianceLearner(), cv_smoothing=True, **options).fit(X, y)
    mapped = X @ np.linalg.cholesky(raw.global_metric_)
    references = mapped[raw.reference_indices_]
    for j in range(6):
        others = [i for i in range(6) if i != j]
        w = np.exp(-((references[others] - references[j]) ** 2).sum(-1) / 3.0)
        expected = np.einsum("i,ijk->jk", w / w.sum(), raw.metrics_[others])
        np.testing.assert_allclose(smoothed.metrics_[j], expected, rtol=1e-10)


def test_hybrid_uses_global_learner_for_proximity(data):
    X, y = data
    placement = LocalMetrics(CovarianceLearner(reg=1.0), where="class", global_learner=CovarianceLearner(reg=0.01))
    placement.fit(X, y)
    np.testing.assert_allclose(
        placement.global_metric_, CovarianceLearner(reg=0.01).fit(X, y).metric_, rtol=1e-5
    )


def test_joint_per_class_learner_is_used_when_available(data):
    X, y = data
    placement = LocalMetrics(JointSpyLearner(), where="class", ridge=0.0).fit(X, y)
    base = CovarianceLearner().fit(X, y).metric_
    for c in range(3):  # not trace-normalized: the joint metrics are comparable as learned
        np.testing.assert_allclose(placement.class_metrics_[c], (c + 1.0) * base)


def test_one_class_region_falls_back(data):
    X, y = data
    fallback = np.diag([1.0, 2.0, 3.0])
    metric = fit_local_metric(CovarianceLearner(), X[y == 0], y[y == 0], fallback=fallback, ridge=0.0)
    np.testing.assert_allclose(metric, fallback / 6.0)


def test_learner_without_sample_weight_is_refused_for_weighted_fits(data):
    X, y = data

    class NoWeights(CovarianceLearner):
        def fit(self, X, y):
            return super().fit(X, y)

    with pytest.raises(TypeError, match="sample_weight"):
        fit_local_metric(NoWeights(), X, y, np.linspace(0.5, 1.0, len(X)))


@pytest.mark.parametrize(
    "params, message",
    [(dict(where="cluster"), "where must be one of"), (dict(rank=0), "rank must be"),
     (dict(where="exemplar", n_local=0), "n_local must be an int >= 1"),
     (dict(where="reference", sigma=-1.0), "sigma must be > 0"),
     (dict(where="reference", n_references=0), "n_references must be an int >= 1")],
)
def test_bad_parameters(data, params, message):
    X, y = data
    with pytest.raises(ValueError, match=re.escape(message)):
        LocalMetrics(CovarianceLearner(), **params).fit(X, y)


def test_single_class_is_refused(data):
    X, _ = data
    with pytest.raises(ValueError, match="at least 2 classes"):
        LocalMetrics(CovarianceLearner()).fit(X, np.zeros(len(X)))


def test_n_jobs_gives_the_same_metrics(data):
    X, y = data
    one = LocalMetrics(CovarianceLearner(), where="exemplar", n_local=15).fit(X, y)
    with parallel_config(backend="threading"):  # loky start-up is slow on a shared machine
        two = LocalMetrics(CovarianceLearner(), where="exemplar", n_local=15, n_jobs=2).fit(X, y)
    np.testing.assert_allclose(one.metrics_, two.metrics_)


# -- LazyField -------------------------------------------------------------------------------------


def test_lazy_field_learns_on_the_nearest_points_and_caches(data):
    X, y = data
    proximity = np.diag([1.0, 4.0, 0.25])
    field = LazyField(CovarianceLearner(), X, y, n_local=12, proximity=proximity)
    queries = np.array([[0.5, -0.5, 0.2], [2.0, -2.0, 1.0]])
    metrics = field.metric_matrix(queries)
    for query, metric in zip(queries, metrics):
        sq = np.einsum("ni,ij,nj->n", X - query, proximity, X - query)
        nearest = np.argsort(sq)[:12]
        np.testing.assert_allclose(np.sort(field.neighbors(query)), np.sort(nearest))
        np.testing.assert_allclose(metric, fit_local_metric(CovarianceLearner(), X[nearest], y[nearest]))
    assert field.cache_info()[:3] == (0, 2, 2)
    again = field.metric_matrix(np.stack([queries[1], queries[0], queries[1]])[None])
    assert again.shape == (1, 3, 3, 3)
    np.testing.assert_allclose(again[0, 0], metrics[1])
    assert field.cache_info().hits == 2 and field.cache_info().misses == 2
    assert not field.is_smooth
    assert np.all(field.metric_derivative(queries) == 0)


def test_lazy_field_cache_is_bounded_and_parallel_is_identical(data):
    X, y = data
    queries = np.random.default_rng(3).normal(size=(9, 3))
    small = LazyField(CovarianceLearner(), X, y, n_local=20, cache_size=4)
    first = small.metric_matrix(queries)
    assert small.cache_info().currsize == 4
    parallel = LazyField(CovarianceLearner(), X, y, n_local=20, n_jobs=2)
    with parallel_config(backend="threading"):
        np.testing.assert_allclose(parallel.metric_matrix(queries), first)
    np.testing.assert_allclose(small.metric_matrix(queries), first)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [(dict(n_local=0), ValueError, "n_local must be an int >= 1"),
     (dict(proximity=np.eye(2)), ValueError, "proximity must be 3x3"),
     (dict(cache_size=0), ValueError, "cache_size must be an int >= 1")],
)
def test_lazy_field_bad_input(data, kwargs, error, message):
    X, y = data
    with pytest.raises(error, match=re.escape(message)):
        LazyField(CovarianceLearner(), X, y, **kwargs)
    with pytest.raises(ValueError, match="y must have shape"):
        LazyField(CovarianceLearner(), X, y[:-1])
    with pytest.raises(ValueError, match="last axis of length dim=3"):
        LazyField(CovarianceLearner(), X, y).metric_matrix(np.zeros(2))


def brute_force_bandwidth(mapped, reference_indices):
    """Median over samples of the squared distance to the nearest reference other than the sample itself."""
    sq = ((mapped[:, None] - mapped[reference_indices]) ** 2).sum(-1)
    sq[reference_indices, np.arange(len(reference_indices))] = np.inf
    nearest = sq.min(axis=1)
    return np.median(nearest[np.isfinite(nearest)])


@pytest.mark.parametrize("n_references", [30, 45, 60])
def test_auto_bandwidth_stays_positive_when_half_or_more_are_references(data, n_references):
    X, y = data
    placement = LocalMetrics(CovarianceLearner(), where="reference", n_references=n_references, random_state=0)
    placement.fit(X, y)
    mapped = X @ np.linalg.cholesky(placement.global_metric_)
    expected = brute_force_bandwidth(mapped, placement.reference_indices_)
    assert expected > 0.1  # the plain nearest-reference median was 0 here (2.2e-308 after flooring)
    np.testing.assert_allclose(placement.sigma_, expected, rtol=1e-12)
    spread = np.ptp(placement.metrics_.reshape(n_references, -1), axis=0).max()
    assert spread > 1e-3 * np.abs(placement.metrics_).max()  # reference metrics differ (they all coincided before)


def test_auto_bandwidth_with_two_samples_gives_finite_metrics():
    X, y = np.array([[0.0, 0.0], [1.0, 2.0]]), np.array([0, 1])
    placement = LocalMetrics(CovarianceLearner(), where="reference", random_state=0).fit(X, y)
    mapped = X @ np.linalg.cholesky(placement.global_metric_)
    np.testing.assert_allclose(placement.sigma_, np.sum((mapped[0] - mapped[1]) ** 2), rtol=1e-12)
    assert np.all(np.isfinite(placement.metrics_))


def test_auto_bandwidth_of_coincident_points_is_refused(data):
    X, y = data
    X = np.repeat(X[:6], 10, axis=0)
    y = np.repeat(y[[0, 1, 2, 20, 21, 40]], 10)
    with pytest.raises(ValueError, match="sigma='auto' is 0"):
        LocalMetrics(CovarianceLearner(), where="reference", n_references=40, random_state=0).fit(X, y)
    sigma = LocalMetrics(CovarianceLearner(), where="reference", n_references=40, sigma=1.0, random_state=0).fit(X, y)
    assert sigma.sigma_ == 1.0


def test_class_weights_mark_members_and_their_neighbourhoods():
    neighbours = np.array([[0, 3], [1, 2], [2, 1], [3, 0], [4, 1]])
    y = np.array([0, 1, 1, 0, 2])
    weights = class_weights(neighbours, y, 3)
    np.testing.assert_array_equal(weights, [[1, 0, 0, 1, 0], [0, 1, 1, 0, 0], [0, 1, 0, 0, 1]])


@pytest.mark.parametrize("kind, field_type", [("nearest", NearestLocalField), ("rbf", RBFLocalField), ("smooth", SmoothLocalField)])
def test_interpolate_builds_the_field_of_its_kind(data, kind, field_type):
    placement = LocalMetrics(CovarianceLearner(), where="reference", n_references=6, random_state=0).fit(*data)
    field = interpolate(placement, kind, rho=3.0)
    assert type(field) is field_type
    x = data[0][:4] + 0.1
    builders = {"nearest": placement.nearest_field, "rbf": placement.rbf_field, "smooth": lambda: placement.smooth_field(3.0)}
    np.testing.assert_array_equal(field.metric_matrix(x), builders[kind]().metric_matrix(x))
    with pytest.raises(ValueError, match="interpolation must be one of"):
        interpolate(placement, "cubic")


def test_place_field_lazy_is_a_lazy_field_around_the_global_metric(data):
    X, y = data
    placement, field = place_field(CovarianceLearner(), X, y, "lazy", n_local=12)
    assert placement.where == "global" and isinstance(field, LazyField)
    assert field.n_local == 12
    np.testing.assert_allclose(field.proximity, placement.global_metric_)
    assert place_field(CovarianceLearner(), X, y, "lazy")[1].n_local == 50
    placement, field = place_field(CovarianceLearner(), X, y, "class", "smooth", 2.0)
    np.testing.assert_array_equal(field.metric_matrix(X[:3]), placement.smooth_field(2.0).metric_matrix(X[:3]))
    with pytest.raises(ValueError, match="where must be one of"):
        place_field(CovarianceLearner(), X, y, "cluster")
