r"""Geodesic numerics on a smooth :class:`~riemlocal.fields.MetricField`.

* **Log / distance** (boundary-value problem): minimize the discrete curve energy

  .. math::
      E(c_0, \dots, c_N) = N \sum_{i=0}^{N-1} d_i^T M(m_i)\, d_i, \qquad
      d_i = c_{i+1} - c_i,\ m_i = \tfrac12 (c_i + c_{i+1}),

  over the interior nodes, in variables preconditioned by the Euclidean
  Hessian :math:`2N\,(\Delta \otimes \bar M)` (the discrete Laplacian
  :math:`\Delta` is diagonalized by a DST-I): by Newton's method on the
  block-tridiagonal Hessian in low dimension, by L-BFGS with the analytic
  gradient above (Nocedal & Wright, *Numerical Optimization*, ch. 3 and 7). The
  midpoint rule is second order, so the solve is repeated on a curve with
  twice the nodes and the length and initial velocity are Richardson
  extrapolated (fourth order).
* **Exp** (initial-value problem): Dormand--Prince integration of
  :math:`c'' = -\Gamma(c', c')` (:meth:`MetricField.geodesic_acceleration`).

References: Hauberg, Freifeld & Black, *A Geometric Take on Metric Learning*,
NIPS 2012, sec. 3.1 (with the corrected geodesic equation; see DESIGN.md).
"""

import functools
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.linalg.lapack import dpbsv
from sklearn.exceptions import ConvergenceWarning

from .utils.optimize import batched_lbfgs, batched_newton
from .utils.validation import check_option

__all__ = ["curve_energy", "BoundaryValueResult", "solve_boundary_value", "integrate_geodesic"]


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


def _upper_band(diagonal, upper):
    """LAPACK upper band storage (``kd = 2 dim - 1``) of symmetric block-tridiagonal matrices.

    ``diagonal`` ``(batch, n, dim, dim)`` and ``upper`` ``(batch, n - 1, dim, dim)``
    give ``(batch, 2 dim, n dim)`` with ``band[kd + i - j, j] = H[i, j]`` for ``i <= j``.
    """
    batch, n, dim, _ = diagonal.shape
    band = np.zeros((batch, 2 * dim, n * dim))
    (rows, columns, a, c), (upper_rows, upper_columns, ua, uc) = _band_positions(n, dim)
    band[:, rows, columns] = diagonal[:, :, a, c]
    band[:, upper_rows, upper_columns] = upper[:, :, ua, uc]
    return band


@functools.lru_cache(maxsize=64)
def _band_positions(n, dim):
    """Where :func:`_upper_band` puts the entries ``[a, c]`` (``a <= c``) of diagonal blocks and all of upper ones."""
    kd = 2 * dim - 1
    a, c = np.triu_indices(dim)
    ua, uc = np.indices((dim, dim)).reshape(2, -1)
    return (
        (kd + a - c, dim * np.arange(n)[:, None] + c, a, c),
        (kd - dim + ua - uc, dim * np.arange(1, n)[:, None] + uc, ua, uc),
    )


def _solve_band_spd(band, rhs):
    """Solve each system ``band[b] x = rhs[b]`` (LAPACK ``dpbsv``); also returns which were not positive definite."""
    solution, indefinite = np.zeros_like(rhs), np.zeros(len(rhs), dtype=bool)
    for b in range(len(rhs)):
        _, x, info = dpbsv(band[b], rhs[b])
        indefinite[b] = info != 0
        if info == 0:
            solution[b] = x
    return solution, indefinite


@dataclass
class BoundaryValueResult:
    """Geodesics between pairs of points.

    Attributes
    ----------
    curves : ndarray of shape (batch, n_nodes + 1, dim)
        Nodes of the finest discrete geodesics, equally spaced in :math:`t \\in [0, 1]`.
    initial_velocity : ndarray of shape (batch, dim)
        :math:`c'(0) = \\mathrm{Log}_x(y)`.
    length : ndarray of shape (batch,)
        Geodesic distance.
    n_iter : int
        Iterations of the slowest pair, summed over both resolutions.
    gradient_norm : float
        Largest preconditioned gradient norm at termination (relative to the energy).
    converged : bool
    """

    curves: np.ndarray
    initial_velocity: np.ndarray
    length: np.ndarray
    n_iter: int
    gradient_norm: float
    converged: bool


