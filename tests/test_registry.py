"""The rule registry and the injected Log solver: one path for distance, pairwise_distances and LocalMetricKNN."""

import numpy as np
import pytest
from helpers import CovarianceLearner

from riemlocal.distances import RULES, check_rule, distance, pairwise_distances, register_rule, rules_for, unregister_rule
from riemlocal.fields import STRUCTURES, NearestLocalField, SmoothLocalField
from riemlocal.manifold import LearnedMetricManifold
from riemlocal.neighbors import LocalMetricKNN, check_where_rule
from riemlocal.numerics import EnergyLogSolver

CENTERS = np.array([[0.0, 0.0], [2.0, 1.0]])
METRICS = np.array([[[3.0, 0.5], [0.5, 1.0]], [[1.0, 0.0], [0.0, 4.0]]])


@pytest.fixture
def euclidean():
    """A toy rule ignoring the field, registered for the test only."""

    @register_rule("euclidean", STRUCTURES, "Euclidean length, whatever the field")
    def rule(field, X, Y, x_index, y_index, **options):
        return np.sum((Y[y_index] - X[x_index]) ** 2, axis=1)

    yield "euclidean"
    unregister_rule("euclidean")


def test_a_registered_rule_serves_distance_pairwise_distances_and_the_classifier(euclidean):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(5, 2)), rng.normal(size=(4, 2))
    field = NearestLocalField(CENTERS, METRICS)
    expected = np.linalg.norm(X[:, None] - Y[None], axis=-1)
    np.testing.assert_allclose(pairwise_distances(field, X, Y, rule=euclidean), expected, rtol=1e-14)
    np.testing.assert_allclose(distance(field, X[:, None], Y[None], rule=euclidean, squared=True), expected**2, rtol=1e-14)
    assert distance(field, X[0], X[0], rule=euclidean) == 0.0
    assert euclidean in rules_for("piecewise_constant") and RULES[euclidean].quantity.startswith("Euclidean")

    train_X = np.r_[rng.normal(size=(10, 2)) - 3, rng.normal(size=(10, 2)) + 3]
    train_y = np.repeat([0, 1], 10)
    clf = LocalMetricKNN(CovarianceLearner(), where="class", rule=euclidean, shortlist=5).fit(train_X, train_y)
    candidates, distances_sq = clf.local_distances(train_X[:3])
    np.testing.assert_allclose(distances_sq, np.sum((train_X[candidates] - train_X[:3, None]) ** 2, axis=-1), rtol=1e-14)


def test_unregistered_and_misregistered_rules_are_refused(euclidean):
    with pytest.raises(ValueError, match="name must be a string not yet registered"):
        register_rule("test", STRUCTURES, "again")
    with pytest.raises(ValueError, match="structures must be one of"):
        register_rule("toy", ("curved",), "a structure that does not exist")
    unregister_rule(euclidean)
    with pytest.raises(ValueError, match="rule must be one of"):
        distance(NearestLocalField(CENTERS, METRICS), np.zeros(2), np.ones(2), rule=euclidean)
    register_rule(euclidean, ("smooth",), "again, for smooth fields only")(lambda field, X, Y, x_index, y_index, **options: 0 * x_index)
    with pytest.raises(ValueError, match="rule='euclidean' serves fields of structure 'smooth', but NearestLocalField"):
        distance(NearestLocalField(CENTERS, METRICS), np.zeros(2), np.ones(2), rule=euclidean)
    with pytest.raises(ValueError, match="where='class' with interpolation='nearest' has structure='piecewise_constant'"):
        check_where_rule("class", "nearest", euclidean)
    assert check_rule(euclidean, "smooth", "a field") == euclidean


class RecordingSolver:
    """A Log solver that counts the pairs it is asked for and forwards them."""

    def __init__(self, field, **options):
        self.solver, self.pairs = EnergyLogSolver(field, **options), 0

    def dist(self, point_a, point_b):
        self.pairs += len(point_a)
        return self.solver.dist(point_a, point_b)


