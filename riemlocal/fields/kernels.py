r"""Compiled (numba) evaluators of the RBF-blended local fields, registered as their capability.

A field of the :class:`~riemlocal.fields.RBFLocalField` family (including
:class:`~riemlocal.fields.SmoothLocalField`) declares its arrays as an
:data:`RBFKernel`, the ``data`` of its :class:`~riemlocal.numerics.CompiledCapability`,
and this module registers the evaluators of that type
(:func:`~riemlocal.numerics.register_evaluators`): the blend at one point (``rbf_*``:
the metric, the geodesic acceleration and its derivative) or at every segment of a
curve at once (``rbf_curve_*``: the discrete energy of Log and distances, segments
innermost so that the loops vectorize) without numpy's per-call overhead (the cost
of a geodesic at small ``dim``). They compute the same formulas as the field's
numpy methods (tests compare both to 1e-12):

.. math::
    h_r = P_r (x - x_r), \quad s_r = h_r \cdot (x - x_r), \quad
    w = \mathrm{softmax}_r(-s_r / \sigma), \quad M(x) = \sum_r w_r M_r,

with :math:`P_r = M_r` (``own_proximity``) or one global :math:`P`.
Every evaluator returns ``False`` where a proximity overflows float64 or the
blended metric is not numerically positive definite; callers then use the
numpy path, which ranks far points by scaled scores or raises the error that
explains the failure.
"""

import math
from collections import namedtuple

import numpy as np

from ..numerics import HIDDEN_WEIGHT, cholesky_solve, factored_solve, register_evaluators
from ..utils.compiled import cached_njit, exp_nonpositive, refcount_free

__all__ = ["RBFKernel", "rbf_hidden_weight", "rbf_weights", "rbf_metric", "rbf_point_metric", "rbf_acceleration", "rbf_acceleration_derivative", "rbf_work_space", "rbf_curve_work", "rbf_curve_terms", "rbf_curve_hessian", "rbf_curve_trapezoid", "rbf_curve_quadratics", "rbf_relative_to"]


RBFKernel = namedtuple("RBFKernel", ["centers", "metrics", "proximity", "sigma", "own_proximity", "groups"])
RBFKernel.__doc__ = """Arrays of an RBF-blended field for its compiled evaluators (the ``data`` of its capability).

``centers`` ``(R, dim)``, ``metrics`` ``(R, dim, dim)``, ``proximity`` ``(R, dim, dim)``
(``metrics`` when ``own_proximity``: :math:`P_r = M_r`) or ``(1, dim, dim)`` (one global :math:`P`),
the softmax temperature ``sigma``; center ``r`` has ``metrics[groups[r]]`` (here ``groups`` is ``0, ..., R - 1``;
:data:`~riemlocal.fields.shared_kernels.SharedRBFKernel` stores metrics that centers share once, and its
evaluators at a point are these).
"""


@refcount_free
def rbf_weights(kernel, x, weights, half_grad):
    """Weights :math:`w_r(x)` into ``weights`` ``(R,)`` and :math:`h_r` into ``half_grad`` ``(R, dim)``; False on overflow."""
    centers = kernel.centers
    n_centers, dim = centers.shape
    smallest = np.inf
    proximity, own = kernel.proximity, kernel.own_proximity
    for r in range(n_centers):  # element indexing throughout: a view (metrics[r]) costs reference counting
        p = kernel.groups[r] if own else 0
        score = 0.0
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += proximity[p, i, j] * (x[j] - centers[r, j])
            half_grad[r, i] = total
            score += total * (x[i] - centers[r, i])
        weights[r] = score
        smallest = min(smallest, score)
    if not math.isfinite(smallest):
        return False
    norm = 0.0
    for r in range(n_centers):
        weights[r] = math.exp((smallest - weights[r]) / kernel.sigma)  # exp(-inf) = 0: no check needed
        norm += weights[r]
    if not math.isfinite(norm):  # a score of NaN
        return False
    for r in range(n_centers):
        weights[r] /= norm
    return True


@refcount_free
def rbf_metric(kernel, weights, metric, group_weights):
    r""":math:`M = \sum_r w_r M_r = \sum_g W_g M_g` into ``metric`` ``(dim, dim)``, with the weight :math:`W_g` of each
    distinct metric into ``group_weights`` ``(>= G,)``."""
    metrics, groups = kernel.metrics, kernel.groups
    dim = kernel.centers.shape[1]
    for g in range(len(metrics)):
        group_weights[g] = 0.0
    for r in range(len(groups)):
        group_weights[groups[r]] += weights[r]
    for i in range(dim):
        for j in range(dim):
            total = 0.0
            for g in range(len(metrics)):
                total += group_weights[g] * metrics[g, i, j]
            metric[i, j] = total


