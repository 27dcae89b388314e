"""No call can hang on a bad option (issue 23).

Every tolerance outside what float64 can honor (``1e-300``, ``0``, ``nan``, ``inf``, negative) is
refused with a ``ValueError`` naming it, and every iterative loop has a bound that neither a NaN
nor a huge ``max_iter`` can dodge. Each call runs under an alarm: a hang fails the test instead of
stalling the suite.
"""

import signal
import warnings
from contextlib import contextmanager

import numpy as np
import pytest

from riemlocal import LearnedMetricManifold, SmoothLocalField
from riemlocal.learning import FrechetMean, GeodesicRegression, PrincipalGeodesicAnalysis, TangentSpaceRegression
from riemlocal.numerics import EnergyLogSolver, dormand_prince, integrate_geodesic
from riemlocal.utils.validation import MIN_RTOL

FIELD = SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2 * np.eye(2), np.eye(2)])
X, Y, V = np.array([1.0, 1.0]), np.array([1.0, 3.0]), np.array([0.5, 1.0])
HOSTILE = [1e-300, 1e-17, 0.0, -1e-6, np.nan, np.inf, -np.inf]
SECONDS = 20  # a generous bound: each call below takes well under a second once its kernels are compiled


@contextmanager
def bounded(seconds=SECONDS):
    """Fail with ``TimeoutError`` if the block runs longer than ``seconds``."""

    def interrupt(*_):
        raise TimeoutError(f"the call ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("rtol", HOSTILE)
def test_manifold_refuses_tolerances_float64_cannot_honor(rtol):
    with bounded(), pytest.raises(ValueError, match="rtol"):
        LearnedMetricManifold(FIELD, rtol=rtol)


@pytest.mark.parametrize("option", ["rtol", "log_rtol"])
@pytest.mark.parametrize("value", HOSTILE)
def test_log_solver_refuses_hostile_tolerances_even_when_set_later(option, value):
    solver = EnergyLogSolver(FIELD)
    setattr(solver, option, value)  # the solver checks its options on every call, not only in __init__
    with bounded(), pytest.raises(ValueError, match=option):
        solver.log(Y, X)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("rtol", HOSTILE)
def test_integrator_refuses_hostile_tolerances(rtol, compiled):
    with bounded(), pytest.raises(ValueError, match="rtol"):
        integrate_geodesic(FIELD, V[None], X[None], rtol=rtol, atol=1e-12, compiled=compiled)


@pytest.mark.parametrize("compiled", [True, False])
def test_the_tightest_accepted_tolerance_is_met(compiled):
    """At ``MIN_RTOL`` the integrator still finishes, and agrees with a looser run to its own tolerance."""
    loose = integrate_geodesic(FIELD, V[None], X[None], rtol=1e-10, atol=1e-12, compiled=compiled)  # compiles first
    with bounded():
        tight = integrate_geodesic(FIELD, V[None], X[None], rtol=MIN_RTOL, atol=MIN_RTOL * 1e-2, compiled=compiled)
    np.testing.assert_allclose(tight, loose, atol=1e-8)


def test_dormand_prince_raises_on_a_nan_step_instead_of_looping():
    """The starting step of ``atol = 1e-302`` is NaN (its scaled norms overflow): the loop must stop, not spin."""

    def rhs(state):
        return np.concatenate([state[:, 2:], np.zeros_like(state[:, 2:])], axis=1)

    with bounded(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(RuntimeError, match="not finite"):
            dormand_prince(rhs, np.array([[1.0, 1.0, 0.5, 1.0]]), np.array([1.0]), 1e-300, 1e-302)


def test_dormand_prince_raises_when_the_right_hand_side_turns_nan():
    def rhs(state):
        return np.full_like(state, np.nan)

    with bounded(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(RuntimeError, match="round-off"):
            dormand_prince(rhs, np.array([[1.0, 1.0]]), np.array([1.0]), 1e-6, 1e-8)


@pytest.mark.parametrize("method", ["parallel_transport", "jacobi_field", "exp_differential"])
@pytest.mark.parametrize("rtol", [1e-300, np.nan])
def test_connection_refuses_hostile_tolerances(method, rtol):
    space = LearnedMetricManifold(FIELD)
    space.metric.exp_solver.rtol = rtol  # the connection's ODEs run at the Exp solver's tolerances
    arguments = {
        "parallel_transport": (V, X, V),
        "jacobi_field": (V, X, np.zeros(2), V),
        "exp_differential": (V, X),
    }[method]
    with bounded(), pytest.raises(ValueError, match="rtol"):
        getattr(space.metric, method)(*arguments)


@pytest.mark.parametrize("tol", [1e-300, 5e-324])
def test_log_with_an_unreachable_gradient_tolerance_and_huge_max_iter_ends(tol):
    """An unreachable ``tol`` with ``max_iter = 10**12`` stops on stalled progress, within the time bound."""
    reference = LearnedMetricManifold(FIELD).metric.dist(X, Y)  # outside the alarm: compiles the kernels
    solver = EnergyLogSolver(FIELD, tol=tol, max_iter=10**12, max_segments=64)
    with bounded(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = solver.solve(Y, X)
    np.testing.assert_allclose(result.length, reference, rtol=1e-6)


@pytest.mark.parametrize("compiled", [True, False])
def test_output_times_within_round_off_of_the_start_are_the_start(compiled):
    """Tiny positive times (1e-300 ... 1e-20) are within round-off of t = 0: the initial point, not an error."""
    times = [1e-300, 1e-20, 1e-16, 0.5]
    path = integrate_geodesic(FIELD, V[None], X[None], times, rtol=1e-9, atol=1e-11, compiled=compiled)[0]
    np.testing.assert_allclose(path[:3], np.broadcast_to(X, (3, 2)), atol=1e-15)
    half = integrate_geodesic(FIELD, V[None], X[None], [0.5], rtol=1e-9, atol=1e-11, compiled=compiled)[0, 0]
    np.testing.assert_allclose(path[3], half, rtol=1e-12)


def _estimators():
    """``(name, make(**options), fit(estimator))`` of every statistic, on a few points of FIELD."""
    space = LearnedMetricManifold(FIELD)
    points = np.random.default_rng(0).uniform(1, 5, (8, 2))
    times = np.linspace(0.0, 1.0, 8)
    return [
        ("FrechetMean joint", lambda **o: FrechetMean(space, **o), lambda e: e.fit(points)),
        ("FrechetMean karcher", lambda **o: FrechetMean(space, method="karcher", **o), lambda e: e.fit(points)),
        ("PGA tangent", lambda **o: PrincipalGeodesicAnalysis(space, 2, **o), lambda e: e.fit(points)),
        ("PGA exact", lambda **o: PrincipalGeodesicAnalysis(space, 1, method="exact", **o), lambda e: e.fit(points)),
        ("GeodesicRegression exact", lambda **o: GeodesicRegression(space, **o), lambda e: e.fit(times, points)),
        ("GeodesicRegression flat", lambda **o: GeodesicRegression(space, method="flat", **o), lambda e: e.fit(times, points)),
        ("TangentSpaceRegression", lambda **o: TangentSpaceRegression(space, **o), lambda e: e.fit(points, points[:, 0])),
    ]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("estimator", range(7), ids=[name for name, _, _ in _estimators()])
def test_estimators_refuse_hostile_tolerances(estimator, value):
    _, make, fit = _estimators()[estimator]
    with bounded(), pytest.raises(ValueError, match="tol"):
        fit(make(tol=value))


@pytest.mark.parametrize("estimator", range(7), ids=[name for name, _, _ in _estimators()])
def test_estimators_end_at_the_tightest_tolerance_with_huge_max_iter(estimator):
    """``tol = MIN_RTOL`` and ``max_iter = 10**12``: every loop stops on its own bound (stalled progress), in time."""
    _, make, fit = _estimators()[estimator]
    fit(make())  # compiles the kernels outside the alarm
    with bounded(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = fit(make(tol=MIN_RTOL, max_iter=10**12))
    assert np.all(np.isfinite(getattr(fitted, "estimate_", getattr(fitted, "mean_", 0.0))))