class LogOnlySolver:
    """A Log solver without ``dist``: the geodesic rule takes the norm of its Log."""

    def __init__(self, field):
        self.solver = EnergyLogSolver(field)

    def log(self, point, base_point):
        return self.solver.log(point, base_point)


def test_the_geodesic_rule_uses_the_injected_solver():
    field = SmoothLocalField(CENTERS, METRICS)
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(3, 2)), rng.normal(size=(2, 2)) + 1
    reference = pairwise_distances(field, X, Y, rule="geodesic")
    recording = RecordingSolver(field, rtol=1e-3)
    np.testing.assert_allclose(pairwise_distances(field, X, Y, rule="geodesic", log_solver=recording), reference, rtol=1e-3)
    assert recording.pairs == 6
    np.testing.assert_allclose(distance(field, X[0], Y[0], rule="geodesic", log_solver=recording), reference[0, 0], rtol=1e-3)
    assert recording.pairs == 7
    np.testing.assert_allclose(distance(field, X[0], Y[0], rule="geodesic", log_solver=LogOnlySolver(field)), reference[0, 0], rtol=1e-3)

    space = LearnedMetricManifold(field)
    space.metric.log_solver = RecordingSolver(field)
    np.testing.assert_allclose(distance(space, X, Y[0], rule="geodesic"), reference[:, 0], rtol=1e-5)
    np.testing.assert_allclose(pairwise_distances(space, X, Y, rule="line"), pairwise_distances(field, X, Y, rule="line"))
    assert space.metric.log_solver.pairs == 3
    with pytest.raises(TypeError, match="either a space as field or log_solver, not both"):
        distance(space, X, Y[0], rule="geodesic", log_solver=recording)
    with pytest.raises(TypeError, match="log_solver must have a method dist"):
        distance(field, X, Y[0], rule="geodesic", log_solver="energy")


def test_the_call_n_jobs_reaches_a_given_solver_for_the_call():
    """``n_jobs`` of ``distance``/``pairwise_distances`` runs the space's (or a given) solver with that many workers,
    and leaves the solver's own setting as it was; ``None`` keeps the solver's."""
    field = SmoothLocalField(CENTERS, METRICS)
    X = np.random.default_rng(3).normal(size=(3, 2))
    seen = []

    class WorkersSolver(RecordingSolver):
        n_jobs = 1

        def dist(self, point_a, point_b):
            seen.append(self.n_jobs)
            return super().dist(point_a, point_b)

    space = LearnedMetricManifold(field)
    space.metric.log_solver = WorkersSolver(field)
    pairwise_distances(space, X, rule="geodesic", n_jobs=2)
    distance(field, X[0], X[1], rule="geodesic", log_solver=space.metric.log_solver)
    assert seen == [2, 1] and space.metric.log_solver.n_jobs == 1


def test_the_classifier_builds_its_solver_from_the_fitted_field():
    rng = np.random.default_rng(2)
    X = np.r_[rng.normal(size=(8, 2)) - 1, rng.normal(size=(8, 2)) + 1]
    y = np.repeat([0, 1], 8)
    built = []

    def solver(field):
        built.append(RecordingSolver(field, rtol=1e-4))
        return built[-1]

    params = dict(where="class", interpolation="smooth", rule="geodesic", shortlist=4)
    clf = LocalMetricKNN(CovarianceLearner(), log_solver=solver, **params).fit(X, y)
    _, distances_sq = clf.local_distances(X[:2] + 0.1)
    assert len(built) == 1 and built[0].solver.field is clf.field_ and built[0].pairs == 8
    default = LocalMetricKNN(CovarianceLearner(), **params).fit(X, y).local_distances(X[:2] + 0.1)[1]
    np.testing.assert_allclose(distances_sq, default, rtol=1e-3)
