r"""Compiled (numba) point kernels of the RBF-blended local fields.

A field of the :class:`~riemlocal.fields.RBFLocalField` family (including
:class:`~riemlocal.fields.SmoothLocalField`) exposes its arrays as an
:data:`RBFKernel` (``field.kernel``); the solvers of
:mod:`riemlocal.numerics` hand it to these functions, which evaluate the
blend at one point without numpy's per-call overhead (the cost of a geodesic
at small ``dim``). They compute the same formulas as the field's numpy
methods (tests compare both to 1e-12):

.. math::
    h_r = P_r (x - x_r), \quad s_r = h_r \cdot (x - x_r), \quad
    w = \mathrm{softmax}_r(-s_r / \sigma), \quad M(x) = \sum_r w_r M_r,

with :math:`P_r = M_r` (``own_proximity``) or one global :math:`P`.
Every kernel returns ``False`` where a proximity overflows float64 or the
blended metric is not numerically positive definite; callers then use the
numpy path, which raises the error that explains it.
"""

import math
from collections import namedtuple

import numpy as np
from numba import njit

__all__ = [
    "RBFKernel",
    "rbf_weights",
    "rbf_metric",
    "rbf_energy_terms",
    "rbf_acceleration",
    "rbf_geodesic_rhs",
    "rbf_work_space",
    "cholesky",
    "cholesky_solve",
    "forward_substitution",
    "back_substitution",
]

RBFKernel = namedtuple("RBFKernel", ["centers", "metrics", "proximity", "sigma", "own_proximity"])
RBFKernel.__doc__ = """Arrays of an RBF-blended field for the compiled kernels.

``centers`` ``(R, dim)``, ``metrics`` ``(R, dim, dim)``, ``proximity`` ``(dim, dim)``
(ignored when ``own_proximity``: then :math:`P_r = M_r`), the softmax temperature ``sigma``.
"""


@njit(cache=True)
def rbf_weights(kernel, x, weights, half_grad):
    """Weights :math:`w_r(x)` into ``weights`` ``(R,)`` and :math:`h_r` into ``half_grad`` ``(R, dim)``; False on overflow."""
    centers, metrics, proximity, own = kernel.centers, kernel.metrics, kernel.proximity, kernel.own_proximity
    n_centers, dim = centers.shape
    smallest = np.inf
    for r in range(n_centers):
        score = 0.0
        for i in range(dim):
            total = 0.0
            if own:
                for j in range(dim):
                    total += metrics[r, i, j] * (x[j] - centers[r, j])
            else:
                for j in range(dim):
                    total += proximity[i, j] * (x[j] - centers[r, j])
            half_grad[r, i] = total
            score += total * (x[i] - centers[r, i])
        weights[r] = score
        smallest = min(smallest, score)
    if not math.isfinite(smallest):
        return False
    norm, inverse_sigma = 0.0, 1.0 / kernel.sigma
    for r in range(n_centers):
        if not math.isfinite(weights[r]):
            return False
        weights[r] = math.exp((smallest - weights[r]) * inverse_sigma)
        norm += weights[r]
    inverse_norm = 1.0 / norm
    for r in range(n_centers):
        weights[r] *= inverse_norm
    return True


@njit(cache=True)
def rbf_metric(kernel, weights, metric):
    r""":math:`M = \sum_r w_r M_r` into ``metric`` ``(dim, dim)``."""
    metrics = kernel.metrics
    n_centers, dim = kernel.centers.shape
    metric[:] = 0.0
    for r in range(n_centers):
        weight = weights[r]
        for i in range(dim):
            for j in range(dim):
                metric[i, j] += weight * metrics[r, i, j]


@njit(cache=True)
def cholesky(matrix, relative_pivot):
    """Lower Cholesky factor of ``matrix`` in place of its lower triangle; False if not SPD.

    A pivot at most ``relative_pivot`` times the largest diagonal entry counts
    as not positive definite (0: LAPACK's test, a pivot that is not > 0).
    """
    dim = len(matrix)
    largest = 0.0
    for i in range(dim):
        largest = max(largest, matrix[i, i])
    for j in range(dim):
        pivot = matrix[j, j]
        for k in range(j):
            pivot -= matrix[j, k] * matrix[j, k]
        if not pivot > relative_pivot * largest:
            return False
        pivot = math.sqrt(pivot)
        matrix[j, j] = pivot
        for i in range(j + 1, dim):
            total = matrix[i, j]
            for k in range(j):
                total -= matrix[i, k] * matrix[j, k]
            matrix[i, j] = total / pivot
    return True


