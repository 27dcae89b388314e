r"""Geodesic solver objects for a smooth :class:`~riemlocal.fields.MetricField` (geomstats' pattern).

* :class:`ODEExpSolver` -- Exp (initial-value problem): Dormand--Prince 5(4)
  integration, vectorized over geodesics with a step size per geodesic, of :math:`c'' = -\Gamma(c', c')` (:meth:`MetricField.geodesic_acceleration`).
* :class:`EnergyLogSolver` -- Log and distance (boundary-value problem):
  discrete energy minimization at doubling resolutions, Romberg
  extrapolated, refined until the estimated relative error of the distance
  meets ``rtol`` (:func:`~riemlocal.numerics.extrapolate_levels`).

A :class:`~riemlocal.manifold.LearnedMetric` holds one of each as
``exp_solver`` and ``log_solver`` and only forwards to them; either can be
replaced by any object with the same methods.

References: Hauberg, Freifeld & Black, *A Geometric Take on Metric Learning*,
NIPS 2012, sec. 3.1 (with the corrected geodesic equation: docs/concepts.rst, "Geodesics and the manifold").
"""

import copy
import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np
from joblib import effective_n_jobs
from scipy.sparse import coo_array
from scipy.sparse.csgraph import dijkstra
from sklearn.exceptions import ConvergenceWarning

from ..learners import CONDITION_WARNING, condition_numbers
from ..utils.arrays import unique_rows
from ..utils.parallel import map_chunks, parallel_map
from ..utils.validation import broadcast_flat, check_bool, check_int, check_option, check_positive, check_tolerance
from ._capability import compiled_data
from ._compiled_log import FAILED, NEEDS_LEVEL, compiled_log_pairs, laplacian_levels
from ._energy import curve_energy, initial_velocity, polyline_length, refine, segment_lengths
from ._minimize import METHODS, UNRESOLVED, extrapolate_levels, guard_level, resolve_method
from ._routes import CHECK_BLEND, CHECK_LATTICE_NODES, DETOURS, REACH_FRACTION, SHARP_BLEND, FieldLattice, blend_sharpness, center_graph, center_legs, cheap_reach, detour_routes, graph_routes, lattice_alternatives, lattice_routes, resample, shortest_path
from ._riders import EQUATIONS, rider_rhs, rider_width
from ._runge_kutta import compiled_dormand_prince, dormand_prince
from ._tolerances import EXP_ATOL_FACTOR, INTEGRATION_RTOL, RTOL, integration_tolerances

__all__ = ["CHUNK_SIZE", "BoundaryValueResult", "EnergyLogSolver", "ODEExpSolver", "integrate_geodesic", "solve_boundary_value"]

CHUNK_SIZE = 64  #: default pairs solved jointly in one vectorized problem (per pair, 1.3-1.8x cheaper than 16: bench_vs_geomstats.py)


def integrate_geodesic(field, tangent_vec, base_point, t_eval=(1.0,), rtol=INTEGRATION_RTOL, atol=None, max_step=np.inf, compiled=True):
    """Integrate :math:`c'' = -\\Gamma(c', c')` from ``base_point`` with velocity ``tangent_vec``.

    Each geodesic has its own step size (Dormand--Prince 5(4) with error
    control per geodesic): all advance together through the field's numpy
    methods (:func:`~riemlocal.numerics.dormand_prince`), or, for a field with
    a compiled capability (:attr:`MetricField.capability`), one after the other in
    compiled code (:func:`~riemlocal.numerics.compiled_dormand_prince`; the
    same steps, so the same curves to rounding).

    Parameters
    ----------
    field : MetricField
    tangent_vec, base_point : ndarray of shape (batch, dim)
    t_eval : sequence of float
        Times (>= 0; in [0, 1] for Exp) at which to return the curve.
    rtol : float, default=INTEGRATION_RTOL
        Relative tolerance of the Dormand--Prince 5(4) integrator, per geodesic.
    atol : float, default=None
        Its absolute tolerance; ``None``: ``rtol *`` :data:`~riemlocal.numerics.EXP_ATOL_FACTOR`.
    compiled : bool, default=True
        Use the field's compiled evaluators when it has them and the batch is small
        enough for them to be faster (``False``: always the numpy path).

    Returns
    -------
    ndarray of shape (batch, len(t_eval), dim)
    """
    rtol, atol = integration_tolerances(rtol, atol)
    times, position = np.unique(np.asarray(t_eval, dtype=float), return_inverse=True)
    states = _integrate_states(field, np.concatenate([base_point, tangent_vec], axis=1), times, rtol, atol, max_step, compiled)
    return states[:, position, : field.dim]


def _integrate_states(field, initial, times, rtol, atol, max_step, compiled, equation="jacobi"):
    """Rows ``[x, v, riders of equation]`` ``(batch, n)`` at increasing ``times``: compiled where the field declares it
    (and it is the faster path), else, or where the compiled evaluation fails, by the numpy right-hand sides."""
    dim = field.dim
    carried = rider_rhs(field, equation) if initial.shape[1] > 2 * dim else None
    # with riders, compiled wherever one point evaluation is (they share its work; numpy repeats it per rider):
    # 40 geodesics x 35 Jacobi fields at dim = 35, R = 10: 2.1 s against 2.5 s; 64 x 10 at dim = 10: 0.12 s against 0.37 s
    data = compiled_data(field, 1 if carried else len(initial)) if compiled else None
    if data is not None:
        states, status = compiled_dormand_prince(data, initial, times, rtol, atol, max_step, dim, EQUATIONS[equation])
        if status == 0:
            return states  # else the numpy path raises the error that explains the failure

    def rhs(state):
        position, velocity = state[:, :dim], state[:, dim : 2 * dim]
        parts = [velocity, field._acceleration(velocity, position)] + ([carried(position, velocity, state[:, 2 * dim :])] if carried else [])
        return np.concatenate(parts, axis=1)

    def squared_speed(state):  # conserved along a geodesic: the integrator checks it at every step
        velocity = state[:, dim : 2 * dim]
        return np.einsum("bi,bi->b", velocity, field.metric_vector_product(velocity, state[:, :dim]))

    def hidden(state, new_state):  # a thin part of the field that a step's stages may all miss
        return field.hidden_weight(state[:, :dim], new_state[:, :dim])

    return dormand_prince(rhs, initial, times, rtol, atol, max_step, squared_speed, hidden)


def _broadcast_pairs(first, second, names, dim):
    """Validate two point arrays and broadcast them to ``(n_pairs, dim)``; also returns the batch shape."""
    batch, (a, b) = broadcast_flat(dim, (first, names[0]), (second, names[1]))
    if len(a) == 0:
        raise ValueError(f"{names[0]} and {names[1]} must hold at least one point, got shape {batch + (dim,)}")
    return a, b, batch


def _distinct_pairs(x, y, symmetric):
    """One representative of each distinct pair ``(x_p, y_p)``, unordered if ``symmetric``.

    Returns the representatives' indices, the representative of every pair
    (``inverse``), whether a pair is its representative reversed, and the
    distinct points with the indices of each representative's ``x`` and ``y``
    among them (``None`` for a single pair).
    """
    if len(x) == 1:  # the common single Log: skip the sorting
        return slice(None), slice(None), np.zeros(1, dtype=bool), None
    points, ids = unique_rows(np.concatenate([x, y]))
    a, b = ids[: len(x)], ids[len(x) :]
    reverse = (a > b) if symmetric else np.zeros(len(x), dtype=bool)
    keys = np.where(reverse, b, a) * (ids.max() + 1) + np.where(reverse, a, b)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    return first, inverse, reverse != reverse[first][inverse], (points, a[first], b[first])


