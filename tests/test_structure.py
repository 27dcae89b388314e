"""Fields declare their structure; rules follow from it: exact line rules for every piecewise-constant field."""

import re
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.datasets import load_iris

from helpers import CovarianceLearner, random_spd
from riemlocal.distances import distance, pairwise_distances
from riemlocal.fields import (
    STRUCTURES,
    ConstantField,
    LazyField,
    MetricField,
    NearestLocalField,
    RBFLocalField,
    SegmentCells,
    SmoothLocalField,
)
from riemlocal.learners import LDAMetric
from riemlocal.manifold import LearnedMetricManifold

LINE_RULES = ("line", "line_length")


def midpoint_sums(field, x, y, n=4000):
    """Energy and length of the segment x -> y by an n-point midpoint rule."""
    lam = (np.arange(n) + 0.5) / n
    d = y - x
    speed2 = np.einsum("i,nij,j->n", d, field.metric_matrix(x + lam[:, None] * d), d)
    return speed2.mean(), np.sqrt(speed2).mean()


class TwoHalfPlanes(MetricField):
    """A user's piecewise-constant field: metric ``left`` where x_0 < 0, ``right`` elsewhere."""

    structure = "piecewise_constant"

    def __init__(self, left, right):
        super().__init__(2)
        self.metrics = np.array([left, right], dtype=float)

    def metric_matrix(self, base_point):
        return self.metrics[(self._check(base_point)[..., 0] >= 0).astype(int)]

    def segment_cells(self, start_point, end_point):
        start, end = self._segments(start_point, end_point)
        a, b = start[:, 0], end[:, 0]
        crosses = (a < 0) != (b < 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            split = np.where(crosses, a / (a - b), 1.0)  # where x_0 = 0
        pair = np.repeat(np.arange(len(start)), 2)
        span = np.column_stack([split, 1.0 - split]).ravel()
        cell = np.column_stack([a >= 0, b >= 0]).astype(int).ravel()
        return SegmentCells(pair, span, cell, self.metrics)


class UndeclaredPieces(MetricField):
    """Declares piecewise constant but lists no cells."""

    structure = "piecewise_constant"

    def metric_matrix(self, base_point):
        x = self._check(base_point)
        return np.where((x[..., :1, None] >= 0), 4.0, 1.0) * np.eye(self.dim)


class Counting(MetricField):
    """A smooth user field counting its evaluations."""

    def __init__(self):
        super().__init__(2)
        self.calls = 0

    def metric_matrix(self, base_point):
        self.calls += 1
        x = self._check(base_point)
        return (1.0 + np.sum(x**2, axis=-1))[..., None, None] * np.eye(2)


class LabelLearner(BaseEstimator):
    """A learner whose metric is a function of the labels only (exactly translation invariant)."""

    def fit(self, X, y):
        share = np.mean(np.asarray(y) == np.asarray(y).min())
        self.metric_ = np.diag([1.0 + 3.0 * share, 2.0 - share, 1.0][: np.shape(X)[1]])
        return self


# --------------------------------------------------------------------------- the declaration


def test_every_field_declares_a_structure():
    rng = np.random.default_rng(0)
    centers, metrics = rng.normal(size=(3, 2)), random_spd(rng, 3, 2)
    expected = {
        ConstantField(np.eye(2)): ("constant", True),
        NearestLocalField(centers, metrics): ("piecewise_constant", False),
        RBFLocalField(centers, metrics, sigma=1.0): ("smooth", True),
        SmoothLocalField(centers, metrics): ("smooth", True),
        LazyField(CovarianceLearner(), rng.normal(size=(10, 2)), np.arange(10) % 2, n_local=4): (
            "piecewise_constant",
            False,
        ),
        Counting(): ("smooth", True),  # the documented default of a user field
    }
    for field, (structure, smooth) in expected.items():
        assert field.structure == structure and field.structure in STRUCTURES
        assert field.is_smooth is smooth
    with pytest.raises(AttributeError):
        Counting().is_smooth = False


def test_bad_declarations_fail_at_class_definition():
    with pytest.raises(ValueError, match=re.escape("Wrong.structure must be one of")):

        class Wrong(MetricField):
            structure = "piecewise constant"

    with pytest.raises(TypeError, match="is_smooth is derived from the class attribute structure"):

        class Legacy(MetricField):
            is_smooth = False


def test_rules_and_manifold_follow_the_declaration():
    field = UndeclaredPieces(2)
    x, y = np.array([-1.0, 0.0]), np.array([1.0, 0.5])
    for rule in LINE_RULES:
        with pytest.raises(ValueError, match=re.escape("without implementing segment_cells(start_point, end_point)")):
            distance(field, x, y, rule=rule)
    with pytest.raises(ValueError, match="rule='geodesic' serves fields of structure 'constant' or 'smooth'"):
        distance(field, x, y, rule="geodesic")
    with pytest.raises(ValueError, match="structure='piecewise_constant'"):
        LearnedMetricManifold(field)
    assert distance(field, x, y, rule="test", squared=True) == pytest.approx(4.25)
    assert distance(field, x, y, rule="train", squared=True) == pytest.approx(17.0)
    with pytest.raises(NotImplementedError, match="segment_cells"):
        field.segment_cells(x, y)


def test_a_wrong_hook_is_reported():
    class Gappy(TwoHalfPlanes):
        def segment_cells(self, start_point, end_point):
            pair, span, cell, metrics = super().segment_cells(start_point, end_point)
            return SegmentCells(pair, 0.5 * span, cell, metrics)

    with pytest.raises(ValueError, match="Gappy.segment_cells must return"):
        distance(Gappy(np.eye(2), np.eye(2)), [-1.0, 0.0], [1.0, 0.0], rule="line")


@pytest.mark.parametrize("own_metric", [True, False])
def test_nearest_cells_are_listed_in_order_along_each_segment(own_metric):
    rng = np.random.default_rng(9)
    metrics = random_spd(rng, 25, 2, condition=30.0)
    field = NearestLocalField(rng.normal(size=(25, 2)), metrics, None if own_metric else metrics[0])
    X, Y = 2.5 * rng.normal(size=(2, 3, 2))
    cells = field.segment_cells(X[:, None, :], Y[None, :, :])  # 3 x 3 broadcast segments
    assert cells.metrics is field.metrics
    for p in range(9):
        x, y = X[p // 3], Y[p % 3]
        mine = cells.pair == p
        breaks = np.r_[0.0, np.cumsum(cells.span[mine])]
        assert breaks[-1] == pytest.approx(1.0, rel=1e-14) and np.all(cells.span[mine] > 0)
        middle = x + 0.5 * (breaks[1:] + breaks[:-1])[:, None] * (y - x)
        np.testing.assert_array_equal(field.nearest_center(middle), cells.cell[mine])
    assert np.bincount(cells.pair).max() >= 4  # segments cross several cells


# --------------------------------------------------------------------------- a user's piecewise-constant field


def test_user_piecewise_field_gets_exact_line_rules():
    rng = np.random.default_rng(1)
    left, right = random_spd(rng, 2, 2, condition=20.0)
    field = TwoHalfPlanes(left, right)
    X, Y = 2.0 * rng.normal(size=(2, 12, 2))
    X[0], Y[0] = [-1.0, 0.3], [3.0, -0.2]  # crosses at lambda = 1/4
    energy = distance(field, X, Y, rule="line", squared=True)
    length = distance(field, X, Y, rule="line_length")
    d = Y - X
    with np.errstate(divide="ignore", invalid="ignore"):
        split = np.where((X[:, 0] < 0) != (Y[:, 0] < 0), X[:, 0] / (X[:, 0] - Y[:, 0]), 1.0)
    start_metric = np.where(X[:, 0, None, None] >= 0, right, left)
    end_metric = np.where(Y[:, 0, None, None] >= 0, right, left)
    first, second = (np.einsum("pi,pij,pj->p", d, m, d) for m in (start_metric, end_metric))
    np.testing.assert_allclose(energy, split * first + (1 - split) * second, rtol=1e-13)
    np.testing.assert_allclose(length, split * np.sqrt(first) + (1 - split) * np.sqrt(second), rtol=1e-13)
    assert energy[0] == pytest.approx(0.25 * first[0] + 0.75 * second[0], rel=1e-14)
    assert np.mean((split > 0) & (split < 1)) > 0.3  # many segments really cross
    for p in range(4):
        brute = midpoint_sums(field, X[p], Y[p])
        np.testing.assert_allclose([energy[p], length[p]], brute, rtol=1e-3)
    np.testing.assert_allclose(pairwise_distances(field, X, Y, rule="line").diagonal(), np.sqrt(energy), rtol=1e-13)


# --------------------------------------------------------------------------- LazyField


@pytest.fixture
def lazy_field():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2)) + np.repeat([[0.0, 0.0], [1.5, 0.5]], 20, axis=0)
    return LazyField(CovarianceLearner(), X, np.repeat([0, 1], 20), n_local=7)


