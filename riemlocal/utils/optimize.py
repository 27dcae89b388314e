"""L-BFGS for a batch of independent problems, iterated in lockstep.

``scipy.optimize.minimize`` sees a batch of problems as one: its line search
and curvature pairs mix them, and every iteration evaluates every member
until the hardest one is done. Here each problem keeps its own curvature
pairs, step length and stopping test, and only the members still running are
evaluated (half the evaluations of a joint solve for batches of geodesics).

References: Nocedal & Wright, *Numerical Optimization*, 2nd ed., Algorithm 7.4
(two-loop recursion) and 3.1 (backtracking line search); Hager & Zhang, SIAM J.
Optim. 16 (2005) (approximate Wolfe conditions).
"""

import numpy as np

from .validation import check_int, check_points, check_positive

__all__ = ["batched_lbfgs"]

_ARMIJO = 1e-4
_MAX_BACKTRACKS = 20
_MAX_STALLS = 10
_ROUND_OFF = 1e-12  # relative change of the value treated as round-off by the approximate Wolfe test


def batched_lbfgs(objective, x0, tol, max_iter, memory=5):
    r"""Minimize :math:`f_b(x_b)` for every row ``b`` of ``x0`` independently.

    Parameters
    ----------
    objective : callable
        ``objective(x, rows)`` returns the values ``(k,)`` and gradients
        ``(k, n)`` of the problems ``rows`` (an index array, or ``slice(None)``
        for all of them) at ``x`` ``(k, n)``.
    x0 : ndarray of shape (batch, n)
    tol : float
        A problem stops when :math:`\max_i |\partial_i f_b| \le` ``tol``.
    max_iter : int
    memory : int, default=5
        Curvature pairs kept per problem.

    Returns
    -------
    x : ndarray of shape (batch, n)
    n_iter : int
        Iterations of the slowest problem.
    gradient_norm : ndarray of shape (batch,)
        :math:`\max_i |\partial_i f_b|` at the returned points.

    Notes
    -----
    Steps whose decrease is hidden by round-off in :math:`f` are accepted on
    the gradient's word (approximate Wolfe conditions). A problem that improves
    neither its value nor its smallest gradient norm for ``_MAX_STALLS``
    iterations in a row, or for which no step passes the line search, stops
    early (``gradient_norm`` tells how far it got).
    """
    x0 = check_points(x0, name="x0", min_ndim=2)
    if x0.ndim != 2:
        raise ValueError(f"x0 must have shape (batch, n), got {x0.shape}")
    tol = check_positive(tol, "tol", strict=False)
    max_iter = check_int(max_iter, "max_iter")
    memory = check_int(memory, "memory")
    batch, n = x0.shape
    x_out, norm_out = x0.copy(), np.empty(batch)
    ids = np.arange(batch)  # the problems still running; every state array below follows them
    x = x0.copy()
    value, gradient = objective(x, slice(None))
    norm = np.abs(gradient).max(axis=1)
    best_norm = norm.copy()
    stalls = np.zeros(batch, dtype=int)  # iterations in a row that improved neither the value nor the gradient
    steps, changes = np.zeros((memory, batch, n)), np.zeros((memory, batch, n))
    inverse_curvatures = np.zeros((memory, batch))  # 1 / s^T y, or 0 for an empty or skipped slot
    scaling = np.ones(batch)  # s^T y / y^T y of the newest pair: the initial inverse Hessian
    running = norm > tol
    n_iter = 0
    while True:
        if not running.all():  # retire finished problems, so that the loop works on views
            x_out[ids[~running]], norm_out[ids[~running]] = x[~running], norm[~running]
            ids, x, value, gradient, norm, best_norm, stalls, scaling = (
                a[running] for a in (ids, x, value, gradient, norm, best_norm, stalls, scaling)
            )
            steps, changes, inverse_curvatures = steps[:, running], changes[:, running], inverse_curvatures[:, running]
        if len(ids) == 0 or n_iter >= max_iter:
            break
        order = [(n_iter - 1 - i) % memory for i in range(min(n_iter, memory))]  # newest first
        g, alphas = gradient, []
        for slot in order:
            alpha = inverse_curvatures[slot] * _dot(steps[slot], g)
            g = g - alpha[:, None] * changes[slot]
            alphas.append(alpha)
        direction = scaling[:, None] * g
        for slot, alpha in zip(reversed(order), reversed(alphas)):
            direction += (alpha - inverse_curvatures[slot] * _dot(changes[slot], direction))[:, None] * steps[slot]
        direction = -direction
        slope = _dot(gradient, direction)
        uphill = slope >= 0  # lost curvature information: restart along the steepest descent
        direction[uphill] = -gradient[uphill]
        slope[uphill] = -_dot(gradient[uphill], gradient[uphill])

        rows = _index(ids, batch)
        new_x, new_value, new_gradient = _backtrack(objective, x, value, rows, direction, slope)
        moved = np.isfinite(new_value)
        slot = n_iter % memory
        s, y = new_x - x, new_gradient - gradient
        curvature, y_norm = _dot(s, y), _dot(y, y)
        useful = moved & (curvature > 1e-12 * np.sqrt(_dot(s, s) * y_norm))
        steps[slot], changes[slot] = s, y
        inverse_curvatures[slot] = np.where(useful, 1.0 / np.where(useful, curvature, 1.0), 0.0)
        scaling = np.where(useful, curvature / np.maximum(y_norm, 1e-300), scaling)

        new_norm = np.abs(new_gradient).max(axis=1)
        progress = (new_value < value) | (new_norm < best_norm)
        stalls = np.where(progress, 0, stalls + 1)
        x[moved], value[moved], norm[moved] = new_x[moved], new_value[moved], new_norm[moved]
        gradient[moved] = new_gradient[moved]
        best_norm = np.minimum(best_norm, norm)
        running = moved & (norm > tol) & (stalls < _MAX_STALLS)
        n_iter += 1
    x_out[ids], norm_out[ids] = x, norm
    return x_out, n_iter, norm_out


