r"""Compiled curve evaluators of RBF-blended fields whose centers share metrics (:data:`SharedRBFKernel`).

A per-class field places every training point as a center with its class's metric
(iris: 150 centers, 3 metrics). The blend of :mod:`~riemlocal.fields.kernels` is
unchanged, but the terms linear in :math:`M_r` (and :math:`P_r = M_r`) are summed
over each distinct metric :math:`g` first:

.. math::
    h_r = P_g x - P_g x_r, \quad M(x)\, d = \sum_g W_g M_g d, \quad
    \sum_r w_r \bar h_r (M_r d)^T = \sum_g \Big(\sum_{r \in g} w_r \bar h_r\Big) (M_g d)^T,

with :math:`W_g = \sum_{r \in g} w_r`: :math:`O(\mathrm{dim}^2)` per metric and
:math:`O(\mathrm{dim})` per center for the products, where the per-center evaluators of
:mod:`~riemlocal.fields.kernels` spend :math:`O(\mathrm{dim}^2)` per center on each; of the
Hessian only :math:`\sum_r \tilde q_r b_r b_r^T` stays per center (:func:`shared_curve_hessian`). Fields
whose metrics are all distinct keep those evaluators (here every center would be its
own group, at 7--15% more cost measured). The point evaluators are the same functions
(they read ``metrics[groups[r]]``). Tests compare both to the numpy path to 1e-12.
"""

from collections import namedtuple

import numpy as np

from ..numerics import register_evaluators
from ..utils.compiled import cached_njit, refcount_free
from .kernels import (
    RBFKernel,
    blend_quadratics,
    load_columns,
    load_nodes,
    load_segments,
    scale_blocks,
    softmax_scores,
    trapezoid_sum,
    rbf_acceleration,
    rbf_hidden_weight,
    rbf_acceleration_derivative,
    rbf_point_metric,
    rbf_work_space_compiled,
    zero_blocks,
)

__all__ = ["SharedRBFKernel", "rbf_kernel", "shared_curve_work", "shared_curve_terms", "shared_curve_hessian", "shared_curve_trapezoid", "shared_curve_quadratics", "shared_relative_scratch", "shared_relative_to"]

SharedRBFKernel = namedtuple("SharedRBFKernel", ["centers", "metrics", "proximity", "sigma", "own_proximity", "groups", "shifted", "members", "starts"])
SharedRBFKernel.__doc__ = """Arrays of an RBF-blended field whose centers share metrics (:func:`rbf_kernel`).

``centers`` ``(R, dim)``; ``metrics`` ``(G, dim, dim)``, the distinct local metrics, center ``r`` has
``metrics[groups[r]]``; ``proximity`` ``(G, dim, dim)`` (``metrics`` when ``own_proximity``) or ``(1, dim, dim)``;
the temperature ``sigma``; ``shifted`` ``(R, dim)``, :math:`b_r = P_r x_r`; the centers of metric ``g`` are
``members[starts[g]:starts[g + 1]]``.
"""


def rbf_kernel(centers, metrics, proximity, sigma):
    """The capability data of an RBF field: centers ``(R, dim)``, metrics ``(R, dim, dim)``, a global proximity
    ``(dim, dim)`` or ``None`` (each center's own metric) and the temperature. A :data:`SharedRBFKernel` where some
    centers share a metric (equal arrays), else a :data:`~riemlocal.fields.kernels.RBFKernel`."""
    centers, metrics = (np.ascontiguousarray(a, dtype=float) for a in (centers, metrics))
    own = proximity is None
    _, first, groups = np.unique(metrics.reshape(len(metrics), -1), axis=0, return_index=True, return_inverse=True)
    if len(first) == len(metrics):
        proximity = metrics if own else np.ascontiguousarray(proximity, dtype=float)[None]
        return RBFKernel(centers, metrics, proximity, float(sigma), own, np.arange(len(metrics)))
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))  # metrics in the order of their first center
    groups = rank[groups.ravel()]
    distinct = np.ascontiguousarray(metrics[np.sort(first)])
    proximity = distinct if own else np.ascontiguousarray(proximity, dtype=float)[None]
    shifted = np.einsum("rij,rj->ri", proximity[groups if own else np.zeros_like(groups)], centers)
    starts = np.concatenate([[0], np.cumsum(np.bincount(groups, minlength=len(distinct)))])
    return SharedRBFKernel(centers, distinct, proximity, float(sigma), own, groups, shifted, np.argsort(groups, kind="stable"), starts)