def laplacian_inverse_sqrt(n_segments):
    r""":math:`\Delta^{-1/2}` of the (n_segments - 1)-node Dirichlet Laplacian tridiag(-1, 2, -1).

    The orthonormal DST-I basis :math:`S_{jk} = \sqrt{2/N} \sin(\pi jk/N)`
    diagonalizes :math:`\Delta` with eigenvalues :math:`2 - 2\cos(\pi k/N)`,
    so :math:`\Delta^{-1/2} = S \Lambda^{-1/2} S`: a small symmetric matrix,
    applied along the node axis of curves in one product (for the tens of
    nodes used here, faster than two fast sine transforms). It is the
    preconditioner of discrete curve energies.
    """
    k = np.arange(1, n_segments)
    basis = np.sqrt(2.0 / n_segments) * np.sin(np.pi * np.outer(k, k) / n_segments)
    return (basis / np.sqrt(2.0 - 2.0 * np.cos(np.pi * k / n_segments))) @ basis


METHODS = ("auto", "newton", "lbfgs")  #: energy minimizers of solve_boundary_value
_UNRESOLVED = 1e-8  # pairs this close (relative to their coordinates) are straight to round-off
_NEWTON_MAX_DIM = 8  # "auto" takes Newton up to this dimension (above, L-BFGS is faster: benchmarks/bench_geodesics.py)
_DAMPING = 10.0 ** np.arange(-3, 5)  # Levenberg--Marquardt shifts tried where the energy Hessian is indefinite