@njit(cache=True)
def forward_substitution(factor, vector):
    """Solve ``L y = vector`` in place for the lower triangle ``L`` of ``factor``."""
    for i in range(len(vector)):
        total = vector[i]
        for k in range(i):
            total -= factor[i, k] * vector[k]
        vector[i] = total / factor[i, i]


@njit(cache=True)
def back_substitution(factor, vector):
    """Solve ``L^T x = vector`` in place for the lower triangle ``L`` of ``factor``."""
    for i in range(len(vector) - 1, -1, -1):
        total = vector[i]
        for k in range(i + 1, len(vector)):
            total -= factor[k, i] * vector[k]
        vector[i] = total / factor[i, i]


@njit(cache=True)
def cholesky_solve(matrix, vector):
    """Solve ``matrix x = vector`` in place (``matrix`` is overwritten by its Cholesky factor); False if not SPD.

    A pivot at most ``1e-12`` times the largest diagonal entry counts as not positive definite.
    """
    if not cholesky(matrix, 1e-12):
        return False
    forward_substitution(matrix, vector)
    back_substitution(matrix, vector)
    return True


@njit(cache=True)
def rbf_acceleration(kernel, x, v, out, work):
    r"""Geodesic acceleration :math:`c'' = -\Gamma(v, v)` at ``x`` into ``out`` ``(dim,)``; False on failure.

    :math:`M c'' = -\tfrac{1}{\sigma} \sum_r [\tilde q_r h_r - 2 \tilde \nu_r M_r v]` with
    :math:`q_r = v^T M_r v`, :math:`\nu_r = h_r \cdot v`, :math:`\tilde a_r = w_r (a_r - \bar a)`
    (:meth:`RBFLocalField._acceleration`). ``work`` is :func:`rbf_work_space`.
    """
    weights, half_grad, local, quadratics, metric = work
    if not rbf_weights(kernel, x, weights, half_grad):
        return False
    metrics = kernel.metrics
    n_centers, dim = kernel.centers.shape
    mean_q, mean_nu = 0.0, 0.0
    for r in range(n_centers):
        q, nu = 0.0, 0.0
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += metrics[r, i, j] * v[j]
            local[r, i] = total
            q += total * v[i]
            nu += half_grad[r, i] * v[i]
        quadratics[0, r], quadratics[1, r] = q, nu
        mean_q += weights[r] * q
        mean_nu += weights[r] * nu
    for i in range(dim):
        out[i] = 0.0
    scale = -1.0 / kernel.sigma
    for r in range(n_centers):
        spread_q = scale * weights[r] * (quadratics[0, r] - mean_q)
        spread_nu = -2.0 * scale * weights[r] * (quadratics[1, r] - mean_nu)
        for i in range(dim):
            out[i] += spread_q * half_grad[r, i] + spread_nu * local[r, i]
    rbf_metric(kernel, weights, metric)
    return cholesky_solve(metric, out)


