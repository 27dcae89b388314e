"""Line-search descent for a batch of independent problems, iterated in lockstep.

``scipy.optimize.minimize`` sees a batch of problems as one: its line search
and curvature pairs mix them, and every iteration evaluates every member
until the hardest one is done. Here each problem keeps its own search
direction, step length and stopping test, and only the members still running
are evaluated (half the evaluations of a joint solve for batches of geodesics).
Directions come from L-BFGS (:func:`batched_lbfgs`) or from the caller's
Newton steps (:func:`batched_newton`); both share one driver and line search.

References: Nocedal & Wright, *Numerical Optimization*, 2nd ed., Algorithm 7.4
(two-loop recursion), 3.1 (backtracking line search) and 3.4 (Newton with
Hessian modification); Hager & Zhang, SIAM J. Optim. 16 (2005) (approximate
Wolfe conditions).

Steps whose decrease is hidden by round-off in :math:`f` are accepted on the
gradient's word (approximate Wolfe conditions). A problem that improves
neither its value nor its smallest gradient norm for ``MAX_STALLS``
iterations in a row, or for which no step passes the line search, stops early
(the returned gradient norm tells how far it got).

The Newton driver and line search are mirrored, for one problem, in the
compiled Log of :mod:`riemlocal.numerics` (``_compiled_log._newton``): keep both in step.
"""

import numpy as np

from .validation import check_int, check_points, check_positive

__all__ = ["ARMIJO", "MAX_BACKTRACKS", "MAX_STALLS", "ROUND_OFF", "batched_lbfgs", "batched_newton"]

ARMIJO = 1e-4  #: sufficient-decrease constant of every line search in riemlocal
MAX_BACKTRACKS = 20  #: step halvings of a line search before it fails
MAX_STALLS = 10  #: iterations in a row without progress before a problem stops
ROUND_OFF = 1e-12  #: relative change of the value treated as round-off by the approximate Wolfe test


def batched_lbfgs(objective, x0, tol, max_iter, memory=5):
    r"""Minimize :math:`f_b(x_b)` for every row ``b`` of ``x0`` independently, by L-BFGS.

    Parameters
    ----------
    objective : callable
        ``objective(x, rows)`` returns the values ``(k,)`` and gradients
        ``(k, n)`` of the problems ``rows`` (an index array, or ``slice(None)``
        for all of them) at ``x`` ``(k, n)``, optionally followed by further
        per-problem arrays (as for :func:`batched_newton`).
    x0 : ndarray of shape (batch, n)
    tol : float
        A problem stops when :math:`\max_i |\partial_i f_b| \le` ``tol``.
    max_iter : int
    memory : int, default=5
        Curvature pairs kept per problem.

    Returns
    -------
    x : ndarray of shape (batch, n)
    value : ndarray of shape (batch,)
        :math:`f_b` at the returned points.
    n_iter : int
        Iterations of the slowest problem.
    gradient_norm : ndarray of shape (batch,)
        :math:`\max_i |\partial_i f_b|` at the returned points.
    """
    x0, tol, max_iter = _check(x0, tol, max_iter)
    return _descend(objective, x0, tol, max_iter, _LBFGSDirections(check_int(memory, "memory"), *x0.shape))


def batched_newton(objective, newton_step, x0, tol, max_iter):
    r"""Minimize :math:`f_b(x_b)` for every row ``b`` of ``x0`` independently, by Newton's method.

    Parameters
    ----------
    objective : callable
        As in :func:`batched_lbfgs`; the arrays it returns after the gradients
        (e.g. Hessians, computed in the same pass) are handed to ``newton_step``.
    newton_step : callable
        ``newton_step(x, rows, gradient, *extras)`` returns the directions ``(k, n)``
        :math:`-H_b^{-1} \nabla f_b` of the problems ``rows`` at ``x``, with
        :math:`H_b` the Hessian made positive definite where it is not (a
        direction that is not downhill is replaced by the steepest descent).
    x0 : ndarray of shape (batch, n)
    tol : float
        A problem stops when :math:`\max_i |\partial_i f_b| \le` ``tol``.
    max_iter : int

    Returns
    -------
    x, value, n_iter, gradient_norm
        As for :func:`batched_lbfgs`.
    """
    x0, tol, max_iter = _check(x0, tol, max_iter)
    return _descend(objective, x0, tol, max_iter, _NewtonDirections(newton_step))