def _curve_work(kernel, n_segments):
    """Work arrays of the curve evaluators for up to ``n_segments`` segments, points last (``N + 1``): steps and
    midpoints (or nodes) ``(2, dim, N + 1)``; :math:`P_g x` and :math:`M_g d` ``(G, dim, N + 1)`` each; weights and
    spreads ``(2, R, N + 1)``; three per-point scalars (the last :math:`\\bar q`) ``(3, N + 1)``;
    :math:`m = \\sum_r w_r h_r` ``(dim, N + 1)``; :math:`W_g` and :math:`q_g` ``(2, G, N + 1)``; :math:`V_g`
    ``(G, dim, N + 1)``."""
    n_centers, dim = kernel.centers.shape
    n_metrics = len(kernel.metrics)
    return (
        np.empty((2, dim, n_segments + 1)),
        np.empty((n_metrics, dim, n_segments + 1)),
        np.empty((n_metrics, dim, n_segments + 1)),
        np.empty((2, n_centers, n_segments + 1)),
        np.empty((3, n_segments + 1)),
        np.empty((dim, n_segments + 1)),
        np.empty((2, n_metrics, n_segments + 1)),
        np.empty((n_metrics, dim, n_segments + 1)),
    )


shared_curve_work = _curve_work  # from Python
shared_curve_work_compiled = cached_njit(_curve_work)  # inside compiled code


@refcount_free
def _curve_weights(kernel, n, work, shifts):
    r"""The weights :math:`w_r` at the first ``n`` points and steps of the curve work, and per metric :math:`g`:
    :math:`P_g x`, :math:`M_g d`, :math:`q_g = d^T M_g d`, :math:`W_g = \sum_{r \in g} w_r` and (``shifts``)
    :math:`V_g = \sum_{r \in g} w_r b_r`. The score :math:`s_r = (P_g x - b_r) \cdot (x - x_r)` of each center is
    summed in place; :math:`h_r` is never stored. False where a proximity overflows."""
    steps, points, projected, local = work[0][0], work[0][1], work[1], work[2]
    weights, smallest = work[3][0], work[4][0]
    group_weights, group_q, group_shift = work[6][0], work[6][1], work[7]
    centers, shifted, members, starts = kernel.centers, kernel.shifted, kernel.members, kernel.starts
    metrics, proximity, own = kernel.metrics, kernel.proximity, kernel.own_proximity
    n_centers, dim = centers.shape
    for s in range(n):
        smallest[s] = np.inf
    for g in range(len(metrics)):
        p = g if own else 0
        for s in range(n):
            group_q[g, s] = 0.0
        for i in range(dim):
            for s in range(n):
                local[g, i, s], projected[g, i, s] = 0.0, 0.0
            for j in range(dim):
                metric_ij, proximity_ij = metrics[g, i, j], proximity[p, i, j]
                for s in range(n):
                    local[g, i, s] += metric_ij * steps[j, s]
                    projected[g, i, s] += proximity_ij * points[j, s]
            for s in range(n):
                group_q[g, s] += local[g, i, s] * steps[i, s]
        for m in range(starts[g], starts[g + 1]):
            r = members[m]
            for s in range(n):
                weights[r, s] = 0.0
            for i in range(dim):
                shift, center_i = shifted[r, i], centers[r, i]
                for s in range(n):
                    weights[r, s] += (projected[g, i, s] - shift) * (points[i, s] - center_i)
            for s in range(n):
                smallest[s] = min(smallest[s], weights[r, s])
    if not softmax_scores(n_centers, n, kernel.sigma, work):
        return False
    for g in range(len(metrics)):
        for s in range(n):
            group_weights[g, s] = 0.0
        for i in range(dim if shifts else 0):
            for s in range(n):
                group_shift[g, i, s] = 0.0
        for m in range(starts[g], starts[g + 1]):
            r = members[m]
            for s in range(n):
                group_weights[g, s] += weights[r, s]
            for i in range(dim if shifts else 0):
                shift = shifted[r, i]
                for s in range(n):
                    group_shift[g, i, s] += weights[r, s] * shift
    return True


