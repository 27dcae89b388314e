r"""The certified Log of :class:`~riemlocal.numerics.EnergyLogSolver` by Newton's method, compiled (numba) for fields with a capability.

One pair after the other, in compiled code, the same algorithm as the numpy
path (so the same results to rounding), each step mirroring its numpy helper:

* :func:`_levels` -- :func:`~riemlocal.numerics.extrapolate_levels`: levels of
  :math:`N, 2N, 4N, \dots` segments, warm started by the cubic :func:`refine`, Romberg
  extrapolation of the length and the initial velocity (the length's rate checked,
  :func:`~riemlocal.numerics._minimize.geometric_error`), the trapezoid-vs-midpoint
  gap and the acceptance test of ``EnergyLogSolver._solve_chunk``;
* :func:`_newton` -- :func:`~riemlocal.utils.optimize.batched_newton` (its
  driver ``_descend`` and line search ``_backtrack``) for one problem, in the
  preconditioned chart ``_Chart`` of :func:`minimize_curve_energy` (so ``tol``
  means the same), with the directions of ``_Chart.newton_step`` (the
  Levenberg--Marquardt shifts ``_DAMPING``) from :func:`block_tridiagonal_solve`
  instead of LAPACK's banded ``dpbsv``; the chart is linear, so the iterates are
  kept as curves and only the stopping test maps a gradient to the chart;
* :func:`_curve_energy` and :func:`_curve_hessian` -- :func:`curve_energy` and
  its Hessian blocks, from the field's evaluators ``curve_terms`` and
  ``curve_hessian`` (:mod:`~riemlocal.numerics._capability`; all segments of a
  curve at once); the blocks only at points a Newton step starts from (not at
  the last point of a level).

Curves are kept relative to the base point :math:`x` (the field's
``relative_to`` :math:`x`), so that nothing cancels at large offsets.
"""

import functools
import math

import numpy as np

from ..utils.compiled import cached_njit, refcount_free
from ..utils.optimize import ARMIJO, MAX_BACKTRACKS, MAX_STALLS, ROUND_OFF
from ._capability import curve_hessian, curve_terms, curve_trapezoid, curve_work, point_metric, point_work, relative_scratch, relative_to
from ._cholesky import block_tridiagonal_solve, cholesky_factor, cholesky_solve, forward_substitution
from ._energy import laplacian_inverse_sqrt
from ._minimize import _DAMPING, COARSE_TOL_FACTOR, ERROR_SAFETY, RESOLVED_RATIO, STALL_FACTOR, UNRESOLVED, geometric_error, guard_level

__all__ = ["laplacian_levels", "compiled_log_pairs", "OK", "FAILED", "NEEDS_LEVEL"]

OK, FAILED, NEEDS_LEVEL = 0, 1, 2  #: status of a pair: solved; an evaluator declined (numpy path); finer levels needed


@functools.lru_cache(maxsize=16)
def laplacian_levels(n_segments, n_levels):
    r""":func:`laplacian_inverse_sqrt` for :math:`N 2^k` segments, :math:`k < ` ``n_levels``, packed in one array (read-only)."""
    parts = [laplacian_inverse_sqrt(n_segments << level).ravel() for level in range(n_levels)]
    packed = np.concatenate(parts)
    packed.flags.writeable = False
    return packed


@refcount_free
def _curve_energy(data, curve, gradient, work, terms):
    """:func:`curve_energy` of one curve and its gradient; NaN on failure.

    The evaluators' arrays of every segment stay in ``work`` for :func:`_curve_hessian`, the segment terms in ``terms``.
    """
    n_segments, dim = curve.shape[0] - 1, curve.shape[1]
    if not curve_terms(data, curve, work, terms):
        return np.nan
    metric_v, quadratic_gradient = terms[0], terms[1]
    energy = 0.0
    gradient[0] = 0.0
    for s in range(n_segments):
        for i in range(dim):
            energy += (curve[s + 1, i] - curve[s, i]) * metric_v[i, s]
            gradient[s, i] += n_segments * (0.5 * quadratic_gradient[i, s] - 2.0 * metric_v[i, s])  # outgoing
            gradient[s + 1, i] = n_segments * (2.0 * metric_v[i, s] + 0.5 * quadratic_gradient[i, s])  # incoming
    return n_segments * energy