@refcount_free
def rbf_point_metric(kernel, x, metric, work):
    """:math:`M(x)` into ``metric``; ``work`` is :func:`rbf_work_space`; False on overflow."""
    if not rbf_weights(kernel, x, work[0], work[1]):
        return False
    rbf_metric(kernel, work[0], metric, work[7][0])
    return True


@refcount_free
def _chord_minimum(constant, linear, quadratic):
    r""":math:`\min_{\tau \in [0, 1]} (a + b \tau + c \tau^2)`."""
    smallest = min(constant, constant + linear + quadratic)
    if quadratic > 0.0 and 0.0 < -linear < 2.0 * quadratic:
        smallest = min(smallest, constant - linear * linear / (4.0 * quadratic))
    return smallest


@refcount_free
def rbf_hidden_weight(kernel, x0, x1, work):
    r"""A bound on the largest weight, relative to the leading center's, that a center below :data:`HIDDEN_WEIGHT` at both ends of the chord from ``x0`` to ``x1`` reaches on it.

    Along :math:`x(\tau) = x_0 + \tau \Delta` every score is a quadratic,
    :math:`s_r(\tau) = s_r + 2 \tau\, h_r \cdot \Delta + \tau^2 \Delta^T P_r \Delta`, and for any center
    :math:`q`, :math:`w_r(\tau) \le e^{-(s_r(\tau) - s_q(\tau)) / \sigma}`; with :math:`q` the leading center at
    either end, :math:`\max_\tau w_r \le \exp(-\max_q \min_\tau (s_r - s_q) / \sigma)`. ``work`` is
    :func:`rbf_work_space` (its rows ``work[7]``). The numpy twin is :meth:`RBFLocalField.hidden_weight`.
    """
    centers, proximity, own, groups = kernel.centers, kernel.proximity, kernel.own_proximity, kernel.groups
    n_centers, dim = centers.shape
    start, slope, curvature, end = work[7][0], work[7][1], work[7][2], work[7][3]
    for r in range(n_centers):
        p = groups[r] if own else 0
        score = linear = quadratic = 0.0
        for i in range(dim):
            product, step_product = 0.0, 0.0
            for j in range(dim):
                product += proximity[p, i, j] * (x0[j] - centers[r, j])
                step_product += proximity[p, i, j] * (x1[j] - x0[j])
            score += product * (x0[i] - centers[r, i])
            linear += 2.0 * product * (x1[i] - x0[i])
            quadratic += step_product * (x1[i] - x0[i])
        start[r], slope[r], curvature[r], end[r] = score, linear, quadratic, score + linear + quadratic
    first, last = 0, 0
    for r in range(n_centers):
        first = r if start[r] < start[first] else first
        last = r if end[r] < end[last] else last
    largest, cutoff = 0.0, -kernel.sigma * math.log(HIDDEN_WEIGHT)  # a score this far above the leading one: below the threshold
    for r in range(n_centers):
        if start[r] - start[first] <= cutoff or end[r] - end[last] <= cutoff:
            continue  # seen at an end: the integrator's stages sample it
        gap = max(
            _chord_minimum(start[r] - start[first], slope[r] - slope[first], curvature[r] - curvature[first]),
            _chord_minimum(start[r] - start[last], slope[r] - slope[last], curvature[r] - curvature[last]),
        )
        largest = max(largest, exp_nonpositive(-max(gap, 0.0) / kernel.sigma))
    return largest


@refcount_free
def _local_products(kernel, v, weights, half_grad, local, quadratics):
    r""":math:`M_r v` into ``local``, :math:`q_r = v^T M_r v` and :math:`\nu_r = h_r \cdot v` into ``quadratics``; returns :math:`\bar q, \bar \nu`."""
    metrics, groups = kernel.metrics, kernel.groups
    n_centers, dim = kernel.centers.shape
    mean_q, mean_nu = 0.0, 0.0
    for r in range(n_centers):
        q, nu = 0.0, 0.0
        g = groups[r]
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += metrics[g, i, j] * v[j]
            local[r, i] = total
            q += total * v[i]
            nu += half_grad[r, i] * v[i]
        quadratics[0, r], quadratics[1, r] = q, nu
        mean_q += weights[r] * q
        mean_nu += weights[r] * nu
    return mean_q, mean_nu


