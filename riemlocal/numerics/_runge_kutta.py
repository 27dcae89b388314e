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

A quantity the exact solution conserves (``invariant``; for a geodesic its squared speed
:math:`v^T M(x) v`) joins the error test: a step is also rejected when the quantity changes by
more than ``_DRIFT = 10`` times ``rtol`` relative to its size (the ratio counts as one more error
norm; the fifth-order steps of smooth problems change it far less, so their steps mostly stay the same).
The embedded estimate alone is blind to a step whose stages all miss a sharp change of the
right-hand side: on a blend of condition-100 metrics (``bench_hard_geometry.py``'s construction,
field seed ``[6, 99]``) one step of an Exp at ``rtol=1e-6`` crossed a blend transition unseen,
quadrupled the squared speed and ended 1.3 away from the geodesic's end point.

A step is also rejected, and halved, where ``hidden`` (for a geodesic: the field's ``hidden_weight``)
bounds the weight of a part of the field that is weak at both of the step's ends above ``HIDDEN_WEIGHT``
in between: a thin wall of another metric, with the same metric on both sides, changes neither the
error estimate nor the speed when no stage falls in it (a condition-1000 field, seed ``[6, 99]``: an
Exp 1.9 off).

References: Dormand & Prince, J. Comput. Appl. Math. 6 (1980); Hairer,
Nørsett & Wanner, *Solving Ordinary Differential Equations I*, II.4
(step-size control and the starting step).
"""

import math

import numpy as np

from ..utils.compiled import cached_njit, refcount_free
from ._capability import HIDDEN_WEIGHT, geodesic_rhs, hidden_weight, point_metric, point_work

__all__ = ["dormand_prince", "compiled_dormand_prince"]

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
_TABLEAU = np.zeros((6, 6))  # the rows of _STAGES, zero-padded (the compiled integrator)
for _i, _row in enumerate(_STAGES):
    _TABLEAU[_i, : len(_row)] = _row
_SAFETY, _MIN_FACTOR, _MAX_FACTOR = 0.9, 0.2, 10.0
_DRIFT = 10.0  # a step may change the conserved quantity by this many times rtol (relative)
_HIDDEN_NORM = 32.0  # the error norm of a step that may hide a part of the field (halves it)
_BETA = 0.04  # weight of the previous error in the PI step control (Hairer, Nørsett & Wanner, II.4, as in DOPRI5)
_FIRST_PREVIOUS_ERROR = 1e-4  # the previous error norm before the first step, and its floor (DOPRI5)


def _rms(a):
    return np.sqrt(np.einsum("kn,kn->k", a, a) / a.shape[1])


def _combine(coefficients, stages):
    r""":math:`\sum_i a_i k_i` for stages ``(i, k, n)``: one matrix-vector product (``tensordot`` costs more on small batches)."""
    return (coefficients @ stages[: len(coefficients)].reshape(len(coefficients), -1)).reshape(stages.shape[1:])


def _drift(before, after, rtol):
    r"""The change of a conserved quantity over a step as an error norm, :math:`|I_1 - I_0| / (10\, \mathrm{rtol} \max(|I_0|, |I_1|))` (0 for 0 / 0, NaN for NaN)."""
    size, change = _DRIFT * rtol * np.maximum(np.abs(before), np.abs(after)), np.abs(after - before)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(size > 0, change / size, change)


def _initial_step(rhs, y, f, rtol, atol):
    """Starting step per row (Hairer, Nørsett & Wanner, II.4), as ``solve_ivp`` chooses it for order 5(4)."""
    scale = atol + rtol * np.abs(y)
    d0, d1 = _rms(y / scale), _rms(f / scale)
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.maximum(d1, 1e-300))
    d2 = _rms((rhs(y + h0[:, None] * f) - f) / scale) / h0
    small = np.maximum(d1, d2) <= 1e-15
    h1 = np.where(small, np.maximum(1e-6, 1e-3 * h0), (0.01 / np.maximum(np.maximum(d1, d2), 1e-300)) ** 0.2)
    return np.minimum(100.0 * h0, h1)


def dormand_prince(rhs, y0, times, rtol, atol, max_step=np.inf, invariant=None, hidden=None):
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
    invariant : callable, default=None
        ``invariant(y)`` -> a quantity ``(k,)`` that every row conserves, checked at every step (see above).
    hidden : callable, default=None
        ``hidden(y, y_new)`` -> ``(k,)``: a bound on the weight of a feature of the right-hand side that a step's ends
        do not see; a step where it exceeds ``HIDDEN_WEIGHT`` is rejected and halved (see above).

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
    conserved = None if invariant is None else invariant(y)
    t, h = np.zeros(batch), np.minimum(_initial_step(rhs, y, f, rtol, atol), max_step)
    next_time = np.full(batch, n_zero)
    previous_norm = np.full(batch, _FIRST_PREVIOUS_ERROR)
    rows = np.arange(batch)
    while len(rows):
        yk, fk, tk = y[rows], f[rows], t[rows]
        remaining = times[next_time[rows]] - tk
        round_off = 10.0 * np.spacing(np.maximum(tk, 1.0))
        arrived = remaining <= round_off  # an output time within round-off of a row's time: its current state
        if arrived.any():
            landed = rows[arrived]
            out[landed, next_time[landed]] = y[landed]
            next_time[landed] += 1
            rows = rows[next_time[rows] < len(times)]
            continue
        landing = h[rows] >= remaining - round_off  # a step ending within round-off of an output time lands on it
        step = np.where(landing, remaining, h[rows])  # (else a sliver of a step would be left)
        too_small = ~(step > round_off)  # NaN included: a NaN step would never be accepted nor rejected for good
        if too_small.any():
            raise RuntimeError(f"step size below round-off (or not finite) at t = {tk[too_small].min():.3g}")
        stages = np.empty((7,) + yk.shape)
        stages[0] = fk
        for i, a in enumerate(_STAGES[1:], start=1):
            stages[i] = rhs(yk + step[:, None] * _combine(a, stages))
        y_new = yk + step[:, None] * _combine(_WEIGHTS, stages)
        stages[6] = f_new = rhs(y_new)
        error = step[:, None] * _combine(_ERROR, stages)
        norm = _rms(error / (atol + rtol * np.maximum(np.abs(yk), np.abs(y_new))))
        if conserved is not None:
            conserved_new = invariant(y_new)
            norm = np.maximum(norm, _drift(conserved[rows], conserved_new, rtol))
        if hidden is not None:
            norm = np.where(hidden(yk, y_new) > HIDDEN_WEIGHT, np.maximum(norm, _HIDDEN_NORM), norm)
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
        if conserved is not None:
            conserved[done_rows] = conserved_new[accepted]
        t[done_rows] = np.where(landing[accepted], times[next_time[done_rows]], tk[accepted] + step[accepted])
        landed = done_rows[landing[accepted]]
        out[landed, next_time[landed]] = y[landed]
        next_time[landed] += 1
        rows = rows[next_time[rows] < len(times)]
    return out


@cached_njit
def _scaled_rms(a, y, y_new, rtol, atol):
    total = 0.0
    for i in range(len(a)):
        scaled = a[i] / (atol + rtol * max(abs(y[i]), abs(y_new[i])))
        total += scaled * scaled
    return math.sqrt(total / len(a))


@refcount_free
def _squared_speed(params, y, metric):
    r""":math:`v^T M(x) v` of a state ``[x, v, ...]`` (``metric`` ``(dim, dim)`` scratch); NaN where the metric fails."""
    data, work, dim = params[0], params[1], params[2]
    if not point_metric(data, y[:dim], metric, work):
        return np.nan
    total = 0.0
    for i in range(dim):
        for j in range(dim):
            total += y[dim + i] * metric[i, j] * y[dim + j]
    return total


@cached_njit
def _spacing(t):
    """``numpy.spacing`` of ``t >= 1``."""
    return math.ldexp(1.0, math.frexp(t)[1] - 53)


@cached_njit
def _compiled_initial_step(params, y, f, rtol, atol, work, f_work):
    """:func:`_initial_step` of one row; ``work`` and ``f_work`` are scratch of the state's size."""
    n = len(y)
    d0 = d1 = 0.0
    for i in range(n):
        scale = atol + rtol * abs(y[i])
        d0 += (y[i] / scale) ** 2
        d1 += (f[i] / scale) ** 2
    d0, d1 = math.sqrt(d0 / n), math.sqrt(d1 / n)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / max(d1, 1e-300)
    for i in range(n):
        work[i] = y[i] + h0 * f[i]
    if not geodesic_rhs(params, work, f_work):
        return -1.0
    d2 = 0.0
    for i in range(n):
        d2 += ((f_work[i] - f[i]) / (atol + rtol * abs(y[i]))) ** 2
    d2 = math.sqrt(d2 / n) / h0
    largest = max(d1, d2)
    h1 = max(1e-6, 1e-3 * h0) if largest <= 1e-15 else (0.01 / max(largest, 1e-300)) ** 0.2
    return min(100.0 * h0, h1)


@cached_njit
def compiled_dormand_prince(data, y0, times, rtol, atol, max_step, dim, equation):
    """:func:`dormand_prince` compiled for the geodesics of a field with capability data ``data``, one row after the other.

    Rows ``[x, v, riders]`` of ``2 dim`` numbers and riders of ``equation``
    (:func:`~riemlocal.numerics.geodesic_rhs`). The same steps, step-size control and
    landing on output times as the numpy integrator with the squared speed :math:`v^T M(x) v`
    as its conserved quantity, so both give the same rows to rounding. Returns the rows at
    ``times`` and a status: 0 done, 1 the right-hand side failed, 2 a step fell below round-off.
    """
    params = (data, point_work(data), dim, equation, np.empty((3, dim)))
    metric = np.empty((dim, dim))
    batch, n = y0.shape
    out = np.empty((batch, len(times), n))
    stages = np.empty((7, n))
    y, y_new, trial, f_work = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    n_zero = 0
    while n_zero < len(times) and times[n_zero] <= 0.0:
        n_zero += 1
    for b in range(batch):
        for k in range(n_zero):
            out[b, k] = y0[b]
        if n_zero == len(times):
            continue
        y[:] = y0[b]
        if not geodesic_rhs(params, y, stages[0]):
            return out, 1
        h = _compiled_initial_step(params, y, stages[0], rtol, atol, trial, f_work)
        if h < 0.0:
            return out, 1
        h = min(h, max_step)
        conserved = _squared_speed(params, y, metric)
        t, next_time, previous_norm = 0.0, n_zero, _FIRST_PREVIOUS_ERROR
        while next_time < len(times):
            remaining = times[next_time] - t
            round_off = 10.0 * _spacing(max(t, 1.0))
            if remaining <= round_off:  # an output time within round-off of the current time: the current state
                out[b, next_time] = y
                next_time += 1
                continue
            landing = h >= remaining - round_off
            step = remaining if landing else h
            if not step > round_off:  # NaN included
                return out, 2
            for s in range(1, 6):
                for i in range(n):
                    total = 0.0
                    for j in range(s):
                        total += _TABLEAU[s, j] * stages[j, i]
                    trial[i] = y[i] + step * total
                if not geodesic_rhs(params, trial, stages[s]):
                    return out, 1
            for i in range(n):
                total = 0.0
                for j in range(6):
                    total += _WEIGHTS[j] * stages[j, i]
                y_new[i] = y[i] + step * total
            if not geodesic_rhs(params, y_new, stages[6]):
                return out, 1
            for i in range(n):
                total = 0.0
                for j in range(7):
                    total += _ERROR[j] * stages[j, i]
                trial[i] = step * total
            norm = _scaled_rms(trial, y, y_new, rtol, atol)
            conserved_new = _squared_speed(params, y_new, metric)
            size, change = _DRIFT * rtol * max(abs(conserved), abs(conserved_new)), abs(conserved_new - conserved)
            drift = change / size if size > 0 else change  # _drift
            if not drift <= norm:  # NaN included
                norm = drift
            if hidden_weight(params[0], y[:dim], y_new[:dim], params[1]) > HIDDEN_WEIGHT:
                norm = max(norm, _HIDDEN_NORM)
            accepted = norm <= 1.0
            if norm == 0.0:
                factor = _MAX_FACTOR
            elif accepted:
                factor = norm ** (-0.2 + 0.75 * _BETA) * previous_norm**_BETA
            else:
                factor = norm**-0.2
            factor = min(max(_SAFETY * factor, _MIN_FACTOR), _MAX_FACTOR)
            if not accepted:
                factor = min(factor, 1.0)
            h = min(max(step * factor, h) if (accepted and landing) else step * factor, max_step)
            if accepted:
                previous_norm = max(norm, _FIRST_PREVIOUS_ERROR)
                conserved = conserved_new
                y[:] = y_new
                stages[0] = stages[6]
                if landing:
                    t = times[next_time]
                    out[b, next_time] = y
                    next_time += 1
                else:
                    t = t + step
    return out, 0