@refcount_free
def _curve_hessian(data, work, blocks, diagonal, upper, scale):
    """The Hessian blocks of :func:`curve_energy` in the interior nodes, times ``scale``, from :func:`_curve_energy`'s ``work``."""
    n_segments, dim = diagonal.shape[0] + 1, diagonal.shape[1]
    curve_hessian(data, n_segments, work, blocks)
    hessian_x, mixed, hessian_v = blocks[0], blocks[1], blocks[2]
    for s in range(n_segments):
        for i in range(dim):
            for j in range(dim):
                quarter = 0.25 * (n_segments * hessian_x[i, j, s])
                symmetric = 0.5 * (n_segments * mixed[i, j, s] + n_segments * mixed[j, i, s])
                skew = 0.5 * (n_segments * mixed[i, j, s] - n_segments * mixed[j, i, s])
                second_v = n_segments * hessian_v[i, j, s]
                if s < n_segments - 1:  # the segment's last node is interior node s
                    diagonal[s, i, j] = quarter + symmetric + second_v
                if s:  # its first node is interior node s - 1
                    diagonal[s - 1, i, j] += quarter - symmetric + second_v
                if 0 < s < n_segments - 1:
                    upper[s - 1, i, j] = quarter + skew - second_v
    for array in (diagonal.reshape(-1, dim), upper.reshape(-1, dim)):
        _assign(array, array, scale)


@refcount_free
def _node_product(matrix, vectors, scale, out):
    """``out = scale * (matrix @ vectors)`` for a node-space matrix ``(N - 1, N - 1)`` and node vectors ``(N - 1, dim)``."""
    n_interior, dim = vectors.shape
    for i in range(n_interior):
        for k in range(dim):
            total = 0.0
            for j in range(n_interior):
                total += matrix[i, j] * vectors[j, k]
            out[i, k] = scale * total


@refcount_free
def _evaluate(data, chart, state):
    """``_Chart.objective`` (Newton) at the curve of ``state``: the value, and the node gradient into ``state``; NaN on failure.

    Both are divided by the chart's normalizer. The gradient in z follows from :func:`_gradient_norm`
    and the Hessian blocks from :func:`_hessian`, only where the search needs them.
    """
    curve, gradient = state[0], state[1]
    energy = _curve_energy(data, curve, gradient, state[6], state[7])
    if not math.isfinite(energy):
        return np.nan
    scale = 1.0 / chart[2]
    _assign(gradient, gradient, scale)
    if not math.isfinite(_max_abs(gradient)):
        return np.nan
    return scale * energy


@refcount_free
def _gradient_norm(chart, state):
    r"""The stopping test's :math:`\max |g_z|` of the gradient in z, :math:`g_z =` ``curve_scale`` :math:`S (g L^{-T})` (into ``state[2]``)."""
    _, curve_scale, _, _, inverse_factor, preconditioner = chart
    gradient, gradient_z, inner = state[1], state[2], state[5]
    n_interior, dim = inner.shape
    for i in range(n_interior):
        for k in range(dim):
            total = 0.0
            for j in range(dim):
                total += gradient[i + 1, j] * inverse_factor[k, j]
            inner[i, k] = total
    _node_product(preconditioner, inner, curve_scale, gradient_z)
    return _max_abs(gradient_z)


@refcount_free
def _hessian(data, chart, state):
    """The node-space Hessian blocks of ``_Chart.objective`` at the point of the last :func:`_evaluate` on ``state``."""
    _curve_hessian(data, state[6], state[8], state[3], state[4], 1.0 / chart[2])