def test_lazy_cells_are_the_neighbour_sets_along_the_segment(lazy_field):
    x, y = np.array([-2.0, -1.5]), np.array([3.0, 2.0])
    cells = lazy_field.segment_cells(x, y)
    np.testing.assert_array_equal(cells.pair, 0)
    assert np.all(cells.span > 0) and cells.span.sum() == pytest.approx(1.0, rel=1e-14)
    assert len(cells.span) >= 10  # the walk crosses many cells
    assert len(cells.metrics) == len(np.unique(cells.cell))  # one fit per distinct neighbour set
    breaks = np.r_[0.0, np.cumsum(cells.span)]
    # on a fine grid away from the breakpoints, the field's own metric is the cell's metric
    lam = np.linspace(0.0, 1.0, 5001)
    piece = np.searchsorted(breaks, lam, side="right") - 1
    away = np.min(np.abs(lam[:, None] - breaks[None]), axis=1) > 1e-9
    piece = np.minimum(piece, len(cells.span) - 1)[away]
    grid = lazy_field.metric_matrix(x + lam[away, None] * (y - x))
    np.testing.assert_array_equal(grid, cells.metrics[cells.cell[piece]])
    # and the neighbour set does change at every breakpoint (no spurious pieces)
    between = 0.5 * (breaks[1:] + breaks[:-1])
    sets = np.sort(lazy_field.neighbors(x + between[:, None] * (y - x)), axis=1)
    assert np.all(np.any(sets[1:] != sets[:-1], axis=1))


