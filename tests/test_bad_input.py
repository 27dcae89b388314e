"""The defect list of issue 12: each bad input raises a clear error naming its argument, weights are relative."""

import re

import numpy as np
import pytest
from sklearn.utils.validation import has_fit_parameter

from helpers import one_field_of_each_kind, random_spd
from riemlocal import LearnedMetricManifold
from riemlocal.distances import distance, pairwise_distances
from riemlocal.fields import GLMLField, LazyField, NearestLocalField, RBFLocalField, SmoothLocalField
from riemlocal.learners import BoostMetric, CCMLMetric, LDAMetric, LMNNMetric
from riemlocal.learning import FrechetMean
from riemlocal.neighbors import LocalMetricKNN
from riemlocal.placement import LocalMetrics
from riemlocal.utils.parallel import parallel_map
from riemlocal.utils.validation import check_labels, check_n_jobs, check_points, check_random_state

N_JOBS_MESSAGE = re.escape("n_jobs must be None or a nonzero int (1: no parallelism, -1: all cores), got 0")


def _classes(seed=0):
    rng = np.random.default_rng(seed)
    X = np.concatenate([rng.normal(loc, 1.0, size=(20, 3)) for loc in (-2.0, 0.0, 2.0)])
    X[:, 2] *= 5.0
    return X, np.repeat([0, 1, 2], 20)


def _fields():
    return one_field_of_each_kind(*_classes(), seed=1, n_neighbors=15)


@pytest.mark.parametrize("value", [np.ones(3) + 1j, np.array([1 + 0j, 2, 3]), [1.0, 2.0, 1j]])
def test_complex_points_are_a_type_error_naming_the_argument(value):
    # a cast to float used to drop the imaginary part silently
    with pytest.raises(TypeError, match="point must be a numeric array of real numbers"):
        check_points(value, 3, "point")
    with pytest.raises(TypeError, match="must be a numeric array"):
        check_points(["1.0", "2.0", "3.0"], 3)
    for field in _fields():
        with pytest.raises(TypeError, match="base_point must be a numeric array of real numbers"):
            field.metric_matrix(value)
        with pytest.raises(TypeError, match="tangent_vec must be a numeric array of real numbers"):
            field.metric_vector_product(value, np.zeros(3))
    with pytest.raises(TypeError, match="centers must be a numeric array of real numbers"):
        SmoothLocalField(np.zeros((2, 3)) + 1j, np.stack([np.eye(3)] * 2))


@pytest.mark.parametrize("field", _fields(), ids=repr)
@pytest.mark.parametrize(
    "method", ["metric_vector_product", "energy_terms", "energy_hessian", "derivative_vector_product", "geodesic_acceleration"]
)
def test_every_field_method_validates_tangent_vec(field, method):
    x = np.zeros((2, 3))
    function = getattr(field, method)
    with pytest.raises(ValueError, match="tangent_vec contains NaN or infinite values"):
        function(np.array([1.0, np.nan, 0.0]), x)
    with pytest.raises(ValueError, match=re.escape("tangent_vec must have last axis of length dim=3, got shape (4,)")):
        function(np.ones(4), x)
    with pytest.raises(ValueError, match=re.escape("tangent_vec of shape (3, 3) and base_point of shape (2, 3) do not broadcast")):
        function(np.ones((3, 3)), x)
    result = function(np.ones((2, 3)), x)  # valid input still works, with the documented leading shape
    for part in result if isinstance(result, tuple) else (result,):
        assert part.shape[0] == 2 and np.all(np.isfinite(part))


def test_inner_product_and_norms_validate_their_vectors():
    field = SmoothLocalField(np.eye(3), random_spd(np.random.default_rng(2), 3, 3))
    metric = LearnedMetricManifold(field).metric
    x, v = np.array([0.1, 0.2, 0.3]), np.array([1.0, -2.0, 0.5])
    expected = v @ field.metric_matrix(x) @ v
    assert metric.squared_norm(v, x) == pytest.approx(expected, rel=1e-14)
    assert metric.norm(v, x) == pytest.approx(np.sqrt(expected), rel=1e-14)
    assert metric.inner_product(v, v, x) == pytest.approx(expected, rel=1e-14)
    with pytest.raises(ValueError, match="tangent_vec_b contains NaN"):
        metric.inner_product(v, np.array([np.inf, 0, 0]), x)
    with pytest.raises(ValueError, match=re.escape("vector must have last axis of length dim=3, got shape (4,)")):
        metric.norm(np.ones(4), x)
    with pytest.raises(TypeError, match="vector must be a numeric array of real numbers"):
        metric.squared_norm(v + 1j, x)
    with pytest.raises(ValueError, match=re.escape("tangent_vec_a of shape (4, 3) and tangent_vec_b of shape (2, 3) and base_point of shape (3,) do not broadcast together")):
        metric.inner_product(np.ones((4, 3)), np.ones((2, 3)), x)


