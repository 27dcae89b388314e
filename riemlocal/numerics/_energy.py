r"""The discrete curve energy and its derivatives: what every geodesic solver minimizes.

.. math::
    E(c_0, \dots, c_N) = N \sum_{i=0}^{N-1} d_i^T M(m_i)\, d_i, \qquad
    d_i = c_{i+1} - c_i,\ m_i = \tfrac12 (c_i + c_{i+1}),

approximates :math:`\int_0^1 c'^T M(c)\, c'\,dt` by the midpoint rule
(second order, in even powers of :math:`1/N`). Its minimizers with fixed
endpoints are discrete geodesics (Hauberg, Freifeld & Black, *A Geometric
Take on Metric Learning*, NIPS 2012, sec. 3.1).
"""

import functools

import numpy as np
import scipy.fft
import scipy.linalg

from ..utils.validation import solve_spd
from ._capability import QUADRATURE_MAX_DIM, compiled_data, polyline_quadratics

__all__ = ["curve_energy", "laplacian_inverse_sqrt", "polyline_length", "refine", "initial_velocity", "segment_lengths", "segment_quadratics", "trapezoid_energy"]


def curve_energy(field, curves, hessian=False):
    r"""Discrete energy of curves, its gradient with respect to every node and optionally its Hessian.

    Segment :math:`i` contributes :math:`N f(m_i, d_i)` with :math:`f(x, v) = v^T M(x) v`.
    With :math:`C = \nabla_x^2 f`, :math:`K = \nabla_x \nabla_v f` and :math:`A = \nabla_v^2 f`
    (:meth:`~riemlocal.fields.MetricField.energy_hessian`) at :math:`(m_i, d_i)`,
    the chain rule through :math:`m_i = (c_i + c_{i+1})/2`, :math:`d_i = c_{i+1} - c_i`
    gives the segment's Hessian blocks

    .. math::
        \partial^2_{c_i c_i} = N\big(\tfrac14 C - \tfrac12 (K + K^T) + A\big), \quad
        \partial^2_{c_{i+1} c_{i+1}} = N\big(\tfrac14 C + \tfrac12 (K + K^T) + A\big), \quad
        \partial^2_{c_i c_{i+1}} = N\big(\tfrac14 C + \tfrac12 (K - K^T) - A\big).

    Parameters
    ----------
    field : MetricField
    curves : ndarray of shape (..., N + 1, dim)
        Nodes :math:`c_0, \dots, c_N` of piecewise-linear curves on :math:`t \in [0, 1]`.
    hessian : bool, default=False
        Also return the Hessian with respect to the interior nodes (block tridiagonal).

    Returns
    -------
    energy : ndarray of shape (...)
        :math:`N \sum_i d_i^T M(m_i) d_i`, which approximates :math:`\int_0^1 c'^T M(c) c'\,dt`.
    gradient : ndarray of shape (..., N + 1, dim)
    diagonal : ndarray of shape (..., N - 1, dim, dim)
        Only with ``hessian=True``: blocks :math:`\partial^2 E / \partial c_k^2`, :math:`k = 1, \dots, N - 1`.
    upper : ndarray of shape (..., N - 2, dim, dim)
        Only with ``hessian=True``: blocks :math:`\partial^2 E / \partial c_k \partial c_{k+1}`.
    """
    n_segments = curves.shape[-2] - 1
    steps = np.diff(curves, axis=-2)
    metric_steps, quadratic_gradients, *second = field.segment_energy_terms(curves, hessian)
    energy = n_segments * np.einsum("...nd,...nd->...", steps, metric_steps)
    incoming = n_segments * (2.0 * metric_steps + 0.5 * quadratic_gradients)  # d/dc_{i+1} of segment i
    outgoing = n_segments * (0.5 * quadratic_gradients - 2.0 * metric_steps)  # d/dc_i
    gradient = np.zeros_like(curves)
    gradient[..., 1:, :] = incoming
    gradient[..., :-1, :] += outgoing
    if not hessian:
        return energy, gradient
    hessian_x, mixed, hessian_v = (n_segments * block for block in second)
    symmetric, skew = 0.5 * (mixed + np.swapaxes(mixed, -1, -2)), 0.5 * (mixed - np.swapaxes(mixed, -1, -2))
    quarter = 0.25 * hessian_x
    first = quarter - symmetric + hessian_v  # at the first node of each segment
    last = quarter + symmetric + hessian_v  # at its last node
    cross = quarter + skew - hessian_v
    return energy, gradient, last[..., :-1, :, :] + first[..., 1:, :, :], cross[..., 1:-1, :, :]