def _curve_work(kernel, n_segments):
    """Work arrays of the curve evaluators (:func:`rbf_curve_terms`, :func:`rbf_curve_hessian`, :func:`rbf_curve_trapezoid`) for up to ``n_segments`` segments.

    Points last, with room for the ``N + 1`` nodes: steps and midpoints (or nodes) ``(2, dim, N + 1)``;
    :math:`h_r` and :math:`M_r d` ``(R, dim, N + 1)``; weights and spreads ``(2, R, N + 1)``;
    two per-point scalars ``(2, N + 1)``.
    """
    n_centers, dim = kernel.centers.shape
    return (
        np.empty((2, dim, n_segments + 1)),
        np.empty((n_centers, dim, n_segments + 1)),
        np.empty((n_centers, dim, n_segments + 1)),
        np.empty((2, n_centers, n_segments + 1)),
        np.empty((2, n_segments + 1)),
    )


rbf_curve_work = _curve_work  # from Python
rbf_curve_work_compiled = cached_njit(_curve_work)  # inside compiled code


@refcount_free
def _curve_weights(kernel, points, n, work):
    r"""Weights :math:`w_r`, :math:`h_r` and the products :math:`M_r d`, :math:`q_r = d^T M_r d` at the first ``n`` points and steps.

    Points ``work[0][1]`` and steps ``work[0][0]`` ``(dim, N + 1)`` in; ``work[3][0]``, ``work[1]``,
    ``work[2]`` and ``work[3][1]`` out. :func:`rbf_weights` with the points as the innermost axis of
    every loop, which the compiler vectorizes. False where a proximity overflows.
    """
    steps, points, half_grad, local = work[0][0], work[0][1], work[1], work[2]
    weights, quadratics, smallest = work[3][0], work[3][1], work[4][0]
    centers, metrics, proximity, own = kernel.centers, kernel.metrics, kernel.proximity, kernel.own_proximity
    n_centers, dim = centers.shape
    for s in range(n):
        smallest[s] = np.inf
    for r in range(n_centers):  # the scores s_r into the weights first
        p = r if own else 0
        for s in range(n):
            weights[r, s], quadratics[r, s] = 0.0, 0.0
        for i in range(dim):
            for s in range(n):
                half_grad[r, i, s], local[r, i, s] = 0.0, 0.0
            for j in range(dim):
                proximity_ij, metric_ij, center_j = proximity[p, i, j], metrics[r, i, j], centers[r, j]
                for s in range(n):
                    half_grad[r, i, s] += proximity_ij * (points[j, s] - center_j)
                    local[r, i, s] += metric_ij * steps[j, s]
            center_i = centers[r, i]
            for s in range(n):
                weights[r, s] += half_grad[r, i, s] * (points[i, s] - center_i)
                quadratics[r, s] += local[r, i, s] * steps[i, s]
        for s in range(n):
            smallest[s] = min(smallest[s], weights[r, s])
    return softmax_scores(n_centers, n, kernel.sigma, work)


@refcount_free
def softmax_scores(n_centers, n, sigma, work):
    r"""The scores :math:`s_r` in the curve work's weights (their smallest in ``work[4][0]``) at the first ``n`` points
    into the weights :math:`\mathrm{softmax}_r(-s_r / \sigma)`; False where a score overflows or is NaN."""
    weights, smallest, norm = work[3][0], work[4][0], work[4][1]
    for s in range(n):
        if not math.isfinite(smallest[s]):
            return False
        norm[s] = 0.0
    for r in range(n_centers):
        for s in range(n):
            weights[r, s] = exp_nonpositive((smallest[s] - weights[r, s]) / sigma)  # exp(-inf) = 0: no check needed
            norm[s] += weights[r, s]
    for s in range(n):
        if not math.isfinite(norm[s]):  # a score of NaN
            return False
    for r in range(n_centers):
        for s in range(n):
            weights[r, s] /= norm[s]
    return True


