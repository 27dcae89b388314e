"""Property-based bad-input suite over the public entry points (hypothesis).

The contract: any input either returns finite output of the documented shape, or raises
``ValueError`` / ``TypeError`` whose message names one of the arguments; a solver either
meets its tolerance or warns. Inputs mix valid arrays with wrong shapes, NaN/inf, huge and
tiny values, complex numbers, strings, ragged lists and ``None``.
"""

import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import riemlocal.io as rio
from helpers import one_field_of_each_kind
from riemlocal import LearnedMetricManifold
from riemlocal.distances import distance, pairwise_distances
from riemlocal.fields import ConstantField, GLMLField, LazyField, NearestLocalField, RBFLocalField, SmoothLocalField
from riemlocal.learners import BoostMetric, CCMLMetric, LDAMetric, LMNNMetric, condition_metric, fit_local_metric
from riemlocal.learning import FrechetMean, PrincipalGeodesicAnalysis
from riemlocal.neighbors import LocalMetricKNN
from riemlocal.placement import LocalMetrics
from riemlocal.utils.validation import is_positive_definite

DIM = 2
FAST = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
#: scikit-learn's input validation of an estimator's ``X`` (``validate_data``, whose ``ValueError`` for complex
#: data ``check_estimator`` requires) describes the array instead of naming it, or passes numpy's message on
SKLEARN_MESSAGES = (
    "Expected 2D array",
    "Complex data not supported",
    "could not convert",
    "Found array with",
    "float() argument must be",
    "inhomogeneous shape",
)

special = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, 1e6, -1e6, 1e200])
reals = st.one_of(st.floats(-10, 10), special)
#: the geodesic solvers of the statistics take points up to about 1e150 (their curve energies overflow beyond)
moderate = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, 1e-300, 1e6, -1e6])


def shapes(dim=DIM, batch=3):
    """Mostly ``(..., dim)``, sometimes a wrong last axis, no axis or an empty batch."""
    good = st.one_of(st.just((dim,)), st.tuples(st.integers(1, batch), st.just(dim)))
    bad = st.one_of(st.just(()), st.just((0, dim)), st.tuples(st.integers(1, batch), st.integers(0, dim + 2)))
    return st.one_of(good, good, good, bad)


@st.composite
def arrays(draw, shape_strategy, elements=st.floats(-10, 10), specials=special):
    """Arrays of ``elements``; one in four has one entry replaced by a special value (NaN, inf, 1e6, 1e-300...)."""
    values = draw(hnp.arrays(np.float64, shape_strategy, elements=elements))
    if values.size and draw(st.integers(0, 3)) == 0:
        values.flat[draw(st.integers(0, values.size - 1))] = draw(specials)
    return values


garbage = st.sampled_from([None, "abc", ["1", "a"], [[0.0, 1.0], [2.0]], 1j, np.ones(DIM) + 1j, object()])


def points(dim=DIM, batch=3):
    return st.one_of(*[arrays(shapes(dim, batch))] * 4, garbage)