def test_lazy_line_rules_are_exact_finite_sums(lazy_field):
    rng = np.random.default_rng(3)
    X, Y = 1.5 * rng.normal(size=(2, 4, 2))
    energy = distance(lazy_field, X, Y, rule="line", squared=True)
    length = distance(lazy_field, X, Y, rule="line_length")
    for p in range(len(X)):
        cells = lazy_field.segment_cells(X[p], Y[p])
        d = Y[p] - X[p]
        speed2 = np.einsum("i,kij,j->k", d, cells.metrics[cells.cell], d)
        assert energy[p] == pytest.approx(np.sum(cells.span * speed2), rel=1e-13)
        assert length[p] == pytest.approx(np.sum(cells.span * np.sqrt(speed2)), rel=1e-13)
        np.testing.assert_allclose([energy[p], length[p]], midpoint_sums(lazy_field, X[p], Y[p]), rtol=2e-3)
    np.testing.assert_allclose(
        pairwise_distances(lazy_field, X, Y, rule="line_length").diagonal(), length, rtol=1e-13
    )


def test_lazy_iris_line_in_few_fits():
    """Ramanan & Baker's Lazy LDA on iris: one fit per cell, equal to a 4,000-point midpoint sum."""
    X, y = load_iris(return_X_y=True)
    field = LazyField(LDAMetric(), X, y, n_local=20)
    energy = distance(field, X[0], X[100], rule="line", squared=True)
    n_cells = field.cache_info().misses
    assert 10 <= n_cells <= 500  # today's quadrature fitted 68,315 metrics
    length = distance(field, X[0], X[100], rule="line_length")
    assert field.cache_info().misses == n_cells  # the second rule reuses every fit
    np.testing.assert_allclose([energy, length], midpoint_sums(field, X[0], X[100]), rtol=1e-3)


def test_lazy_cache_is_keyed_by_the_neighbour_set(lazy_field):
    points = np.array([[0.1, 0.1], [0.1000001, 0.1], [5.0, 5.0]])
    lazy_field.cache_clear()
    metrics = lazy_field.metric_matrix(points)
    assert lazy_field.cache_info().misses == 2  # the first two points share their neighbours
    np.testing.assert_array_equal(metrics[0], metrics[1])
    lazy_field.metric_matrix(points[:1])
    assert lazy_field.cache_info().hits == 1


def test_lazy_with_all_points_as_neighbours_is_constant():
    rng = np.random.default_rng(4)
    X, y = rng.normal(size=(8, 2)), np.arange(8) % 2
    field = LazyField(CovarianceLearner(), X, y, n_local=50)
    metric = field.metric_matrix(np.zeros(2))
    d = np.array([3.0, -1.0])
    assert distance(field, -d, d, rule="line", squared=True) == pytest.approx(4 * d @ metric @ d, rel=1e-13)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"rank": 0}, ValueError, "rank must be 'auto', None or a positive int"),
        ({"rank": "full"}, ValueError, "rank"),
        ({"ridge": -1e-3}, ValueError, "ridge must be >= 0"),
        ({"ridge": "small"}, TypeError, "ridge must be a real number"),
        ({"ridge": np.nan}, ValueError, "ridge"),
    ],
)
def test_lazy_validates_at_construction(kwargs, error, match):
    X = np.random.default_rng(5).normal(size=(6, 2))
    with pytest.raises(error, match=match):
        LazyField(CovarianceLearner(), X, np.arange(6) % 2, n_local=3, **kwargs)