@njit(cache=True)
def rbf_energy_terms(kernel, x, v, work, metric_v, gradient, hessian_x, mixed, hessian_v, hessian):
    r"""Derivatives of :math:`f = v^T M(x) v` at one point (:meth:`RBFLocalField._energy_terms`); False on failure.

    :math:`M v` into ``metric_v`` and :math:`\nabla_x f = -\tfrac{2}{\sigma} \sum_r \tilde q_r h_r` into
    ``gradient`` ``(dim,)``; with ``hessian``, the blocks :math:`C = \nabla_x^2 f`,
    :math:`K = \nabla_x \nabla_v f` and :math:`A = \nabla_v^2 f = 2 M(x)` into the ``(dim, dim)`` arrays
    ``hessian_x``, ``mixed`` and ``hessian_v``:
    :math:`C = \tfrac{4}{\sigma^2} \sum_r \tilde q_r \bar h_r \bar h_r^T - \tfrac{2}{\sigma} \sum_r \tilde q_r P_r`
    (the last sum only for ``own_proximity``), :math:`K = -\tfrac{4}{\sigma} \sum_r w_r \bar h_r (M_r v)^T`,
    with :math:`\bar h_r = h_r - \sum_s w_s h_s` and :math:`\tilde q_r = w_r (q_r - \bar q)`, :math:`q_r = v^T M_r v`.
    ``work`` is :func:`rbf_work_space` (``half_grad`` is centered in place).
    """
    weights, half_grad, local, quadratics, metric = work
    if not rbf_weights(kernel, x, weights, half_grad):
        return False
    metrics, sigma = kernel.metrics, kernel.sigma
    n_centers, dim = kernel.centers.shape
    mean_q = 0.0
    for r in range(n_centers):
        q = 0.0
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += metrics[r, i, j] * v[j]
            local[r, i] = total
            q += total * v[i]
        quadratics[0, r] = q
        mean_q += weights[r] * q
    for i in range(dim):
        metric_v[i], gradient[i] = 0.0, 0.0
    for r in range(n_centers):
        weight = weights[r]
        spread = weight * (quadratics[0, r] - mean_q)
        quadratics[1, r] = spread
        for i in range(dim):
            metric_v[i] += weight * local[r, i]
            gradient[i] += spread * half_grad[r, i]
    for i in range(dim):
        gradient[i] *= -2.0 / sigma
    if not hessian:
        return True
    for i in range(dim):
        mean_h = 0.0
        for r in range(n_centers):
            mean_h += weights[r] * half_grad[r, i]
        for r in range(n_centers):
            half_grad[r, i] -= mean_h
    for i in range(dim):
        for j in range(dim):
            hessian_x[i, j], mixed[i, j], hessian_v[i, j] = 0.0, 0.0, 0.0
    own = kernel.own_proximity
    for r in range(n_centers):
        weight, spread = weights[r], quadratics[1, r]
        for i in range(dim):
            spread_h, weight_h = spread * half_grad[r, i], weight * half_grad[r, i]
            for j in range(i + 1):
                hessian_x[i, j] += spread_h * half_grad[r, j]
            for j in range(dim):
                mixed[i, j] += weight_h * local[r, j]
                hessian_v[i, j] += weight * metrics[r, i, j]
            if own:
                for j in range(i + 1):  # the P_r term, scaled by sigma^2 / 4 as the sum
                    hessian_x[i, j] -= (sigma / 2.0) * spread * metrics[r, i, j]
    for i in range(dim):
        for j in range(i + 1):
            hessian_x[i, j] *= 4.0 / sigma**2
            hessian_x[j, i] = hessian_x[i, j]
        for j in range(dim):
            mixed[i, j] *= -4.0 / sigma
            hessian_v[i, j] *= 2.0
    return True


@njit(cache=True)
def rbf_acceleration(kernel, x, v, out, work):
    r"""Geodesic acceleration :math:`c'' = -\Gamma(v, v)` at ``x`` into ``out`` ``(dim,)``; False on failure.

    :math:`M c'' = -\tfrac{1}{\sigma} \sum_r [\tilde q_r h_r - 2 \tilde \nu_r M_r v]` with
    :math:`q_r = v^T M_r v`, :math:`\nu_r = h_r \cdot v`, :math:`\tilde a_r = w_r (a_r - \bar a)`
    (:meth:`RBFLocalField._acceleration`). ``work`` is :func:`rbf_work_space`.
    """
    weights, half_grad, local, quadratics, metric = work
    if not rbf_weights(kernel, x, weights, half_grad):
        return False
    metrics = kernel.metrics
    n_centers, dim = kernel.centers.shape
    mean_q, mean_nu = 0.0, 0.0
    for r in range(n_centers):
        q, nu = 0.0, 0.0
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += metrics[r, i, j] * v[j]
            local[r, i] = total
            q += total * v[i]
            nu += half_grad[r, i] * v[i]
        quadratics[0, r], quadratics[1, r] = q, nu
        mean_q += weights[r] * q
        mean_nu += weights[r] * nu
    for i in range(dim):
        out[i] = 0.0
    scale = -1.0 / kernel.sigma
    for r in range(n_centers):
        spread_q = scale * weights[r] * (quadratics[0, r] - mean_q)
        spread_nu = -2.0 * scale * weights[r] * (quadratics[1, r] - mean_nu)
        for i in range(dim):
            out[i] += spread_q * half_grad[r, i] + spread_nu * local[r, i]
    rbf_metric(kernel, weights, metric)
    return cholesky_solve(metric, out)