class ODEExpSolver:
    """Exp and geodesics from an initial velocity, by Dormand--Prince 5(4) integration (a step size per geodesic).

    The same integrator carries states along the geodesics (:meth:`integrate_with`:
    parallel transport and Jacobi fields of :mod:`riemlocal.connection`).

    Parameters
    ----------
    field : MetricField
        A smooth field.
    rtol : float, default=1e-6
        Relative tolerance of the integrator (absolute: ``rtol * EXP_ATOL_FACTOR``);
        applied to each geodesic's own error estimate (a geodesic's steps do not depend on its batch-mates).
    chunk_size : int, default=64
        Geodesics integrated jointly.
    n_jobs : int, default=None
        Parallel chunks through joblib.
    verbose : bool, default=False
        Progress bar over chunks.
    compiled : bool, default=True
        Integrate in compiled code when the field declares a compiled capability
        (:attr:`MetricField.capability`) and the chunk is small enough for it to be faster
        (:func:`~riemlocal.numerics.compiled_data`); ``False`` takes the numpy path
        (the same curves to rounding).
    """

    solves_ivp = True  # geomstats: geodesic_ivp is available

    def __init__(self, field, rtol=RTOL, chunk_size=CHUNK_SIZE, n_jobs=None, verbose=False, compiled=True):
        self.field, self.rtol, self.chunk_size, self.n_jobs, self.verbose = field, rtol, chunk_size, n_jobs, verbose
        self.compiled = compiled
        self._check()

    def _check(self):
        check_tolerance(self.rtol, "rtol")
        check_int(self.chunk_size, "chunk_size")
        check_bool(self.compiled, "compiled")

    @property
    def tolerances(self):
        """``(rtol, atol)`` of the integrator, ``atol = rtol * EXP_ATOL_FACTOR`` (also used for transport and Jacobi fields)."""
        return self.rtol, self.rtol * EXP_ATOL_FACTOR

    def _integrate(self, tangent_vec, base_point, t_eval):
        return integrate_geodesic(self.field, tangent_vec, base_point, t_eval, *self.tolerances, compiled=self.compiled)

    def exp(self, tangent_vec, base_point):
        r""":math:`\mathrm{Exp}_x(v) = c(1)` for the geodesic with :math:`c(0) = x`, :math:`c'(0) = v`; shape ``(..., dim)``."""
        self._check()
        v, x, shape = _broadcast_pairs(tangent_vec, base_point, ("tangent_vec", "base_point"), self.field.dim)

        def solve(v, x):
            return (self._integrate(v, x, (1.0,))[:, 0],)

        (end,) = map_chunks(solve, (v, x), self.chunk_size, self.n_jobs, self.verbose, "Exp (initial-value problems)")
        return end.reshape(shape + (self.field.dim,))

    def geodesic_ivp(self, tangent_vec, base_point):
        """Geodesic as a callable ``path(t)`` -> points of shape ``(..., n_times, dim)``; ``t`` a scalar or 1-D array >= 0."""
        self._check()
        v, x, shape = _broadcast_pairs(tangent_vec, base_point, ("initial_tangent_vec", "initial_point"), self.field.dim)

        def path(t):
            t = np.atleast_1d(np.asarray(t, dtype=float))
            if t.ndim != 1 or not np.all(np.isfinite(t)) or np.any(t < 0):
                raise ValueError(f"t must be a finite non-negative scalar or 1-D array, got shape {t.shape}")
            return self._integrate(v, x, t).reshape(shape + (len(t), self.field.dim))

        return path

    def integrate_with(self, equation, tangent_vec, base_point, riders, t_eval=(1.0,)):
        r"""Integrate geodesics together with riders, states carried along them (Jacobi fields, parallel transport).

        Each row ``[x, v, r]`` (a geodesic and its riders) is one problem of the
        Dormand--Prince integrator at :attr:`tolerances`, with its own step size, compiled
        like :meth:`exp` where the field declares it; rows are batched in chunks of
        ``chunk_size`` (workers: ``n_jobs``).

        Parameters
        ----------
        equation : {"jacobi", "transport"}
            What the riders obey (:mod:`~riemlocal.numerics._riders`): ``[J, J']`` of the
            variational equation, or vectors parallel-transported.
        tangent_vec, base_point : ndarray of shape (batch, dim)
        riders : ndarray of shape (batch, m * width)
            Initial riders, ``m`` per geodesic of ``width`` ``2 dim`` (``"jacobi"``) or ``dim`` (``"transport"``).
        t_eval : sequence of float
            Times (>= 0) at which to return the riders.

        Returns
        -------
        ndarray of shape (batch, len(t_eval), m * width)
        """
        self._check()
        dim = self.field.dim
        width, riders = rider_width(equation, dim), np.asarray(riders, dtype=float)
        if riders.ndim != 2 or len(riders) != len(tangent_vec) or riders.shape[1] % width:
            raise ValueError(f"riders must have shape (batch, m * {width}) for {equation!r} riders at dim = {dim}, got {riders.shape}")
        times, position = np.unique(np.asarray(t_eval, dtype=float), return_inverse=True)

        def solve(x, velocity_and_riders):
            initial = np.concatenate([x, velocity_and_riders], axis=1)
            states = _integrate_states(self.field, initial, times, *self.tolerances, np.inf, self.compiled, equation)
            return (states[:, position, 2 * dim :],)

        initial = np.concatenate([tangent_vec, riders], axis=1)
        (carried,) = map_chunks(solve, (base_point, initial), self.chunk_size, self.n_jobs, self.verbose, "along geodesics")
        return carried


@dataclass
class BoundaryValueResult:
    """Geodesics between pairs of points, each array of the pairs' batch shape ``(...)``.

    Attributes
    ----------
    initial_velocity : ndarray of shape (..., dim)
        :math:`c'(0) = \\mathrm{Log}_x(y)`; NaN (as ``log_error_estimate``) after
        :meth:`~EnergyLogSolver.dist` for pairs solved from the other end (each
        unordered pair is solved once; its curve is then reversed).
    length : ndarray of shape (...)
        Geodesic distance.
    error_estimate : ndarray of shape (...)
        Estimated relative error of ``length``.
    log_error_estimate : ndarray of shape (...)
        Estimated error of ``initial_velocity`` in the norm :math:`M(x)`, relative to ``length``.
    n_segments : ndarray of int of shape (...)
        Segments of the finest discrete geodesic.
    converged : ndarray of bool of shape (...)
        Whether the minimization converged and ``error_estimate <= rtol``.
    curves : ndarray of object of shape (...)
        The finest discrete geodesic of each pair, shape ``(n_segments + 1, dim)``.
    n_iter_all_levels : int
        Iterations of the slowest chunk, summed over its levels.
    """

    initial_velocity: np.ndarray
    length: np.ndarray
    error_estimate: np.ndarray
    log_error_estimate: np.ndarray
    n_segments: np.ndarray
    converged: np.ndarray
    curves: np.ndarray
    n_iter_all_levels: int


