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

__all__ = ["RBFKernel", "rbf_weights", "rbf_metric", "rbf_acceleration", "rbf_geodesic_rhs", "rbf_work_space", "cholesky_solve"]

RBFKernel = namedtuple("RBFKernel", ["centers", "metrics", "proximity", "sigma", "own_proximity"])
RBFKernel.__doc__ = """Arrays of an RBF-blended field for the compiled kernels.

``centers`` ``(R, dim)``, ``metrics`` ``(R, dim, dim)``, ``proximity`` ``(dim, dim)``
(ignored when ``own_proximity``: then :math:`P_r = M_r`), the softmax temperature ``sigma``.
"""


@njit(cache=True)
def rbf_weights(kernel, x, weights, half_grad):
    """Weights :math:`w_r(x)` into ``weights`` ``(R,)`` and :math:`h_r` into ``half_grad`` ``(R, dim)``; False on overflow."""
    centers = kernel.centers
    n_centers, dim = centers.shape
    smallest = np.inf
    for r in range(n_centers):
        proximity = kernel.metrics[r] if kernel.own_proximity else kernel.proximity
        score = 0.0
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += proximity[i, j] * (x[j] - centers[r, j])
            half_grad[r, i] = total
            score += total * (x[i] - centers[r, i])
        weights[r] = score
        smallest = min(smallest, score)
    if not math.isfinite(smallest):
        return False
    norm = 0.0
    for r in range(n_centers):
        if not math.isfinite(weights[r]):
            return False
        weights[r] = math.exp((smallest - weights[r]) / kernel.sigma)
        norm += weights[r]
    for r in range(n_centers):
        weights[r] /= norm
    return True


@njit(cache=True)
def rbf_metric(kernel, weights, metric):
    r""":math:`M = \sum_r w_r M_r` into ``metric`` ``(dim, dim)``."""
    metrics = kernel.metrics
    n_centers, dim = kernel.centers.shape
    for i in range(dim):
        for j in range(dim):
            total = 0.0
            for r in range(n_centers):
                total += weights[r] * metrics[r, i, j]
            metric[i, j] = total


@njit(cache=True)
def cholesky_solve(matrix, vector):
    """Solve ``matrix x = vector`` in place (``matrix`` is overwritten by its Cholesky factor); False if not SPD.

    A pivot at most ``1e-12`` times the largest diagonal entry counts as not positive definite.
    """
    dim = len(vector)
    largest = 0.0
    for i in range(dim):
        largest = max(largest, matrix[i, i])
    for j in range(dim):
        pivot = matrix[j, j]
        for k in range(j):
            pivot -= matrix[j, k] * matrix[j, k]
        if not pivot > 1e-12 * largest:
            return False
        pivot = math.sqrt(pivot)
        matrix[j, j] = pivot
        for i in range(j + 1, dim):
            total = matrix[i, j]
            for k in range(j):
                total -= matrix[i, k] * matrix[j, k]
            matrix[i, j] = total / pivot
    for i in range(dim):  # L y = b
        total = vector[i]
        for k in range(i):
            total -= matrix[i, k] * vector[k]
        vector[i] = total / matrix[i, i]
    for i in range(dim - 1, -1, -1):  # L^T x = y
        total = vector[i]
        for k in range(i + 1, dim):
            total -= matrix[k, i] * vector[k]
        vector[i] = total / matrix[i, i]
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