@pytest.mark.parametrize("make", [NearestLocalField, SmoothLocalField, lambda c, m: RBFLocalField(c, m, sigma=1.0)])
def test_fields_without_centers_are_rejected(make):
    with pytest.raises(ValueError, match=re.escape("centers must hold at least one center of dimension >= 1, got shape (0, 3)")):
        make(np.zeros((0, 3)), np.zeros((0, 3, 3)))


@pytest.mark.parametrize("learner", [LMNNMetric(), BoostMetric()], ids=repr)
@pytest.mark.parametrize("scale", [1e-300, 1e-8, 7.0, 1e300])
def test_only_the_ratios_of_sample_weights_matter(learner, scale):
    # before: uniform 1e-8 weights changed LMNN's metric by 10%, 1e-300 and 1e300 returned the identity
    # after 0 iterations (a 567% change); BoostMetric failed on 1e-300 and 1e300 (NaN triplet weights)
    X, y = _classes()
    weights = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    reference = learner.fit(X, y, sample_weight=weights).metric_
    scaled = learner.fit(X, y, sample_weight=scale * weights).metric_
    np.testing.assert_allclose(scaled, reference, rtol=1e-8, atol=1e-10 * np.abs(reference).max())
    unit = learner.fit(X, y).metric_
    np.testing.assert_allclose(learner.fit(X, y, sample_weight=np.full(len(y), scale)).metric_, unit, rtol=1e-8, atol=1e-10)


def test_lda_weights_stay_counts():
    # LDA's bagging correction uses the class totals: weights are counts, not ratios
    X, y = _classes()
    model = LDAMetric(subsample=0.5, form="scatter")
    assert not np.allclose(model.fit(X, y, sample_weight=np.full(len(y), 0.05)).metric_, model.fit(X, y).metric_)


@pytest.mark.parametrize(
    "call",
    [
        lambda f, X: pairwise_distances(f, X[:4], rule="test", n_jobs=0),
        lambda f, X: distance(f, X[:2], X[2:4], rule="line", n_jobs=0),
        lambda f, X: LearnedMetricManifold(f, n_jobs=0).metric.dist(X[0], X[1]),
        lambda f, X: parallel_map(abs, [(1,)], n_jobs=0),
        lambda f, X: LazyField(LDAMetric(), *_classes(), n_jobs=0),
        lambda f, X: LocalMetrics(LDAMetric(), n_jobs=0).fit(*_classes()),
        lambda f, X: LocalMetricKNN(LDAMetric(), n_jobs=0).fit(*_classes()),
        lambda f, X: FrechetMean(LearnedMetricManifold(f), n_jobs=0).fit(X[:5]),
    ],
)
def test_n_jobs_zero_has_one_message_everywhere(call):
    field = SmoothLocalField(np.eye(3), np.stack([np.eye(3)] * 3))
    with pytest.raises(ValueError, match=N_JOBS_MESSAGE):
        call(field, _classes()[0])


def test_check_n_jobs():
    assert check_n_jobs(None) is None and check_n_jobs(-1) == -1 and check_n_jobs(np.int64(2)) == 2
    for bad in (1.5, "2", True):
        with pytest.raises(TypeError, match="n_jobs must be None or an int"):
            check_n_jobs(bad)


@pytest.mark.parametrize(
    "learner", [LDAMetric(), LMNNMetric(), BoostMetric(), CCMLMetric(), LocalMetrics(LDAMetric()), LocalMetricKNN(LDAMetric())], ids=repr
)
def test_mixed_labels_and_string_weights_name_their_argument(learner):
    X, _ = _classes()
    mixed = np.array([0, "a", 1.5] * 20, dtype=object)
    with pytest.raises(TypeError, match=re.escape("y must hold labels of one type (all strings or all numbers), got a mix of")):
        learner.fit(X, mixed)
    if has_fit_parameter(learner, "sample_weight"):
        with pytest.raises(TypeError, match="sample_weight must be an array of real numbers"):
            learner.fit(X, np.repeat([0, 1, 2], 20), sample_weight=["1"] * 60)
    assert check_labels(np.array(["a", "b"], dtype=object)).shape == (2,)