@refcount_free
def _newton_direction(chart, state, direction, scratch):
    """``_Chart.newton_step`` in node space: the Newton step of the interior nodes into ``direction``, Levenberg--Marquardt shifted where needed.

    The chart is linear, so the step in z (the numpy path) maps to this one; zero where no shift helps.
    """
    _, _, normalizer, factor, _, _ = chart
    gradient, diagonal, upper = state[1], state[3], state[4]
    damped_diagonal, damped_upper, block_factor, coupling = scratch
    n_interior, dim = direction.shape
    for i in range(n_interior):
        for k in range(dim):
            direction[i, k] = -gradient[i + 1, k]
    if block_tridiagonal_solve(diagonal, upper, direction, block_factor, coupling):
        return
    reference = 2.0 * (n_interior + 1) * 1.0 / normalizer
    for shift in _DAMPING:
        for i in range(dim):
            for j in range(dim):
                metric = 0.0  # (L L^T)_ij
                for m in range(min(i, j) + 1):
                    metric += factor[i, m] * factor[j, m]
                scaled = shift * reference * metric  # the constant-metric Hessian's M_bar blocks
                for b in range(n_interior):
                    damped_diagonal[b, i, j] = diagonal[b, i, j] + 2.0 * scaled
                for b in range(n_interior - 1):
                    damped_upper[b, i, j] = upper[b, i, j] - scaled
        for i in range(n_interior):
            for k in range(dim):
                direction[i, k] = -gradient[i + 1, k]
        if block_tridiagonal_solve(damped_diagonal, damped_upper, direction, block_factor, coupling):
            return
    _assign(direction, direction, 0.0)  # no step (the numpy path's zero solution): the steepest descent follows


@refcount_free
def _steepest_descent(chart, state, direction):
    """The node step of the steepest descent in z, :math:`-g_z` mapped by ``to_curves``: ``curve_scale`` :math:`(S (-g_z)) L^{-1}`."""
    _, curve_scale, _, _, inverse_factor, preconditioner = chart
    gradient_z, inner = state[2], state[5]
    n_interior, dim = direction.shape
    _node_product(preconditioner, gradient_z, -curve_scale, inner)
    for i in range(n_interior):
        for k in range(dim):
            total = 0.0
            for j in range(dim):
                total += inner[i, j] * inverse_factor[j, k]
            direction[i, k] = total


@refcount_free
def _assign(target, source, scale):
    """``target = scale * source`` for C-ordered arrays of the same size (no broadcasting code)."""
    flat_target, flat_source = target.reshape(-1), source.reshape(-1)
    for i in range(len(flat_target)):
        flat_target[i] = scale * flat_source[i]


@refcount_free
def _dot(a, b):
    """Inner product of two arrays of the same shape (``_dot`` of :mod:`riemlocal.utils.optimize`, one row)."""
    flat_a, flat_b, total = a.reshape(-1), b.reshape(-1), 0.0
    for i in range(len(flat_a)):
        total += flat_a[i] * flat_b[i]
    return total


@refcount_free
def _interior_dot(gradient, direction):
    r""":math:`g \cdot \delta c` over the interior nodes (rows 1 to N - 1 of ``gradient``)."""
    n_interior, dim = direction.shape
    total = 0.0
    for i in range(n_interior):
        for k in range(dim):
            total += gradient[i + 1, k] * direction[i, k]
    return total


@refcount_free
def _max_abs(a):
    r""":math:`\max_i |a_i|`: the gradient norm of the stopping test; the first NaN or inf if there is one."""
    flat, largest = a.reshape(-1), 0.0
    for i in range(len(flat)):
        value = abs(flat[i])
        if not math.isfinite(value):
            return value
        largest = max(largest, value)
    return largest


@cached_njit
def _new_state(data, n_nodes, dim):
    """Curve, node gradient, gradient in z, Hessian blocks, scratch, the evaluators' ``curve_work``, segment terms and blocks of :func:`_evaluate`."""
    n_interior, n_segments = n_nodes - 2, n_nodes - 1
    return (
        np.empty((n_nodes, dim)),
        np.empty((n_nodes, dim)),
        np.empty((n_interior, dim)),
        np.empty((n_interior, dim, dim)),
        np.empty((max(n_interior - 1, 0), dim, dim)),
        np.empty((n_interior, dim)),
        curve_work(data, n_segments),
        np.empty((2, dim, n_segments)),
        np.empty((3, dim, dim, n_segments)),
    )