@refcount_free
def rbf_curve_terms(kernel, curve, work, terms):
    r"""Derivatives of :math:`f = d^T M(m) d` at every segment of a curve ``(N + 1, dim)`` (:meth:`RBFLocalField._energy_terms`).

    For the steps :math:`d_s = c_{s+1} - c_s` at the midpoints :math:`m_s`, relative to the
    curve's first node (the frame of ``kernel``'s centers): :math:`M d` and
    :math:`\nabla_x f = -\tfrac{2}{\sigma} \sum_r \tilde q_r h_r` into ``terms`` ``(2, dim, N)``, with
    :math:`\tilde q_r = w_r (q_r - \bar q)`, :math:`q_r = d^T M_r d`; ``work`` is :func:`rbf_curve_work`;
    :func:`rbf_curve_hessian` reads what this leaves there. Segments are the innermost axis of
    every loop, which the compiler vectorizes (2x faster than point by point at 32 segments).
    False where a proximity overflows.
    """
    weights, spreads, half_grad, local, metric_v, gradient = work[3][0], work[3][1], work[1], work[2], terms[0], terms[1]
    n_centers, dim = kernel.centers.shape
    n = load_segments(curve, work)
    if not _curve_weights(kernel, work[0][1], n, work):
        return False
    spread_quadratics(n_centers, n, work)
    for i in range(dim):
        for s in range(n):
            metric_v[i, s], gradient[i, s] = 0.0, 0.0
        for r in range(n_centers):
            for s in range(n):
                metric_v[i, s] += weights[r, s] * local[r, i, s]
                gradient[i, s] += spreads[r, s] * half_grad[r, i, s]
        for s in range(n):
            gradient[i, s] *= -2.0 / kernel.sigma
    return True


@refcount_free
def load_segments(curve, work):
    """The steps :math:`d_s` and midpoints (relative to the first node) of a curve into the curve work; returns N."""
    steps, midpoints = work[0][0], work[0][1]
    n = len(curve) - 1
    for i in range(curve.shape[1]):
        for s in range(n):
            steps[i, s] = curve[s + 1, i] - curve[s, i]
            midpoints[i, s] = 0.5 * ((curve[s + 1, i] - curve[0, i]) + (curve[s, i] - curve[0, i]))
    return n


@refcount_free
def spread_quadratics(n_centers, n, work):
    r""":math:`\tilde q_r = w_r (q_r - \bar q)`, :math:`\bar q = \sum_r w_r q_r`, in place of the curve work's :math:`q_r`."""
    weights, spreads, mean = work[3][0], work[3][1], work[4][0]
    for s in range(n):
        mean[s] = 0.0
    for r in range(n_centers):
        for s in range(n):
            mean[s] += weights[r, s] * spreads[r, s]
    for r in range(n_centers):
        for s in range(n):
            spreads[r, s] = weights[r, s] * (spreads[r, s] - mean[s])


@refcount_free
def load_nodes(curve, work):
    """The nodes (relative to the first) and steps (0 after the last node) of a curve into the curve work; returns N."""
    steps, nodes = work[0][0], work[0][1]
    n = len(curve) - 1
    for i in range(curve.shape[1]):
        for s in range(n + 1):
            nodes[i, s] = curve[s, i] - curve[0, i]
            steps[i, s] = curve[s + 1, i] - curve[s, i] if s < n else 0.0
    return n


@refcount_free
def trapezoid_sum(weights, quadratics, n):
    r""":math:`\tfrac{N}{2} \sum_s \sum_k (w_k(c_s) + w_k(c_{s+1}))\, q_k(d_s)` over the rows of ``weights`` (at the
    nodes) and ``quadratics`` (per center, or per metric with :math:`W_g` and :math:`q_g`)."""
    total = 0.0
    for r in range(len(weights)):
        for s in range(n):
            total += (weights[r, s] + weights[r, s + 1]) * quadratics[r, s]
    return 0.5 * n * total


@refcount_free
def rbf_curve_trapezoid(kernel, curve, work):
    r"""The trapezoid energy :math:`N \sum_s \tfrac12 \big(d_s^T M(c_s) d_s + d_s^T M(c_{s+1}) d_s\big)` of a curve (:func:`~riemlocal.numerics.trapezoid_energy`); NaN on failure.

    With :math:`d_s^T M(c) d_s = \sum_r w_r(c)\, q_r`: the weights at the nodes, relative to the
    curve's first node like :func:`rbf_curve_terms`, whose arrays in ``work`` it overwrites.
    """
    n = load_nodes(curve, work)
    if not _curve_weights(kernel, work[0][1], n + 1, work):
        return np.nan
    return trapezoid_sum(work[3][0], work[3][1], n)