def _minimize_energy(field, curves, factors, tol, max_iter, method):
    """Minimize the energy over the interior nodes of ``curves`` (modified in place).

    Pair :math:`b` minimizes :math:`E_b / E^0_b`, with
    :math:`E^0_b = \\|L_b^T (c_N - c_0)\\|^2` the energy of the straight line in
    the metric :math:`\\bar M_b = L_b L_b^T` (``factors``), in variables
    :math:`z_b` with :math:`c_b = c^0_b + \\sqrt{E^0_b}\\, T_b z_b`,
    :math:`T_b = (2N)^{-1/2}\\, S \\Lambda^{-1/2} S \\otimes L_b^{-T}`, where
    :math:`S` is the orthonormal DST-I: the Hessian in :math:`z` is the
    identity for the constant metric :math:`\\bar M_b`, whatever the length of
    each pair, and ``tol`` applies to the gradient in :math:`z`. Pairs closer
    than round-off allows to resolve (``_UNRESOLVED``, relative to their
    coordinates) keep the straight line, which is then exact to that level.
    Each pair runs its own iterations and line search
    (:mod:`riemlocal.utils.optimize`), so finished pairs are no longer evaluated.

    ``method="newton"`` solves the block-tridiagonal Newton system
    (:func:`curve_energy` with ``hessian=True``) for each pair by a banded
    Cholesky factorization, in :math:`O(N\\,D^3)`; where the Hessian is not
    positive definite it is shifted by :math:`\\mu\\, 2N (\\Delta \\otimes \\bar M_b)`
    (Levenberg--Marquardt, the smallest :math:`\\mu` in ``_DAMPING`` that works).
    ``method="lbfgs"`` needs first derivatives only.

    Returns the energies of the final curves, the iterations and the largest gradient norm.
    """
    span = np.abs(curves[:, -1] - curves[:, 0]).max(axis=-1)
    scale = 1.0 + np.abs(curves[:, [0, -1]]).max(axis=(1, 2))
    active = span > _UNRESOLVED * scale
    if not np.all(active):
        energy = curve_energy(field, curves)[0]
        if not np.any(active):
            return energy, 0, 0.0
        subset = curves[active]
        energy[active], *result = _minimize_energy(field, subset, factors[active], tol, max_iter, method)
        curves[active] = subset
        return (energy, *result)
    batch, n_nodes, dim = curves.shape
    n_segments = n_nodes - 1
    preconditioner = laplacian_inverse_sqrt(n_segments) / np.sqrt(2.0 * n_segments)
    inverse_factors = np.linalg.inv(factors)  # L^{-1}, (batch, dim, dim)
    start = curves.copy()
    normalizer = np.sum(((curves[:, -1] - curves[:, 0])[:, None, :] @ factors)[:, 0] ** 2, axis=-1)
    lengths = np.sqrt(normalizer)[:, None, None]  # per pair, indexed by rows
    newton = method == "newton"

    def to_curves(z, rows):
        z = lengths[rows] * z.reshape(len(z), n_segments - 1, dim)
        full = start[rows].copy()
        full[:, 1:-1, :] += (preconditioner @ z) @ inverse_factors[rows]  # L^{-T} at each node
        return full

    def objective(z, rows):
        energy, gradient, *hessian = curve_energy(field, to_curves(z, rows), hessian=newton)
        inner = gradient[:, 1:-1, :] @ inverse_factors[rows].transpose(0, 2, 1)  # L^{-1} g
        return energy / normalizer[rows], ((preconditioner @ inner) / lengths[rows]).reshape(len(z), -1), *hessian

    inverse_preconditioner = np.linalg.inv(preconditioner)
    laplacian = 2.0 * n_segments * np.array([2.0, -1.0])  # diagonal and off-diagonal blocks of 2N (Delta (x) M_bar)

    def newton_step(z, rows, gradient_z, diagonal, upper):
        factor = factors[rows]
        # back from z to the nodes: T^{-1} = sqrt(2N) Delta^{1/2} (x) L^T, and grad E = sqrt(E^0) T^{-T} grad_z
        nodes = inverse_preconditioner @ gradient_z.reshape(len(z), -1, dim)
        rhs = -(lengths[rows] * nodes @ factor.transpose(0, 2, 1)).reshape(len(z), -1)
        step, indefinite = _solve_band_spd(_upper_band(diagonal, upper), rhs)
        mean_metric = factor @ factor.transpose(0, 2, 1)
        for shift in _DAMPING:
            if not indefinite.any():
                break
            pending = np.flatnonzero(indefinite)
            scaled = shift * laplacian[:, None, None, None, None] * mean_metric[pending, None]
            band = _upper_band(diagonal[pending] + scaled[0], upper[pending] + scaled[1])
            step[pending], indefinite[pending] = _solve_band_spd(band, rhs[pending])
        step = step.reshape(len(z), -1, dim)
        return ((inverse_preconditioner @ step) @ factor / lengths[rows]).reshape(len(z), -1)

    z0 = np.zeros((batch, (n_segments - 1) * dim))
    if newton:
        z, value, n_iter, grad_norms = batched_newton(objective, newton_step, z0, tol, max_iter)
    else:
        z, value, n_iter, grad_norms = batched_lbfgs(objective, z0, tol, max_iter)
    curves[:] = to_curves(z, slice(None))
    return value * normalizer, n_iter, float(grad_norms.max(initial=0.0))


def _refine(curves):
    """Insert the midpoint of every segment: N segments -> 2N segments."""
    batch, n_nodes, dim = curves.shape
    fine = np.empty((batch, 2 * n_nodes - 1, dim))
    fine[:, ::2] = curves
    fine[:, 1::2] = 0.5 * (curves[:, 1:] + curves[:, :-1])
    return fine


def _initial_velocity(field, curves, base_metric):
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
    return np.linalg.solve(base_metric, momentum[..., None])[..., 0]