@cached_njit
def _newton_buffers(data, n_nodes, dim):
    """Arrays of :func:`_newton`: two states of :func:`_evaluate`, the scratch of :func:`_newton_direction` and the direction."""
    n_interior = n_nodes - 2
    scratch = (
        np.empty((n_interior, dim, dim)),
        np.empty((max(n_interior - 1, 0), dim, dim)),
        np.empty((n_interior, dim, dim)),
        np.empty((max(n_interior - 1, 0), dim, dim)),
    )
    return (_new_state(data, n_nodes, dim), _new_state(data, n_nodes, dim)), scratch, np.empty((n_interior, dim))


@refcount_free
def _newton(data, chart, tol, max_iter, buffers):
    r""":func:`batched_newton` for one problem from ``z = 0`` (the chart's start), in the arrays ``buffers`` of :func:`_newton_buffers`.

    The iterates are curves: the chart is linear, so a step of length t along a direction in z
    moves the nodes by t times its node step, and the slopes :math:`g_z \cdot \delta z = g \cdot \delta c`
    are node-space products; only the stopping test maps gradients to z. Returns the value,
    iterations, gradient norm and which of the two states holds the minimizer (NaN value: failed).
    """
    states, scratch, direction = buffers
    current, trial = states
    n_interior, dim = direction.shape
    _assign(current[0], chart[0], 1.0)
    _assign(trial[0], chart[0], 1.0)  # the end nodes stay
    which = 0
    value = _evaluate(data, chart, current)
    if not math.isfinite(value):
        return np.nan, 0, np.nan, which
    norm = _gradient_norm(chart, current)
    best_norm, stalls, n_iter, running = norm, 0, 0, norm > tol
    while running and n_iter < max_iter:
        _hessian(data, chart, current)
        _newton_direction(chart, current, direction, scratch)
        slope = _interior_dot(current[1], direction)
        if not slope < 0.0:  # not downhill: the steepest descent
            _steepest_descent(chart, current, direction)
            slope = -_dot(current[2], current[2])
        step_length, round_off, accepted = 1.0, value + ROUND_OFF * abs(value), False
        for _ in range(MAX_BACKTRACKS):  # _backtrack
            for i in range(n_interior):
                for k in range(dim):
                    trial[0][i + 1, k] = current[0][i + 1, k] + step_length * direction[i, k]
            trial_value = _evaluate(data, chart, trial)
            if not math.isfinite(trial_value):
                return np.nan, n_iter, np.nan, which  # the numpy path raises the error that explains it
            trial_slope = _interior_dot(trial[1], direction)
            armijo = trial_value <= value + ARMIJO * step_length * slope
            wolfe = trial_value <= round_off and trial_slope >= 0.9 * slope
            if armijo or (wolfe and trial_slope <= -0.8 * slope):
                accepted = True
                break
            step_length *= 0.5
        new_norm = _gradient_norm(chart, trial) if accepted else 0.0
        stalls = 0 if ((accepted and trial_value < value) or new_norm < best_norm) else stalls + 1
        if accepted:
            current, trial, which = trial, current, 1 - which
            value, norm = trial_value, new_norm
        best_norm = min(best_norm, norm)
        running = accepted and norm > tol and stalls < MAX_STALLS
        n_iter += 1
    return value, n_iter, norm, which


@refcount_free
def _measure(terms, n_segments, energy, base_metric, factor, out):
    """``measure`` of ``_solve_chunk``: the length and :func:`initial_velocity` (discrete Legendre transform) into ``out``.

    The first segment's terms are those :func:`_evaluate` left in ``terms`` at the minimizer.
    """
    metric_v, quadratic_gradient = terms[0], terms[1]
    out[0] = math.sqrt(max(energy, 0.0))
    velocity = out[1:]
    for i in range(len(velocity)):
        velocity[i] = n_segments * (metric_v[i, 0] - 0.25 * quadratic_gradient[i, 0])
    _assign(factor, base_metric, 1.0)
    return cholesky_solve(factor, velocity)