def _check(x0, tol, max_iter):
    x0 = check_points(x0, name="x0", min_ndim=2)
    if x0.ndim != 2:
        raise ValueError(f"x0 must have shape (batch, n), got {x0.shape}")
    return x0, check_positive(tol, "tol", strict=False), check_int(max_iter, "max_iter")


class _LBFGSDirections:
    """Per-problem curvature pairs and the two-loop recursion (Nocedal & Wright, Algorithm 7.4)."""

    def __init__(self, memory, batch, n):
        self.memory, self.n_updates = memory, 0
        self.steps, self.changes = np.zeros((memory, batch, n)), np.zeros((memory, batch, n))
        self.inverse_curvatures = np.zeros((memory, batch))  # 1 / s^T y, or 0 for an empty or skipped slot
        self.scaling = np.ones(batch)  # s^T y / y^T y of the newest pair: the initial inverse Hessian

    def __call__(self, x, rows, gradient, *extras):
        order = [(self.n_updates - 1 - i) % self.memory for i in range(min(self.n_updates, self.memory))]  # newest first
        g, alphas = gradient, []
        for slot in order:
            alpha = self.inverse_curvatures[slot] * _dot(self.steps[slot], g)
            g = g - alpha[:, None] * self.changes[slot]
            alphas.append(alpha)
        direction = self.scaling[:, None] * g
        for slot, alpha in zip(reversed(order), reversed(alphas)):
            beta = self.inverse_curvatures[slot] * _dot(self.changes[slot], direction)
            direction += (alpha - beta)[:, None] * self.steps[slot]
        return -direction

    def update(self, s, y, moved):
        slot = self.n_updates % self.memory
        curvature, y_norm = _dot(s, y), _dot(y, y)
        useful = moved & (curvature > 1e-12 * np.sqrt(_dot(s, s) * y_norm))
        self.steps[slot], self.changes[slot] = s, y
        self.inverse_curvatures[slot] = np.where(useful, 1.0 / np.where(useful, curvature, 1.0), 0.0)
        self.scaling = np.where(useful, curvature / np.maximum(y_norm, 1e-300), self.scaling)
        self.n_updates += 1

    def keep(self, running):
        self.steps, self.changes = self.steps[:, running], self.changes[:, running]
        self.inverse_curvatures, self.scaling = self.inverse_curvatures[:, running], self.scaling[running]


class _NewtonDirections:
    """The caller's Newton steps; no state."""

    def __init__(self, newton_step):
        self.newton_step = newton_step

    def __call__(self, x, rows, gradient, *extras):
        return self.newton_step(x, rows, gradient, *extras)

    def update(self, s, y, moved):
        pass

    def keep(self, running):
        pass