@functools.lru_cache(maxsize=32)
def laplacian_inverse_sqrt(n_segments, inverse=False):
    r""":math:`\Delta^{-1/2}` (or, with ``inverse``, :math:`\Delta^{1/2}`) of the (n_segments - 1)-node Dirichlet Laplacian tridiag(-1, 2, -1).

    The orthonormal DST-I basis :math:`S_{jk} = \sqrt{2/N} \sin(\pi jk/N)`
    diagonalizes :math:`\Delta` with eigenvalues :math:`\lambda_m = 2 - 2\cos(\pi m/N)`,
    so :math:`\Delta^{\mp 1/2} = S \Lambda^{\mp 1/2} S`, whose entries are
    :math:`f(j - k) - f(j + k)` with :math:`f(s) = \frac1N \sum_{m=1}^{N-1} \lambda_m^{\mp 1/2} \cos(\pi s m/N)`
    (a DCT-I, :math:`f(2N - s) = f(s)`): a Toeplitz minus a Hankel matrix, built in :math:`O(N^2)`
    (the product :math:`S \Lambda S` took 0.6 s at 2,048 segments, this 7 ms, and squares to :math:`\Delta`
    200 times more closely). A small symmetric matrix, applied along the node axis of curves in one product (for
    the tens of nodes used here, faster than two fast sine transforms): the preconditioner of discrete curve
    energies; cached per ``n_segments`` (read-only).
    """
    m = np.arange(1, n_segments)
    eigenvalues = 2.0 - 2.0 * np.cos(np.pi * m / n_segments)
    weights = np.sqrt(eigenvalues) if inverse else 1.0 / np.sqrt(eigenvalues)
    cosines = scipy.fft.dct(np.concatenate([[0.0], weights, [0.0]]), type=1) / (2.0 * n_segments)  # f(0), ..., f(N)
    f = np.concatenate([cosines, cosines[-2:0:-1]])  # f(0), ..., f(2N - 1)
    matrix = scipy.linalg.toeplitz(f[: n_segments - 1]) - scipy.linalg.hankel(f[2 : n_segments + 1], f[n_segments : 2 * n_segments - 1])
    matrix.flags.writeable = False
    return matrix


def refine(curves, cubic=False):
    r"""Insert a node in every segment of curves ``(..., N + 1, dim)``: N segments -> 2N segments.

    The new nodes are the segments' midpoints, or with ``cubic`` (curves of at
    least 4 nodes) the values at :math:`t_{i + 1/2}` of the cubic through the
    four nearest nodes, :math:`(9 (c_i + c_{i+1}) - c_{i-1} - c_{i+2}) / 16`
    (one-sided :math:`(5 c_0 + 15 c_1 - 5 c_2 + c_3) / 16` at the ends):
    :math:`O(N^{-4})` from a smooth curve instead of :math:`O(N^{-2})`.
    """
    fine = np.empty(curves.shape[:-2] + (2 * curves.shape[-2] - 1, curves.shape[-1]))
    fine[..., ::2, :] = curves
    fine[..., 1::2, :] = 0.5 * (curves[..., 1:, :] + curves[..., :-1, :])
    if cubic and curves.shape[-2] >= 4:
        c = curves
        fine[..., 3:-3:2, :] = (9.0 * (c[..., 1:-2, :] + c[..., 2:-1, :]) - (c[..., :-3, :] + c[..., 3:, :])) / 16.0
        fine[..., 1, :] = (5.0 * c[..., 0, :] + 15.0 * c[..., 1, :] - 5.0 * c[..., 2, :] + c[..., 3, :]) / 16.0
        fine[..., -2, :] = (5.0 * c[..., -1, :] + 15.0 * c[..., -2, :] - 5.0 * c[..., -3, :] + c[..., -4, :]) / 16.0
    return fine