def _index(rows, total):
    """``rows`` as a basic slice when it selects all ``total`` rows (views instead of copies)."""
    return slice(None) if len(rows) == total else rows


def _dot(a, b):
    """Row-wise inner products of ``(k, n)`` arrays."""
    return np.einsum("kn,kn->k", a, b)


def _backtrack(objective, x, value, rows, direction, slope):
    r"""Backtracking from ``x`` (the problems ``rows``); failed problems get a NaN value.

    A step is accepted by the Armijo condition or, where the decrease is
    hidden by round-off, by the approximate Wolfe conditions
    :math:`\phi(\alpha) \le \phi(0) + \epsilon` and
    :math:`0.9\,\phi'(0) \le \phi'(\alpha) \le -0.8\,\phi'(0)`, which rely
    on the gradient alone (Hager & Zhang, SIAM J. Optim. 16, 2005).
    """
    new_x, new_gradient = x.copy(), np.zeros_like(x)  # what a failed problem reports: no step, no curvature pair
    new_value = np.full(len(x), np.nan)
    step_length = np.ones(len(x))
    round_off = value + _ROUND_OFF * np.abs(value)
    pending = np.arange(len(x))
    for _ in range(_MAX_BACKTRACKS):
        trial_rows = _index(pending, len(x))
        trial = x[trial_rows] + step_length[trial_rows, None] * direction[trial_rows]
        trial_value, trial_gradient = objective(trial, _compose(rows, trial_rows))
        initial_slope = slope[trial_rows]
        armijo = trial_value <= value[trial_rows] + _ARMIJO * step_length[trial_rows] * initial_slope
        trial_slope = _dot(trial_gradient, direction[trial_rows])
        wolfe = (trial_value <= round_off[trial_rows]) & (trial_slope >= 0.9 * initial_slope)
        accepted = armijo | (wolfe & (trial_slope <= -0.8 * initial_slope))
        keep = pending[accepted]
        new_x[keep], new_value[keep] = trial[accepted], trial_value[accepted]
        new_gradient[keep] = trial_gradient[accepted]
        pending = pending[~accepted]
        if len(pending) == 0:
            break
        step_length[pending] *= 0.5
    return new_x, new_value, new_gradient


def _compose(rows, subset):
    """Index of ``subset`` of the selection ``rows`` (either may be ``slice(None)``)."""
    if isinstance(subset, slice):
        return rows
    return subset if isinstance(rows, slice) else rows[subset]