@refcount_free
def load_columns(points, vectors, n, work):
    """The first ``n`` columns of ``points`` and ``vectors`` ``(dim, >= n)`` into the curve work's points and steps."""
    for i in range(points.shape[0]):
        for s in range(n):
            work[0][1][i, s], work[0][0][i, s] = points[i, s], vectors[i, s]


@refcount_free
def blend_quadratics(weights, quadratics, n, out):
    r""":math:`\sum_k w_k q_k` over the rows of ``weights`` and ``quadratics`` at their first ``n`` columns into ``out``
    (per center, or per metric with :math:`W_g` and :math:`q_g`)."""
    for s in range(n):
        out[s] = 0.0
    for k in range(len(weights)):
        for s in range(n):
            out[s] += weights[k, s] * quadratics[k, s]


@refcount_free
def rbf_curve_quadratics(kernel, points, vectors, n, work, out):
    r""":math:`v^T M(x) v = \sum_r w_r(x)\, v^T M_r v` at the first ``n`` columns of ``points`` and ``vectors`` ``(dim, >= n)``
    (relative to the kernel's origin) into ``out``; the weights as in the curve evaluators. False on overflow."""
    load_columns(points, vectors, n, work)
    if not _curve_weights(kernel, work[0][1], n, work):
        return False
    blend_quadratics(work[3][0], work[3][1], n, out)
    return True


@refcount_free
def rbf_curve_hessian(kernel, n_segments, work, blocks):
    r"""Second derivatives of :math:`f = d^T M(m) d` at the segments of the last :func:`rbf_curve_terms` on ``work``.

    The blocks :math:`C = \nabla_x^2 f`, :math:`K = \nabla_x \nabla_d f` and :math:`A = \nabla_d^2 f = 2 M(m)`
    of the first ``n_segments`` segments into ``blocks`` ``(3, dim, dim, N)``:
    :math:`C = \tfrac{4}{\sigma^2} \sum_r \tilde q_r \bar h_r \bar h_r^T - \tfrac{2}{\sigma} \sum_r \tilde q_r P_r`
    (the last sum only for ``own_proximity``), :math:`K = -\tfrac{4}{\sigma} \sum_r w_r \bar h_r (M_r d)^T`,
    with :math:`\bar h_r = h_r - \sum_{r'} w_{r'} h_{r'}` (``half_grad`` is centered in place).
    """
    half_grad, local, weights, spreads = work[1], work[2], work[3][0], work[3][1]
    hessian_x, mixed, hessian_v = blocks[0], blocks[1], blocks[2]
    metrics, sigma, own = kernel.metrics, kernel.sigma, kernel.own_proximity
    n_centers, dim = kernel.centers.shape
    n = n_segments
    center_half_gradients(n_centers, n, work, blocks)
    for r in range(n_centers):
        for i in range(dim):
            for j in range(i + 1):
                for s in range(n):
                    hessian_x[i, j, s] += (spreads[r, s] * half_grad[r, i, s]) * half_grad[r, j, s]
            for j in range(dim):
                metric_ij = metrics[r, i, j]
                for s in range(n):
                    mixed[i, j, s] += (weights[r, s] * half_grad[r, i, s]) * local[r, j, s]
                    hessian_v[i, j, s] += weights[r, s] * metric_ij
            if own:
                for j in range(i + 1):  # the P_r term, scaled by sigma^2 / 4 as the sum
                    metric_ij = metrics[r, i, j]
                    for s in range(n):
                        hessian_x[i, j, s] -= (sigma / 2.0) * spreads[r, s] * metric_ij
    scale_blocks(sigma, n, blocks)


@refcount_free
def center_half_gradients(n_centers, n, work, blocks):
    r""":math:`\bar h_r = h_r - \sum_{r'} w_{r'} h_{r'}` in place in the curve work, and the Hessian ``blocks`` zeroed."""
    half_grad, weights, mean = work[1], work[3][0], work[4][0]
    dim = half_grad.shape[1]
    for i in range(dim):
        for s in range(n):
            mean[s] = 0.0
        for r in range(n_centers):
            for s in range(n):
                mean[s] += weights[r, s] * half_grad[r, i, s]
        for r in range(n_centers):
            for s in range(n):
                half_grad[r, i, s] -= mean[s]
    zero_blocks(n, blocks)