@pytest.mark.parametrize("learner", [LMNNMetric(), CCMLMetric(), LocalMetrics(LDAMetric())], ids=repr)
def test_negative_random_state_names_the_argument(learner):
    X, y = _classes()
    message = re.escape("random_state must be None, a non-negative int or a numpy Generator, got -1")
    with pytest.raises(ValueError, match=message):
        learner.set_params(random_state=-1).fit(X, y)
    with pytest.raises(ValueError, match=message):
        check_random_state(-1)
    with pytest.raises(TypeError, match="random_state must be None"):
        check_random_state(True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore:line quadrature:sklearn.exceptions.ConvergenceWarning")
def test_far_points_give_finite_values_or_a_named_error():
    # before: at |x| = 1e200 the squared proximities overflowed and the smooth field returned NaN silently
    rng = np.random.default_rng(4)
    centers, metrics = rng.normal(size=(3, 2)), random_spd(rng, 3, 2)
    far = np.array([1e200, 0.0])
    for field in (SmoothLocalField(centers, metrics), RBFLocalField(centers, metrics, sigma=1.0, proximity=metrics[0])):
        metric = field.metric_matrix(far)  # far from every center the weights stay a convex combination
        assert np.all(np.isfinite(metric)) and np.all(np.linalg.eigvalsh(metric) >= np.linalg.eigvalsh(metrics).min() - 1e-12)
        assert np.all(np.isfinite(field.metric_derivative(far)))
        with pytest.raises(ValueError, match="tangent_vec is too large for this field"):
            field.energy_terms(far, np.zeros(2))
    nearest = NearestLocalField(centers, metrics)
    assert nearest.nearest_center(far) == np.argmin(metrics[:, 0, 0])  # the cell of the flattest metric along x_0
    with pytest.raises(ValueError, match="x and y are too far apart for this field"):
        distance(nearest, np.zeros(2), far, rule="line")
    with pytest.raises(ValueError, match="X and Y are too far apart for this field"):
        pairwise_distances(SmoothLocalField(centers, metrics), far[None], np.zeros((1, 2)), rule="line")


def test_string_weights_name_sample_weight_at_every_entry_point():
    from riemlocal.learners import fit_local_metric
    from riemlocal.learning import GeodesicRegression, TangentSpaceRegression

    X, y = _classes()
    space = LearnedMetricManifold(SmoothLocalField(np.eye(3), np.stack([np.eye(3)] * 3)))
    calls = [
        lambda w: fit_local_metric(LDAMetric(), X, y, w),
        lambda w: FrechetMean(space).fit(X[:5], sample_weight=w[:5]),
        lambda w: GeodesicRegression(space).fit(np.linspace(0, 1, 5), X[:5], sample_weight=w[:5]),
        lambda w: TangentSpaceRegression(space).fit(X[:5], y[:5], sample_weight=w[:5]),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="sample_weight must be an array of real numbers"):
            call(np.array(["1"] * len(y)))
        with pytest.raises(TypeError, match="sample_weight must be an array of real numbers"):
            call(np.ones(len(y)) + 1j)


def test_data_fields_reject_training_points_whose_squares_overflow():
    # before: GLMLField built from a point at 1e200 raised LinAlgError at the first query, LazyField an LDA error
    X, y = _classes()
    X[0, 0] = 1e200
    for make in (lambda: GLMLField(X, y), lambda: LazyField(LDAMetric(), X, y)):
        with pytest.raises(ValueError, match=re.escape("X spans too far (about 1e154 or more)")):
            make()
    with pytest.raises(ValueError, match="base_point is too far from the class means"):
        GLMLField(*_classes()).metric_matrix(np.array([1e200, 0.0, 0.0]))
    with pytest.raises(ValueError, match=re.escape("rho must be > 0 with 2 / rho finite, got 5e-324")):
        SmoothLocalField(np.eye(3), np.stack([np.eye(3)] * 3), rho=5e-324)