class EnergyLogSolver:
    r"""Log and distance by discrete energy minimization, refined until the distance is certified.

    Discrete geodesics with :math:`N, 2N, 4N, \dots` segments (``N =
    n_segments``) minimize the discrete curve energy; their lengths and
    initial velocities (discrete Legendre transform) are Romberg
    extrapolated (:func:`~riemlocal.numerics.extrapolate_levels`). From the
    third level on, a pair stops when the estimated relative error of its
    distance is at most ``rtol`` and, for :meth:`log` and :meth:`solve`, that
    of its Log vector at most ``log_rtol``; a pair still above them when the
    next level would exceed ``max_segments`` is returned with a
    ``ConvergenceWarning`` that gives the estimate.

    Hard pairs get a cheap global search (:meth:`_search_routes`): pairs not
    certified, pairs that needed more than ``HARD_LEVELS_FACTOR`` times the first
    level's segments (more below the default ``rtol``: :meth:`_many_levels`), every
    pair of a field of more than two dimensions that is sharp
    (:func:`~riemlocal.numerics._routes.sharp_blend`) or has a metric cheaper than another
    along most directions (:func:`~riemlocal.numerics._routes.cheap_reach`), and the pairs of a
    two-dimensional field of sharpness above ``CHECK_BLEND`` whose answer a coarse
    lattice route, minimized, disproves (:meth:`_check_routes`); the other pairs cost no more.
    The certificate of these pairs also checks their curves (:meth:`_assess`: the
    curve's own length by an independent quadrature within ``CURVE_GAP``, no segment
    ``JUMP_FACTOR`` times the mean).
    See docs/concepts.rst, "Geodesics and the manifold".

    Parameters
    ----------
    field : MetricField
        A smooth field.
    n_segments : int, default=8
        Segments (>= 2) of the coarsest discrete geodesic; at least three
        levels (8, 16 and 32 segments by default) are solved.
    rtol : float, default=1e-6
        Requested relative error of the distance.
    log_rtol : float, default=1e-4
        Requested error of Log vectors in the norm :math:`M(x)`, relative to
        the distance. Looser than ``rtol``: a Log vector depends to first
        order on the discrete curve, its length to second order.
    max_segments : int, default=2048
        Cap on the segments of the finest level.
    tol : float, default=1e-7
        Tolerance of the energy minimization (preconditioned gradient norm).
    max_iter : int, default=2000
        Iterations per level.
    method : {"auto", "newton", "lbfgs"}, default="auto"
        Newton's method on the block-tridiagonal energy Hessian (:math:`O(N D^3)`
        per step) or L-BFGS (:math:`O(N D^2)`); ``"auto"`` takes Newton up to ``dim = 8``,
        in compiled code up to ``dim = 20`` for Logs and 17 for distances alone (:func:`~riemlocal.numerics.resolve_method`).
        On the numpy path, distances alone (:meth:`dist`) take fewer L-BFGS iterations
        (``lengths_only`` of :func:`~riemlocal.numerics.extrapolate_levels`).
    chunk_size : int, default=64
        Pairs solved jointly in one vectorized problem.
    n_jobs : int, default=None
        Parallel chunks through joblib (any joblib backend, e.g. dask); BLAS
        is limited to one thread inside workers.
    verbose : bool, default=False
        Progress bar over chunks.
    compiled : bool, default=True
        With Newton's method, solve in compiled code when the field declares a compiled
        capability (:attr:`MetricField.capability`): the same algorithm one pair
        after the other (:func:`~riemlocal.numerics.compiled_log_pairs`), the same results to rounding;
        ``False`` takes the numpy path.
    min_levels : int, default=3
        Levels solved before a pair may stop. With 4, the estimate also covers the change of the sixth-order value
        from the level before: three levels can agree by coincidence where the coarsest is not yet in the
        expansion's regime (:func:`~riemlocal.numerics.extrapolate_levels`). With 3, a pair whose Log vector's
        estimate exceeds ``LOG_GUARD * rtol`` at the third level, 4 times that at each level after (a sign of that),
        solves the next level as well. On 3,420
        pairs of random smooth fields (D = 2, 3 and 6, Wishart metrics with a ridge of 0.05, rho 0.3--3), 3 distances
        certified at 3 levels were 1 to 1.5 times ``rtol`` off (26, up to 8.3, without ``LOG_GUARD``, 9, up to 3.3, with
        it at the third level only; the others that differ from a 256-segment reference are on a neighbouring route),
        none at 4, whose Logs and distances cost 1.7--1.8 times as much (D = 2, 10 and 20).

    Attributes
    ----------
    last_result_ : BoundaryValueResult
        All results of the latest call, including the error estimates per pair.
    """

    def __init__(
        self,
        field,
        n_segments=8,
        rtol=RTOL,
        log_rtol=1e-4,
        max_segments=2048,
        tol=1e-7,
        max_iter=2000,
        method="auto",
        chunk_size=CHUNK_SIZE,
        n_jobs=None,
        verbose=False,
        compiled=True,
        min_levels=3,
    ):
        self.field = field
        self.n_segments, self.rtol, self.log_rtol, self.max_segments = n_segments, rtol, log_rtol, max_segments
        self.min_levels = min_levels
        self.tol, self.max_iter, self.method = tol, max_iter, method
        self.chunk_size, self.n_jobs, self.verbose, self.compiled = chunk_size, n_jobs, verbose, compiled
        self._checked, self._per_field, self._measured = (), None, {}
        self._check()

    def _check(self):
        options = (self.compiled, self.n_segments, self.max_segments, self.rtol, self.log_rtol, self.tol, self.max_iter, self.method, self.chunk_size, self.min_levels)
        if len(options) == len(self._checked) and all(a is b for a, b in zip(options, self._checked)):
            return  # the options checked last time (checked again after any change)
        check_bool(self.compiled, "compiled")
        check_int(self.n_segments, "n_segments", minimum=2)
        check_int(self.max_segments, "max_segments", minimum=self.n_segments)
        check_tolerance(self.rtol, "rtol")
        check_tolerance(self.log_rtol, "log_rtol")
        check_positive(self.tol, "tol")
        check_int(self.max_iter, "max_iter")
        check_option(self.method, "method", METHODS)
        check_int(self.chunk_size, "chunk_size")
        check_int(self.min_levels, "min_levels", minimum=3)
        self._checked = options

    def log(self, point, base_point):
        r""":math:`\mathrm{Log}_x(y) = c'(0)` of the constant-speed geodesic from :math:`x` to :math:`y` on [0, 1]."""
        return self.solve(point, base_point).initial_velocity

    def dist(self, point_a, point_b):
        """Geodesic distance (length of the shortest curve), shape ``(...)``; each distinct unordered pair is solved once."""
        return self.solve(point_b, point_a, ("point_b", "point_a"), log_rtol=np.inf).length

    def joint_mean(self, points, weights, start, rtol=None, n_segments=None, max_segments=None, tol=None, max_iter=None):
        r"""Weighted Fréchet mean by one joint minimization over the mean and the curves to every point.

        L-BFGS on :math:`\sum_i w_i E(c_i)` over the interior nodes of the discrete curves
        :math:`c_i` from the mean to ``points`` ``(n, dim)`` *and* the mean, their shared free
        first node (:math:`\min_c E(c) = d^2` at constant speed), from straight curves at ``start``,
        at ``n_segments``, twice and four times as many segments (warm started), the mean Romberg-
        extrapolated and refined up to ``max_segments`` until its estimated error in :math:`M(\mu)`
        is at most ``rtol`` times the rms distance (:func:`extrapolate_levels`). The options default
        to the solver's own (``max_iter``: 20 times it).

        Returns
        -------
        mean : ndarray of shape (dim,)
        rms_distance, error_estimate, grad_norm : float
            The extrapolated rms distance, the mean's estimated relative error and the gradient
            norm :math:`\|\sum_i w_i \mathrm{Log}_\mu(x_i)\|_\mu` from the finest curves.
        n_iter : int
        converged : bool
            Every level converged and the error estimate is at most ``rtol``.
        """
        self._check()
        rtol = self.rtol if rtol is None else rtol
        max_segments = self.max_segments if max_segments is None else max_segments
        n_segments = self.n_segments if n_segments is None else n_segments
        tol, max_iter = self.tol if tol is None else tol, 20 * self.max_iter if max_iter is None else max_iter
        dim = points.shape[1]
        t = np.linspace(0.0, 1.0, n_segments + 1)[:, None]
        curves = (start + t * (points - start)[:, None, :])[None]

        def measure(minimum, rows):  # the mean and the rms distance
            return np.concatenate([minimum.curves[:, 0, 0, :], np.sqrt(minimum.energy)[:, None]], axis=1)

        def relative_error(value, error, unresolved):
            metric = self.field.metric_matrix(value[:, :dim])
            norm = np.sqrt(np.einsum("pi,pij,pj->p", error[:, :dim], metric, error[:, :dim]))
            relative = np.divide(norm, value[:, dim], out=np.zeros_like(norm), where=norm > 0)  # 0 / 0: one distinct point
            return np.maximum(relative, unresolved)

        def accept(value, error, unresolved, rows):
            return relative_error(value, error, unresolved) <= rtol

        result = extrapolate_levels(
            self.field, curves, measure, accept, max_segments, weights=weights[None], free_start=True, method="lbfgs", tol=tol, max_iter=max_iter
        )
        error_estimate = float(relative_error(result.value, result.error, result.unresolved)[0])
        final = result.curves[0]
        mean_gradient = weights @ curve_energy(self.field, final)[1][:, 0, :]
        metric = self.field.metric_matrix(final[0, 0])
        grad_norm = 0.5 * float(np.sqrt(max(mean_gradient @ np.linalg.solve(metric, mean_gradient), 0.0)))
        converged = bool(result.optimized[0]) and error_estimate <= rtol
        return result.value[0, :dim], float(result.value[0, dim]), error_estimate, grad_norm, result.n_iter, converged

    def solve(self, point, base_point, names=("point", "base_point"), log_rtol=None):
        """Geodesics from ``base_point`` to ``point`` (shapes ``(..., dim)``, broadcast); sets ``last_result_``.

        ``log_rtol`` overrides the option of the same name (``np.inf``: distances only).
        """
        self._check()
        self._measured = {}
        log_rtol = self.log_rtol if log_rtol is None else log_rtol
        y, x, shape = _broadcast_pairs(point, base_point, names, self.field.dim)
        first, inverse, flipped, ends = _distinct_pairs(x, y, symmetric=math.isinf(log_rtol))

        def solve_chunk(point, base_point):
            return self._solve_chunk(point, base_point, log_rtol)

        y_pairs, x_pairs = y[first], x[first]  # the distinct pairs
        outputs = map_chunks(
            solve_chunk, (y_pairs, x_pairs), self.chunk_size, self.n_jobs, self.verbose, "geodesic boundary-value problems"
        )
        certified, searched = self._assess(outputs, log_rtol)[0], self._searched_field()
        all_certified, most = bool(certified.all()), outputs[4].max(initial=0)  # most segments
        checked = self.field.dim == 2 and self._sharpness() > CHECK_BLEND
        repair = searched or checked or not all_certified or most > self._level_limit(HARD_LEVELS_FACTOR)  # else nothing to repair
        if repair:
            self._retry_finer(outputs, y_pairs, x_pairs, log_rtol, certified)
            if checked:
                self._check_routes(outputs, y_pairs, x_pairs, log_rtol)
            certified = self._assess(outputs, log_rtol)[0]
            hard = ~certified | self._many_levels(outputs[4], HARD_LEVELS_FACTOR)
            hard |= self._sharpness() > SHARP_BLEND and self.field.dim > 2
            far = ~hard & (searched and self.field.dim > 2)  # searched for the field's cheap reach alone
            hard = (hard | far) & (outputs[4] > 1)  # not the pairs closer than round-off resolves
            self._search_routes(outputs, y_pairs, x_pairs, log_rtol, hard, certified, far)
            self._restart_resampled(outputs, y_pairs, x_pairs, log_rtol)
            most = outputs[4].max(initial=0)
        screen = self.field.dim == 2 and not checked and most > self._level_limit(SCREEN_LEVELS_FACTOR)  # else nothing to screen
        screened = self._screen_routes(outputs, y_pairs, x_pairs, log_rtol) if screen else False
        if self._check_triangles(outputs, y_pairs, x_pairs, log_rtol, ends) or repair or screened:
            certified = self._assess(outputs, log_rtol)[0]
            all_certified = bool(certified.all())
        uncertain = None if all_certified else ~self._assess(outputs, np.inf)[0][inverse]  # the distance, whatever the Log
        velocity, length, error, log_error, n_segments, optimized, curves, n_iter = (part[inverse] for part in outputs)
        if flipped.any():
            velocity[flipped], log_error[flipped] = np.nan, np.nan  # solved from the other end: no Log at this one
            for row in np.flatnonzero(flipped):
                curves[row] = curves[row][::-1]
        converged, n_straight = certified[inverse], 0
        if uncertain is not None:
            error[uncertain & (error <= self.rtol)] = np.inf  # the estimates passed, the curve check failed: no estimate holds
            n_straight = _bound_by_real_curves(self.field, x, y, velocity, length, error, log_error, uncertain, curves)
            converged &= ~uncertain
        self.last_result_ = BoundaryValueResult(
            initial_velocity=velocity.reshape(shape + (self.field.dim,)),
            length=length.reshape(shape),
            error_estimate=error.reshape(shape),
            log_error_estimate=log_error.reshape(shape),
            n_segments=n_segments.reshape(shape),
            converged=converged.reshape(shape),
            curves=curves.reshape(shape),
            n_iter_all_levels=int(n_iter.max()),
        )
        self._measured = {}
        if not (all_certified or converged.all()):
            self._warn(optimized, error, log_error, log_rtol, n_straight)
        return self.last_result_

    def _retry_finer(self, outputs, point, base_point, log_rtol, certified):
        """Solve the uncertified pairs again from a straight start with ``RETRY_FACTOR`` times the segments.

        A coarse start can settle in a wrong minimizer of the discrete energy (one
        segment jumping across a sharp blend transition at every level); a finer one
        resolves the transition. The retry replaces a pair's result where it is better
        (:func:`_better`). ``outputs`` (of :meth:`_solve_chunk`) are updated in place.
        """
        rows = np.flatnonzero(~certified)
        if not len(rows) or 4 * RETRY_FACTOR * self.n_segments > self.max_segments:
            return
        retry = copy.copy(self)
        retry.n_segments = RETRY_FACTOR * self.n_segments
        self._keep_better(outputs, rows, retry._solve_chunk(point[rows], base_point[rows], log_rtol), log_rtol)

    def _restart_resampled(self, outputs, point, base_point, log_rtol):
        """Solve the pairs still uncertified again from their own curves and from their straight segments, each
        resampled evenly by the field's arc length (:func:`~riemlocal.numerics._routes.resample`), at ``RETRY_FACTOR``
        times the first level's segments, then ``RESTART_FACTOR`` times finer for those still uncertified,
        ``RESTARTS`` times in all; the answers replace a pair's where they are better (:func:`_better`).

        Only suspect curves are restarted: those whose error estimate exceeds ``CURVE_GAP`` or that fail the curve
        check (a pair short of a tight ``rtol`` on a resolved route needs finer levels instead). A jump minimizer
        keeps one segment across a sharp transition at every level: its midpoint lies beyond the transition, and
        splitting it costs more at the midpoints of the halves, so each finer level, warm started from the coarser
        one, keeps it. Resampled by the field's arc length, the jump becomes many nodes inside the
        transition, and the minimization crosses it where it is cheapest; at 32 segments it can tunnel again, and
        the finer restarts then find the route. On 540 pairs of 54 random 2-D fields at condition 1000
        (``benchmarks/bench_hard_geometry.py``'s construction, seeds 0--5), 31 were uncertified without restarts,
        most of them jump minimizers, and 21 were with them at ``max_segments=1024``, 2 at the default 2048. The
        search's full solves from its candidate routes are restarted the same way (:meth:`_search_rows`), also
        where the pair is certified: a benchmark pair (seed 2) certified 1.4% too long from its straight start is
        right only through a candidate that ended as a jump and was repaired.
        """
        _, length, error, log_error, n_segments, optimized, _, _ = outputs
        estimated = _certified(optimized, length, error, log_error, self.rtol, log_rtol)  # the estimates pass, the curve check failed
        suspect = estimated | ~(error <= CURVE_GAP)  # else its route is resolved: finer levels, not a restart, would certify it
        rows = np.flatnonzero(~self._assess(outputs, log_rtol)[0] & suspect & (n_segments > 1))  # not the pairs closer than round-off resolves
        for factor in RETRY_FACTOR * RESTART_FACTOR ** np.arange(RESTARTS):
            if not len(rows) or 4 * factor * self.n_segments > self.max_segments:
                return
            n_nodes = factor * self.n_segments + 1
            own = np.stack([resample(outputs[6][row], n_nodes, self.field) for row in rows])  # curves of different lengths
            straight = resample(np.stack([base_point[rows], point[rows]], axis=1), n_nodes, self.field)  # one batch
            again = self._solve_from(np.concatenate([own, straight]), np.tile(point[rows], (2, 1)), np.tile(base_point[rows], (2, 1)), log_rtol)
            for half in (slice(None, len(rows)), slice(len(rows), None)):
                self._keep_better(outputs, rows, tuple(output[half] for output in again), log_rtol)
            rows = rows[~self._assess(outputs, log_rtol, rows)[0]]

    def _keep_better(self, outputs, rows, again, log_rtol):
        """Put the answers ``again`` of the pairs ``rows`` into ``outputs`` (both of :meth:`_solve_chunk`) where they are better (:func:`_better`)."""
        _replace_rows(outputs, rows, again, _better(self._assess(again, log_rtol), self._assess(outputs, log_rtol, rows), self.rtol))

    def _minimize_routes(self, curves, method):
        """Candidate curves ``(n, N + 1, dim)`` minimized at their level to the coarse tolerance (the searches' first step):
        the first level of :meth:`_solve_pairs` with ``method``, compiled where the field has a capability."""
        level = copy.copy(self)
        level.n_segments = level.max_segments = curves.shape[1] - 1
        level.method = method
        return np.stack(level._map_pairs(curves[:, -1], curves[:, 0], np.inf, curves, "candidate routes")[6])

    def _solve_from(self, curves, point, base_point, log_rtol):
        """Solve the pairs ``(point, base_point)`` in full from the curves ``(n, N + 1, dim)``, N segments first."""
        retry = copy.copy(self)
        retry.n_segments = curves.shape[1] - 1
        return retry._map_pairs(point, base_point, log_rtol, curves, "geodesics from other routes")

    def _map_pairs(self, point, base_point, log_rtol, starts, description):
        """:meth:`_solve_pairs` on chunks of the pairs over the solver's workers (:func:`~riemlocal.utils.parallel.map_chunks`)."""

        def solve(point, base_point, starts):
            return self._solve_pairs(point, base_point, log_rtol, starts)

        return tuple(map_chunks(solve, (point, base_point, starts), self.chunk_size, self.n_jobs, False, description))

    def _search_routes(self, outputs, point, base_point, log_rtol, hard, certified, far):
        """Hard pairs: solve again from the best routes of a cheap global search, keep the better answer.

        The candidates of a pair are its own curve and its detours through the field's centers and random waypoints
        (:func:`~riemlocal.numerics._routes.detour_routes`),
        each resampled to ``RETRY_FACTOR * n_segments`` segments and minimized at that level
        (a route's own length says little about the geodesic it leads to), by Newton. On a sharp field
        (:func:`~riemlocal.numerics._routes.sharp_blend`) above two dimensions the detours through centers are
        minimized by L-BFGS as well, which stays in the basin of its start where Newton's full steps across sharp
        transitions leave it; each finds routes the other misses. On two D = 10 benchmark fields: one center's
        detour ended on the straight route, 22.13, by Newton, and at 15.37 by L-BFGS, the route of the pair's
        distance 15.113; on the other field Newton's detours found a pair's 12.095 and L-BFGS's alone certified
        13.16. In two dimensions the lattice gives the routes (L-BFGS alone there missed two benchmark routes, by
        2.8e-3 and 4.2e-3); L-BFGS runs in numpy, and for every candidate it made iris' matrix 3 times slower.
        Candidates that end
        within ``SAME_ROUTE`` of the chord of a shorter one are the same route; a ``certified`` pair whose
        candidates all end on its own curve's route is done (on iris' per-class field, 39 of 190 pairs
        searched, every candidate did: the search took 5.9 s of 7.0 s, and improved none). The pairs ``far``, searched
        only for the field's cheap reach (:func:`~riemlocal.numerics._routes.cheap_reach`), take no detours through
        centers: the routes out through the reach start from the waypoints and the graph's route (on iris' per-class
        field at ``max_condition=100``, the waypoints found all 20 pairs certified too long, the detours none). The
        ``ROUTE_REFINE`` shortest distinct candidates (:func:`~riemlocal.numerics.polyline_length`) are
        refined to twice the segments and minimized again, where their lengths rank them more
        reliably (at 32 segments a sharp transition can shorten a wrong route by a percent), and the
        ``ROUTE_STARTS`` shortest are solved in full from there.

        In two dimensions the routes of a lattice around the pair, its shortest and distinct via-routes
        (:func:`~riemlocal.numerics._routes.lattice_alternatives`), are solved in full as well, each from
        ``LATTICE_START_FACTOR * n_segments`` segments spaced by the field's arc length: on condition-1000 fields,
        minimized at 32 or 64 segments, the lattice's routes changed basin (a narrow cheap channel is not resolved)
        or ranked behind longer geodesics (23.7 against 22.7 at 64 segments, 22.53 against 22.69 in full); solved
        from the fine start, each keeps its route. The lattice's own lengths rank them poorly: a via-route 7% longer
        on the lattice than its shortest path led to a geodesic 22% shorter (17.668 against 22.533, a benchmark
        pair whose reference had missed it). The best answer of every full solve replaces
        the pair's result where it is better (:func:`_better`). ``outputs`` (of :meth:`_solve_chunk`)
        are updated in place. The pairs are split over the solver's workers, ``SEARCH_TASKS_PER_WORKER``
        tasks each (:meth:`_search_rows`); its minimizations run in chunks (:meth:`_map_pairs`).
        """
        rows = np.flatnonzero(hard)
        if not len(rows) or 8 * RETRY_FACTOR * self.n_segments > self.max_segments:
            return
        self._of_field(center_graph, self.n_jobs)  # once, over the workers: they get it with the solver
        n_workers = effective_n_jobs(self.n_jobs)
        n_tasks = 1 if n_workers == 1 else min(len(rows), SEARCH_TASKS_PER_WORKER * n_workers)
        tasks = np.array_split(rows, n_tasks)
        serial = copy.copy(self)
        serial.n_jobs = 1
        serial._measured = self._measured if n_workers == 1 else {}  # not shipped to the workers
        answers = parallel_map(
            serial._search_rows,
            [(tuple(output[task] for output in outputs), point[task], base_point[task], log_rtol, certified[task], far[task]) for task in tasks],
            self.n_jobs,
        )
        for task, answer in zip(tasks, answers):  # the rows a task changed (its other curves come back as copies, unmeasured)
            _replace_rows(outputs, task, answer, np.array([not np.array_equal(outputs[6][row], curve) for row, curve in zip(task, answer[6])]))

    def _search_rows(self, outputs, point, base_point, log_rtol, certified, far):
        """The search of :meth:`_search_routes` for every pair of ``outputs`` (of :meth:`_solve_chunk`), updated and returned."""
        rows = np.arange(len(point))
        n_nodes = RETRY_FACTOR * self.n_segments + 1
        starts, owners, gentle, graph = [], [], [], self._of_field(center_graph)
        lattice_starts, lattice_owners = [], []
        same = SAME_ROUTE * np.linalg.norm(point - base_point, axis=1)
        ends, end_of = unique_rows(np.concatenate([base_point, point]))  # a point of a distance matrix ends many pairs
        legs = center_legs(self.field, ends, graph)[end_of.reshape(2, -1)]
        sharp = self.field.dim > 2 and self._sharpness() > SHARP_BLEND
        routes = graph_routes(self.field, base_point, point, graph, legs)
        for row in rows:
            n_detours = 0 if far[row] else min(DETOURS, len(graph[0]))
            detours = resample(detour_routes(base_point[row], point[row], graph, legs[:, row], n_detours), n_nodes)
            n_gentle = n_detours if sharp else 0  # the detours once more, for L-BFGS
            gentle += [False] * (len(detours) + 2) + [True] * n_gentle
            starts += [resample(outputs[6][row], n_nodes), *detours, resample(routes[row], n_nodes), *detours[:n_gentle]]
            owners += [row] * (len(detours) + 2 + n_gentle)
            if self.field.dim == 2:
                lattice = lattice_alternatives(self.field, base_point[row], point[row])
                lattice_starts += [resample(route, LATTICE_START_FACTOR * self.n_segments + 1, self.field) for route in lattice]
                lattice_owners += [row] * len(lattice)
        method = resolve_method(self.method, self.field.dim, n_problems=1)  # per pair's worth of work: Newton up to dim = 20
        starts, owners, gentle = np.stack(starts), np.array(owners), np.array(gentle)
        curves = np.empty_like(starts)
        for chosen, chosen_method in ((gentle, "lbfgs"), (~gentle, method)):
            if chosen.any():
                curves[chosen] = self._minimize_routes(starts[chosen], chosen_method)
        first = np.searchsorted(owners, owners)  # each pair's first candidate (owners ascend): its own curve, minimized
        own, apart = first == np.arange(len(owners)), ~_same_route(curves, curves[first], same[owners])
        kept = apart | (own & (np.isin(owners, owners[apart]) | ~certified[owners]))  # a certified pair whose candidates all found its own route is done
        solves, found = [], outputs[6].copy()  # the curves before the search
        if kept.any():
            curves, owners = curves[kept], owners[kept]
            rank = _route_ranks(curves, owners, _route_lengths(self.field, curves), same[owners])
            chosen = np.flatnonzero(rank < ROUTE_REFINE)
            curves, owners = self._minimize_routes(refine(curves[chosen], cubic=True), method), owners[chosen]
            rank = _route_ranks(curves, owners, _route_lengths(self.field, curves), same[owners])
            chosen = np.flatnonzero(rank < ROUTE_STARTS)
            solves.append((curves[chosen], owners[chosen], rank[chosen]))
        if lattice_starts:  # each in full from a fine start, which keeps the basin of its route (the coarse levels do not)
            owners = np.array(lattice_owners)
            solves.append((np.stack(lattice_starts), owners, np.arange(len(owners)) - np.searchsorted(owners, owners)))
        for curves, owners, rank in solves:
            again = self._solve_from(curves, point[owners], base_point[owners], log_rtol)
            self._restart_resampled(again, point[owners], base_point[owners], log_rtol)  # a route's own jumps repaired
            for k in np.unique(rank):  # the best start of each pair first, each answer against the best so far
                mine = rank == k
                self._keep_better(outputs, owners[mine], tuple(output[mine] for output in again), log_rtol)
        moved = np.flatnonzero([curve is not before for curve, before in zip(outputs[6], found)])
        if len(moved):  # a new answer's own curve, coarse again, is a candidate the search has not tried
            self._solve_shorter(outputs, point, base_point, log_rtol, moved, outputs[6][moved], method)
        return outputs

    def _many_levels(self, n_segments, factor):
        """Whether pairs that needed ``n_segments`` needed more than ``factor`` times the first level's, scaled by
        ``(RTOL / rtol) ** (1 / 4)`` for a tighter ``rtol`` (the extrapolated length's error falls about like the fourth
        power of the segments' length: on the half-plane, the ball and the sphere, 32 segments first, ``rtol`` from
        1e-6 to 1e-10 took 128 to 256--512), and by 2 for every level of ``min_levels`` above 3 (the levels past the
        minimum are the signal). A tight tolerance alone makes no pair hard."""
        return n_segments > self._level_limit(factor)

    def _level_limit(self, factor):
        """The segments above which :meth:`_many_levels` holds."""
        return factor * (self.n_segments << (self.min_levels - 3)) * max(1.0, (RTOL / self.rtol) ** 0.25)

    def _of_field(self, compute, *args):
        """``compute(field, *args)`` (a function of the field alone: ``args`` such as workers do not change it), computed
        once per field of the solver."""
        if self._per_field is None or self._per_field[0] is not self.field:
            self._per_field = (self.field, {})
        cache = self._per_field[1]
        if compute not in cache:
            cache[compute] = compute(self.field, *args)
        return cache[compute]

    def _sharpness(self):
        """:func:`~riemlocal.numerics._routes.blend_sharpness` of the field, computed once per field."""
        return self._of_field(blend_sharpness, self.n_jobs)

    def _searched_field(self):
        """Whether every pair of the field is searched (above two dimensions) and checked: a sharp field
        (:func:`~riemlocal.numerics._routes.sharp_blend`) or one with a metric much cheaper than another along most
        directions (:func:`~riemlocal.numerics._routes.cheap_reach`)."""
        return self._sharpness() > SHARP_BLEND or self._of_field(cheap_reach) > REACH_FRACTION

    def _check_routes(self, outputs, point, base_point, log_rtol):
        """The cheap global check of a sharp two-dimensional field's pairs; a pair it disproves is solved again.

        The shortest route on a coarse lattice around each pair (``CHECK_LATTICE_NODES`` per side,
        :func:`~riemlocal.numerics._routes.lattice_routes`), minimized at ``RETRY_FACTOR * n_segments``
        segments, is a real curve: where it is more than ``CURVE_GAP`` shorter than the pair's distance,
        that distance is wrong, whatever its certificate, and the pair is solved in full from that curve
        (:meth:`_solve_shorter`). Searching every pair of a sharp 2-D field in full made the
        estimators' tests on one several hundred times slower.
        """
        rows = np.flatnonzero(outputs[4] > 1)  # not the pairs closer than round-off resolves
        if len(rows):
            routes = lattice_routes(self.field, base_point[rows], point[rows], CHECK_LATTICE_NODES)
            self._solve_shorter(outputs, point, base_point, log_rtol, rows, routes)

    def _screen_routes(self, outputs, point, base_point, log_rtol):
        """The screen of the pairs of a smooth two-dimensional field with centers whose levels disagreed past the third.

        A pair that needed more than ``SCREEN_LEVELS_FACTOR`` times the first level's segments, but not more than
        ``HARD_LEVELS_FACTOR`` times (those are searched, :meth:`_search_routes`), is screened against the field's
        :class:`~riemlocal.numerics._routes.FieldLattice`: where the lattice's shortest route between its ends, a
        lookup, is estimated less than ``1 + SCREEN_SLACK`` times the pair's distance and runs more than
        ``SCREEN_STEPS`` lattice steps away from the pair's curve (another route, as long within the lattice's
        resolution), it is minimized and, if shorter, solved from (:meth:`_solve_shorter`). Returns whether any pair
        was minimized again.

        Why only these pairs: the per-pair lattice check (:meth:`_check_routes`), forced on 1,040 pairs of 26 smooth
        2-D fields (condition 10 and 100, rho 0.5--2), found 20 pairs whose straight start had led to a route 1--22%
        too long, all at 128 segments or more (the full search repairs them); none of the pairs certified at 32
        segments, 55% of all, was on a wrong route. They cost nothing more. A pair of
        ``benchmarks/bench_hard_geometry.py`` certified 1.9% too long at 64 segments is pinned in the tests.
        """
        segments = outputs[4]
        rows = np.flatnonzero(self._many_levels(segments, SCREEN_LEVELS_FACTOR) & ~self._many_levels(segments, HARD_LEVELS_FACTOR))
        if not len(rows) or getattr(self.field, "centers", None) is None:
            return False
        lattice = self._of_field(FieldLattice)
        ends = np.concatenate([base_point[rows], point[rows]])
        nodes, legs = lattice.near(ends, self.field.metric_matrix(ends))  # both ends at once
        lengths, start, end = lattice.route_lengths((nodes[: len(rows)], legs[: len(rows)]), (nodes[len(rows) :], legs[len(rows) :]))
        candidates = np.flatnonzero(lengths < (1.0 + SCREEN_SLACK) * self._assess(outputs, log_rtol, rows)[1])
        if not len(candidates):
            return False
        paths = lattice.paths(start[candidates], end[candidates])
        samples = np.linspace(0.0, 1.0, SCREEN_SAMPLES)
        curves = np.stack([curve[np.rint(samples * (len(curve) - 1)).astype(int)] for curve in outputs[6][rows[candidates]]])
        other = np.flatnonzero(_separation(paths / lattice.step, curves / lattice.step) > SCREEN_STEPS)
        if len(other):
            routes = [np.concatenate([base_point[rows[k], None], path, point[rows[k], None]]) for k, path in zip(candidates[other], paths[other])]
            self._solve_shorter(outputs, point, base_point, log_rtol, rows[candidates[other]], routes)
        return bool(len(other))

    def _solve_shorter(self, outputs, point, base_point, log_rtol, rows, routes, method=None):
        """Minimize the pairs' candidate ``routes`` at ``RETRY_FACTOR * n_segments`` segments (by ``method``, default
        the solver's for that many problems); a pair whose route is then more than ``CURVE_GAP`` shorter than its
        distance has a wrong distance, whatever its certificate, and is solved in full from it (the answer replaces
        the pair's where it is better, :func:`_better`)."""
        starts = np.stack([resample(route, RETRY_FACTOR * self.n_segments + 1) for route in routes])
        curves = self._minimize_routes(starts, method or resolve_method(self.method, self.field.dim, n_problems=len(rows)))
        shorter = polyline_length(self.field, curves, CURVE_SUBDIVISIONS) < (1.0 - CURVE_GAP) * outputs[1][rows]
        rows, curves = rows[shorter], curves[shorter]
        if len(rows):
            self._keep_better(outputs, rows, self._solve_from(curves, point[rows], base_point[rows], log_rtol), log_rtol)

    def _check_triangles(self, outputs, point, base_point, log_rtol, ends):
        """Pairs of one call that share endpoints (a distance matrix): no distance above a path through the others.

        The distances (upper bounds, :meth:`_assess`) are the edges of a graph over the call's points; where the
        shortest path between a pair's ends (Dijkstra) is more than ``CURVE_GAP`` shorter than the pair's distance,
        that distance is wrong, whatever its certificate: the path's curves, joined, are a real curve that short.
        Such a pair is solved again from that curve (resampled to ``RETRY_FACTOR * n_segments`` segments; the answer
        replaces the pair's where it is better, :func:`_better`). ``ends``: the call's distinct points and the
        indices of each pair's ``base_point`` and ``point`` among them (:func:`_distinct_pairs`).
        Returns whether any pair was solved again.
        """
        if len(point) < 3:  # no other path (and a single Log pays nothing)
            return False
        nodes, start, end = ends
        if len(nodes) == 2 * len(point):  # no two pairs share a point: no other path
            return False
        upper = self._assess(outputs, log_rtol)[1]
        usable = np.isfinite(upper) & (start != end)
        order = np.flatnonzero(usable)[np.argsort(upper[usable])]  # the shortest answers first
        edges, kept = np.unique(np.sort(np.stack([start[order], end[order]], axis=1), axis=1), axis=0, return_index=True)  # a pair solved twice: its shorter answer
        graph = coo_array((upper[order[kept]], tuple(edges.T)), shape=(len(nodes), len(nodes))).tocsr()
        paths, predecessors = dijkstra(graph, directed=False, return_predecessors=True)
        rows = np.flatnonzero(usable & (paths[start, end] < (1.0 - CURVE_GAP) * upper))
        if not len(rows):
            return False
        edge = {}
        for row in order[::-1]:  # a pair solved twice: the curve of its shorter answer
            edge[start[row], end[row]], edge[end[row], start[row]] = outputs[6][row], outputs[6][row][::-1]
        curves = []
        for row in rows:
            route = shortest_path(predecessors[start[row]], end[row])
            joined = np.concatenate([edge[a, b][:-1] for a, b in zip(route[:-1], route[1:])] + [nodes[end[row]][None]])
            curves.append(resample(joined, RETRY_FACTOR * self.n_segments + 1))
        self._keep_better(outputs, rows, self._solve_from(np.stack(curves), point[rows], base_point[rows], log_rtol), log_rtol)
        return True

    def _assess(self, outputs, log_rtol, rows=slice(None)):
        """Whether the pairs ``rows`` of ``outputs`` (of :meth:`_solve_chunk`) are certified, and an upper bound on their distances.

        Certified: :func:`_certified`, and the curve's own length (:func:`~riemlocal.numerics.polyline_length`,
        an independent quadrature) within ``CURVE_GAP`` of the distance, with no segment longer than ``JUMP_FACTOR``
        times the mean (a jump minimizer). The curve check covers the pairs that the global search takes
        (:meth:`_search_routes`: hard pairs, all pairs of a searched field), where it costs little; on easy pairs, in
        numpy, it would add up to half the cost of the compiled Log (D = 10, a pair solved at 64 segments).
        The bound is a certified distance, else the length of the curve where two quadratures agree (else infinite:
        a curve across a singularity of the field, e.g. out of the Poincaré ball, has no reliable length).
        """
        parts = outputs if isinstance(rows, slice) and rows == slice(None) else tuple(part[rows] for part in outputs)
        _, length, error, log_error, n_segments, optimized, curves, _ = parts
        certified = _certified(optimized, length, error, log_error, self.rtol, log_rtol)
        searched = self._searched_field()
        if not searched and certified.all() and not n_segments.max(initial=0) > self._level_limit(HARD_LEVELS_FACTOR):
            return certified, length  # the common case, at no cost
        hard = ~certified | self._many_levels(n_segments, HARD_LEVELS_FACTOR)
        checked = np.flatnonzero(hard | searched)
        curve_length, faithful = length.copy(), np.ones(len(length), dtype=bool)
        shapes = np.stack([[len(curves[i]) - 1 for i in checked], np.where(certified[checked], 1, CURVE_SUBDIVISIONS)], axis=1)
        for nodes, subdivisions in unique_rows(shapes)[0]:
            group = checked[(shapes == (nodes, subdivisions)).all(axis=1)]  # one quadrature per shape
            curve_length[group], no_jump = self._measure_curves(curves[group], subdivisions)
            gap = np.abs(curve_length[group] - length[group])
            faithful[group] = (nodes == 1) | ((gap <= CURVE_GAP * length[group]) & no_jump)
        certified &= faithful
        return certified, np.where(certified, length, curve_length)

    def _measure_curves(self, curves, subdivisions):
        """The lengths of curves of one shape (:func:`~riemlocal.numerics.polyline_length`, ``subdivisions`` pieces per
        segment; above one, infinite where twice as many pieces differ by more than ``CURVE_GAP``: no reliable length)
        and whether no segment is ``JUMP_FACTOR`` times their mean. Each curve is measured once per :meth:`solve`
        (``_measured``, by identity): :meth:`_assess` runs several times on the same curves. More than ``chunk_size``
        new curves are measured over the solver's workers."""
        new = [curve for curve in curves if (id(curve), subdivisions) not in self._measured]
        if new:
            measure = functools.partial(_segment_lengths, self.field, subdivisions)
            n_jobs = self.n_jobs if len(new) > self.chunk_size else 1  # over the workers only where that pays
            segments, finer = map_chunks(measure, (np.stack(new),), len(new), n_jobs, False, "curve lengths")
            lengths = segments.sum(axis=1)
            if subdivisions > 1:  # an uncertified curve's length bounds the distance where a finer quadrature agrees
                lengths = np.where(np.abs(finer - lengths) <= CURVE_GAP * finer, lengths, np.inf)
            no_jump = segments.max(axis=1) <= JUMP_FACTOR * segments.mean(axis=1)
            for curve, value, flag in zip(new, lengths, no_jump):
                self._measured[id(curve), subdivisions] = (curve, value, flag)  # the curve kept alive: its id stays its own
        measured = [self._measured[id(curve), subdivisions] for curve in curves]
        return np.array([entry[1] for entry in measured]), np.array([entry[2] for entry in measured], dtype=bool)

    def _solve_chunk(self, point, base_point, log_rtol):
        """The first solve of pairs ``(n, dim)``, from straight starts (:meth:`_solve_pairs`)."""
        return self._solve_pairs(point, base_point, log_rtol)

    def _solve_pairs(self, point, base_point, log_rtol, starts=None):
        """Solve pairs ``(n, dim)``: compiled (Newton, a field with a compiled capability) or by :meth:`_solve_numpy`.

        ``starts`` ``(n, N + 1, dim)``: the curves the coarsest level starts from (default: straight, ``n_segments``).
        """
        capability = getattr(self.field, "capability", None) if self.compiled else None
        method = resolve_method(self.method, self.field.dim, n_problems=len(point), compiled=True, lengths_only=math.isinf(log_rtol))
        if capability is None or method != "newton":
            return self._solve_numpy(point, base_point, log_rtol, starts)
        given = np.empty((0, self.n_segments + 1, self.field.dim)) if starts is None else np.ascontiguousarray(starts)
        n_levels = (self.max_segments // self.n_segments).bit_length()  # levels up to max_segments
        first_levels = min(n_levels, max(self.min_levels, (128 // self.n_segments).bit_length()))  # up to 128 segments
        options = (self.n_segments, self.max_segments, self.rtol, log_rtol, self.tol, self.max_iter)
        *outputs, iterations, status = compiled_log_pairs(
            capability.data, point, base_point, given, *options, laplacian_levels(self.n_segments, first_levels), first_levels, self.min_levels
        )
        outputs[-1] = _object_array(outputs[-1])
        finer = np.flatnonzero(status == NEEDS_LEVEL) if status.any() else ()  # rare: more than 128 segments
        if len(finer):
            iterations = np.pad(iterations, ((0, 0), (0, n_levels - first_levels)))
            *parts, iterations[finer], status[finer] = compiled_log_pairs(
                capability.data, point[finer], base_point[finer], given[finer] if len(given) else given, *options,
                laplacian_levels(self.n_segments, n_levels), n_levels, self.min_levels,
            )
            for output, part in zip(outputs, parts):
                output[finer] = _object_array(part) if isinstance(part, list) else part
        outputs.append(np.full(len(point), iterations.max(axis=0).sum()))
        failed = np.flatnonzero(status == FAILED) if status.any() else ()  # an evaluator declined (overflow, not SPD)
        if len(failed):  # the numpy path explains
            for output, part in zip(outputs, self._solve_numpy(point[failed], base_point[failed], log_rtol, None if starts is None else starts[failed])):
                output[failed] = part
            outputs[-1][:] = outputs[-1].max()
        return tuple(outputs)

    def _solve_numpy(self, point, base_point, log_rtol, starts=None):
        """Solve pairs ``(n, dim)``; pairs closer than round-off resolves (``UNRESOLVED``) are straight segments.

        ``starts`` ``(n, N + 1, dim)``: the curves the coarsest level starts from (default: straight, ``n_segments``).

        :func:`~riemlocal.numerics.compiled_log_pairs` mirrors this (with Newton) in compiled code:
        a change here needs the same change there (``tests/test_compiled_log.py`` compares both).
        """
        n_pairs = len(point)
        step, midpoint = point - base_point, 0.5 * (point + base_point)
        scale = 1.0 + np.maximum(np.abs(point), np.abs(base_point)).max(axis=1)
        velocity, length = step.copy(), np.sqrt(np.einsum("pi,pi->p", step, self.field.metric_vector_product(step, midpoint)))
        dist_error, log_error, n_segments = np.zeros(n_pairs), np.zeros(n_pairs), np.ones(n_pairs, dtype=int)
        optimized, curves, n_iter = np.ones(n_pairs, dtype=bool), np.empty(n_pairs, dtype=object), 0
        for row, segment in enumerate(np.stack([base_point, point], axis=1)):
            curves[row] = segment
        rows = np.flatnonzero(np.abs(step).max(axis=1) > UNRESOLVED * scale)
        if len(rows):
            base_metric = self.field.metric_matrix(base_point[rows])
            t = np.linspace(0.0, 1.0, self.n_segments + 1)[:, None]
            start = (base_point[rows, None, :] + t * step[rows, None, :] if starts is None else starts[rows])[:, None]

            def measure(minimum, subset):
                velocity = initial_velocity(self.field, minimum.curves[:, 0], base_metric[subset])
                return np.concatenate([np.sqrt(np.maximum(minimum.energy, 0.0))[:, None], velocity], axis=1)

            def estimates(value, error, unresolved, metric):
                """Relative error estimates of the distance and of the Log vector."""
                velocity_error = error[:, 1:]
                log_error = np.sqrt(np.maximum(np.einsum("pi,pij,pj->p", velocity_error, metric, velocity_error), 0.0))
                return (
                    np.maximum(_relative(np.abs(error[:, 0]), value[:, 0]), unresolved),
                    np.maximum(_relative(log_error, value[:, 0]), unresolved),
                )

            def accept(value, error, unresolved, subset):
                dist_error, log_error = estimates(value, error, unresolved, base_metric[subset])
                return (dist_error <= self.rtol) & (log_error <= log_rtol)

            def doubtful(value, error, unresolved, subset, level):  # the Log vector's levels disagree: another level
                return estimates(value, error, unresolved, base_metric[subset])[1] > guard_level(level) * self.rtol

            result = extrapolate_levels(
                self.field,
                start,
                measure,
                accept,
                self.max_segments,
                method=self.method,
                tol=self.tol,
                max_iter=self.max_iter,
                lengths_only=math.isinf(log_rtol),
                rate_checked=(0,),  # the length
                min_levels=self.min_levels,
                doubtful=doubtful,
            )
            velocity[rows], length[rows] = result.value[:, 1:], result.value[:, 0]
            dist_error[rows], log_error[rows] = estimates(result.value, result.error, result.unresolved, base_metric)
            n_segments[rows], optimized[rows], n_iter = result.n_segments, result.optimized, result.n_iter
            for row, curve in zip(rows, result.curves):
                curves[row] = curve[0]
        return velocity, length, dist_error, log_error, n_segments, optimized, curves, np.full(n_pairs, n_iter)

    def _warn(self, optimized, error, log_error, log_rtol, n_straight):
        if n_straight:
            warnings.warn(
                f"geodesic solver: for {n_straight} of {len(error)} pairs its curve was no shorter than the straight "
                "segment (a wrong local minimizer, or one whose segments do not resolve a sharp region): the straight "
                "segment and its length are returned, an upper bound on the distance, uncertified",
                ConvergenceWarning,
                stacklevel=3,
            )
        if not optimized.all():
            warnings.warn(
                f"geodesic energy minimization did not converge for {int((~optimized).sum())} of {len(optimized)} "
                f"pairs ({self.method}, max_iter={self.max_iter} per level): preconditioned gradient norm above "
                f"tol={self.tol:.3g}",
                ConvergenceWarning,
                stacklevel=3,
            )
        metrics = getattr(self.field, "metrics", None)  # the centers' metrics of a local field
        condition = 1.0 if metrics is None else condition_numbers(metrics).max()
        if condition > CONDITION_WARNING:
            cause = (
                f"the field's metrics have condition numbers up to {condition:.3g}: bound them with "
                "LocalMetrics(max_condition=...), e.g. 100, rather than raising max_segments"
            )
        else:
            cause = "raise max_segments, or rtol if it is tighter than needed"
        for what, estimate, tolerance, name in (("distance", error, self.rtol, "rtol"), ("Log", log_error, log_rtol, "log_rtol")):
            uncertified = estimate > tolerance
            if uncertified.any():
                warnings.warn(
                    f"geodesic {what} not certified for {int(uncertified.sum())} of {len(estimate)} pairs at "
                    f"max_segments={self.max_segments}: estimated relative error up to {estimate.max():.3g} > "
                    f"{name}={tolerance:.3g}"
                    + ("; their distances are the lengths of the curves returned (upper bounds)" if what == "distance" else "")
                    + f"; {cause}",
                    ConvergenceWarning,
                    stacklevel=3,
                )


def _segment_lengths(field, subdivisions, curves):
    """The lengths of the segments of ``curves`` ``(n, N + 1, dim)`` (:func:`~riemlocal.numerics.polyline_length`,
    ``subdivisions`` pieces each) and, above one piece, the curves' lengths by twice as many (else NaN)."""
    segments = segment_lengths(field, curves, subdivisions)  # along whole curves: one-segment curves cost 5 times as much
    finer = polyline_length(field, curves, 2 * subdivisions) if subdivisions > 1 else np.full(len(curves), np.nan)
    return segments, finer


def _route_lengths(field, curves):
    """Lengths of candidate routes ``(n, N + 1, dim)`` that rank them (:func:`~riemlocal.numerics.polyline_length`):
    two pieces per segment, and ``CURVE_SUBDIVISIONS`` where one and two pieces differ by more than
    ``RANK_RESOLUTION`` (a segment that does not resolve its field). Where both miss a feature alike the
    ranking can be off by a few 1e-4 (random routes of 32 segments on a condition-1000 field: 2.8e-4), below
    ``CURVE_GAP``; answers are chosen by their certified solves, not by these lengths. On iris' 150-center
    field and on the 5- and 10-D hard fields: the same distances as ``CURVE_SUBDIVISIONS`` everywhere."""
    one, two = polyline_length(field, curves, 1), polyline_length(field, curves, 2)
    unresolved = np.abs(two - one) > RANK_RESOLUTION * two
    if unresolved.any():
        two[unresolved] = polyline_length(field, curves[unresolved], CURVE_SUBDIVISIONS)
    return two


def _same_route(curves, others, same):
    """Whether curves ``(..., N + 1, dim)`` lie node by node within ``same`` ``(...)`` of ``others`` (every coordinate): the same route."""
    return np.abs(curves - others).max(axis=(-2, -1)) <= same


def _route_ranks(curves, owners, lengths, same):
    """Rank of each candidate curve ``(n, N + 1, dim)`` among its pair's (``owners``) by ``lengths``.

    A candidate whose nodes all lie within ``same`` (per candidate) of a better-ranked candidate's is the
    same route: it ranks after every distinct one.
    """
    order = np.lexsort((lengths, owners))
    rank = np.empty(len(order), dtype=int)
    for pair in np.unique(owners):
        mine = order[owners[order] == pair]
        distinct = []
        for k in mine:
            if not any(_same_route(curves[k], curves[j], same[k]) for j in distinct):
                distinct.append(k)
        rank[distinct] = np.arange(len(distinct))
        rank[np.setdiff1d(mine, distinct, assume_unique=True)] = len(mine)
    return rank


def _replace_rows(outputs, rows, again, better):
    """Where ``better``, put the results ``again`` of the pairs ``rows`` into ``outputs`` (both of :meth:`EnergyLogSolver._solve_chunk`; not ``n_iter``)."""
    for output, part in zip(outputs[:-1], again[:-1]):
        output[rows[better]] = part[better]


def _better(new, old, rtol):
    """Whether answers ``new`` beat ``old``, both ``(certified, upper bound)`` of :meth:`EnergyLogSolver._assess`.

    A better answer is more than ``rtol`` shorter (within ``rtol``, the same geodesic: the first one stays);
    one that gains the certificate may be up to ``CURVE_GAP`` longer, one that loses it must be more than
    ``CURVE_GAP`` shorter (a real curve that much shorter disproves the old certificate).
    """
    (certified, upper), (old_certified, old_upper) = new, old
    factor = np.where(certified == old_certified, 1.0 - rtol, np.where(certified, 1.0 + CURVE_GAP, 1.0 - CURVE_GAP))
    return upper < factor * old_upper


def _certified(optimized, length, error, log_error, rtol, log_rtol):
    """Pairs whose minimization converged, with a non-negative length and error estimates within the tolerances.

    A NaN ``log_error`` means no Log was asked (distances only); a negative or NaN length is never certified,
    whatever its error estimate (an extrapolation can overshoot below zero with a small last correction).
    """
    return optimized & (length >= 0) & (error <= rtol) & ~(log_error > log_rtol)


#: the retry of an uncertified pair starts from this many times the segments (:meth:`EnergyLogSolver._retry_finer`)
RETRY_FACTOR = 4
#: restarts of a pair still uncertified (:meth:`EnergyLogSolver._restart_resampled`), each from this many times the
#: segments of the one before, the first from ``RETRY_FACTOR`` times the first level's
RESTARTS = 3
RESTART_FACTOR = 4
#: hard pairs are solved in full from this many of their candidate routes (:meth:`EnergyLogSolver._search_routes`) ...
ROUTE_STARTS = 3
#: ... chosen among this many distinct routes refined to twice the segments
ROUTE_REFINE = 6
#: the routes of a pair's lattice (two dimensions) are solved in full from this many times the first level's segments
LATTICE_START_FACTOR = 16
#: the search's pairs are split in this many tasks per worker (:meth:`EnergyLogSolver._search_routes`): their costs differ
SEARCH_TASKS_PER_WORKER = 4
#: candidate curves whose nodes are all within this fraction of the pair's chord of a shorter one's are one route
SAME_ROUTE = 0.05
#: a curve with a segment this many times longer than its mean segment is a jump minimizer, not certified
JUMP_FACTOR = 8.0
#: a pair is searched for a shorter route when it needed more than this many times the first level's segments
HARD_LEVELS_FACTOR = 8
#: an uncertified extrapolated length more than this fraction below its own curve's length is not believed
#: (a polyline of 32 or more segments that resolves the field is within about 1e-4 of its limit)
CURVE_GAP = 1e-3
#: pieces of each segment of an uncertified curve in its length (4 Gauss points each: an uncertified curve
#: may not resolve its field, e.g. a metric that jumps within one segment)
CURVE_SUBDIVISIONS = 8
#: candidate routes whose lengths by one and two pieces per segment differ by more than this fraction get ``CURVE_SUBDIVISIONS``
RANK_RESOLUTION = 1e-4
#: :meth:`EnergyLogSolver._screen_routes` screens the pairs that needed more than this many times the first level's
#: segments; it minimizes a pair's lattice route where that is estimated less than 1 + ``SCREEN_SLACK`` times the
#: pair's distance and runs more than ``SCREEN_STEPS`` lattice steps away from the pair's curve (at ``SCREEN_SAMPLES``
#: of the curve's nodes, evenly spaced)
SCREEN_LEVELS_FACTOR = 4
SCREEN_SLACK = 0.03
SCREEN_STEPS = 2.0
SCREEN_SAMPLES = 17
#: pieces of each straight segment in :func:`_bound_by_real_curves` (4 Gauss points each)
STRAIGHT_SUBDIVISIONS = 64


def _bound_by_real_curves(field, x, y, velocity, length, error, log_error, uncertain, curves):
    """Keep every uncertified distance (``uncertain``) within the length of a real curve: its own, or the straight segment.

    An uncertified extrapolated length can fall far below every curve the solver found,
    exceed its own curve, or be negative or not finite. Such a pair reports the length of
    its returned curve instead (:func:`~riemlocal.numerics.polyline_length`, an upper bound
    on the distance); one at most ``CURVE_GAP`` below it keeps its extrapolated length. Where
    the straight segment, a candidate of every solve, is no longer, the pair gets the
    segment itself with its length. A replaced length's error estimate is at least the relative
    gap between the curve's length and the extrapolated one. Certified pairs cost nothing more. The arrays
    are updated in place; the straight ones get infinite error estimates. Returns their number.
    """
    suspect = np.flatnonzero(uncertain)
    if not len(suspect):
        return 0
    own = np.array([polyline_length(field, curves[row][None], CURVE_SUBDIVISIONS)[0] for row in suspect])
    segments = np.stack([x[suspect], y[suspect]], axis=1)
    straight = polyline_length(field, segments, STRAIGHT_SUBDIVISIONS)
    with np.errstate(invalid="ignore"):  # an extrapolated length that is NaN or infinite: an infinite gap
        gap = np.where(length[suspect] >= 0, (own - length[suspect]) / own, np.inf)
    gap = np.nan_to_num(gap, nan=np.inf)
    implausible = ~((gap >= 0) & (gap <= CURVE_GAP))  # above its own curve, or far below it
    error[suspect] = np.where(implausible, np.fmax(error[suspect], np.abs(gap)), error[suspect])
    length[suspect] = np.where(implausible, np.where(np.isfinite(own), own, np.inf), length[suspect])
    longer = ~(length[suspect] < straight)
    rows = suspect[longer]
    length[rows], error[rows] = straight[longer], np.inf
    log_error[rows] = np.where(np.isnan(log_error[rows]), np.nan, np.inf)
    velocity[rows] = np.where(np.isnan(velocity[rows]), np.nan, y[rows] - x[rows])
    for row, segment in zip(rows, segments[longer]):
        curves[row] = segment
    return len(rows)


def _separation(routes, curves):
    """How far each route ``(n, k, dim)`` strays from its polyline ``(n, m, dim)``: the largest distance of a route's
    node to the nearest point of the polyline, shape ``(n,)``."""
    start, steps = curves[:, :-1], np.diff(curves, axis=1)  # (n, m - 1, dim)
    along = np.einsum("nksd,nsd->nks", routes[:, :, None] - start[:, None], steps)
    along /= np.maximum(np.einsum("nsd,nsd->ns", steps, steps), np.finfo(float).tiny)[:, None]
    gaps = routes[:, :, None] - (start[:, None] + np.clip(along, 0.0, 1.0)[..., None] * steps[:, None])
    return np.sqrt(np.einsum("nksd,nksd->nks", gaps, gaps).min(axis=2).max(axis=1))


def _object_array(items):
    """A 1-D object array of ``items`` (arrays of any shapes)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def _relative(error, length):
    """``error / length``, 0 where the length is 0 (then the error is too)."""
    return np.divide(error, length, out=np.zeros_like(error), where=length > 0)


def solve_boundary_value(field, point, base_point, **options):
    """Geodesics from ``base_point`` to ``point``: :meth:`EnergyLogSolver.solve` with ``options``.

    Returns
    -------
    BoundaryValueResult
    """
    return EnergyLogSolver(field, **options).solve(point, base_point)