@refcount_free
def zero_blocks(n, blocks):
    """The Hessian ``blocks`` ``(3, dim, dim, >= n)`` zeroed at the first ``n`` points."""
    dim = blocks.shape[1]
    for i in range(dim):
        for j in range(dim):
            for s in range(n):
                blocks[0, i, j, s], blocks[1, i, j, s], blocks[2, i, j, s] = 0.0, 0.0, 0.0


@refcount_free
def scale_blocks(sigma, n, blocks):
    r"""The sums of the Hessian blocks times their factors: :math:`C \cdot 4 / \sigma^2` (its lower triangle mirrored),
    :math:`K \cdot (-4 / \sigma)`, :math:`A \cdot 2`."""
    hessian_x, mixed, hessian_v = blocks[0], blocks[1], blocks[2]
    dim = hessian_x.shape[0]
    for i in range(dim):
        for j in range(i + 1):
            for s in range(n):
                hessian_x[i, j, s] *= 4.0 / sigma**2
                hessian_x[j, i, s] = hessian_x[i, j, s]
        for j in range(dim):
            for s in range(n):
                mixed[i, j, s] *= -4.0 / sigma
                hessian_v[i, j, s] *= 2.0


@refcount_free
def rbf_acceleration(kernel, x, v, out, work):
    r"""Geodesic acceleration :math:`c'' = -\Gamma(v, v)` at ``x`` into ``out`` ``(dim,)``; False on failure.

    :math:`M c'' = -\tfrac{1}{\sigma} \sum_r [\tilde q_r h_r - 2 \tilde \nu_r M_r v]` with
    :math:`q_r = v^T M_r v`, :math:`\nu_r = h_r \cdot v`, :math:`\tilde a_r = w_r (a_r - \bar a)`
    (:meth:`RBFLocalField._acceleration`). ``work`` is :func:`rbf_work_space`; what
    :func:`rbf_acceleration_derivative` reuses stays there (the acceleration in ``work[5][0]``,
    the Cholesky factor of :math:`M(x)` in ``work[4]``).
    """
    weights, half_grad, local, quadratics, metric = work[0], work[1], work[2], work[3], work[4]
    if not rbf_weights(kernel, x, weights, half_grad):
        return False
    n_centers, dim = kernel.centers.shape
    mean_q, mean_nu = _local_products(kernel, v, weights, half_grad, local, quadratics)
    for i in range(dim):
        out[i] = 0.0
    scale = -1.0 / kernel.sigma
    for r in range(n_centers):
        spread_q = scale * weights[r] * (quadratics[0, r] - mean_q)
        spread_nu = -2.0 * scale * weights[r] * (quadratics[1, r] - mean_nu)
        for i in range(dim):
            out[i] += spread_q * half_grad[r, i] + spread_nu * local[r, i]
    rbf_metric(kernel, weights, metric, work[7][0])
    if not cholesky_solve(metric, out):
        return False
    for i in range(dim):
        work[5][0, i] = out[i]
    return True


def _work_space(kernel):
    """Work arrays of the point evaluators: :math:`w` ``(R,)``, :math:`h_r`, :math:`M_r v` ``(R, dim)``, ``(2, R)``, ``(dim, dim)``, ``(2, dim)``, ``(R, dim)``, ``(4, R)``.

    :func:`rbf_weights` uses the first two, :func:`rbf_acceleration` the first five, :func:`rbf_acceleration_derivative` all.
    """
    n_centers, dim = kernel.centers.shape
    return (
        np.empty(n_centers),
        np.empty((n_centers, dim)),
        np.empty((n_centers, dim)),
        np.empty((2, n_centers)),
        np.empty((dim, dim)),
        np.empty((2, dim)),
        np.empty((n_centers, dim)),
        np.empty((4, n_centers)),
    )


rbf_work_space = _work_space  # from Python
rbf_work_space_compiled = cached_njit(_work_space)  # inside compiled code


@refcount_free
def _local_product(metrics, g, vector, i):
    """:math:`(M_g u)_i`."""
    total = 0.0
    for j in range(len(vector)):
        total += metrics[g, i, j] * vector[j]
    return total