def _descend(objective, x0, tol, max_iter, directions):
    """The lockstep driver: directions, backtracking, stopping tests, retiring finished problems."""
    batch = len(x0)
    x_out, value_out, norm_out = x0.copy(), np.empty(batch), np.empty(batch)
    ids = np.arange(batch)  # the problems still running; every state array below follows them
    x = x0.copy()
    value, gradient, *extras = objective(x, slice(None))
    norm = np.maximum.reduce(np.abs(gradient), axis=1)
    best_norm = norm.copy()
    stalls = np.zeros(batch, dtype=int)  # iterations in a row that improved neither the value nor the gradient
    running = norm > tol
    n_iter = 0
    while True:
        if not running.all():  # retire finished problems, so that the loop works on views
            done = ids[~running]
            x_out[done], value_out[done], norm_out[done] = x[~running], value[~running], norm[~running]
            ids, x, value, gradient, norm, best_norm, stalls, *extras = (
                a[running] for a in (ids, x, value, gradient, norm, best_norm, stalls, *extras)
            )
            directions.keep(running)
        if len(ids) == 0 or n_iter >= max_iter:
            break
        rows = _index(ids, batch)
        direction = directions(x, rows, gradient, *extras)
        slope = _dot(gradient, direction)
        uphill = ~(slope < 0)  # lost curvature information (or NaN): restart along the steepest descent
        if uphill.any():
            direction[uphill] = -gradient[uphill]
            slope[uphill] = -_dot(gradient[uphill], gradient[uphill])

        new_x, new_value, new_gradient, new_extras = _backtrack(objective, x, value, rows, direction, slope)
        moved = np.isfinite(new_value)
        directions.update(new_x - x, new_gradient - gradient, moved)
        new_norm = np.maximum.reduce(np.abs(new_gradient), axis=1)
        progress = (new_value < value) | (new_norm < best_norm)
        stalls = np.where(progress, 0, stalls + 1)
        if moved.all():  # the common case: take the new arrays whole
            x, value, norm, gradient, extras = new_x, new_value, new_norm, new_gradient, list(new_extras)
        else:
            x[moved], value[moved], norm[moved] = new_x[moved], new_value[moved], new_norm[moved]
            gradient[moved] = new_gradient[moved]
            for extra, new_extra in zip(extras, new_extras):
                extra[moved] = new_extra[moved]
        best_norm = np.minimum(best_norm, norm)
        running = moved & (norm > tol) & (stalls < MAX_STALLS)
        n_iter += 1
    x_out[ids], value_out[ids], norm_out[ids] = x, value, norm
    return x_out, value_out, n_iter, norm_out


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
    Returns the accepted points, values, gradients and the objective's extra outputs.
    """
    new_extras = None  # allocated once a step is rejected
    step_length = np.ones(len(x))
    round_off = value + ROUND_OFF * np.abs(value)
    pending = np.arange(len(x))
    for _ in range(MAX_BACKTRACKS):
        trial_rows = _index(pending, len(x))
        trial = x[trial_rows] + step_length[trial_rows, None] * direction[trial_rows]
        trial_value, trial_gradient, *trial_extras = objective(trial, _compose(rows, trial_rows))
        initial_slope = slope[trial_rows]
        armijo = trial_value <= value[trial_rows] + ARMIJO * step_length[trial_rows] * initial_slope
        trial_slope = _dot(trial_gradient, direction[trial_rows])
        wolfe = (trial_value <= round_off[trial_rows]) & (trial_slope >= 0.9 * initial_slope)
        accepted = armijo | (wolfe & (trial_slope <= -0.8 * initial_slope))
        if new_extras is None:
            if accepted.all():  # every full step passed: nothing to merge
                return trial, trial_value, trial_gradient, trial_extras
            new_x, new_gradient = x.copy(), np.zeros_like(x)  # what a failed problem reports: no step, no curvature pair
            new_value = np.full(len(x), np.nan)
            new_extras = [np.zeros((len(x),) + extra.shape[1:]) for extra in trial_extras]
        keep = pending[accepted]
        new_x[keep], new_value[keep] = trial[accepted], trial_value[accepted]
        new_gradient[keep] = trial_gradient[accepted]
        for store, extra in zip(new_extras, trial_extras):
            store[keep] = extra[accepted]
        pending = pending[~accepted]
        if len(pending) == 0:
            break
        step_length[pending] *= 0.5
    return new_x, new_value, new_gradient, new_extras


def _compose(rows, subset):
    """Index of ``subset`` of the selection ``rows`` (either may be ``slice(None)``)."""
    if isinstance(subset, slice):
        return rows
    return subset if isinstance(rows, slice) else rows[subset]
