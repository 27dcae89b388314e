"""Batched lockstep L-BFGS and Newton (riemlocal.utils.optimize)."""

import numpy as np
import pytest

from riemlocal.utils.optimize import batched_lbfgs, batched_newton


def quadratics(batch, n, seed=0, with_hessians=False):
    """Problems f_b(x) = 1/2 x^T A_b x - c_b^T x with condition numbers up to 1e3."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(batch, n, n)))
    eigenvalues = np.exp(rng.uniform(0, np.log(1e3), (batch, n)))
    hessians = np.einsum("bij,bj,bkj->bik", q, eigenvalues, q)
    linear = rng.normal(size=(batch, n))
    calls = []

    def objective(x, rows):
        calls.append(len(x))
        gradient = np.einsum("bij,bj->bi", hessians[rows], x) - linear[rows]
        value = 0.5 * np.einsum("bi,bi->b", gradient - linear[rows], x)
        return (value, gradient, hessians[rows]) if with_hessians else (value, gradient)

    return objective, np.linalg.solve(hessians, linear[..., None])[..., 0], calls


def test_solves_each_quadratic():
    objective, minimizers, _ = quadratics(6, 8)
    x, _, n_iter, gradient_norm = batched_lbfgs(objective, np.zeros((6, 8)), tol=1e-10, max_iter=500)
    np.testing.assert_allclose(x, minimizers, rtol=1e-7, atol=1e-9)
    assert np.all(gradient_norm <= 1e-10)
    assert 0 < n_iter < 500


def test_problems_do_not_interact():
    objective, _, _ = quadratics(5, 6, seed=1)
    together = batched_lbfgs(objective, np.ones((5, 6)), tol=1e-9, max_iter=500)[0]
    for b in range(5):

        def alone(x, rows, b=b):
            return objective(x, np.array([b]))

        np.testing.assert_allclose(batched_lbfgs(alone, np.ones((1, 6)), tol=1e-9, max_iter=500)[0][0], together[b], atol=1e-12)


def test_converged_problems_are_no_longer_evaluated():
    objective, _, calls = quadratics(4, 5, seed=2)
    easy = np.zeros((4, 5))
    batched_lbfgs(objective, easy, tol=1e-8, max_iter=500)
    assert calls[0] == 4 and min(calls) < 4  # the batch shrinks as problems finish


def test_rosenbrock_batch():
    def objective(x, rows):
        a, b = x[:, 0], x[:, 1]
        value = (1 - a) ** 2 + 100 * (b - a**2) ** 2
        gradient = np.stack([-2 * (1 - a) - 400 * a * (b - a**2), 200 * (b - a**2)], axis=1)
        return value, gradient

    starts = np.array([[-1.2, 1.0], [2.0, -1.0], [0.0, 0.0], [1.5, 2.5]])
    x, _, _, gradient_norm = batched_lbfgs(objective, starts, tol=1e-9, max_iter=1000)
    np.testing.assert_allclose(x, 1.0, atol=1e-7)
    assert np.all(gradient_norm <= 1e-9)


def test_stops_at_round_off_instead_of_running_to_max_iter():
    objective, minimizers, _ = quadratics(3, 4, seed=3)
    x, _, n_iter, _ = batched_lbfgs(objective, np.zeros((3, 4)), tol=0.0, max_iter=10_000)
    assert n_iter < 200
    np.testing.assert_allclose(x, minimizers, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("memory", [1, 3, 10])
def test_any_memory_converges(memory):
    objective, minimizers, _ = quadratics(3, 10, seed=4)
    x = batched_lbfgs(objective, np.zeros((3, 10)), tol=1e-10, max_iter=5000, memory=memory)[0]
    np.testing.assert_allclose(x, minimizers, rtol=1e-7, atol=1e-9)


def newton_step(x, rows, gradient, hessian):
    return -np.linalg.solve(hessian, gradient[..., None])[..., 0]


def test_newton_solves_quadratics_in_one_step():
    objective, minimizers, calls = quadratics(5, 6, with_hessians=True)
    x, value, n_iter, gradient_norm = batched_newton(objective, newton_step, np.zeros((5, 6)), tol=1e-9, max_iter=50)
    assert n_iter == 1 and calls == [5, 5]  # the start, then one full step for every problem
    np.testing.assert_allclose(x, minimizers, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(value, objective(minimizers, slice(None))[0], rtol=1e-12)
    assert np.all(gradient_norm <= 1e-9)


def test_newton_on_a_rosenbrock_batch_with_a_modified_hessian():
    """Where the Hessian is indefinite the caller shifts it; the iteration converges quadratically at the end."""
    seen = []

    def objective(x, rows):
        a, b = x[:, 0], x[:, 1]
        value = (1 - a) ** 2 + 100 * (b - a**2) ** 2
        gradient = np.stack([-2 * (1 - a) - 400 * a * (b - a**2), 200 * (b - a**2)], axis=1)
        hessian = np.empty((len(x), 2, 2))
        hessian[:, 0, 0] = 2 - 400 * (b - 3 * a**2)
        hessian[:, 0, 1] = hessian[:, 1, 0] = -400 * a
        hessian[:, 1, 1] = 200
        return value, gradient, hessian

    def shifted_step(x, rows, gradient, hessian):
        seen.append(np.allclose(hessian, objective(x, rows)[2]))  # the Hessian of these very points
        smallest = np.linalg.eigvalsh(hessian)[:, 0]
        shift = np.maximum(0.0, 1e-3 - smallest)[:, None, None] * np.eye(2)
        return newton_step(x, rows, gradient, hessian + shift)

    starts = np.array([[-1.2, 1.0], [2.0, -1.0], [0.0, 0.0], [1.5, 2.5]])
    x, _, n_iter, gradient_norm = batched_newton(objective, shifted_step, starts, tol=1e-10, max_iter=200)
    np.testing.assert_allclose(x, 1.0, atol=1e-9)
    assert np.all(gradient_norm <= 1e-10) and all(seen)
    assert n_iter < 30  # 22; L-BFGS takes 45 on this batch


def test_newton_replaces_uphill_steps_by_steepest_descent():
    objective, minimizers, _ = quadratics(3, 4, seed=5, with_hessians=True)

    def uphill(x, rows, gradient, hessian):
        return -newton_step(x, rows, gradient, hessian)

    x = batched_newton(objective, uphill, np.zeros((3, 4)), tol=1e-8, max_iter=5000)[0]
    np.testing.assert_allclose(x, minimizers, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(x0=np.zeros(3)), ValueError, "x0 must have at least 2"),
        (dict(x0=np.zeros((2, 2, 2))), ValueError, "x0 must have shape"),
        (dict(x0=np.full((2, 2), np.nan)), ValueError, "x0 contains NaN"),
        (dict(tol=-1.0), ValueError, "tol must be >= 0"),
        (dict(max_iter=0), ValueError, "max_iter must be an int >= 1"),
        (dict(memory=1.5), TypeError, "memory must be an int"),
    ],
)
def test_bad_input(kwargs, error, match):
    objective, _, _ = quadratics(2, 2)
    arguments = dict(x0=np.zeros((2, 2)), tol=1e-8, max_iter=10) | kwargs
    with pytest.raises(error, match=match):
        batched_lbfgs(objective, **arguments)

    if "memory" not in kwargs:
        objective, _, _ = quadratics(2, 2, with_hessians=True)
        with pytest.raises(error, match=match):
            batched_newton(objective, newton_step, **arguments)