def outcome(call, *names, expected_shape=None):
    """Run ``call``: it returns finite values of ``expected_shape`` or raises an error naming an argument."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call()
        except (ValueError, TypeError) as exc:
            message = str(exc)
            assert any(name in message for name in names + SKLEARN_MESSAGES), f"{type(exc).__name__} names none of {names}: {message}"
            return None, caught
    for part in result if isinstance(result, tuple) else (result,):
        if np.asarray(part).dtype.kind in "biufc" and not hasattr(part, "get_params"):  # numbers, not labels or objects
            assert np.all(np.isfinite(part)), f"non-finite output for arguments {names}"
    if expected_shape is not None:
        first = result[0] if isinstance(result, tuple) else result
        assert np.shape(first) == expected_shape
    return result, caught


def _fields():
    return one_field_of_each_kind(*_classification(), seed=0, n_local=8)


def _classification(n=12):
    rng = np.random.default_rng(1)
    return np.concatenate([rng.normal(-1.0, 1.0, (n // 2, DIM)), rng.normal(1.0, 1.0, (n // 2, DIM))]), np.repeat([0, 1], n // 2)


FIELDS = _fields()
SMOOTH = FIELDS[3]
SPACE = LearnedMetricManifold(SMOOTH, n_segments=8)


def _plus(batch, tail):
    """``batch + tail``, or ``None`` (no shape to check) when ``batch`` is ``None``."""
    return None if batch is None else batch + tail


@FAST
@given(centers=points(), metrics=st.one_of(arrays(st.just((4, DIM, DIM))), arrays(st.tuples(st.integers(0, 4), st.just(DIM), st.just(DIM))), garbage), scale=st.one_of(reals, garbage))
def test_field_constructors(centers, metrics, scale):
    for make, names in (
        (lambda: SmoothLocalField(centers, metrics, rho=scale), ("centers", "metrics", "rho")),
        (lambda: RBFLocalField(centers, metrics, sigma=scale), ("centers", "metrics", "sigma")),
        (lambda: NearestLocalField(centers, metrics), ("centers", "metrics")),
        (lambda: ConstantField(metrics), ("metric",)),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                field = make()
            except (ValueError, TypeError) as exc:
                assert any(name in str(exc) for name in names), str(exc)
                continue
        outcome(lambda: field.metric_matrix(np.zeros((3, DIM))), "base_point", expected_shape=(3, DIM, DIM))


@FAST
@given(X=st.one_of(arrays(st.tuples(st.integers(0, 8), st.integers(1, 3))), garbage), y=st.sampled_from(["two", "one", "mixed", "short", "nan"]), scale=st.one_of(reals, garbage))
def test_data_field_constructors(X, y, scale):
    n = len(X) if isinstance(X, np.ndarray) and X.ndim else 0
    labels = {"two": np.arange(n) % 2, "one": np.zeros(n), "mixed": np.array([0, "a"] * n, dtype=object)[:n], "short": np.zeros(1), "nan": np.full(n, np.nan)}[y]
    for make, names in (
        (lambda: GLMLField(X, labels, gamma=scale), ("X", "y", "gamma", "reg_covar")),
        (lambda: LazyField(LDAMetric(), X, labels, n_local=4), ("X", "y")),
    ):
        try:
            field = make()
        except (ValueError, TypeError) as exc:
            assert any(name in str(exc) for name in names), str(exc)
            continue
        outcome(lambda: field.metric_matrix(np.zeros(field.dim)), "base_point", expected_shape=(field.dim, field.dim))


@FAST
@given(x=points(), v=points(), index=st.integers(0, len(FIELDS) - 1))
@example(x=np.zeros((0, DIM)), v=np.zeros((0, DIM)), index=2)  # an empty batch (found by hypothesis)
@example(x=np.zeros((0, DIM)), v=np.zeros((0, DIM)), index=3)
def test_field_methods(x, v, index):
    field = FIELDS[index]
    shape = x.shape[:-1] if isinstance(x, np.ndarray) and x.ndim else None
    outcome(lambda: field.metric_matrix(x), "base_point", expected_shape=_plus(shape, (DIM, DIM)))
    if not isinstance(field, LazyField):  # its derivative is zero; GLML's is central differences of a discontinuous field
        outcome(lambda: field.metric_derivative(x), "base_point", expected_shape=_plus(shape, (DIM,) * 3))
    both = None
    if isinstance(x, np.ndarray) and isinstance(v, np.ndarray) and x.ndim and v.ndim:
        try:
            both = np.broadcast_shapes(x.shape, v.shape)[:-1]
        except ValueError:
            pass
    for method in ("metric_vector_product", "energy_terms", "derivative_vector_product", "geodesic_acceleration"):
        if method != "metric_vector_product" and isinstance(field, (GLMLField, LazyField)):
            continue
        outcome(lambda: getattr(field, method)(v, x), "tangent_vec", "base_point", expected_shape=_plus(both, (DIM,)))
    if hasattr(field, "nearest_center"):
        outcome(lambda: field.nearest_center(x), "base_point", expected_shape=shape)


@FAST
@given(curves=st.one_of(arrays(st.tuples(st.integers(1, 2), st.integers(0, 5), st.sampled_from([DIM, DIM, DIM, 3]))), garbage), index=st.sampled_from([0, 2, 3]))
def test_segment_energy_terms(curves, index):
    field = FIELDS[index]
    ok = isinstance(curves, np.ndarray) and curves.ndim >= 2 and curves.shape[-1] == DIM and curves.shape[-2] >= 2
    shape = curves.shape[:-2] + (curves.shape[-2] - 1, DIM) if ok else None
    outcome(lambda: field.segment_energy_terms(curves), "curves", expected_shape=shape)


n_jobs_values = st.sampled_from([None, None, 1, 0, "2", 1.5])


@FAST
@given(x=points(), y=points(), rule=st.sampled_from(["test", "train", "line", "line_length", "nope", 3]), squared=st.sampled_from([False, True, "no"]), index=st.sampled_from([0, 1, 3]), n_jobs=n_jobs_values)
def test_distances(x, y, rule, squared, index, n_jobs):
    field = FIELDS[index]
    if rule == "train" and isinstance(field, SmoothLocalField):
        rule = "test"
    names = ("x", "y", "rule", "squared", "n_jobs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quadrature warnings carry their own estimate
        outcome(lambda: distance(field, x, y, rule, squared=squared, n_jobs=n_jobs), *names)
        result, _ = outcome(lambda: pairwise_distances(field, x, y, rule, squared=squared, n_jobs=n_jobs), "X", "Y", "rule", "squared", "n_jobs")
    if result is not None:
        assert result.shape == (len(np.atleast_2d(x)), len(np.atleast_2d(x if y is None else y))) and np.all(result >= 0)


LEARNERS = [LDAMetric(), LMNNMetric(max_iter=20), BoostMetric(max_iter=5), CCMLMetric(max_iter=20)]
labels = st.sampled_from(["two", "two", "strings", "strings", "one", "mixed", "float-nan", "2d"])
weights = st.one_of(st.none(), st.none(), arrays(st.just((12,)), st.floats(0, 10)), arrays(st.integers(0, 13).map(lambda n: (n,))), garbage)


def _labels(kind, n=12):
    return {
        "two": np.arange(n) % 2,
        "one": np.zeros(n, dtype=int),
        "mixed": np.resize(np.array([0, "a"], dtype=object), n),
        "float-nan": np.where(np.arange(n) % 2, 1.0, np.nan),
        "strings": np.resize(np.array(["u", "v", "w"]), n),
        "2d": np.zeros((n, 2), dtype=int),
    }[kind]


VALID_X = _classification()[0]


@SLOW
@example(X=VALID_X, y="two", sample_weight=None, index=0)
@example(X=VALID_X, y="strings", sample_weight=np.full(12, 1e-300), index=1)
@example(X=VALID_X, y="two", sample_weight=np.full(12, 1e300), index=2)
@example(X=VALID_X, y="strings", sample_weight=np.arange(12.0), index=3)
@given(X=st.one_of(arrays(st.tuples(st.integers(10, 12), st.integers(1, 3)), elements=st.floats(-5, 5)), garbage), y=labels, sample_weight=weights, index=st.integers(0, len(LEARNERS) - 1))
def test_learner_fit(X, y, sample_weight, index):
    learner = LEARNERS[index]
    n = len(X) if isinstance(X, np.ndarray) and X.ndim else 12
    result, _ = outcome(lambda: learner.fit(X, _labels(y, n), sample_weight=sample_weight), "X", "y", "sample_weight", "classes", "class")
    if result is not None:
        assert result.metric_.shape == (X.shape[1], X.shape[1]) and np.all(np.isfinite(result.metric_))
        assert np.all(np.isfinite(result.transform(X)))


@SLOW
@example(X=VALID_X, y="two", where="class", rule="line", n_neighbors=3, query=np.zeros((2, DIM)))
@example(X=VALID_X, y="strings", where="reference", rule="test", n_neighbors=1, query=np.ones(DIM))
@given(X=st.one_of(arrays(st.tuples(st.integers(6, 12), st.just(DIM)), elements=st.floats(-5, 5)), garbage), y=labels, where=st.sampled_from(["class", "exemplar", "reference", "nowhere"]), rule=st.sampled_from(["test", "train", "line"]), n_neighbors=st.sampled_from([1, 3, 0, -1, 2.5]), query=points(batch=4))
def test_local_metrics_and_knn(X, y, where, rule, n_neighbors, query):
    n = len(X) if isinstance(X, np.ndarray) and X.ndim else 12
    names = ("X", "y", "where", "rule", "n_neighbors", "class", "n_references", "sigma")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        placement, _ = outcome(lambda: LocalMetrics(LDAMetric(), where=where, n_references=3).fit(X, _labels(y, n)), *names)
        if placement is not None:
            outcome(lambda: placement.nearest_field().metric_matrix(np.zeros(DIM)), "base_point", expected_shape=(DIM, DIM))
        clf, _ = outcome(lambda: LocalMetricKNN(LDAMetric(), where=where, rule=rule, n_neighbors=n_neighbors, n_references=3).fit(X, _labels(y, n)), *names)
        if clf is not None:
            predicted, _ = outcome(lambda: clf.predict(query), "X")
            if predicted is not None:
                assert predicted.shape == (len(np.atleast_2d(query)),) and set(predicted) <= set(clf.classes_)


def _line_length(x, y):
    """Length of the straight segment, by 64-point Gauss--Legendre quadrature (an upper bound of the distance)."""
    nodes, weights = np.polynomial.legendre.leggauss(64)
    t = 0.5 * (nodes + 1.0)[:, None, None]
    d = np.broadcast_to(y - x, np.broadcast_shapes(np.shape(x), np.shape(y)))
    speeds = np.sqrt(np.einsum("t...i,t...ij,t...j->t...", d[None], SMOOTH.metric_matrix(x + t * d), d[None]))
    return 0.5 * np.tensordot(weights, speeds, axes=1)


@SLOW
@example(x=np.array([0.5, -1.0]), y=np.array([[1.0, 1.0], [-1.0, 0.5]]), v=np.array([0.3, 0.2]))
@example(x=np.zeros((2, DIM)), y=np.ones(DIM), v=np.array([[1e-300, 0.0], [-2.0, 1.0]]))
@given(x=points(batch=2), y=points(batch=2), v=points(batch=2))
def test_learned_metric_maps(x, y, v):
    metric = SPACE.metric
    small = all(isinstance(a, np.ndarray) and np.all(np.abs(a) < 5) for a in (x, y, v))
    if not small:  # bad input must be rejected before any solver runs; huge finite points take long solves
        for a in (x, y, v):
            if isinstance(a, np.ndarray) and np.all(np.isfinite(a)) and a.size and np.abs(a).max() > 5:
                return
    dist, caught = outcome(lambda: metric.dist(x, y), "point_a", "point_b")
    if dist is not None and not caught:
        # a geodesic is no longer than the straight line, with the solver's tolerance
        assert np.all(dist <= _line_length(np.asarray(x), np.asarray(y)) * (1 + 1e-6) + 1e-9)
    outcome(lambda: metric.log(y, x), "point", "base_point")
    outcome(lambda: metric.exp(v, x), "tangent_vec", "base_point")
    outcome(lambda: metric.inner_product(v, v, x), "tangent_vec_a", "tangent_vec_b", "base_point")
    outcome(lambda: metric.norm(v, x), "vector", "base_point")


@SLOW
@example(X=VALID_X[:6] / 3, sample_weight=None, n_components=2)
@example(X=VALID_X[:5] / 3, sample_weight=np.full(5, 1e-300), n_components=1)
@given(X=st.one_of(arrays(st.tuples(st.integers(0, 6), st.sampled_from([DIM, DIM, DIM, 3])), elements=st.floats(-2, 2), specials=moderate), garbage), sample_weight=st.one_of(st.none(), arrays(st.integers(0, 7).map(lambda n: (n,)), st.floats(0, 3)), garbage), n_components=st.sampled_from([1, 2, 0, 3, "2"]))
def test_frechet_mean_and_pga(X, sample_weight, n_components):
    names = ("X", "sample_weight", "n_components")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, _ = outcome(lambda: FrechetMean(SPACE, max_iter=20).fit(X, sample_weight=sample_weight), *names)
        if mean is not None:
            assert mean.estimate_.shape == (DIM,) and np.all(np.isfinite(mean.estimate_))
        pga, _ = outcome(lambda: PrincipalGeodesicAnalysis(SPACE, n_components=n_components, max_iter=20).fit(X), *names, "components")
        if pga is not None:
            outcome(lambda: pga.transform(X), "X", expected_shape=(len(X), pga.n_components_))


@FAST
@example(metric=np.full((2, 2), np.nan), ridge=1e-6)  # issue 23: these became the identity silently
@example(metric=-np.eye(2), ridge=1e-6)
@example(metric=np.zeros((2, 2)), ridge=1e-6)
@example(metric=np.ones((2, 3)), ridge=1e-6)
@given(metric=st.one_of(arrays(st.tuples(st.integers(0, 3), st.integers(0, 3))), arrays(st.just((DIM, DIM))), arrays(st.just((1, DIM, DIM))), garbage), ridge=st.sampled_from([0.0, 1e-6]))
def test_condition_metric(metric, ridge):
    result, _ = outcome(lambda: condition_metric(metric, ridge=ridge), "metric")
    if result is not None:
        assert result.shape == np.shape(metric) and np.trace(result) == pytest.approx(1.0 + ridge)
        assert np.linalg.eigvalsh(result).min() >= -1e-9


@SLOW
@given(X=st.one_of(arrays(st.tuples(st.integers(1, 12), st.integers(1, 3)), elements=st.floats(-5, 5)), arrays(st.just((12,))), garbage), y=labels, sample_weight=weights, zero_metric=st.sampled_from(["raise", "fallback", "no"]))
def test_fit_local_metric(X, y, sample_weight, zero_metric):
    n = len(X) if isinstance(X, np.ndarray) and X.ndim else 12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result, _ = outcome(lambda: fit_local_metric(LDAMetric(), X, _labels(y, n), sample_weight, zero_metric=zero_metric), "X", "y", "sample_weight", "zero_metric", "metric", "classes", "class")
    if result is not None:
        assert result.shape == (X.shape[1], X.shape[1]) and is_positive_definite(result)


@FAST
@given(options=st.dictionaries(st.sampled_from(["foo", "n_segments", "n_jobs", "tol", "rtol"]), st.sampled_from([None, 0, 4, "2", 1.5, 1e-3]), max_size=2), t=st.one_of(arrays(st.tuples(st.integers(0, 3)), elements=st.sampled_from([0.0, 0.3, 1.0]), specials=st.sampled_from([np.nan, np.inf, -1.0])), st.just(0.5), garbage))
def test_manifold_options_and_geodesic_times(options, t):
    # times in (0, 1e-13) are left out: the Exp integrator fails on them ("step size below round-off", issue 23 report)
    space, _ = outcome(lambda: LearnedMetricManifold(SMOOTH, **options), "LearnedMetricManifold", "n_segments", "n_jobs", "tol", "rtol")
    if space is not None:
        path = space.metric.geodesic(np.zeros(DIM), initial_tangent_vec=np.array([0.1, 0.0]))
        outcome(lambda: path(t), "t", expected_shape=None if not isinstance(t, np.ndarray) else (np.atleast_1d(t).size, DIM))


@FAST
@given(path=st.one_of(garbage.filter(lambda value: not isinstance(value, str)), st.integers(-3, 300), st.floats()))
def test_io_paths(path):
    outcome(lambda: rio.load(path), "path")
    outcome(lambda: rio.save(ConstantField(np.eye(DIM)), path), "path")


@pytest.fixture(scope="module")
def saved_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("io") / "saved.npz"
    rio.save(LDAMetric().fit(*_classification()), path)
    return path.read_bytes()


@FAST
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4), cut=st.one_of(st.none(), st.integers(0, 10**6)))
def test_io_load_of_damaged_files(saved_file, tmp_path_factory, edits, cut):
    raw = bytearray(saved_file)
    for position, value in edits:
        raw[position % len(raw)] = value
    path = tmp_path_factory.mktemp("damaged") / "damaged.npz"
    path.write_bytes(bytes(raw[: cut % len(raw)] if cut is not None else raw))
    loaded, _ = outcome(lambda: rio.load(path), str(path))
    if loaded is not None:
        X = _classification()[0]
        assert np.all(np.isfinite(loaded.transform(X)))