@refcount_free
def shared_curve_terms(kernel, curve, work, terms):
    r""":func:`~riemlocal.fields.kernels.rbf_curve_terms` (:math:`M d` and :math:`\nabla_x f` at every segment of a curve)
    metric by metric: the centers of metric :math:`g` have :math:`h_r = P_g x - b_r` and :math:`q_r = q_g`, so

    .. math::
        M d = \sum_g W_g M_g d, \quad \nabla_x f = -\tfrac{2}{\sigma} \sum_g (q_g - \bar q)\, (W_g P_g x - V_g),
        \quad \bar q = \sum_g W_g q_g,

    with :math:`V_g = \sum_{r \in g} w_r b_r`: per center and point, the score and :math:`V_g`, :math:`O(\mathrm{dim})`
    each, and no :math:`h_r` stored (digits, 32 segments: 0.51 ms, against 0.73 ms writing and reading every
    :math:`h_r`, ``(R, dim, N)``, 4.7 MB). :math:`m = \sum_g (W_g P_g x - V_g)` stays in ``work[5]`` for
    :func:`shared_curve_hessian`."""
    projected, local, mean_q, mean = work[1], work[2], work[4][2], work[5]
    group_weights, group_q, group_shift = work[6][0], work[6][1], work[7]
    metric_v, gradient = terms[0], terms[1]
    dim = kernel.centers.shape[1]
    n = load_segments(curve, work)
    if not _curve_weights(kernel, n, work, True):
        return False
    blend_quadratics(group_weights, group_q, n, mean_q)
    for i in range(dim):
        for s in range(n):
            metric_v[i, s], gradient[i, s], mean[i, s] = 0.0, 0.0, 0.0
        for g in range(len(kernel.metrics)):
            for s in range(n):
                weighted = group_weights[g, s] * projected[g, i, s] - group_shift[g, i, s]  # sum of w_r h_r over g
                metric_v[i, s] += group_weights[g, s] * local[g, i, s]
                gradient[i, s] += (group_q[g, s] - mean_q[s]) * weighted
                mean[i, s] += weighted
        for s in range(n):
            gradient[i, s] *= -2.0 / kernel.sigma
    return True


@refcount_free
def shared_curve_trapezoid(kernel, curve, work):
    r""":func:`~riemlocal.fields.kernels.rbf_curve_trapezoid` (the trapezoid energy of a curve; NaN on failure):
    :math:`\tfrac{N}{2} \sum_s \sum_g (W_g(c_s) + W_g(c_{s+1}))\, q_g(d_s)`."""
    n = load_nodes(curve, work)
    if not _curve_weights(kernel, n + 1, work, False):
        return np.nan
    return trapezoid_sum(work[6][0], work[6][1], n)


@refcount_free
def shared_curve_quadratics(kernel, points, vectors, n, work, out):
    """:func:`~riemlocal.fields.kernels.rbf_curve_quadratics` (:math:`v^T M(x) v` at columns of points and vectors)."""
    load_columns(points, vectors, n, work)
    if not _curve_weights(kernel, n, work, False):
        return False
    blend_quadratics(work[6][0], work[6][1], n, out)
    return True


