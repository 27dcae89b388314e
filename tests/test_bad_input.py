"""The defect list of issue 12: each bad input raises a clear error naming its argument, weights are relative."""

import re
import warnings

import numpy as np
import pytest
from sklearn.utils.validation import has_fit_parameter

from helpers import one_field_of_each_kind, random_spd
import riemlocal.io as rio
from riemlocal import LearnedMetric, LearnedMetricManifold
from riemlocal.distances import distance, pairwise_distances
from riemlocal.fields import ConstantField, GLMLField, LazyField, NearestLocalField, RBFLocalField, SmoothLocalField
from riemlocal.learners import BoostMetric, CCMLMetric, LDAMetric, LMNNMetric, condition_metric, fit_local_metric
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
    return one_field_of_each_kind(*_classes(), seed=1, n_local=15)


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
        lambda f, X, n_jobs: pairwise_distances(f, X[:4], rule="test", n_jobs=n_jobs),
        lambda f, X, n_jobs: pairwise_distances(f, X[:1], rule="line", n_jobs=n_jobs),  # no pair to compute
        lambda f, X, n_jobs: distance(f, X[:2], X[2:4], rule="line", n_jobs=n_jobs),
        lambda f, X, n_jobs: distance(f, X[0], X[0], rule="geodesic", n_jobs=n_jobs),
        lambda f, X, n_jobs: LearnedMetricManifold(f, n_jobs=n_jobs),
        lambda f, X, n_jobs: parallel_map(abs, [(1,)], n_jobs=n_jobs),
        lambda f, X, n_jobs: LazyField(LDAMetric(), *_classes(), n_jobs=n_jobs),
        lambda f, X, n_jobs: LocalMetrics(LDAMetric(), n_jobs=n_jobs).fit(*_classes()),
        lambda f, X, n_jobs: LocalMetricKNN(LDAMetric(), n_jobs=n_jobs).fit(*_classes()),
        lambda f, X, n_jobs: FrechetMean(LearnedMetricManifold(f), n_jobs=n_jobs).fit(X[:5]),
    ],
)
@pytest.mark.parametrize("n_jobs, error, message", [
    (0, ValueError, N_JOBS_MESSAGE), ("2", TypeError, "n_jobs must be None or an int, got '2'"), (1.5, TypeError, "n_jobs must be None or an int, got 1.5"),
])
def test_bad_n_jobs_has_one_message_everywhere(call, n_jobs, error, message):
    # before: a string or float n_jobs reached joblib, and identical points returned 0 without checking it
    field = SmoothLocalField(np.eye(3), np.stack([np.eye(3)] * 3))
    with pytest.raises(error, match=message):
        call(field, _classes()[0], n_jobs)


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


# -- issue 23, items 3 and 4 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metric, message",
    [
        (np.full((2, 2), np.nan), "metric contains NaN or infinite values"),
        (np.diag([np.inf, 1.0]), "metric contains NaN or infinite values"),
        (np.ones((2, 3)), re.escape("metric must be a square matrix of shape (dim, dim) with dim >= 1, got shape (2, 3)")),
        (np.ones((2, 2, 2)), re.escape("metric must be a square matrix of shape (dim, dim) with dim >= 1, got shape (2, 2, 2)")),
        (np.zeros((0, 0)), re.escape("metric must be a square matrix of shape (dim, dim) with dim >= 1, got shape (0, 0)")),
        (np.ones(3), "metric must have at least 2 axis"),
        (-np.eye(2), "metric must be positive semidefinite and nonzero; its eigenvalues range from -1 to -1"),
        (np.zeros((2, 2)), "metric must be positive semidefinite and nonzero; its eigenvalues range from 0 to 0"),
        (np.diag([1.0, -1e-6]), "metric must be positive semidefinite and nonzero"),
        ([["a", "b"], ["c", "d"]], "metric must be a numeric array of real numbers"),
    ],
)
def test_condition_metric_rejects_what_it_cannot_make_spd(metric, message):
    # before: NaN, negative definite and zero metrics all became 0.5000005 * I silently
    with pytest.raises((ValueError, TypeError), match=message):
        condition_metric(metric)