def solve_boundary_value(field, point, base_point, n_nodes=16, tol=1e-7, max_iter=2000, method="auto"):
    """Geodesics from ``base_point`` to ``point`` by discrete energy minimization.

    The length of a minimizer is :math:`\\sqrt{E}` (it has constant speed).
    Lengths and initial velocities at ``n_nodes`` and ``2 n_nodes`` segments
    are Richardson extrapolated.

    Parameters
    ----------
    field : MetricField
        A smooth field.
    point, base_point : ndarray of shape (batch, dim)
    n_nodes : int, default=16
        Segments (>= 2) of the coarse curve; the fine curve has twice as many.
    tol : float, default=1e-7
        Tolerance on the preconditioned, energy-normalized gradient.
    max_iter : int, default=2000
        Iterations per resolution.
    method : {"auto", "newton", "lbfgs"}, default="auto"
        Newton's method on the block-tridiagonal energy Hessian (quadratic
        convergence, :math:`O(N D^3)` per step) or L-BFGS (gradients only,
        :math:`O(N D^2)` per step). ``"auto"`` takes Newton up to
        ``dim = 8``, where it is the faster one.

    Returns
    -------
    BoundaryValueResult
    """
    if check_option(method, "method", METHODS) == "auto":
        method = "newton" if field.dim <= _NEWTON_MAX_DIM else "lbfgs"
    t = np.linspace(0.0, 1.0, n_nodes + 1)[None, :, None]
    curves = base_point[:, None, :] + t * (point - base_point)[:, None, :]
    factors = np.linalg.cholesky(field.metric_matrix(0.5 * (point + base_point)))
    base_metric = field.metric_matrix(base_point)
    lengths, velocities, n_iter, grad_norm = [], [], [], []
    for level in range(2):
        if level:
            curves = _refine(curves)
        energy, iterations, norm = _minimize_energy(field, curves, factors, tol, max_iter, method)
        lengths.append(np.sqrt(np.maximum(energy, 0.0)))
        velocities.append(_initial_velocity(field, curves, base_metric))
        n_iter.append(iterations)
        grad_norm.append(norm)
    converged = max(grad_norm) <= 10 * tol
    if not converged:
        warnings.warn(
            f"geodesic energy minimization did not converge ({method} stopped after {n_iter[0]} + {n_iter[1]} "
            f"iterations, max_iter={max_iter} each): preconditioned gradient norm "
            f"{max(grad_norm):.3g} > tol={tol:.3g}",
            ConvergenceWarning,
            stacklevel=3,
        )
    return BoundaryValueResult(
        curves=curves,
        initial_velocity=(4.0 * velocities[1] - velocities[0]) / 3.0,
        length=(4.0 * lengths[1] - lengths[0]) / 3.0,
        n_iter=sum(n_iter),
        gradient_norm=max(grad_norm),
        converged=converged,
    )


def integrate_geodesic(field, tangent_vec, base_point, t_eval=(1.0,), rtol=1e-9, atol=1e-11, max_step=np.inf):
    """Integrate :math:`c'' = -\\Gamma(c', c')` from ``base_point`` with velocity ``tangent_vec``.

    Parameters
    ----------
    field : MetricField
    tangent_vec, base_point : ndarray of shape (batch, dim)
    t_eval : sequence of float
        Times (in [0, 1] for Exp) at which to return the curve.
    rtol, atol : float
        Tolerances of the Dormand--Prince (DOP853) integrator.

    Returns
    -------
    ndarray of shape (batch, len(t_eval), dim)
    """
    batch, dim = base_point.shape
    times, position = np.unique(np.asarray(t_eval, dtype=float), return_inverse=True)
    t_end = float(times.max(initial=0.0))
    if t_end <= 0.0:
        return np.broadcast_to(base_point[:, None, :], (batch, len(position), dim)).copy()

    def rhs(_, state):
        position, velocity = state.reshape(2, batch, dim)
        return np.concatenate([velocity.ravel(), field._acceleration(velocity, position).ravel()])

    state0 = np.concatenate([base_point.ravel(), tangent_vec.ravel()])
    solution = solve_ivp(rhs, (0.0, t_end), state0, method="DOP853", t_eval=times, rtol=rtol, atol=atol, max_step=max_step)
    if solution.status != 0:
        raise RuntimeError(f"geodesic integration failed: {solution.message}")
    positions = np.moveaxis(solution.y[: batch * dim].reshape(batch, dim, len(times)), -1, 1)
    return positions[:, position]