@njit(cache=True)
def rbf_energy_terms(kernel, x, v, work, metric_v, gradient, hessian_x, mixed, hessian_v, hessian):
    r"""Derivatives of :math:`f = v^T M(x) v` at one point (:meth:`RBFLocalField._energy_terms`); False on failure.

    :math:`M v` into ``metric_v`` and :math:`\nabla_x f = -\tfrac{2}{\sigma} \sum_r \tilde q_r h_r` into
    ``gradient`` ``(dim,)``; with ``hessian``, the blocks :math:`C = \nabla_x^2 f`,
    :math:`K = \nabla_x \nabla_v f` and :math:`A = \nabla_v^2 f = 2 M(x)` into the ``(dim, dim)`` arrays
    ``hessian_x``, ``mixed`` and ``hessian_v``:
    :math:`C = \tfrac{4}{\sigma^2} \sum_r \tilde q_r \bar h_r \bar h_r^T - \tfrac{2}{\sigma} \sum_r \tilde q_r P_r`
    (the last sum only for ``own_proximity``), :math:`K = -\tfrac{4}{\sigma} \sum_r w_r \bar h_r (M_r v)^T`,
    with :math:`\bar h_r = h_r - \sum_s w_s h_s` and :math:`\tilde q_r = w_r (q_r - \bar q)`, :math:`q_r = v^T M_r v`.
    ``work`` is :func:`rbf_work_space` (``half_grad`` is centered in place).
    """
    weights, half_grad, local, quadratics, metric = work
    if not rbf_weights(kernel, x, weights, half_grad):
        return False
    metrics, sigma = kernel.metrics, kernel.sigma
    n_centers, dim = kernel.centers.shape
    mean_q = 0.0
    for r in range(n_centers):
        q = 0.0
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += metrics[r, i, j] * v[j]
            local[r, i] = total
            q += total * v[i]
        quadratics[0, r] = q
        mean_q += weights[r] * q
    for i in range(dim):
        metric_v[i], gradient[i] = 0.0, 0.0
    for r in range(n_centers):
        spread = weights[r] * (quadratics[0, r] - mean_q)
        quadratics[1, r] = spread
        for i in range(dim):
            metric_v[i] += weights[r] * local[r, i]
            gradient[i] += spread * half_grad[r, i]
    for i in range(dim):
        gradient[i] *= -2.0 / sigma
    if not hessian:
        return True
    for i in range(dim):
        mean_h = 0.0
        for r in range(n_centers):
            mean_h += weights[r] * half_grad[r, i]
        for r in range(n_centers):
            half_grad[r, i] -= mean_h
    rbf_metric(kernel, weights, metric)
    for i in range(dim):
        for j in range(dim):
            total_x, total_mixed = 0.0, 0.0
            for r in range(n_centers):
                total_x += quadratics[1, r] * half_grad[r, i] * half_grad[r, j]
                total_mixed += weights[r] * half_grad[r, i] * local[r, j]
            hessian_x[i, j] = (4.0 / sigma**2) * total_x
            mixed[i, j] = (-4.0 / sigma) * total_mixed
            hessian_v[i, j] = 2.0 * metric[i, j]
    if kernel.own_proximity:
        for i in range(dim):
            for j in range(dim):
                total = 0.0
                for r in range(n_centers):
                    total += quadratics[1, r] * metrics[r, i, j]
                hessian_x[i, j] -= (2.0 / sigma) * total
    return True


@njit(cache=True)
def rbf_work_space(kernel):
    """Work arrays of the kernels: weights ``(R,)``, ``half_grad`` and ``local`` ``(R, dim)``, ``(2, R)``, ``(dim, dim)``."""
    n_centers, dim = kernel.centers.shape
    return (np.empty(n_centers), np.empty((n_centers, dim)), np.empty((n_centers, dim)), np.empty((2, n_centers)), np.empty((dim, dim)))


@njit(cache=True)
def rbf_geodesic_rhs(params, state, out):
    """Right-hand side :math:`(x, v) \\mapsto (v, c'')` of the geodesic ODE; ``params = (kernel, work)``; False on failure."""
    kernel, work = params
    dim = kernel.centers.shape[1]
    out[:dim] = state[dim:]
    return rbf_acceleration(kernel, state[:dim], state[dim:], out[dim:], work)