def test_condition_metric_still_ridges_low_rank_psd_metrics():
    direction = np.array([3.0, 4.0, 0.0])
    low_rank = np.outer(direction, direction) - 1e-14 * np.eye(3)  # a rounding residue below zero
    metric = condition_metric(low_rank, ridge=1e-3)
    np.testing.assert_allclose(metric, low_rank / np.trace(low_rank) + 1e-3 / 3 * np.eye(3), rtol=1e-12, atol=1e-15)
    assert np.linalg.eigvalsh(metric).min() > 3e-4
    lda = LDAMetric(n_components=1).fit(*_classes())  # rank 1 in dimension 3
    assert np.linalg.matrix_rank(lda.metric_) == 1
    assert np.linalg.eigvalsh(condition_metric(lda.metric_)).min() > 0


def _coinciding_classes():
    X = np.repeat(np.random.default_rng(5).normal(size=(10, 2)), 2, axis=0)  # each point twice, once per class
    return X, np.tile([0, 1], 10)


def test_a_learned_zero_metric_raises_unless_the_fallback_is_asked_for():
    X, y = _coinciding_classes()
    assert not np.any(BoostMetric().fit(X, y).metric_)  # nothing separates the classes
    with pytest.raises(ValueError, match="metric must be positive semidefinite and nonzero"):
        fit_local_metric(BoostMetric(), X, y)
    fallback = np.diag([1.0, 3.0])
    with pytest.warns(RuntimeWarning, match="BoostMetric learned a zero metric; using the fallback metric instead"):
        metric = fit_local_metric(BoostMetric(), X, y, fallback=fallback, zero_metric="fallback", ridge=0.0)
    np.testing.assert_allclose(metric, fallback / 4.0)
    with pytest.raises(ValueError, match=re.escape("zero_metric must be one of ['fallback', 'raise'], got 'ignore'")):
        fit_local_metric(BoostMetric(), X, y, zero_metric="ignore")


def test_placements_pass_the_zero_metric_choice_on():
    X, y = _coinciding_classes()
    with pytest.raises(ValueError, match="metric must be positive semidefinite and nonzero"):
        LazyField(BoostMetric(), X, y, n_local=6).metric_matrix(X[0])
    lazy = LazyField(BoostMetric(), X, y, n_local=6, proximity=np.diag([1.0, 3.0]), zero_metric="fallback")
    with pytest.warns(RuntimeWarning, match="learned a zero metric"):
        np.testing.assert_allclose(lazy.metric_matrix(X[0]), np.diag([1.0, 3.0]) / 4.0 + 1e-6 / 2 * np.eye(2))
    with pytest.raises(ValueError, match="zero_metric must be one of"):
        LazyField(BoostMetric(), X, y, zero_metric=None)
    local = LocalMetrics(BoostMetric(), global_learner=LDAMetric(), where="exemplar", n_local=6)
    with pytest.raises(ValueError, match="metric must be positive semidefinite and nonzero"):
        local.fit(X, y)
    with pytest.warns(RuntimeWarning, match="learned a zero metric"):
        local.set_params(zero_metric="fallback").fit(X, y)
    np.testing.assert_allclose(local.metrics_, np.broadcast_to(local.global_metric_ / np.trace(local.global_metric_), (20, 2, 2)), atol=1e-5)
    with pytest.raises(ValueError, match="zero_metric must be one of"):
        local.set_params(zero_metric="yes").fit(X, y)


def test_constant_field_of_an_empty_matrix_names_metric():
    # before: numpy's "zero-size array to reduction operation maximum which has no identity"
    with pytest.raises(ValueError, match=re.escape("metric must be square matrices of shape (..., D, D) with D >= 1, got shape (0, 0)")):
        ConstantField(np.zeros((0, 0)))


def test_unknown_manifold_options_name_the_class_and_the_options():
    field = SmoothLocalField(np.eye(3), np.stack([np.eye(3)] * 3))
    # before: "EnergyLogSolver.__init__() got an unexpected keyword argument 'foo'"
    message = re.escape("LearnedMetricManifold got unknown option(s) ['foo']; its solver options are rtol, chunk_size, n_jobs")
    with pytest.raises(TypeError, match=message):
        LearnedMetricManifold(field, foo=1)
    with pytest.raises(TypeError, match=re.escape("LearnedMetric got unknown option(s) ['bar', 'foo']")):
        LearnedMetric(LearnedMetricManifold(field), field, foo=1, bar=2)
    assert LearnedMetricManifold(field, n_segments=4, log_rtol=1e-3).metric.log_solver.n_segments == 4