@refcount_free
def _refine(curve, fine):
    """:func:`refine` with ``cubic=True`` into ``fine`` ``(2 N + 1, dim)``: the cubic through the four nearest nodes at every segment's middle."""
    n_segments, dim = curve.shape[0] - 1, curve.shape[1]
    for node in range(n_segments + 1):
        for i in range(dim):
            fine[2 * node, i] = curve[node, i]
            if node == n_segments:
                continue
            if n_segments < 3:  # too few nodes for a cubic: the midpoint
                fine[2 * node + 1, i] = 0.5 * (curve[node + 1, i] + curve[node, i])
            elif node == 0:
                fine[1, i] = (5.0 * curve[0, i] + 15.0 * curve[1, i] - 5.0 * curve[2, i] + curve[3, i]) / 16.0
            elif node == n_segments - 1:
                fine[2 * node + 1, i] = (5.0 * curve[node + 1, i] + 15.0 * curve[node, i] - 5.0 * curve[node - 1, i] + curve[node - 2, i]) / 16.0
            else:
                fine[2 * node + 1, i] = (9.0 * (curve[node, i] + curve[node + 1, i]) - (curve[node - 1, i] + curve[node + 2, i])) / 16.0


@refcount_free
def _estimates(value, error, unresolved, base_metric):
    """``estimates`` of ``_solve_chunk``: relative errors of the distance and of the Log vector in :math:`M(x)`."""
    dim = len(value) - 1
    log_error = 0.0
    for i in range(dim):
        for j in range(dim):
            log_error += error[1 + i] * base_metric[i, j] * error[1 + j]
    log_error = math.sqrt(max(log_error, 0.0))
    length = value[0]
    return (
        max(abs(error[0]) / length if length > 0 else 0.0, unresolved),
        max(log_error / length if length > 0 else 0.0, unresolved),
    )


@cached_njit
def _level_space(data, n_segments, dim):
    """A level's curve ``(N + 1, dim)`` and :func:`_newton_buffers`."""
    return np.empty((n_segments + 1, dim)), _newton_buffers(data, n_segments + 1, dim)


@cached_njit
def _pair_space(data, n_segments, dim):
    """The arrays of :func:`_levels`, shared by the pairs of a call: per level reached so far (appended by
    :func:`_level_space`) its start (then final) curve and :func:`_newton_buffers`; the evaluators' ``point_work``,
    :math:`M(x)`, the factor :math:`L` of the chart and :math:`L^{-1}`, a matrix for :func:`_measure`, the value, its error, two Romberg rows and two scratch vectors."""
    levels = [_level_space(data, n_segments, dim)]
    matrices = (np.empty((dim, dim)), np.empty((dim, dim)), np.empty((dim, dim)), np.empty((dim, dim)))
    vectors = (np.empty(dim + 1), np.empty(dim + 1), np.empty((3, dim + 1)), np.empty((3, dim + 1)), np.empty((2, dim)))
    return levels, point_work(data), matrices, vectors


