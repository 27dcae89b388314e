r"""Geodesic numerics on a smooth :class:`~riemlocal.fields.MetricField`.

* **Log / distance** (boundary-value problem): minimize the discrete curve energy

  .. math::
      E(c_0, \dots, c_N) = N \sum_{i=0}^{N-1} d_i^T M(m_i)\, d_i, \qquad
      d_i = c_{i+1} - c_i,\ m_i = \tfrac12 (c_i + c_{i+1}),

  over the interior nodes with L-BFGS and the analytic gradient, in variables
  preconditioned by the Euclidean Hessian :math:`2N\,(\Delta \otimes \bar M)`
  (the discrete Laplacian :math:`\Delta` is diagonalized by a DST-I). The
  midpoint rule is second order, so the solve is repeated on a curve with
  twice the nodes and the length and initial velocity are Richardson
  extrapolated (fourth order).
* **Exp** (initial-value problem): Dormand--Prince integration of
  :math:`c'' = -\Gamma(c', c')` (:meth:`MetricField.geodesic_acceleration`).

References: Hauberg, Freifeld & Black, *A Geometric Take on Metric Learning*,
NIPS 2012, sec. 3.1 (with the corrected geodesic equation; see DESIGN.md).
"""

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from sklearn.exceptions import ConvergenceWarning

from .utils.optimize import batched_lbfgs

__all__ = ["curve_energy", "BoundaryValueResult", "solve_boundary_value", "integrate_geodesic"]


def curve_energy(field, curves):
    r"""Discrete energy of curves and its gradient with respect to every node.

    Parameters
    ----------
    field : MetricField
    curves : ndarray of shape (..., N + 1, dim)
        Nodes :math:`c_0, \dots, c_N` of piecewise-linear curves on :math:`t \in [0, 1]`.

    Returns
    -------
    energy : ndarray of shape (...)
        :math:`N \sum_i d_i^T M(m_i) d_i`, which approximates :math:`\int_0^1 c'^T M(c) c'\,dt`.
    gradient : ndarray of shape (..., N + 1, dim)
    """
    n_segments = curves.shape[-2] - 1
    steps = np.diff(curves, axis=-2)
    metric_steps, quadratic_gradients = field.segment_energy_terms(curves)
    energy = n_segments * np.einsum("...nd,...nd->...", steps, metric_steps)
    gradient = np.zeros_like(curves)
    gradient[..., 1:, :] += 2.0 * n_segments * metric_steps
    gradient[..., :-1, :] -= 2.0 * n_segments * metric_steps
    gradient[..., 1:, :] += 0.5 * n_segments * quadratic_gradients
    gradient[..., :-1, :] += 0.5 * n_segments * quadratic_gradients
    return energy, gradient


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
        L-BFGS iterations of the slowest pair, summed over both resolutions.
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


_UNRESOLVED = 1e-8  # pairs this close (relative to their coordinates) are straight to round-off