def test_geodesic_times_are_checked():
    space = LearnedMetricManifold(SmoothLocalField(np.eye(2), random_spd(np.random.default_rng(6), 2, 2)))
    path = space.metric.geodesic(np.zeros(2), initial_tangent_vec=np.array([0.2, 0.1]))
    with pytest.raises(TypeError, match="t must be a numeric array of real numbers"):  # before: numpy's conversion error
        path("a")
    with pytest.raises(ValueError, match="t contains NaN or infinite values"):
        path([0.0, np.nan])
    np.testing.assert_allclose(path([0.0, 1.0])[-1], space.metric.exp(np.array([0.2, 0.1]), np.zeros(2)), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_ccml_takes_an_array_like_init():
    X, y = _classes()
    rows = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.2]]
    from_list = CCMLMetric(init=rows, max_iter=5).fit(X, y)  # before: "unhashable type: 'list'"
    np.testing.assert_allclose(from_list.metric_, CCMLMetric(init=np.array(rows), max_iter=5).fit(X, y).metric_)
    with pytest.raises(ValueError, match=re.escape("init must have shape (3, 3), got (1, 3)")):
        CCMLMetric(init=[[1.0, 0.0, 0.0]]).fit(X, y)
    with pytest.raises(ValueError, match="init must have at least 2 axis"):
        CCMLMetric(init=None).fit(X, y)
    with pytest.raises(TypeError, match="init must be a numeric array"):
        CCMLMetric(init=[["a"] * 3] * 3).fit(X, y)
    with pytest.raises(ValueError, match="init must be one of"):
        CCMLMetric(init="eye").fit(X, y)


def test_fit_local_metric_checks_X_and_y():
    X, y = _classes()
    with pytest.raises(ValueError, match=re.escape("X must have at least 2 axis(es) of shape (..., dim), got shape (60,)")):
        fit_local_metric(LDAMetric(), X[:, 0], y)  # before: IndexError
    with pytest.raises(ValueError, match=re.escape("X must have shape (n_samples, dim), got shape (1, 60, 3)")):
        fit_local_metric(LDAMetric(), X[None], y)
    with pytest.raises(ValueError, match=re.escape("y must have shape (60,) to match X, got shape (5,)")):
        fit_local_metric(LDAMetric(), X, y[:5])  # before: a metric learned from misaligned rows
    with pytest.raises(ValueError, match="X contains NaN"):
        fit_local_metric(LDAMetric(), np.where(X > 2, np.nan, X), y)


@pytest.mark.parametrize("path", [None, 123, 1.5, ["a.npz"]])
def test_io_paths_must_be_file_names(path, tmp_path):
    # before: numpy's "expected str, bytes or os.PathLike object"; save(obj, 3) wrote to file descriptor 3
    with pytest.raises(TypeError, match=f"path must be a str or path-like file name, got {type(path).__name__}"):
        rio.load(path)
    with pytest.raises(TypeError, match="path must be a str or path-like file name"):
        rio.save(ConstantField(np.eye(2)), path)
    rio.save(ConstantField(np.eye(2)), tmp_path / "field.npz")
    np.testing.assert_array_equal(rio.load(str(tmp_path / "field.npz")).metric, np.eye(2))


def _statistics_space():
    return LearnedMetricManifold(SmoothLocalField(np.eye(3), np.stack([np.diag([1.0, 2.0, 3.0])] * 3)))


@pytest.mark.parametrize("text", [[["a", "b", "c"]] * 2, np.array([["1", "2", "3"]] * 2), np.array([[b"a", b"b", b"c"]] * 2),
                                  np.array([[0.0, "a", 1.0]] * 2, dtype=object)], ids=["list", "str", "bytes", "object"])