@refcount_free
def rbf_acceleration_derivative(kernel, x, v, dx, dv, out, work):
    r"""Directional derivative of the geodesic acceleration, :meth:`RBFLocalField.acceleration_derivative`, into ``out``.

    The same terms as the numpy method (:math:`c_r = g_r - \bar g`, :math:`\kappa_r = c_r \cdot \delta x`,
    :math:`\nu_r = c_r \cdot v`, :math:`\eta_r = c_r \cdot \delta v`, :math:`\tilde a_r = w_r (a_r - \bar a)`), from
    what :func:`rbf_acceleration` at ``(x, v)`` left in ``work`` (the weights, :math:`M_r v`, the acceleration and
    the Cholesky factor of :math:`M(x)`), so that the Jacobi fields of one geodesic share them.
    """
    vectors = work[5]  # rows: the acceleration, the mean half-gradient
    weights, half_grad, local, quadratics, factor, slopes, scalars = work[0], work[1], work[2], work[3], work[4], work[6], work[7]
    metrics, groups, sigma, own = kernel.metrics, kernel.groups, kernel.sigma, kernel.own_proximity
    n_centers, dim = kernel.centers.shape
    mean_q = 0.0
    for r in range(n_centers):
        mean_q += weights[r] * quadratics[0, r]
    for i in range(dim):
        out[i] = 0.0
        vectors[1, i] = 0.0
        for r in range(n_centers):
            vectors[1, i] += weights[r] * half_grad[r, i]
    mean_mixed, mean_cross = 0.0, 0.0
    for r in range(n_centers):  # scalars: kappa, nu, eta, mixed
        kappa = nu = eta = local_dx_v = cross = 0.0
        for i in range(dim):
            slopes[r, i] = (-2.0 / sigma) * (half_grad[r, i] - vectors[1, i])
            kappa += slopes[r, i] * dx[i]
            nu += slopes[r, i] * v[i]
            eta += slopes[r, i] * dv[i]
            cross += local[r, i] * dv[i]
        spread = weights[r] * (quadratics[0, r] - mean_q)
        for i in range(dim):
            out[i] += 0.5 * spread * kappa * slopes[r, i]
            if own:
                local_dx = _local_product(metrics, groups[r], dx, i)
                out[i] -= (1.0 / sigma) * spread * local_dx
                local_dx_v += local_dx * v[i]
        mixed = kappa * nu - ((2.0 / sigma) * local_dx_v if own else 0.0)
        scalars[0, r], scalars[1, r], scalars[2, r], scalars[3, r] = kappa, nu, eta, mixed
        quadratics[1, r] = cross  # p_r = (M_r v) . dv (nu_r of the acceleration is no longer needed)
        mean_mixed += weights[r] * mixed
        mean_cross += weights[r] * cross
    combined = vectors[1]  # kappa a + nu dv, multiplied by M_r once (the mean half-gradient is no longer needed)
    for r in range(n_centers):
        centered_mixed = weights[r] * (scalars[3, r] - mean_mixed)
        centered_cross = weights[r] * (quadratics[1, r] - mean_cross)
        kappa, nu, eta = weights[r] * scalars[0, r], weights[r] * scalars[1, r], weights[r] * scalars[2, r]
        for j in range(dim):
            combined[j] = kappa * vectors[0, j] + nu * dv[j]
        for i in range(dim):
            out[i] += centered_cross * slopes[r, i] - (centered_mixed + eta) * local[r, i] - _local_product(metrics, groups[r], combined, i)
    factored_solve(factor, out)
    return True


@cached_njit
def _relative_scratch(kernel):
    """The centers' array of :func:`rbf_relative_to`."""
    return np.empty_like(kernel.centers)


@cached_njit
def rbf_relative_to(kernel, origin, scratch):
    """The field in coordinates relative to ``origin``: its centers minus ``origin``, in ``scratch``."""
    for r in range(len(scratch)):
        for i in range(len(origin)):
            scratch[r, i] = kernel.centers[r, i] - origin[i]
    return RBFKernel(scratch, kernel.metrics, kernel.proximity, kernel.sigma, kernel.own_proximity, kernel.groups)


register_evaluators(
    RBFKernel,
    point_work=rbf_work_space_compiled,
    point_metric=rbf_point_metric,
    acceleration=rbf_acceleration,
    acceleration_derivative=rbf_acceleration_derivative,
    curve_work=rbf_curve_work_compiled,
    curve_terms=rbf_curve_terms,
    curve_hessian=rbf_curve_hessian,
    curve_trapezoid=rbf_curve_trapezoid,
    curve_quadratics=rbf_curve_quadratics,
    relative_scratch=_relative_scratch,
    relative_to=rbf_relative_to,
    hidden_weight=rbf_hidden_weight,
)
