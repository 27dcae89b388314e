"""The compiled certified Log (numba) against the numpy Newton path of EnergyLogSolver."""

import warnings

import numpy as np
import pytest
from test_compiled import random_spd, rbf_fields, relative

from riemlocal import LearnedMetricManifold, SmoothLocalField
from riemlocal.numerics import EnergyLogSolver, block_tridiagonal_solve


def block_tridiagonal(rng, n, dim, shift):
    diagonal = random_spd(rng, n, dim, condition=5.0) * 4.0 + shift * np.eye(dim)
    upper = rng.normal(size=(n - 1, dim, dim)) * 0.5
    dense = np.zeros((n * dim, n * dim))
    for k in range(n):
        dense[k * dim : (k + 1) * dim, k * dim : (k + 1) * dim] = diagonal[k]
    for k in range(n - 1):
        dense[k * dim : (k + 1) * dim, (k + 1) * dim : (k + 2) * dim] = upper[k]
        dense[(k + 1) * dim : (k + 2) * dim, k * dim : (k + 1) * dim] = upper[k].T
    return diagonal, upper, dense


@pytest.mark.parametrize("n, dim", [(1, 3), (2, 1), (7, 2), (15, 4)])
def test_block_tridiagonal_solve(n, dim):
    rng = np.random.default_rng(n * dim)
    diagonal, upper, dense = block_tridiagonal(rng, n, dim, shift=0.0)
    rhs = rng.normal(size=(n, dim))
    x = rhs.copy()
    assert block_tridiagonal_solve(diagonal, upper, x, np.empty((n, dim, dim)), np.empty((max(n - 1, 0), dim, dim)))
    np.testing.assert_allclose(x.ravel(), np.linalg.solve(dense, rhs.ravel()), rtol=1e-10, atol=1e-12)
    indefinite = block_tridiagonal(rng, n, dim, shift=-50.0)  # the numpy path's banded Cholesky fails there too
    assert np.linalg.eigvalsh(indefinite[2]).min() < 0
    assert not block_tridiagonal_solve(*indefinite[:2], rhs.copy(), np.empty((n, dim, dim)), np.empty((max(n - 1, 0), dim, dim)))


def test_node_space_iterates_match_the_chart():
    r"""The compiled Newton keeps curves, not chart variables z: with :math:`c = c_0 + \kappa (S z) L^{-1}` and
    :math:`g_z = \kappa S (g L^{-T})`, a z step maps to a node step with the same slope, and the steepest
    descent :math:`-g_z` to :math:`\kappa (S (-g_z)) L^{-1}`."""
    from riemlocal.numerics._compiled_log import _gradient_norm, _interior_dot, _new_state, _steepest_descent
    from riemlocal.numerics._energy import laplacian_inverse_sqrt

    rng = np.random.default_rng(7)
    n_segments, dim, curve_scale = 8, 3, 0.7
    factor = np.linalg.cholesky(random_spd(rng, 1, dim)[0])
    inverse_factor, preconditioner = np.linalg.inv(factor), laplacian_inverse_sqrt(n_segments)
    chart = (np.zeros((n_segments + 1, dim)), curve_scale, 1.0, factor, inverse_factor, preconditioner)
    state = _new_state(rbf_fields(dim)[0].capability.data, n_segments + 1, dim)
    state[1][:] = rng.normal(size=(n_segments + 1, dim))  # a node gradient
    gradient_z = curve_scale * preconditioner @ (state[1][1:-1] @ inverse_factor.T)
    assert _gradient_norm(chart, state) == pytest.approx(np.abs(gradient_z).max(), rel=1e-14)
    np.testing.assert_allclose(state[2], gradient_z, rtol=1e-13)
    dz = rng.normal(size=(n_segments - 1, dim))
    node_step = curve_scale * (preconditioner @ dz) @ inverse_factor
    assert _interior_dot(state[1], node_step) == pytest.approx(np.sum(gradient_z * dz), rel=1e-12)
    direction = np.empty((n_segments - 1, dim))
    _steepest_descent(chart, state, direction)
    np.testing.assert_allclose(direction, curve_scale * (preconditioner @ -gradient_z) @ inverse_factor, rtol=1e-13)