# --------------------------------------------------------------------------- identical points, squared, offsets


@pytest.mark.parametrize("rule", ["test", "train", "line", "line_length", "geodesic"])
def test_identical_points_are_at_distance_zero_at_once(rule):
    field = Counting()
    x = np.array([[0.5, -1.0], [2.0, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(distance(field, x, x, rule=rule), 0.0)
        np.testing.assert_array_equal(distance(field, x, x, rule=rule, squared=True), 0.0)
    assert field.calls == 0
    mixed = distance(field, x, np.array([[0.5, -1.0], [2.0, 4.0]]), rule="line")
    assert mixed[0] == 0.0 and mixed[1] > 0


@pytest.mark.parametrize("squared", ["no", 1, 0.0, None])
def test_squared_must_be_a_bool(squared):
    field = ConstantField(np.eye(2))
    with pytest.raises(TypeError, match="squared must be a bool"):
        distance(field, np.zeros(2), np.ones(2), squared=squared)
    with pytest.raises(TypeError, match="squared must be a bool"):
        pairwise_distances(field, np.zeros((1, 2)), squared=squared)
    assert distance(field, np.zeros(2), np.ones(2), squared=np.bool_(True)) == pytest.approx(2.0)


def _on_grid(values):
    """Coordinates on a 1/64 grid: exactly representable after adding offsets up to 1e8."""
    return np.round(np.asarray(values) * 64.0) / 64.0


def _shifted_fields(offset):
    rng = np.random.default_rng(6)
    centers, metrics = _on_grid(rng.normal(size=(12, 3))), random_spd(rng, 12, 3, condition=20.0)
    train, labels = _on_grid(rng.normal(size=(30, 3))), np.arange(30) % 3
    return {
        "constant": ConstantField(metrics[0]),
        "nearest": NearestLocalField(centers + offset, metrics),
        "nearest, global proximity": NearestLocalField(centers + offset, metrics, proximity=metrics[1]),
        "lazy": LazyField(LabelLearner(), train + offset, labels, n_local=6, rank=None),
        "lazy, global proximity": LazyField(LabelLearner(), train + offset, labels, 6, metrics[2], rank=None),
    }


@pytest.mark.parametrize("offset", [1e4, 1e6, 1e8])
def test_line_rules_are_translation_invariant(offset):
    rng = np.random.default_rng(7)
    X, Y = _on_grid(1.5 * rng.normal(size=(2, 6, 3)))
    here, there = _shifted_fields(0.0), _shifted_fields(offset)
    for name in here:
        for rule in LINE_RULES:
            reference = distance(here[name], X, Y, rule=rule)
            moved = distance(there[name], X + offset, Y + offset, rule=rule)
            np.testing.assert_allclose(moved, reference, rtol=1e-10, err_msg=f"{name}, {rule}")


class Bump(MetricField):
    """A smooth user field with its analytic derivative, evaluated from differences x - c."""

    def __init__(self, center):
        super().__init__(3)
        self.center, self.shape = np.asarray(center, dtype=float), np.diag([1.0, 2.0, 0.5])

    def metric_matrix(self, base_point):
        weight = 1.0 + 3.0 * np.exp(-np.sum((self._check(base_point) - self.center) ** 2, axis=-1))
        return weight[..., None, None] * self.shape

    def metric_derivative(self, base_point):
        offset = self._check(base_point) - self.center
        gradient = -6.0 * np.exp(-np.sum(offset**2, axis=-1))[..., None] * offset
        return self.shape[..., None] * gradient[..., None, None, :]


@pytest.mark.parametrize("offset", [1e4, 1e8])
@pytest.mark.parametrize("kind", ["user", "smooth", "rbf"])
def test_quadrature_line_rules_are_translation_invariant(offset, kind):
    rng = np.random.default_rng(8)
    centers, metrics = _on_grid(rng.normal(size=(5, 3))), random_spd(rng, 5, 3, condition=5.0)
    build = {
        "user": lambda shift: Bump(centers[0] + shift),
        "smooth": lambda shift: SmoothLocalField(centers + shift, metrics, rho=1.0),
        "rbf": lambda shift: RBFLocalField(centers + shift, metrics, sigma=1.0, proximity=metrics[0]),
    }[kind]
    here, there = build(0.0), build(offset)
    X, Y = _on_grid(1.5 * rng.normal(size=(2, 4, 3)))
    np.testing.assert_allclose(there.metric_matrix(X + offset), here.metric_matrix(X), rtol=1e-12, atol=0)
    for rule in LINE_RULES:
        np.testing.assert_allclose(
            distance(there, X + offset, Y + offset, rule=rule), distance(here, X, Y, rule=rule), rtol=1e-10
        )