def test_text_input_to_the_statistics_names_the_argument(text):
    # before: "could not convert string to float" from scikit-learn's validation, naming no argument
    from riemlocal.learning import GeodesicRegression, PrincipalGeodesicAnalysis, TangentSpaceRegression

    space, X = _statistics_space(), _classes()[0][:4] / 10
    calls = {
        "X": [lambda: FrechetMean(space).fit(text), lambda: PrincipalGeodesicAnalysis(space).fit(text),
              lambda: TangentSpaceRegression(space).fit(text, [1.0, 2.0])],
        "y": [lambda: TangentSpaceRegression(space).fit(X[:2], np.asarray(text)[:, 1])],
        "t": [lambda: GeodesicRegression(space).fit(np.asarray(text)[:, 1], X[:2])],
        "Y": [lambda: GeodesicRegression(space).fit([0.0, 1.0], text)],
    }
    for name, functions in calls.items():
        for call in functions:
            with pytest.raises(TypeError, match=f"^{name} must be a numeric array of real numbers, got text"):
                call()
    pga = PrincipalGeodesicAnalysis(space, n_components=2).fit(X)
    for call in (pga.transform, pga.inverse_transform):
        with pytest.raises(TypeError, match="^X must be a numeric array of real numbers, got text"):
            call(np.asarray(text)[:, :2] if call == pga.inverse_transform else text)


def test_principal_geodesic_of_no_times_is_empty():
    from riemlocal.learning import PrincipalGeodesicAnalysis

    pga = PrincipalGeodesicAnalysis(_statistics_space(), n_components=2).fit(_classes()[0][:5] / 10)
    assert pga.principal_geodesic(0, []).shape == (0, 3)  # before: "cannot reshape array of size 0"
    np.testing.assert_allclose(pga.principal_geodesic(1, [0.0]), pga.mean_[None], atol=1e-12)
    with pytest.raises(TypeError, match="t must be a numeric array of real numbers"):
        pga.principal_geodesic(0, ["a"])
    with pytest.raises(ValueError, match="t contains NaN or infinite values"):
        pga.principal_geodesic(0, [np.inf])


@pytest.mark.parametrize("method", ["joint", "karcher"])
@pytest.mark.parametrize(
    "X, sample_weight",
    [(np.array([[0.1, -0.2, 0.3]]), None), (np.array([[0.5, 0.0, 0.0], [0.1, -0.2, 0.3], [0.0, 0.4, 0.0]]), [0.0, 2.0, 0.0]),
     (np.array([[0.1, -0.2, 0.3]] * 2), None)],
    ids=["one point", "one weighted", "two identical"],
)
def test_the_mean_of_one_distinct_point_is_quiet(method, X, sample_weight):
    # before: error_estimate_ nan, "did not converge in 0 iterations" and divide RuntimeWarnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean = FrechetMean(_statistics_space(), method=method).fit(X, sample_weight=sample_weight)
    np.testing.assert_array_equal(mean.estimate_, [0.1, -0.2, 0.3])
    assert mean.converged_ and mean.grad_norm_ == 0.0
    if method == "joint":
        assert mean.error_estimate_ == 0.0


def test_learners_that_are_not_estimators_and_bad_local_fit_options_are_named():
    # before: scikit-learn's "Cannot clone object", int()'s "invalid literal" and "can't multiply sequence"
    X, y = _classes()
    calls = {
        "learner must be a scikit-learn metric learner": [
            lambda: fit_local_metric(None, X, y), lambda: LazyField("lda", X, y), lambda: LocalMetrics("lda").fit(X, y),
            lambda: LocalMetricKNN("lda").fit(X, y),
        ],
        "global_learner must be a scikit-learn metric learner": [lambda: LocalMetrics(global_learner=3).fit(X, y)],
    }
    for message, functions in calls.items():
        for call in functions:
            with pytest.raises(TypeError, match=f"^{message}"):
                call()
    with pytest.raises(ValueError, match="rank must be 'auto', None or a positive int, got 'x'"):
        fit_local_metric(LDAMetric(), X, y, rank="x")
    with pytest.raises(TypeError, match="ridge must be a real number, got 'a'"):
        condition_metric(np.eye(2), ridge="a")
    with pytest.raises(ValueError, match="ridge must be >= 0, got -1.0"):
        condition_metric(np.eye(2), ridge=-1.0)