def initial_velocity(field, curves, base_metric):
    r"""Initial velocity of a discrete geodesic, by the discrete Legendre transform.

    The momentum at the first node of the midpoint variational integrator,
    :math:`p_0 = -\partial E / \partial c_0 = 2N M(m_0) d_0 - \tfrac{N}{2} \nabla_x (d_0^T M d_0)|_{m_0}`,
    matches the continuous momentum :math:`2 M(c_0) c'(0)` to second order
    (in even powers of :math:`1/N`, so the Richardson step makes it fourth order).
    ``base_metric`` is :math:`M(c_0)`.
    """
    n_segments = curves.shape[1] - 1
    metric_step, quadratic_gradient = field.energy_terms(curves[:, 1] - curves[:, 0], 0.5 * (curves[:, 1] + curves[:, 0]))
    momentum = n_segments * (metric_step - 0.25 * quadratic_gradient)  # p_0 / 2
    return solve_spd(base_metric, momentum)


def trapezoid_energy(field, curves):
    r"""Energy of the polygons by the trapezoid rule, :math:`N \sum_i \tfrac12 \big(d_i^T M(c_i) d_i + d_i^T M(c_{i+1}) d_i\big)`.

    Its gap to the midpoint energy of :func:`curve_energy` is
    :math:`O(N^{-2})` where the segments resolve the metric (it falls by 4
    when they are halved); a metric feature that the midpoints miss but a
    node sees makes it fall by 2 only. Shape ``(...)`` for curves ``(..., N + 1, dim)``.
    """
    return 0.5 * (curves.shape[-2] - 1) * field.segment_end_quadratics(curves).sum(axis=(-2, -1))


#: 4-point Gauss--Legendre nodes and weights on [0, 1] (exact for polynomials of degree 7)
_LEGENDRE_NODES, _LEGENDRE_WEIGHTS = np.polynomial.legendre.leggauss(4)  # on [-1, 1]
_GAUSS_NODES, _GAUSS_WEIGHTS = 0.5 * (_LEGENDRE_NODES + 1.0), 0.5 * _LEGENDRE_WEIGHTS


def polyline_length(field, curves, subdivisions=1):
    r"""Length :math:`\sum_i \int_0^1 \sqrt{d_i^T M(c_i + s d_i)\, d_i}\, ds` of polylines, by 4-point Gauss--Legendre.

    An independent quadrature of the curve's own length (the solvers minimize a
    midpoint energy): the length of a real curve, so an upper bound on the geodesic
    distance of its endpoints. Each segment is split into ``subdivisions`` pieces.

    Parameters
    ----------
    field : MetricField
    curves : ndarray of shape (..., N + 1, dim)
    subdivisions : int, default=1

    Returns
    -------
    ndarray of shape (...)
    """
    return segment_lengths(field, curves, subdivisions).sum(axis=-1)


def segment_lengths(field, curves, subdivisions=1):
    """The lengths of the segments of polylines ``(..., N + 1, dim)``, ``(..., N)``: the terms of :func:`polyline_length`."""
    offsets = (np.arange(subdivisions)[:, None] + _GAUSS_NODES).ravel() / subdivisions  # (subdivisions * 4,) along a segment
    squared = segment_quadratics(field, curves, offsets) / subdivisions**2  # each piece's step is d / subdivisions
    speeds = np.sqrt(np.maximum(squared, 0.0)).reshape(curves.shape[:-2] + (-1, subdivisions, 4))
    return np.einsum("...nsk,k->...n", speeds, _GAUSS_WEIGHTS)


def segment_quadratics(field, curves, offsets):
    """:math:`d^T M(c + t d) d` at the fractions ``offsets`` of every segment ``d`` of ``curves``, ``(..., N, k)``: compiled
    along each curve where the field declares it, up to ``QUADRATURE_MAX_DIM`` dimensions at any size
    (:func:`~riemlocal.numerics.polyline_quadratics`), else numpy."""
    n_nodes, dim = curves.shape[-2:]
    capability = getattr(field, "capability", None)
    if capability is not None and dim <= QUADRATURE_MAX_DIM:
        data = capability.data
    else:
        data = compiled_data(field, curves[..., 0, 0].size * (n_nodes - 1) * len(offsets), curves=True)
    if data is not None:  # the curves contiguous, one per row, for the compiled loops only
        squared, done = polyline_quadratics(data, np.ascontiguousarray(curves.reshape(-1, n_nodes, dim), dtype=float), offsets)
        if done:
            return squared.reshape(curves.shape[:-2] + squared.shape[1:])
    steps = np.diff(curves, axis=-2)
    points = curves[..., :-1, None, :] + offsets[:, None] * steps[..., None, :]
    vectors = np.broadcast_to(steps[..., None, :], points.shape)
    return np.einsum("...d,...d->...", vectors, field.metric_vector_product(vectors, points))
