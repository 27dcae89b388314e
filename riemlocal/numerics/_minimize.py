r"""The energy-minimization core: discrete curve energies with fixed and free nodes, at doubling resolutions.

Log, distance and the joint Fréchet mean all minimize weighted sums of
discrete curve energies (:func:`~riemlocal.numerics.curve_energy`):
:func:`minimize_curve_energy` does it at one resolution, by Newton's method
or L-BFGS (:mod:`riemlocal.utils.optimize`), and :func:`extrapolate_levels`
repeats it at :math:`N, 2N, 4N, \dots` segments, warm started, with Romberg
extrapolation and an error estimate.

References: Nocedal & Wright, *Numerical Optimization*, 2nd ed., ch. 3 and 7;
Hauberg, Freifeld & Black, *A Geometric Take on Metric Learning*, NIPS 2012, sec. 3.1.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dpbsv, dtrtri

from ..utils.compiled import refcount_free
from ..utils.optimize import batched_lbfgs, batched_newton
from ..utils.validation import check_option
from ._energy import curve_energy, laplacian_inverse_sqrt, refine, trapezoid_energy

__all__ = [
    "METHODS",
    "EnergyMinimum",
    "Extrapolation",
    "mean_metric_factors",
    "minimize_curve_energy",
    "extrapolate_levels",
    "geometric_error",
    "resolve_method",
    "COMPILED_NEWTON_MAX_DIM",
    "LENGTHS_NEWTON_MAX_DIM",
    "NEWTON_MAX_WORK",
    "NODE_CHART_MAX_DIM",
]

METHODS = ("auto", "newton", "lbfgs")  #: energy minimizers
NEWTON_MAX_DIM = 8  # "auto" takes Newton up to this dimension (above, L-BFGS is faster on batches: benchmarks/bench_geodesics.py)
COMPILED_NEWTON_MAX_DIM = 20  # ... compiled Logs (a field with a capability, one pair at a time): Newton beats batched numpy
# L-BFGS up to dim = 20 (R = 10, bench_geodesics.random_field; ms for 16 / 64 pairs, Newton vs L-BFGS: 11 vs 30 / 43 vs 70 at 17,
# 15 vs 21 / 60 vs 74 at 20, 20 vs 17 / 81 vs 70 at 24; again, beside another job: 23 vs 43 / 93 vs 142 at 20, 32 vs 37 / 129 vs 132 at 24)
COMPILED_LENGTHS_NEWTON_MAX_DIM = 17  # ... compiled lengths alone, where L-BFGS needs fewer levels: 4.6 vs 10 / 17 vs 42 at 10,
# 11 vs 19 / 43 vs 52 at 17, 15 vs 14 / 60 vs 52 at 20 (beside another job: 23 vs 29 / 93 vs 90 at 20)
LENGTHS_NEWTON_MAX_DIM = 7  # ... numpy Newton for lengths alone: batched L-BFGS in the node chart is faster above
NEWTON_MAX_WORK = 20**3  # ... and for problems * dim^3 up to this: a few problems pay per-iteration overhead, not O(dim^3)
NODE_CHART_MAX_DIM = 20  # lengths take the node chart up to this dimension (256 pairs: 0.83x the time at D = 10 and 20, 1.05x at 30)
CHART_SAMPLES = 2  # the node chart factors the metric at this many + 1 nodes of each curve (8: as many iterations, 1.1x the time; 1: 1.1-1.3x the iterations)
ERROR_SAFETY = 2.0  # error estimates are this multiple of the last Romberg correction (extrapolate_levels)
RESOLVED_RATIO = 3.0  # the quadrature gap falls by 4 per level where the metric is resolved, by 2 where it is not
STALL_FACTOR = 10.0  # a minimization whose gradient norm ends above STALL_FACTOR * tol did not converge
COARSE_TOL_FACTOR = 100.0  # the coarsest level weighs 1/45 in the extrapolation: it is minimized to this times tol
RATE_NOISE = 1e-11  # raw level values closer than this fraction of them are rounding apart: no rate is read (geometric_error)
# ... and raw levels whose changes fall by 4 within this are in Romberg's regime (3,120 pairs of bench_geodesics' fields,
# D = 2, 5, 10, seeds 1-4, levels 8-256: none certified above rtol, 1.8% more segments; at 0.5, one at 1.2 rtol)
RATE_SLACK = 0.25
# a problem accepted from the third level on whose Log vector's relative error estimate exceeds this times rtol solves
# the next (levels that disagree on the Log vector are short of the expansion's regime, and their lengths can agree by
# coincidence): on benchmarks/bench_certificate.py's 3,420 Wishart-field pairs the distances certified more than rtol
# off fell from 26 (up to 8.3 rtol) to 9 (3.3) with the guard at the third level alone; 262 of its 6,540 pairs took
# more levels (255 one more), and distances of bench_geodesics' fields cost 2-3% more at D = 2 and 10 (none measurable
# at 20). Past the third level the Log estimate should have fallen like the square of the segments' length, so the
# guard there is 4 times that of the level before (guard_level): wine's per-class LMNN field at max_condition=1000 had
# directions certified at 64 segments 4.2-6.7 rtol off (Log estimates 42-90 rtol, within log_rtol), all within
# 0.16 rtol with it. With 5 rtol at every level, the matrices of bench_learned_fields at max_condition=100 took up to
# 1.7 times as long (digits 17.7 against 10.1-10.3 s, wine 13.6 against 7.7-8.5 s): pairs pushed to 128 segments count
# as hard and are searched
LOG_GUARD = 5.0


@refcount_free
def guard_level(level):
    """``LOG_GUARD`` at the level (counted from 0; the third is 2), times 4 for every level past the third."""
    return LOG_GUARD * 4.0 ** (level - 2)


UNRESOLVED = 1e-8  #: curves this short (relative to their coordinates) stay straight: round-off hides their geometry
_DAMPING = 10.0 ** np.arange(-3, 5)  # Levenberg--Marquardt shifts tried where the energy Hessian is indefinite


@refcount_free
def geometric_error(older, previous, current, value):
    r"""How far ``value`` lies from the limit of raw level values ``older``, ``previous``, ``current`` that converge
    geometrically, where their rate is not Romberg's.

    With :math:`d_1 = T_{k-1} - T_{k-2}`, :math:`d_2 = T_k - T_{k-1}` and the ratio :math:`\rho = d_1 / d_2`,
    the limit of a geometric sequence (alternating where :math:`\rho < 0`) is :math:`T_k + d_2 / (\rho - 1)`
    (Aitken's :math:`\Delta^2`); returns :math:`|` ``value`` :math:`-` limit :math:`|`, infinite where :math:`|\rho| \le 1`
    (the levels do not converge), and 0 where :math:`|\rho - 4| \le` ``RATE_SLACK`` or :math:`|d_2| \le`
    ``RATE_NOISE`` :math:`|T_k|` (rounding). Romberg's estimate, ``ERROR_SAFETY`` times :math:`|T_{k,2} - T_{k,1}|`
    (:func:`extrapolate_levels`), assumes errors in even powers of :math:`1/N`, whose ratio tends to 4. Coarse
    levels can be short of that regime: for errors that fall by a constant :math:`\rho` per level, it is
    :math:`2 (\rho - 1) / (16 - \rho)` times the error of :math:`T_{k,2}` (0.59 at the 4.42 of a pair on a smooth
    2-D field at 8, 16 and 32 segments, certified with a true error of 1.2 ``rtol``), while this distance is that
    error. Near 4 the limit is not the better model: at 3.87 (16, 32 and 64 segments, another pair) it was
    100 times the true error, which Romberg's estimate bounded.
    """
    change, before = current - previous, previous - older
    if abs(change) <= RATE_NOISE * abs(current):
        return 0.0
    ratio = before / change
    if abs(ratio - 4.0) <= RATE_SLACK:
        return 0.0
    if not abs(ratio) > 1.0:
        return math.inf
    return abs(value - (current + change / (ratio - 1.0)))


def resolve_method(method, dim, free_start=False, n_problems=None, compiled=False, lengths_only=False):
    """``"newton"`` or ``"lbfgs"`` for ``method`` in :data:`METHODS`.

    ``"auto"`` takes Newton (fixed first nodes only) up to ``dim = 8``
    (when ``compiled``, the compiled Log of the RBF fields: ``COMPILED_NEWTON_MAX_DIM = 20``,
    ``COMPILED_LENGTHS_NEWTON_MAX_DIM = 17`` for ``lengths_only``; else ``LENGTHS_NEWTON_MAX_DIM = 7``
    for ``lengths_only``, where L-BFGS runs in the node chart: :func:`extrapolate_levels`), and for
    ``n_problems * dim**3 <= NEWTON_MAX_WORK`` (one
    pair up to ``dim = 20``): Newton converges in about three energy
    evaluations per level where L-BFGS needs eight or more, which decides small batches.
    """
    if check_option(method, "method", METHODS) == "auto":
        small = n_problems is not None and n_problems * dim**3 <= NEWTON_MAX_WORK
        if compiled:
            largest = COMPILED_LENGTHS_NEWTON_MAX_DIM if lengths_only else COMPILED_NEWTON_MAX_DIM
        else:
            largest = LENGTHS_NEWTON_MAX_DIM if lengths_only else NEWTON_MAX_DIM
        return "newton" if (dim <= largest or small) and not free_start else "lbfgs"
    if method == "newton" and free_start:
        raise ValueError("method='newton' needs fixed first nodes (free_start=False); use 'lbfgs' or 'auto'")
    return method


@dataclass
class EnergyMinimum:
    """Minimized curves of :func:`minimize_curve_energy`.

    Attributes
    ----------
    curves : ndarray of shape (n_problems, n_curves, N + 1, dim)
    energy : ndarray of shape (n_problems,)
        :math:`\\sum_i p_i E(c_i)` of each problem.
    n_iter : int
        Iterations of the slowest problem.
    gradient_norm : ndarray of shape (n_problems,)
        Final preconditioned gradient norm (relative to the energy); at most ``tol`` when converged.
    """

    curves: np.ndarray
    energy: np.ndarray
    n_iter: int
    gradient_norm: np.ndarray


def mean_metric_factors(field, curves, weights):
    """Cholesky factors :math:`L_b` of :math:`\\bar M_b` at the weighted centroid of each problem's nodes, and their inverses."""
    centroids = np.einsum("pc,pcnd->pd", weights, curves) / curves.shape[2]
    factors = np.linalg.cholesky(field.metric_matrix(centroids))
    inverses = np.empty_like(factors)
    for b, factor in enumerate(factors):  # LAPACK dtrtri: a third of the work of a general inverse (D = 1000: 20 vs 57 ms)
        inverses[b] = dtrtri(factor, lower=1)[0]
    return factors, inverses


def minimize_curve_energy(
    field, curves, weights=None, free_start=False, method="auto", tol=1e-7, max_iter=2000, factors=None, node_chart=False
):
    r"""Minimize :math:`\sum_i p_{bi} E(c_{bi})` of every problem :math:`b` over its free nodes.

    The free nodes are the interior nodes of every curve and, with
    ``free_start``, the first node, shared by all curves of a problem (the
    Fréchet mean: ``curves[b, i, 0]`` are then equal); the last nodes are fixed.
    Problem :math:`b` minimizes :math:`f_b = \sum_i p_{bi} E(c_{bi}) / E^0_b`,
    :math:`E^0_b = \sum_i p_{bi} \|L_b^T (c_{biN} - c_{bi0})\|^2` (straight
    lines in the metric :math:`\bar M_b = L_b L_b^T` at the centroid of its
    nodes), in variables where :math:`f_b` of the constant metric
    :math:`\bar M_b` is the identity quadratic: interior offsets
    :math:`\sqrt{E^0_b / (2 N p_{bi})}\; S \Lambda^{-1/2} S\, z_{bi}\, L_b^{-1}`
    (:math:`S` the orthonormal DST-I, :func:`laplacian_inverse_sqrt`) and a
    shared shift :math:`\sqrt{E^0_b / 2}\; L_b^{-T} s_b` of the first node
    that drags node :math:`j` by :math:`(1 - j/N)`. ``tol`` applies to the
    gradient in these variables. Problems shorter than round-off allows to
    resolve keep their straight lines.

    ``method="newton"`` (fixed first nodes only) solves the block-tridiagonal
    Newton system (:func:`curve_energy` with ``hessian=True``) by a banded
    Cholesky factorization, :math:`O(N D^3)`; where the Hessian is not
    positive definite it is shifted by a multiple of the Hessian of the
    constant metric :math:`\bar M_b` (Levenberg--Marquardt, the smallest in
    ``_DAMPING`` that works). ``method="lbfgs"`` needs gradients only.

    With ``node_chart`` (L-BFGS only), the interior offsets are instead mapped
    by :math:`L_{bik}^{-1}`, the Cholesky factor of :math:`M` at node
    :math:`k` of the starting curve (factored at ``CHART_SAMPLES`` + 1 nodes
    along it, linearly interpolated between them): the energy of the metric
    frozen along the curve is then the identity quadratic up to a compact
    perturbation, where one constant factor leaves the spread of :math:`M`
    along the curve in the conditioning. L-BFGS takes about half the
    iterations on varying fields, for factorizations that pay off at small ``dim``.

    Parameters
    ----------
    field : MetricField
    curves : ndarray of shape (n_problems, n_curves, N + 1, dim)
        Starting curves (not modified).
    weights : ndarray of shape (n_problems, n_curves), default=None
        :math:`p_{bi} > 0`, summing to 1 per problem; default uniform.
    free_start : bool, default=False
    method : {"auto", "newton", "lbfgs"}, default="auto"
    tol : float, default=1e-7
    max_iter : int, default=2000
    factors : tuple of ndarray of shape (n_problems, dim, dim), default=None
        :math:`L_b` and :math:`L_b^{-1}` (:func:`mean_metric_factors`, the default), to reuse them across calls.
    node_chart : bool, default=False
        Map the interior offsets by the node-wise factors above (L-BFGS only).

    Returns
    -------
    EnergyMinimum
    """
    curves = np.array(curves, dtype=float)
    n_problems, n_curves, _, dim = curves.shape
    weights = np.full((n_problems, n_curves), 1.0 / n_curves) if weights is None else np.asarray(weights, dtype=float)
    method = resolve_method(method, dim, free_start, n_problems)
    ends = curves[:, :, [0, -1]]
    span = np.abs(ends[:, :, 1] - ends[:, :, 0]).max(axis=(1, 2))
    active = span > UNRESOLVED * (1.0 + np.abs(ends).max(axis=(1, 2, 3)))
    energy, gradient_norm, n_iter = np.zeros(n_problems), np.zeros(n_problems), 0
    if not active.all():
        energy[~active] = np.einsum("pc,pc->p", weights[~active], curve_energy(field, curves[~active])[0])
    if active.any():
        factors = mean_metric_factors(field, curves, weights) if factors is None else factors
        chart = _Chart(field, curves[active], weights[active], free_start, method, node_chart, *(f[active] for f in factors))
        z0 = np.zeros((int(active.sum()), chart.n_variables))
        if method == "newton":
            z, value, n_iter, gradient_norm[active] = batched_newton(chart.objective, chart.newton_step, z0, tol, max_iter)
        else:
            z, value, n_iter, gradient_norm[active] = batched_lbfgs(chart.objective, z0, tol, max_iter)
        curves[active] = chart.to_curves(z, slice(None))
        energy[active] = value * chart.normalizer
    return EnergyMinimum(curves, energy, n_iter, gradient_norm)


class _Chart:
    """The preconditioned variables of :func:`minimize_curve_energy` and the objective in them."""

    def __init__(self, field, curves, weights, free_start, method, node_chart, factors, inverse_factors):
        newton = method == "newton"
        self.field, self.start, self.weights, self.free_start, self.newton = field, curves, weights, free_start, newton
        _, n_curves, n_nodes, dim = curves.shape
        self.n_segments = n_nodes - 1
        self.factors, self.inverse_factors = factors, inverse_factors  # L and L^{-1}, (problems, dim, dim)
        straight = np.einsum("pcd,pde->pce", curves[:, :, -1] - curves[:, :, 0], self.factors)
        self.normalizer = np.einsum("pc,pc->p", weights, np.sum(straight**2, axis=-1))  # E^0
        self.lengths = np.sqrt(self.normalizer)
        self.curve_scales = self.lengths[:, None] / np.sqrt(2.0 * self.n_segments * weights)
        self.preconditioner = laplacian_inverse_sqrt(self.n_segments)
        self.inverse_preconditioner = laplacian_inverse_sqrt(self.n_segments, inverse=True) if newton else None
        self.taper = 1.0 - np.arange(n_nodes) / self.n_segments
        self.n_shift = dim if free_start else 0
        self.n_variables = self.n_shift + n_curves * (self.n_segments - 1) * dim
        self.sampled_inverses = None  # the node chart: L^{-1} at samples every `stride` nodes, hat weights between them
        if node_chart and not newton:
            self.stride = max(1, self.n_segments // CHART_SAMPLES)
            samples = np.minimum(np.arange(0, self.n_segments + self.stride, self.stride), self.n_segments)
            nodes = samples[:-1, None] + np.arange(1, self.stride + 1)  # node k = samples[j] + m of piece j, m = 1..stride
            hat = (nodes - samples[:-1, None]) / np.diff(samples)[:, None]
            self.hat = np.where(nodes < self.n_segments, hat, 0.0)[:, :, None]  # 0 beyond the last interior node
            self.sampled_inverses = np.linalg.inv(np.linalg.cholesky(field.metric_matrix(curves[:, :, samples])))

    def to_curves(self, z, rows):
        full = self.start[rows].copy()
        inverse_factors = self.inverse_factors[rows]
        if self.free_start:
            shift = np.einsum("pd,pde->pe", z[:, : self.n_shift], inverse_factors) * (self.lengths[rows, None] / np.sqrt(2.0))
            full += self.taper[:, None] * shift[:, None, None, :]
        offsets = z[:, self.n_shift :].reshape(len(z), full.shape[1], self.n_segments - 1, -1)
        offsets = self.curve_scales[rows][:, :, None, None] * (self.preconditioner @ offsets)
        full[:, :, 1:-1, :] += self._node_products(offsets, rows)
        return full

    def _node_products(self, vectors, rows, transpose=False):
        """Interior node vectors ``(k, n_curves, N - 1, dim)`` times :math:`L^{-1}` (``transpose``: :math:`L^{-T}`) of their node."""
        if self.sampled_inverses is None:
            inverse_factors = self.inverse_factors[rows]
            return vectors @ (np.swapaxes(inverse_factors, -1, -2) if transpose else inverse_factors)[:, None]
        sampled = self.sampled_inverses[rows]
        sampled = np.swapaxes(sampled, -1, -2) if transpose else sampled
        k, n_curves, n_interior, dim = vectors.shape
        pieces = np.zeros((k, n_curves, self.hat.size, dim))  # padded to whole pieces, one row per node
        pieces[:, :, :n_interior] = vectors
        pieces = pieces.reshape(k, n_curves, len(self.hat), self.stride, dim)
        out = (self.hat * pieces) @ sampled[:, :, 1:]  # L_k^{-1} = (1 - t) L_j^{-1} + t L_{j+1}^{-1}
        if self.stride > 1:  # (with one node per piece, t = 1)
            out += ((1.0 - self.hat) * pieces) @ sampled[:, :, :-1]
        return out.reshape(k, n_curves, -1, dim)[:, :, :n_interior]

    def objective(self, z, rows):
        energy, gradient, *hessian = curve_energy(self.field, self.to_curves(z, rows), hessian=self.newton)
        scale = self.weights[rows] / self.normalizer[rows, None]  # d f / d E_i
        value = np.einsum("pc,pc->p", scale, energy)
        gradient *= scale[:, :, None, None]
        inner = self._node_products(gradient[:, :, 1:-1, :], rows, transpose=True)
        parts = [(self.curve_scales[rows][:, :, None, None] * (self.preconditioner @ inner)).reshape(len(z), -1)]
        if self.free_start:
            shift_gradient = np.einsum("n,pcnd->pd", self.taper, gradient)
            shift_gradient = np.einsum("pde,pe->pd", self.inverse_factors[rows], shift_gradient)
            parts.insert(0, shift_gradient * (self.lengths[rows, None] / np.sqrt(2.0)))
        gradient_z = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
        if not self.newton:
            return value, gradient_z
        diagonal, upper = (block * scale[:, :, None, None, None] for block in hessian)
        return value, gradient_z, gradient[:, :, 1:-1, :], diagonal, upper

    def newton_step(self, z, rows, gradient_z, node_gradient, diagonal, upper):
        """Newton direction in z: solve the banded node-space system, map back by the inverse change of variables."""
        k, n_curves, n_interior, dim = node_gradient.shape
        rhs = -node_gradient.reshape(k, -1)
        step, indefinite = _solve_band_spd(_upper_band(*_blocks(diagonal, upper)), rhs)
        metric = self.factors[rows] @ np.swapaxes(self.factors[rows], -1, -2)
        reference = (2.0 * self.n_segments * self.weights[rows] / self.normalizer[rows, None])[:, :, None, None, None]
        for shift in _DAMPING:
            if not indefinite.any():
                break
            p = np.flatnonzero(indefinite)
            scaled = shift * reference[p] * metric[p, None, None]  # M_bar blocks of the constant-metric Hessian
            damped = _blocks(diagonal[p] + 2.0 * scaled, upper[p] - scaled)
            step[p], indefinite[p] = _solve_band_spd(_upper_band(*damped), rhs[p])
        nodes = step.reshape(k, n_curves, n_interior, dim) @ self.factors[rows][:, None]
        return ((self.inverse_preconditioner @ nodes) / self.curve_scales[rows][:, :, None, None]).reshape(k, -1)


def _blocks(diagonal, upper):
    """Diagonal and upper blocks ``(k, n_curves (N - 1), dim, dim)`` of a problem's node Hessian: curves do not couple."""
    k, n_curves, n_interior, dim, _ = diagonal.shape
    full_upper = np.zeros((k, n_curves, n_interior, dim, dim))
    full_upper[:, :, :-1] = upper
    return diagonal.reshape(k, -1, dim, dim), full_upper.reshape(k, -1, dim, dim)[:, :-1]
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
    """Solve each system ``band[b] x = rhs[b]`` (LAPACK ``dpbsv``); also returns which were not positive definite.

    The systems do not couple, so they are first solved as one banded system
    (their bands side by side: the zero-filled corners of each band are the
    zero coupling to the previous system), one LAPACK call instead of one per
    system; only when that fails are they solved one by one, to find the indefinite ones.
    """
    if len(rhs) > 1:
        _, joined, info = dpbsv(np.concatenate(band, axis=1), rhs.ravel())
        if info == 0:
            return joined.reshape(rhs.shape), np.zeros(len(rhs), dtype=bool)
    solution, indefinite = np.zeros_like(rhs), np.zeros(len(rhs), dtype=bool)
    for b in range(len(rhs)):
        _, x, info = dpbsv(band[b], rhs[b])
        indefinite[b] = info != 0
        if info == 0:
            solution[b] = x
    return solution, indefinite




@dataclass
class Extrapolation:
    """Result of :func:`extrapolate_levels`, per problem.

    Attributes
    ----------
    value : ndarray of shape (n_problems, n_measures)
        Romberg-extrapolated measures.
    error : ndarray of shape (n_problems, n_measures)
        Signed error estimate of ``value``: ``ERROR_SAFETY`` times the last Romberg correction
        (or the distance to a geometric limit, ``rate_checked``).
    curves : list of ndarray of shape (n_curves, n_segments + 1, dim)
        The finest minimized curves of each problem.
    n_segments : ndarray of int of shape (n_problems,)
        Segments of the finest level.
    n_iter : int
        Iterations summed over the levels (slowest problem of each).
    unresolved : ndarray of shape (n_problems,)
        0 where the metric is resolved along the finest curves: the relative
        gap between their :func:`trapezoid_energy` and their (midpoint)
        energy fell by at least ``RESOLVED_RATIO`` from the level before;
        elsewhere that gap (the Romberg estimate is then void).
    optimized : ndarray of bool of shape (n_problems,)
        Whether the minimization met ``tol`` at every level.
    """

    value: np.ndarray
    error: np.ndarray
    unresolved: np.ndarray
    curves: list
    n_segments: np.ndarray
    n_iter: int
    optimized: np.ndarray


def extrapolate_levels(
    field, curves, measure, accept, max_segments, *, weights=None, free_start=False, method, tol, max_iter, lengths_only=False, rate_checked=(), min_levels=3,
    doubtful=None,
):
    r"""Minimize at :math:`N, 2N, 4N, \dots` segments and Romberg-extrapolate a measure of the minimizers.

    Each level starts from the previous minimizer with a node inserted in
    every segment (:func:`refine`): the cubic through the four nearest nodes
    where Newton's method minimizes or only lengths are measured, else the
    midpoint (see ``lengths_only``). A measure of the minimizer at level
    :math:`k` (length, initial velocity, mean...) has an error expansion in
    even powers of :math:`1/N` (midpoint rule), so with
    :math:`T_{k,0}` = ``measure`` at level :math:`k`,

    .. math::
        T_{k,j} = T_{k,j-1} + \frac{T_{k,j-1} - T_{k-1,j-1}}{4^j - 1}, \qquad j \le \min(k, 2),

    is of order :math:`2j + 2`. The value is the last entry of the newest row
    and its error estimate ``ERROR_SAFETY`` times the difference to the entry
    before (the error of the lower-order value, Romberg's classical estimate,
    with a safety factor); for the measures ``rate_checked``, from the third level on,
    ``ERROR_SAFETY`` times the larger of that difference and the value's distance to
    the limit of the last three raw values read as a geometric sequence
    (:func:`geometric_error`): the classical estimate misses where the coarse levels
    are short of the expansion's regime. With ``min_levels`` above 3, from that level on
    the estimate also covers the change of the value from the level before (three levels
    can agree by coincidence); with three, the problems accepted from the third level on that
    ``doubtful(value, error, unresolved, rows, level)`` flags solve the next level (not where L-BFGS minimizes lengths
    alone: its leftover moves the other measures to first order). That expansion, and the estimate, hold only where
    the segments resolve the metric; where the relative gap between the
    trapezoid and the midpoint energy (:func:`trapezoid_energy`) does not
    fall like :math:`N^{-2}`, the gap is reported as ``unresolved``. From
    level ``min_levels`` on (the third by default), every problem for which ``accept(value, error,
    unresolved, rows)`` holds stops; the others are refined until their
    finest level would exceed ``max_segments``.

    Parameters
    ----------
    field : MetricField
    curves : ndarray of shape (n_problems, n_curves, N + 1, dim)
        Curves of the coarsest level (the starting point of its minimization).
    measure : callable
        ``measure(minimum, rows)`` -> ``(len(rows), n_measures)`` for an
        :class:`EnergyMinimum` of the problems ``rows`` (indices into the
        original problems).
    accept : callable
        ``accept(value, error, unresolved, rows)`` -> boolean ``(len(rows),)``.
    max_segments : int
    weights, free_start, method, tol, max_iter
        As for :func:`minimize_curve_energy`.
    rate_checked : tuple of int, default=()
        Indices of the measures whose error estimate also covers a geometric convergence.
    min_levels : int, default=3
        Levels solved before a problem may stop.
    doubtful : callable, optional
        ``doubtful(value, error, unresolved, rows, level)`` -> boolean ``(len(rows),)``: problems that need another
        level although ``accept`` holds, from the third (``level`` 2, counted from 0) on.
    lengths_only : bool, default=False
        Only energies (lengths) are measured. They are second order in the
        curves, so the minimizer's leftover does not matter to them: finer
        levels then start from the cubic :func:`refine` of the last minimizer,
        and L-BFGS runs in the node chart up to ``dim = NODE_CHART_MAX_DIM``
        (:func:`minimize_curve_energy`). Both change L-BFGS's leftover, to which a
        Log vector is sensitive to first order, so a Log by L-BFGS keeps the
        midpoints and one chart. Newton's leftover is quadratically small, and
        its Log levels start from the cubic too (about one step fewer per fine
        level, and the Log error estimate bounds the true error more often:
        97% of 200 pairs at D = 2 against 72% from midpoints).

    Returns
    -------
    Extrapolation

    Notes
    -----
    Mirrored in compiled code, with ``_Chart`` and Newton's method, by
    ``riemlocal.numerics._compiled_log`` (the Log of the RBF fields):
    keep both in step (``tests/test_compiled_log.py`` compares them).
    ``lengths_only`` (its node chart) is not mirrored: it serves
    batched L-BFGS, and the compiled Newton takes lengths, like Logs, only up to
    ``COMPILED_NEWTON_MAX_DIM``, where it converges in a few steps.
    """
    n_problems, n_curves = curves.shape[:2]
    weights = np.full((n_problems, n_curves), 1.0 / n_curves) if weights is None else np.asarray(weights, dtype=float)
    rows, n_segments, level, previous, n_iter = np.arange(n_problems), curves.shape[2] - 1, 0, None, 0
    value = error = previous_gap = older = None
    factors = mean_metric_factors(field, curves, weights)
    finest, segments, optimized = [None] * n_problems, np.zeros(n_problems, dtype=int), np.ones(n_problems, dtype=bool)
    unresolved = np.zeros(n_problems)
    node_chart = lengths_only and curves.shape[-1] <= NODE_CHART_MAX_DIM
    while True:
        level_tol = tol * (COARSE_TOL_FACTOR if level == 0 else 1.0)
        level_method = resolve_method(method, curves.shape[-1], free_start, len(rows), lengths_only=lengths_only)
        minimum = minimize_curve_energy(
            field, curves, weights[rows], free_start, level_method, level_tol, max_iter, tuple(f[rows] for f in factors), node_chart
        )
        n_iter += minimum.n_iter
        optimized[rows] &= minimum.gradient_norm <= STALL_FACTOR * level_tol
        row = [measure(minimum, rows)]
        for j in range(1, min(level, 2) + 1):
            row.append(row[j - 1] + (row[j - 1] - previous[j - 1]) / (4.0**j - 1.0))
        if value is None:
            value, error = np.empty((n_problems,) + row[0].shape[1:]), np.empty((n_problems,) + row[0].shape[1:])
        value[rows] = row[-1]
        error[rows] = ERROR_SAFETY * (row[-1] - row[-2]) if level else np.inf
        for k in rate_checked if level >= 2 else ():
            geometric = [geometric_error(*values) for values in zip(older[:, k], previous[0][:, k], row[0][:, k], row[-1][:, k])]
            error[rows, k] = np.copysign(np.maximum(np.abs(error[rows, k]), ERROR_SAFETY * np.array(geometric)), error[rows, k])
        if min_levels > 3 and level >= min_levels - 1:  # two consecutive sixth-order values
            error[rows] = np.copysign(np.maximum(np.abs(error[rows]), ERROR_SAFETY * np.abs(row[-1] - previous[-1])), error[rows])
        gap = None
        if level:  # the gap is compared from level 1 on
            gap = _quadrature_gap(field, minimum, weights[rows])
            unresolved[rows] = gap if level == 1 else np.where(previous_gap >= RESOLVED_RATIO * gap, 0.0, gap)
        segments[rows] = n_segments
        for i, curve in zip(rows, minimum.curves):
            finest[i] = curve
        done = np.full(len(rows), 2 * n_segments > max_segments)
        if level >= min_levels - 1:
            accepted = accept(value[rows], error[rows], unresolved[rows], rows)
            if level >= 2 and doubtful is not None and not (lengths_only and level_method == "lbfgs"):
                accepted &= ~doubtful(value[rows], error[rows], unresolved[rows], rows, level)
            done |= accepted
        if done.all():
            return Extrapolation(value, error, unresolved, finest, segments, n_iter, optimized)
        older = None if previous is None else previous[0][~done]  # the raw values two levels back
        rows, previous, previous_gap = rows[~done], [entry[~done] for entry in row], None if gap is None else gap[~done]
        curves, n_segments, level = refine(minimum.curves[~done], cubic=lengths_only or level_method == "newton"), 2 * n_segments, level + 1


def _quadrature_gap(field, minimum, weights):
    """Relative gap between the trapezoid and the midpoint energy of each problem's minimized curves (0 for no energy)."""
    gap = np.abs(np.einsum("pc,pc->p", weights, trapezoid_energy(field, minimum.curves)) - minimum.energy)
    return np.divide(gap, minimum.energy, out=np.zeros_like(gap), where=minimum.energy > 0)