def _minimize_energy(field, curves, factors, tol, max_iter):
    """Minimize the energy over the interior nodes of ``curves`` (modified in place).

    Pair :math:`b` minimizes :math:`E_b / E^0_b` (its energy relative to the
    starting curve's) in variables :math:`z_b` with
    :math:`c_b = c^0_b + \\sqrt{E^0_b}\\, T_b z_b`,
    :math:`T_b = (2N)^{-1/2}\\, S \\Lambda^{-1/2} S \\otimes L_b^{-T}`, where
    :math:`S` is the orthonormal DST-I and :math:`\\bar M_b = L_b L_b^T`: the
    Hessian in :math:`z` is the identity for a constant metric, whatever the
    length of each pair. Pairs closer than round-off allows to resolve
    (``_UNRESOLVED``, relative to their coordinates) keep the straight line,
    which is then exact to that level. Each pair runs its own L-BFGS
    iterations and line search (:func:`~riemlocal.utils.optimize.batched_lbfgs`),
    so finished pairs are no longer evaluated.
    """
    span = np.abs(curves[:, -1] - curves[:, 0]).max(axis=-1)
    scale = 1.0 + np.abs(curves[:, [0, -1]]).max(axis=(1, 2))
    active = span > _UNRESOLVED * scale
    if not np.all(active):
        if not np.any(active):
            return 0, 0.0, True
        subset = curves[active]
        result = _minimize_energy(field, subset, factors[active], tol, max_iter)
        curves[active] = subset
        return result
    batch, n_nodes, dim = curves.shape
    n_segments = n_nodes - 1
    preconditioner = laplacian_inverse_sqrt(n_segments) / np.sqrt(2.0 * n_segments)
    inverse_factors = np.linalg.inv(factors)  # L^{-1}, (batch, dim, dim)
    start = curves.copy()
    start_energy = curve_energy(field, start)[0]
    normalizer = np.where(start_energy > 0, start_energy, 1.0)
    lengths = np.sqrt(normalizer)[:, None, None]  # per pair, indexed by rows

    def to_curves(z, rows):
        z = lengths[rows] * z.reshape(len(z), n_segments - 1, dim)
        full = start[rows].copy()
        full[:, 1:-1, :] += (preconditioner @ z) @ inverse_factors[rows]  # L^{-T} at each node
        return full

    def objective(z, rows):
        energy, gradient = curve_energy(field, to_curves(z, rows))
        inner = gradient[:, 1:-1, :] @ inverse_factors[rows].transpose(0, 2, 1)  # L^{-1} g
        return energy / normalizer[rows], ((preconditioner @ inner) / lengths[rows]).reshape(len(z), -1)

    z, n_iter, grad_norms = batched_lbfgs(objective, np.zeros((batch, (n_segments - 1) * dim)), tol, max_iter)
    curves[:] = to_curves(z, slice(None))
    grad_norm = float(grad_norms.max(initial=0.0))
    return n_iter, grad_norm, grad_norm <= 10 * tol


def _refine(curves):
    """Insert the midpoint of every segment: N segments -> 2N segments."""
    batch, n_nodes, dim = curves.shape
    fine = np.empty((batch, 2 * n_nodes - 1, dim))
    fine[:, ::2] = curves
    fine[:, 1::2] = 0.5 * (curves[:, 1:] + curves[:, :-1])
    return fine


def _length_and_velocity(field, curves):
    r"""Length :math:`\sqrt{E}` (a minimizer has constant speed) and initial velocity.

    The velocity comes from the discrete Legendre transform of the midpoint
    variational integrator: the momentum at the first node,
    :math:`p_0 = -\partial E / \partial c_0`, matches the continuous momentum
    :math:`2 M(c_0) c'(0)` to second order (in even powers of :math:`1/N`, so
    the Richardson step makes it fourth order).
    """
    energy, gradient = curve_energy(field, curves)
    momentum = -0.5 * gradient[:, 0]
    velocity = np.linalg.solve(field.metric_matrix(curves[:, 0]), momentum[..., None])[..., 0]
    return np.sqrt(np.maximum(energy, 0.0)), velocity


def solve_boundary_value(field, point, base_point, n_nodes=16, tol=1e-7, max_iter=2000):
    """Geodesics from ``base_point`` to ``point`` by discrete energy minimization.

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
        L-BFGS iterations per resolution.

    Returns
    -------
    BoundaryValueResult
    """
    t = np.linspace(0.0, 1.0, n_nodes + 1)[None, :, None]
    curves = base_point[:, None, :] + t * (point - base_point)[:, None, :]
    factors = np.linalg.cholesky(field.metric_matrix(0.5 * (point + base_point)))
    n_iter, grad_norm, converged = _minimize_energy(field, curves, factors, tol, max_iter)
    coarse_length, coarse_velocity = _length_and_velocity(field, curves)
    fine = _refine(curves)
    fine_iter, fine_norm, fine_converged = _minimize_energy(field, fine, factors, tol, max_iter)
    fine_length, fine_velocity = _length_and_velocity(field, fine)
    converged = converged and fine_converged
    if not converged:
        warnings.warn(
            f"geodesic energy minimization did not converge (L-BFGS stopped after {n_iter} + {fine_iter} "
            f"iterations, max_iter={max_iter} each): preconditioned gradient norm "
            f"{max(grad_norm, fine_norm):.3g} > tol={tol:.3g}",
            ConvergenceWarning,
            stacklevel=3,
        )
    return BoundaryValueResult(
        curves=fine,
        initial_velocity=(4.0 * fine_velocity - coarse_velocity) / 3.0,
        length=(4.0 * fine_length - coarse_length) / 3.0,
        n_iter=n_iter + fine_iter,
        gradient_norm=max(grad_norm, fine_norm),
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