@cached_njit
def _levels(data, n_segments, step, start, max_segments, rtol, log_rtol, tol, max_iter, laplacians, n_levels, min_levels, space, level_iters):
    """:func:`extrapolate_levels` for one Log problem from 0 to ``step`` (relative coordinates); see the module docstring.

    The first level starts from the curve ``start`` ``(N + 1, dim)`` (relative, its ends 0 and ``step``),
    or from the straight segment where ``start`` has no rows.

    In the arrays ``space`` of :func:`_pair_space` (at most ``n_levels`` levels); returns status,
    the relative error estimates of the distance and of the Log vector, the finest level, its
    segments and whether every level met its tolerance. The value (length, velocity) is left in
    ``space[3][0]``, the finest curve in that level's curve of ``space[0]``; iterations per
    level into ``level_iters``.
    """
    levels, work, (base_metric, factor, inverse_factor, measure_factor), (value, error, row, previous, scratch) = space
    dim = len(step)
    curve, (origin, centroid) = levels[0][0], scratch
    for i in range(dim + 1):
        error[i] = np.inf
    for i in range(dim):
        origin[i], centroid[i] = 0.0, 0.0
    for node in range(n_segments + 1):
        t = node * (1.0 / n_segments) if node < n_segments else 1.0  # numpy.linspace(0, 1)
        for i in range(dim):
            curve[node, i] = start[node, i] if len(start) and 0 < node < n_segments else t * step[i]
            centroid[i] += curve[node, i]
    for i in range(dim):
        centroid[i] /= n_segments + 1
    if not (point_metric(data, origin, base_metric, work) and point_metric(data, centroid, factor, work)):
        return FAILED, 0.0, 0.0, 0, 0, False
    if not cholesky_factor(factor, 0.0):
        return FAILED, 0.0, 0.0, 0, 0, False
    for i in range(dim):
        for j in range(i + 1, dim):
            factor[i, j] = 0.0
    for column in range(dim):  # L^{-1}, column by column
        for i in range(dim):
            origin[i] = 1.0 if i == column else 0.0
        forward_substitution(factor, origin)
        for i in range(dim):
            inverse_factor[i, column] = origin[i]
    offset, level, optimized, previous_gap, unresolved, older = 0, 0, True, 0.0, 0.0, 0.0
    while True:
        if level >= n_levels:
            return NEEDS_LEVEL, 0.0, 0.0, level - 1, n_segments, optimized
        curve, buffers = levels[level]
        size = (n_segments - 1) ** 2
        preconditioner = laplacians[offset : offset + size].reshape(n_segments - 1, n_segments - 1)
        offset += size
        normalizer = 0.0  # |L^T step|^2
        for k in range(dim):
            straight = 0.0
            for j in range(k, dim):
                straight += step[j] * factor[j, k]
            normalizer += straight**2
        chart = (curve, math.sqrt(normalizer) / math.sqrt(2.0 * n_segments * 1.0), normalizer, factor, inverse_factor,
                 preconditioner)
        level_tol = tol * (COARSE_TOL_FACTOR if level == 0 else 1.0)
        scaled_energy, n_iter, norm, which = _newton(data, chart, level_tol, max_iter, buffers)
        if not math.isfinite(scaled_energy):
            return FAILED, 0.0, 0.0, level, n_segments, optimized
        level_iters[level] = n_iter
        optimized &= norm <= STALL_FACTOR * level_tol
        energy = scaled_energy * normalizer
        minimized = buffers[0][which]
        _assign(curve, minimized[0], 1.0)  # the level's curve from here on: its minimizer
        if not _measure(minimized[7], n_segments, energy, base_metric, measure_factor, row[0]):
            return FAILED, 0.0, 0.0, level, n_segments, optimized
        for j in range(1, min(level, 2) + 1):
            for i in range(dim + 1):
                row[j, i] = row[j - 1, i] + (row[j - 1, i] - previous[j - 1, i]) / (4.0**j - 1.0)
        last = min(level, 2)
        _assign(value, row[last], 1.0)
        if level:
            for i in range(dim + 1):
                error[i] = ERROR_SAFETY * (row[last, i] - row[last - 1, i])
            if level >= 2:  # the length's rate checked
                geometric = ERROR_SAFETY * geometric_error(older, previous[0, 0], row[0, 0], row[last, 0])
                error[0] = math.copysign(max(abs(error[0]), geometric), error[0])
            if min_levels > 3 and level >= min_levels - 1:  # two consecutive sixth-order values
                for i in range(dim + 1):
                    error[i] = math.copysign(max(abs(error[i]), ERROR_SAFETY * abs(row[2, i] - previous[2, i])), error[i])
            trapezoid = curve_trapezoid(data, curve, minimized[6])
            if not math.isfinite(trapezoid):
                return FAILED, 0.0, 0.0, level, n_segments, optimized
            gap = abs(trapezoid * 1.0 - energy) / energy if energy > 0 else 0.0
            unresolved = gap if level == 1 else (0.0 if previous_gap >= RESOLVED_RATIO * gap else gap)
            previous_gap = gap
        dist_error, log_error = _estimates(value, error, unresolved, base_metric)
        doubtful = level >= 2 and log_error > guard_level(level) * rtol  # another level (LOG_GUARD)
        if 2 * n_segments > max_segments or (level >= min_levels - 1 and dist_error <= rtol and log_error <= log_rtol and not doubtful):
            return OK, dist_error, log_error, level, n_segments, optimized
        older = previous[0, 0]  # the raw length two levels back, from the next level on
        _assign(previous, row, 1.0)
        if level + 1 < n_levels:
            if level + 1 == len(levels):
                levels.append(_level_space(data, 2 * n_segments, dim))
            _refine(curve, levels[level + 1][0])
        n_segments, level = 2 * n_segments, level + 1