@refcount_free
def shared_curve_hessian(kernel, n_segments, work, blocks):
    r""":func:`~riemlocal.fields.kernels.rbf_curve_hessian` (the blocks :math:`C`, :math:`K`, :math:`A`) after
    :func:`shared_curve_terms`, metric by metric. The centers of metric :math:`g` have :math:`\bar h_r = h_r - m = a_g - b_r`
    (:math:`a_g = P_g x - m`) and :math:`\tilde q_r = w_r (q_g - \bar q)`, so

    .. math::
        \sum_r \tilde q_r \bar h_r \bar h_r^T = \sum_g (q_g - \bar q) \big(W_g a_g a_g^T - a_g V_g^T - V_g a_g^T\big)
        + \sum_r \tilde q_r\, b_r b_r^T, \qquad \sum_{r \in g} w_r \bar h_r = W_g a_g - V_g \ (\text{for } K),

    whose per-center sum takes four centers per pass: per center and point one multiply-add per entry of :math:`C`
    (digits' per-class field, 1,797 centers, 32 segments: 0.37 ms per Hessian; 0.61--0.81 ms with :math:`h_r` stored
    per center, 1.39--1.54 ms centering each). :math:`A = 2 \sum_g W_g M_g` and the :math:`P_r` term of :math:`C` per metric."""
    projected, local, weights, spreads, mean_q, mean = work[1], work[2], work[3][0], work[3][1], work[4][2], work[5]
    group_weights, group_q, group_shift = work[6][0], work[6][1], work[7]
    hessian_x, mixed, hessian_v = blocks[0], blocks[1], blocks[2]
    metrics, members, starts, sigma, own, shifted = kernel.metrics, kernel.members, kernel.starts, kernel.sigma, kernel.own_proximity, kernel.shifted
    n_centers, dim = kernel.centers.shape
    n = n_segments
    zero_blocks(n, blocks)
    for g in range(len(metrics)):
        for i in range(dim):
            for j in range(i + 1):
                for s in range(n):
                    a_i, a_j = projected[g, i, s] - mean[i, s], projected[g, j, s] - mean[j, s]
                    group_term = group_weights[g, s] * a_i * a_j - a_i * group_shift[g, j, s] - group_shift[g, i, s] * a_j
                    hessian_x[i, j, s] += (group_q[g, s] - mean_q[s]) * group_term
            for j in range(dim):
                metric_ij = metrics[g, i, j]
                for s in range(n):
                    a_i = projected[g, i, s] - mean[i, s]
                    mixed[i, j, s] += (group_weights[g, s] * a_i - group_shift[g, i, s]) * local[g, j, s]
                    hessian_v[i, j, s] += group_weights[g, s] * metric_ij
            if own:
                for j in range(i + 1):  # the P_r term, scaled by sigma^2 / 4 as the sum
                    metric_ij = metrics[g, i, j]
                    for s in range(n):
                        hessian_x[i, j, s] -= (sigma / 2.0) * (group_q[g, s] - mean_q[s]) * group_weights[g, s] * metric_ij
        for m in range(starts[g], starts[g + 1]):
            r = members[m]
            for s in range(n):
                spreads[r, s] = weights[r, s] * (group_q[g, s] - mean_q[s])
    quads = n_centers // 4 * 4
    for r in range(0, quads, 4):  # four centers per pass over the block: a quarter of its loads and stores
        for i in range(dim):
            for j in range(i + 1):
                o0, o1 = shifted[r, i] * shifted[r, j], shifted[r + 1, i] * shifted[r + 1, j]
                o2, o3 = shifted[r + 2, i] * shifted[r + 2, j], shifted[r + 3, i] * shifted[r + 3, j]
                for s in range(n):
                    hessian_x[i, j, s] += (spreads[r, s] * o0 + spreads[r + 1, s] * o1) + (spreads[r + 2, s] * o2 + spreads[r + 3, s] * o3)
    for r in range(quads, n_centers):
        for i in range(dim):
            for j in range(i + 1):
                product = shifted[r, i] * shifted[r, j]
                for s in range(n):
                    hessian_x[i, j, s] += spreads[r, s] * product
    scale_blocks(sigma, n, blocks)


def _relative_scratch(kernel):
    """The arrays of :func:`shared_relative_to`: centers and :math:`b_r = P_r x_r`."""
    return np.empty_like(kernel.centers), np.empty_like(kernel.centers)


shared_relative_scratch = _relative_scratch  # from Python
shared_relative_scratch_compiled = cached_njit(_relative_scratch)  # inside compiled code


@cached_njit
def shared_relative_to(kernel, origin, scratch):
    """The field relative to ``origin``: centers minus ``origin``, :math:`b_r = P_r (x_r - x_0)` (the product of the
    difference, not a difference of products: nothing cancels at large offsets), in ``scratch``."""
    centers, shifted = scratch
    proximity, groups, own = kernel.proximity, kernel.groups, kernel.own_proximity
    dim = len(origin)
    for r in range(len(centers)):
        for i in range(dim):
            centers[r, i] = kernel.centers[r, i] - origin[i]
        k = groups[r] if own else 0
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += proximity[k, i, j] * centers[r, j]
            shifted[r, i] = total
    return SharedRBFKernel(centers, kernel.metrics, proximity, kernel.sigma, own, groups, shifted, kernel.members, kernel.starts)


register_evaluators(
    SharedRBFKernel,
    point_work=rbf_work_space_compiled,
    point_metric=rbf_point_metric,
    acceleration=rbf_acceleration,
    acceleration_derivative=rbf_acceleration_derivative,
    curve_work=shared_curve_work_compiled,
    curve_terms=shared_curve_terms,
    curve_hessian=shared_curve_hessian,
    curve_trapezoid=shared_curve_trapezoid,
    curve_quadratics=shared_curve_quadratics,
    relative_scratch=shared_relative_scratch_compiled,
    relative_to=shared_relative_to,
    hidden_weight=rbf_hidden_weight,
)