def solve_both(field, y, x, **options):
    """``EnergyLogSolver.solve`` compiled and on the numpy Newton path, with the warnings each raised."""
    results = []
    for compiled in (True, False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = EnergyLogSolver(field, method="newton", compiled=compiled, **options).solve(y, x)
        results.append((result, [str(w.message) for w in caught]))
    return results


def assert_same_results(compiled, numpy_path):
    assert relative(compiled.initial_velocity, numpy_path.initial_velocity) < 1e-12
    assert relative(compiled.length, numpy_path.length) < 1e-12
    # the estimates are differences of nearly equal values: equal to rounding of the values, relative to the length
    for name in ("error_estimate", "log_error_estimate"):
        assert np.max(np.abs(getattr(compiled, name) - getattr(numpy_path, name))) < 1e-12
    np.testing.assert_array_equal(compiled.n_segments, numpy_path.n_segments)
    np.testing.assert_array_equal(compiled.converged, numpy_path.converged)
    assert compiled.n_iter_all_levels == numpy_path.n_iter_all_levels
    for a, b in zip(compiled.curves.ravel(), numpy_path.curves.ravel()):
        assert a.shape == b.shape and relative(a, b) < 1e-12


@pytest.mark.parametrize("dim", [1, 2, 3, 5, 10])
def test_compiled_log_equals_numpy_newton(dim):
    rng = np.random.default_rng(30 + dim)
    x, y = rng.normal(size=(2, 5, dim))
    y[-1] = x[-1]  # a pair with nothing to solve
    y[-2] = x[-2] + 1e-12  # closer than round-off resolves: a straight segment
    for field in rbf_fields(dim, seed=dim):
        (compiled, compiled_warnings), (numpy_path, numpy_warnings) = solve_both(field, y, x)
        assert_same_results(compiled, numpy_path)
        assert compiled_warnings == numpy_warnings
        assert np.all(compiled.n_segments[:-2] >= 32)


@pytest.mark.parametrize("dim", [2, 5])
def test_compiled_log_from_given_curves_equals_numpy_newton(dim):
    """Solves that start from given curves (the route searches' candidates: detours) agree on both paths, at
    one level (the searches' coarse minimization) and in full."""
    rng = np.random.default_rng(40 + dim)
    x, y = rng.normal(size=(2, 4, dim))
    detour = 2.0 * rng.normal(size=(4, 1, dim))
    t = np.linspace(0.0, 1.0, 17)[:, None]
    starts = x[:, None] + t * (y - x)[:, None] + 4.0 * t * (1.0 - t) * detour  # bent curves, 16 segments
    field = rbf_fields(dim, seed=dim)[1]
    for max_segments in (16, 1024):
        outputs = []
        for compiled in (True, False):
            solver = EnergyLogSolver(field, n_segments=16, max_segments=max_segments, method="newton", compiled=compiled)
            outputs.append(solver._solve_pairs(y, x, solver.log_rtol, starts))
        (velocity, length, *_, curves, n_iter), (velocity_np, length_np, *_, curves_np, n_iter_np) = outputs
        assert relative(velocity, velocity_np) < 1e-12 and relative(length, length_np) < 1e-12
        assert all(a.shape == b.shape and relative(a, b) < 1e-12 for a, b in zip(curves, curves_np))
        straight = EnergyLogSolver(field, n_segments=16, max_segments=max_segments, method="newton")._solve_pairs(y, x, np.inf)
        assert n_iter[0] == n_iter_np[0] > straight[-1][0]  # the bent starts took more Newton steps


def test_compiled_log_several_levels_and_warnings():
    """A sharp field: pairs refined beyond 128 segments (a second compiled pass), uncertified pairs warn the same."""
    field = SmoothLocalField([[0.0, 0.0], [1.0, 0.5], [2.0, -0.5]], [np.diag([1.0, 30.0]), np.eye(2), np.diag([20.0, 1.0])], rho=40.0)
    x, y = np.array([[-0.5, 0.1], [-1.0, -0.3], [0.2, 0.0]]), np.array([[2.5, -0.2], [3.0, 0.4], [0.4, 0.05]])
    (compiled, compiled_warnings), (numpy_path, numpy_warnings) = solve_both(field, y, x, max_segments=256, rtol=1e-9)
    assert_same_results(compiled, numpy_path)
    assert compiled.n_segments.max() == 256 and compiled.n_segments.min() < 256
    assert compiled_warnings == numpy_warnings and any("not certified" in w for w in compiled_warnings)


def test_compiled_distances_and_batches():
    """dist (log_rtol = inf, unordered pairs once) and a broadcast batch give the numpy path's results."""
    field = rbf_fields(3, seed=4)[2]
    rng = np.random.default_rng(5)
    points = rng.normal(size=(4, 1, 3))
    fast, slow = (LearnedMetricManifold(field, compiled=c, method="newton").metric for c in (True, False))
    assert relative(fast.dist(points, points[:, 0]), slow.dist(points, points[:, 0])) < 1e-12
    assert relative(fast.log(points, points[:, 0]), slow.log(points, points[:, 0])) < 1e-12
    assert fast.log_solver.compiled and not slow.log_solver.compiled
    with pytest.raises(TypeError, match="compiled must be a bool"):
        EnergyLogSolver(field, compiled=1)


def test_declined_pairs_take_the_numpy_path():
    """Where a proximity overflows, the kernel declines and the pair is solved (or rejected) by the numpy path."""
    field = rbf_fields(2)[0]
    x, y = np.array([[1e200, -1e200], [0.0, 0.1]]), np.array([[1e200, -1e200], [0.5, -0.2]])
    compiled = EnergyLogSolver(field, method="newton").solve(y, x)
    numpy_path = EnergyLogSolver(field, method="newton", compiled=False).solve(y, x)
    assert_same_results(compiled, numpy_path)
    far = np.array([[1e170, 0.0]])
    for compiled_option in (True, False):
        with pytest.raises(ValueError, match="curves contains NaN or infinite values"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            EnergyLogSolver(field, compiled=compiled_option).log(1.001 * far, far)


def test_compiled_log_is_translation_invariant():
    """The compiled path works relative to the base point: a shift of 1e8 of field and points changes nothing beyond rounding of the inputs."""
    rng = np.random.default_rng(8)
    centers, metrics = rng.normal(size=(5, 2)), random_spd(rng, 5, 2)
    x, y = rng.normal(size=(2, 3, 2))
    offset = np.array([1e8, -3e7])
    near = EnergyLogSolver(SmoothLocalField(centers, metrics), method="newton").solve(y, x)
    far = EnergyLogSolver(SmoothLocalField(centers + offset, metrics), method="newton").solve(y + offset, x + offset)
    scale = np.max(np.abs(y - x))
    # x + offset and y + offset are rounded to 1.5e-8: the pairs themselves move by that much
    # (measured 4.5e-9; the numpy path, whose nodes are absolute, 4.6e-7 on the Log vectors)
    assert np.max(np.abs(far.initial_velocity - near.initial_velocity)) < 1e-7 * scale
    assert np.max(np.abs(far.length - near.length)) < 1e-7 * scale
    np.testing.assert_array_equal(far.n_segments, near.n_segments)
