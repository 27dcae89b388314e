r"""Dormand--Prince 5(4) for a batch of independent initial-value problems, each with its own step size.

Every row of the batch is one problem :math:`y' = f(y)` from :math:`t = 0`.
All running rows advance together (one batched evaluation of :math:`f` per
stage), but each keeps its own step :math:`h_b`, accepted when the RMS of
its embedded error estimate scaled by ``atol + rtol * |y|`` is at most 1 (the
rule of ``scipy.integrate.solve_ivp``, applied per problem), so a problem's
steps never depend on its batch-mates. After an accepted step with error
norm :math:`e_n` the next is :math:`h_{n+1} = 0.9\, h_n\, e_n^{-0.2 + 0.75\beta} e_{n-1}^{\beta}`,
:math:`\beta = 0.04` (proportional-integral control, as in Hairer's DOPRI5:
fewer rejected steps than the purely proportional :math:`e_n^{-0.2}`, which
is kept after a rejection). Steps are shortened to land exactly on the
requested output times (no interpolation).

References: Dormand & Prince, J. Comput. Appl. Math. 6 (1980); Hairer,
Nørsett & Wanner, *Solving Ordinary Differential Equations I*, II.4
(step-size control and the starting step).
"""

import numpy as np

__all__ = ["dormand_prince"]

# the Runge--Kutta matrix, row by row (the right-hand side is autonomous: the nodes are not needed)
_STAGES = tuple(
    np.array(row)
    for row in (
        (),
        (1 / 5,),
        (3 / 40, 9 / 40),
        (44 / 45, -56 / 15, 32 / 9),
        (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
        (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    )
)
_WEIGHTS = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])  # order 5 (FSAL: the 7th stage is f(y_new))
_ERROR = np.array([71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40])  # order 5 minus order 4
_SAFETY, _MIN_FACTOR, _MAX_FACTOR = 0.9, 0.2, 10.0
_BETA = 0.04  # weight of the previous error in the PI step control (Hairer, Nørsett & Wanner, II.4, as in DOPRI5)
_FIRST_PREVIOUS_ERROR = 1e-4  # the previous error norm before the first step, and its floor (DOPRI5)


def _rms(a):
    return np.sqrt(np.einsum("kn,kn->k", a, a) / a.shape[1])


def _combine(coefficients, stages):
    r""":math:`\sum_i a_i k_i` for stages ``(i, k, n)``: one matrix-vector product (``tensordot`` costs more on small batches)."""
    return (coefficients @ stages[: len(coefficients)].reshape(len(coefficients), -1)).reshape(stages.shape[1:])


def _initial_step(rhs, y, f, rtol, atol):
    """Starting step per row (Hairer, Nørsett & Wanner, II.4), as ``solve_ivp`` chooses it for order 5(4)."""
    scale = atol + rtol * np.abs(y)
    d0, d1 = _rms(y / scale), _rms(f / scale)
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.maximum(d1, 1e-300))
    d2 = _rms((rhs(y + h0[:, None] * f) - f) / scale) / h0
    small = np.maximum(d1, d2) <= 1e-15
    h1 = np.where(small, np.maximum(1e-6, 1e-3 * h0), (0.01 / np.maximum(np.maximum(d1, d2), 1e-300)) ** 0.2)
    return np.minimum(100.0 * h0, h1)


def dormand_prince(rhs, y0, times, rtol, atol, max_step=np.inf):
    r"""Integrate :math:`y_b' = f(y_b)` for every row of ``y0`` and return the rows at ``times``.

    Parameters
    ----------
    rhs : callable
        ``rhs(y)`` -> :math:`f(y)` for states ``(k, n)`` (any subset of the rows).
    y0 : ndarray of shape (batch, n)
    times : ndarray of shape (n_times,)
        Increasing, non-negative output times.
    rtol, atol : float
        Local error control per row: RMS of ``error / (atol + rtol * max(|y|, |y_new|))`` at most 1.
    max_step : float, default=inf

    Returns
    -------
    ndarray of shape (batch, n_times, n)

    Raises
    ------
    RuntimeError
        When a row's step falls below round-off of its time.
    """
    y = np.array(y0, dtype=float)
    batch = len(y)
    out = np.empty((batch, len(times), y.shape[1]))
    n_zero = int(np.searchsorted(times, 0.0, side="right"))
    out[:, :n_zero] = y[:, None]
    if n_zero == len(times):
        return out
    f = rhs(y)
    t, h = np.zeros(batch), np.minimum(_initial_step(rhs, y, f, rtol, atol), max_step)
    next_time = np.full(batch, n_zero)
    previous_norm = np.full(batch, _FIRST_PREVIOUS_ERROR)
    rows = np.arange(batch)
    while len(rows):
        yk, fk, tk = y[rows], f[rows], t[rows]
        remaining = times[next_time[rows]] - tk
        round_off = 10.0 * np.spacing(np.maximum(tk, 1.0))
        landing = h[rows] >= remaining - round_off  # a step ending within round-off of an output time lands on it
        step = np.where(landing, remaining, h[rows])  # (else a sliver of a step would be left)
        if np.any(step <= round_off):
            raise RuntimeError(f"step size below round-off at t = {tk[step <= round_off].min():.3g}")
        stages = np.empty((7,) + yk.shape)
        stages[0] = fk
        for i, a in enumerate(_STAGES[1:], start=1):
            stages[i] = rhs(yk + step[:, None] * _combine(a, stages))
        y_new = yk + step[:, None] * _combine(_WEIGHTS, stages)
        stages[6] = f_new = rhs(y_new)
        error = step[:, None] * _combine(_ERROR, stages)
        norm = _rms(error / (atol + rtol * np.maximum(np.abs(yk), np.abs(y_new))))
        accepted = norm <= 1.0
        with np.errstate(divide="ignore"):
            pi_factor = norm ** (-0.2 + 0.75 * _BETA) * previous_norm[rows] ** _BETA  # after an accepted step
            factor = np.clip(_SAFETY * np.where(accepted, pi_factor, norm**-0.2), _MIN_FACTOR, _MAX_FACTOR)
        factor[~accepted] = np.minimum(factor[~accepted], 1.0)
        previous_norm[rows[accepted]] = np.maximum(norm[accepted], _FIRST_PREVIOUS_ERROR)
        # a step shortened to land on an output time says little about the next one: keep the longer proposal
        h[rows] = np.minimum(np.where(accepted & landing, np.maximum(step * factor, h[rows]), step * factor), max_step)
        done_rows = rows[accepted]
        y[done_rows], f[done_rows] = y_new[accepted], f_new[accepted]
        t[done_rows] = np.where(landing[accepted], times[next_time[done_rows]], tk[accepted] + step[accepted])
        landed = done_rows[landing[accepted]]
        out[landed, next_time[landed]] = y[landed]
        next_time[landed] += 1
        rows = rows[next_time[rows] < len(times)]
    return out