@cached_njit
def compiled_log_pairs(data, point, base_point, starts, n_segments, max_segments, rtol, log_rtol, tol, max_iter, laplacians, n_levels, min_levels=3):
    """``EnergyLogSolver._solve_chunk`` with Newton for the pairs ``(point, base_point)`` ``(n, dim)`` of a field with capability data ``data``.

    The first level of each pair starts from its curve in ``starts`` ``(n, N + 1, dim)``, or from the
    straight segment where ``starts`` has no rows; each pair solves at least ``min_levels`` levels
    (``EnergyLogSolver(min_levels=...)``).

    Returns its outputs (velocity, length, error estimates, segments,
    optimized, finest curves) plus the iterations per pair and level
    ``(n, n_levels)`` and a status per pair (:data:`OK`, :data:`FAILED`:
    take the numpy path, :data:`NEEDS_LEVEL`: pass more ``laplacians``
    levels, :func:`laplacian_levels`).
    """
    n_pairs, dim = point.shape
    velocity, length = np.empty((n_pairs, dim)), np.empty(n_pairs)
    dist_error, log_error = np.zeros(n_pairs), np.zeros(n_pairs)
    segments, optimized = np.ones(n_pairs, dtype=np.int64), np.ones(n_pairs, dtype=np.bool_)
    level_iters, status = np.zeros((n_pairs, n_levels), dtype=np.int64), np.zeros(n_pairs, dtype=np.int64)
    curves = [np.empty((0, dim)) for _ in range(n_pairs)]
    space = _pair_space(data, n_segments, dim)
    work, metric = space[1], np.empty((dim, dim))
    step, midpoint, scratch = np.empty(dim), np.empty(dim), relative_scratch(data)
    start = np.empty((n_segments + 1 if len(starts) else 0, dim))
    for p in range(n_pairs):
        largest, span = 0.0, 0.0
        for i in range(dim):
            step[i], midpoint[i] = point[p, i] - base_point[p, i], 0.5 * (point[p, i] + base_point[p, i])
            largest, span = max(largest, abs(point[p, i]), abs(base_point[p, i])), max(span, abs(step[i]))
        curve = np.empty((2, dim))
        if not span > UNRESOLVED * (1.0 + largest):  # straight: round-off hides the geometry
            if not point_metric(data, midpoint, metric, work):
                status[p] = FAILED
                continue
            length[p] = 0.0
            for i in range(dim):
                velocity[p, i], curve[0, i], curve[1, i] = step[i], base_point[p, i], point[p, i]
                for j in range(dim):
                    length[p] += step[i] * metric[i, j] * step[j]
            length[p] = math.sqrt(length[p])
            curves[p] = curve
            continue
        relative = relative_to(data, base_point[p], scratch)  # coordinates relative to the base point
        for node in range(len(start)):
            for i in range(dim):
                start[node, i] = starts[p, node, i] - base_point[p, i]
        status[p], dist_error[p], log_error[p], level, segments[p], optimized[p] = _levels(
            relative, n_segments, step, start, max_segments, rtol, log_rtol, tol, max_iter, laplacians, n_levels, min_levels, space, level_iters[p]
        )
        value, finest = space[3][0], space[0][level][0]
        curve = np.empty_like(finest)
        length[p] = value[0]
        for i in range(dim):
            velocity[p, i] = value[1 + i]
            for node in range(len(curve)):
                curve[node, i] = finest[node, i] + base_point[p, i]
        curves[p] = curve
    return velocity, length, dist_error, log_error, segments, optimized, curves, level_iters, status
