r"""Fréchet (Karcher) mean on a Riemannian manifold.

The mean minimizes :math:`f(\mu) = \frac{1}{2 W} \sum_i w_i\, d^2(\mu, x_i)`,
:math:`W = \sum_i w_i`, whose Riemannian gradient is
:math:`-\bar v(\mu)`, :math:`\bar v(\mu) = \frac1W \sum_i w_i \mathrm{Log}_\mu(x_i)`
(Pennec 1999; Hauberg, Freifeld & Black 2012, sec. 3.1.1).
"""

import warnings
from functools import partial

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data
from tqdm.auto import tqdm

from ..numerics import polyline_length
from ..utils.optimize import ARMIJO, MAX_STALLS, ROUND_OFF
from ..utils.parallel import with_one_blas_thread
from ..utils.validation import check_int, check_n_jobs, check_not_text, check_params, check_points, check_tolerance, check_weights, options
from . import _tangent

__all__ = ["FrechetMean", "given_mean"]

_MIN_KARCHER_STEP = 2.0**-30
_MEDOID_CANDIDATES = 64  # data points tried as the medoid start (n_candidates x n_samples straight lines)
_LINE_SUBDIVISIONS = 8  # Gauss pieces per straight line of the medoid start (a start, not a reported number)
_LINE_POINTS = 2**14  # straight lines x subdivisions per polyline_length call


def given_mean(mean, dim):
    """A precomputed mean (a point of shape ``(dim,)`` or a fitted :class:`FrechetMean`) as ``(point, n_iter)``; ``None`` if none."""
    if mean is None:
        return None
    if isinstance(mean, FrechetMean):
        check_is_fitted(mean, "estimate_")
        return check_points(mean.estimate_, dim, "mean.estimate_"), mean.n_iter_
    point = check_points(mean, dim, "mean")
    if point.shape != (dim,):
        raise ValueError(f"mean must be a point of shape ({dim},) or a fitted FrechetMean, got shape {point.shape}")
    return point, 0


class FrechetMean(BaseEstimator):
    r"""Weighted Fréchet mean :math:`\arg\min_\mu \sum_i w_i\, d^2(\mu, x_i)`.

    Two solvers:

    * ``"karcher"`` (any space with ``exp``/``log``): Riemannian gradient
      descent :math:`\mu \leftarrow \mathrm{Exp}_\mu(s\, \bar v(\mu))`,
      :math:`\bar v = \sum_i w_i \mathrm{Log}_\mu(x_i) / W`, with step
      :math:`s \le 1` halved until the Armijo condition
      :math:`f(\mu') \le f(\mu) - 10^{-4} s \|\bar v\|^2_\mu` holds (and doubled
      back after a success). Each iteration is one batch of Log maps.
    * ``"joint"`` (a :class:`~riemlocal.manifold.LearnedMetricManifold`, or any
      space whose ``metric.log_solver`` has ``joint_mean``, which it runs:
      :meth:`~riemlocal.numerics.EnergyLogSolver.joint_mean`): one L-BFGS minimization of
      :math:`\sum_i w_i E(c_i)` over the mean *and* all interior nodes of
      the discrete curves :math:`c_i` from the mean to every :math:`x_i`
      (:func:`riemlocal.numerics.minimize_curve_energy` with the mean as
      the shared free first node), since :math:`\min_c E(c) = d^2` at
      constant speed. No Log map is solved separately. Like Log and
      distances, it runs at ``n_segments``, twice and four times as many
      segments (warm started, :func:`riemlocal.numerics.extrapolate_levels`),
      Romberg-extrapolates the mean and refines until its estimated error is
      at most ``rtol`` times the rms distance.

    ``"auto"`` takes ``"joint"`` when the space's Log solver offers it; when no joint run converges
    (on sharp fields its coarse curves can settle in a worse basin), it runs ``"karcher"`` from the
    best joint mean and keeps that run if it converges or ends lower.

    **Starts.** Both solvers descend to a local minimum, which depends on the
    start (e.g. on either side of a high-cost ridge). The first run starts at
    ``init`` (or the weighted coordinate mean). Further starts: the weighted
    coordinate mean when ``init`` is given, and, on a space with a ``field``, the
    *line medoid*, the data point with the smallest weighted sum of squared
    straight-line lengths (:func:`~riemlocal.numerics.polyline_length`, 4-point
    Gauss--Legendre on 8 pieces per line, among at most 64 evenly spaced data points).
    A further start is run only when the best run so far did not converge or when its
    straight-line objective, an upper bound of :math:`f` there (to the accuracy of that
    quadrature), is already below that run's
    minimum, so that its run must end lower; the run with the smallest objective
    (the solver's certified rms distance) is kept. A better minimum whose basin
    holds no such start is not searched for.

    Parameters
    ----------
    space : geomstats-style space
        Has ``space.metric.exp(tangent_vec, base_point)``, ``log(point,
        base_point)`` and ``metric_matrix(base_point)``.
    method : {"auto", "karcher", "joint"}, default="auto"
    max_iter : int, default=100
        Karcher iterations, or L-BFGS iterations per resolution (times 20).
    tol : float, default=1e-5
        Convergence when ``grad_norm_ <= tol * rms`` with ``rms`` the
        root-mean-square distance to the data (Karcher; it cannot go below
        the relative accuracy of the space's Log maps, about 1e-5 with a
        :class:`~riemlocal.manifold.LearnedMetricManifold`'s defaults);
        relative preconditioned gradient tolerance of L-BFGS (joint).
    init : array-like of shape (dim,), default=None
        First start; ``None`` takes the weighted coordinate mean,
        projected onto the space when it has ``projection``. See **Starts**.
    n_segments : int, default=4
        Segments of the coarsest discrete curves of ``"joint"``.
    rtol : float, default=1e-5
        Requested error of the ``"joint"`` mean in the norm :math:`M(\mu)`,
        relative to the rms distance (the scale of ``tol``).
    max_segments : int, default=256
        Cap on the segments of the ``"joint"`` curves.
    n_jobs : int, default=None
        Workers (joblib) for the batches of Log maps.
    verbose : bool, default=False
        Show a progress bar.

    Attributes
    ----------
    estimate_ : ndarray of shape (dim,)
        The mean.
    n_iter_ : int
        Karcher iterations (including rejected steps) or total L-BFGS iterations, of the run kept.
    method_ : {"karcher", "joint"}
        Solver of the run kept.
    n_starts_ : int
        Runs made (1 to 4; see **Starts** and ``"auto"``).
    start_ : ndarray of shape (dim,)
        Start of the run kept.
    error_estimate_ : float
        ``method_ == "joint"`` only: estimated error of the mean in the norm :math:`M(\mu)`, relative to the rms distance.
    grad_norm_ : float
        :math:`\|\bar v(\mu)\|_{M(\mu)}`, the norm of the Riemannian gradient
        of :math:`f`. For ``"joint"`` it is computed from the discrete
        energy gradient, :math:`\tfrac12 \sqrt{g^T M(\mu)^{-1} g}` with
        :math:`g = \nabla_\mu \sum_i w_i E(c_i) / W`.
    converged_ : bool
        Whether the stopping test holds at the returned mean (with every Log map certified); otherwise it warns.
    n_uncertified_ : int
        ``"karcher"``: Log maps at the returned mean that the space's Log solver did not certify
        (``space.metric.log_solver.last_result_.converged``); the mean is then not reported as converged.
        ``"joint"`` solves no Log map: 0.
    n_features_in_ : int

    References
    ----------
    .. [1] X. Pennec, "Probabilities and statistics on Riemannian manifolds:
       basic tools for geometric measurements", NSIP 1999.
    .. [2] S. Hauberg, O. Freifeld and M. J. Black, "A geometric take on
       metric learning", NIPS 2012, sec. 3.1.1.

    Examples
    --------
    >>> import numpy as np
    >>> from geomstats.geometry.euclidean import Euclidean
    >>> from riemlocal.learning import FrechetMean
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 3.0]])
    >>> FrechetMean(Euclidean(2)).fit(X).estimate_
    array([1., 1.])
    """

    def __init__(
        self,
        space,
        *,
        method="auto",
        max_iter=100,
        tol=1e-5,
        init=None,
        n_segments=4,
        rtol=1e-5,
        max_segments=256,
        n_jobs=None,
        verbose=False,
    ):
        self.space = space
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.n_segments = n_segments
        self.rtol = rtol
        self.max_segments = max_segments
        self.n_jobs = n_jobs
        self.verbose = verbose

    _parameter_checks = {
        "method": options("auto", "karcher", "joint"),
        "max_iter": check_int,
        "n_segments": partial(check_int, minimum=2),
        "rtol": check_tolerance,
        "tol": check_tolerance,
        "n_jobs": check_n_jobs,
    }

    def _resolve_method(self):
        joint = hasattr(getattr(getattr(self.space, "metric", None), "log_solver", None), "joint_mean")
        if self.method == "joint" and not joint:
            raise ValueError("method='joint' needs a space whose metric's log_solver has joint_mean (a LearnedMetricManifold)")
        return "joint" if self.method == "joint" or (self.method == "auto" and joint) else "karcher"

    @with_one_blas_thread
    def fit(self, X, y=None, sample_weight=None):
        """Compute the mean of ``X`` (n_samples, dim); ``y`` is ignored.

        Samples with weight 0 are absent.
        """
        dim = _tangent.point_dim(self.space)
        params = check_params(self, self._parameter_checks)
        check_int(self.max_segments, "max_segments", minimum=self.n_segments)
        method, max_iter, tol = self._resolve_method(), params["max_iter"], params["tol"]
        X = validate_data(self, check_not_text(X, "X"), dtype=float)
        if X.shape[1] != dim:
            raise ValueError(f"X must have {dim} features to match the space, got shape {X.shape}")
        weights = check_weights(sample_weight, len(X))
        X, weights = X[weights > 0], weights[weights > 0] / weights.sum()
        if self.init is None:
            start = self._coordinate_mean(X, weights)
        else:
            start = check_points(self.init, dim, "init")
            if start.shape != (dim,):
                raise ValueError(f"init must have shape ({dim},), got {start.shape}")
        total = max_iter if method == "karcher" else None  # L-BFGS iterations of "joint" have no set count
        best, self.n_starts_ = None, 0  # best: the run's results, its start, n_uncertified_ and error_estimate_
        with tqdm(total=total, desc=f"Frechet mean ({method})", disable=not self.verbose) as bar:
            solve = self._fit_joint if method == "joint" else self._fit_karcher
            for point, bound in [(start, None)] + self._other_starts(X, weights, start):
                if best is not None and best[0][3] and np.sqrt(bound) >= best[0][4]:
                    continue  # the best run converged, and this start's objective is not below its minimum
                self.n_uncertified_ = 0
                run = solve(X, weights, point, max_iter, tol, bar)  # (mean, n_iter, grad_norm, converged, rms distance)
                self.n_starts_ += 1
                if best is None or run[4] < best[0][4]:
                    best = run, point, self.n_uncertified_, getattr(self, "error_estimate_", None), method
            if self.method == "auto" and method == "joint" and not best[0][3]:  # Karcher descent from the joint's best
                self.n_uncertified_ = 0
                run = self._fit_karcher(X, weights, best[0][0], max_iter, tol, bar)
                self.n_starts_ += 1
                if run[3] or run[4] < best[0][4]:
                    best = run, best[0][0], self.n_uncertified_, None, "karcher"
        (self.estimate_, self.n_iter_, self.grad_norm_, self.converged_, scale), self.start_, self.n_uncertified_, error, method = best
        self.method_ = method
        if method == "joint":
            self.error_estimate_ = error
        elif hasattr(self, "error_estimate_"):
            del self.error_estimate_
        _tangent.warn_uncertified("FrechetMean", self.n_uncertified_, len(X), "from the mean to the data")
        if not self.converged_:
            accuracy = f", estimated relative error {self.error_estimate_:.3g} (rtol={self.rtol:.3g})" if method == "joint" else ""
            warnings.warn(
                f"FrechetMean ({method}) did not converge in {self.n_iter_} iterations: "
                f"gradient norm {self.grad_norm_:.3g} (rms distance {scale:.3g}, tol={tol:.3g}){accuracy}",
                ConvergenceWarning,
                stacklevel=3,  # the user's call, past with_one_blas_thread
            )
        return self

    def _other_starts(self, X, weights, first):
        r"""Starts after ``first``, each with the objective :math:`\sum_i w_i d^2` bounded by straight lines (inf if unknown).

        The weighted coordinate mean when ``init`` is given, and, on a space with a ``field``, the data
        point with the smallest weighted sum of squared straight-line lengths (which bound the distances
        from above; by :func:`~riemlocal.numerics.polyline_length` with ``_LINE_SUBDIVISIONS`` pieces)
        among at most ``_MEDOID_CANDIDATES`` evenly spaced data points.
        """
        field = getattr(self.space, "field", None)
        per_call = max(1, _LINE_POINTS // (len(X) * _LINE_SUBDIVISIONS))

        def objectives(points):  # the straight-line bounds at each of ``points``
            values = []
            for chunk in range(0, len(points), per_call):
                lines = np.stack(np.broadcast_arrays(points[chunk : chunk + per_call, None], X[None]), axis=2)  # (n, len(X), 2, dim)
                values.append(polyline_length(field, lines, _LINE_SUBDIVISIONS) ** 2 @ weights)
            return np.concatenate(values)

        starts = [] if self.init is None else [self._coordinate_mean(X, weights)]
        if field is None:
            return [(point, np.inf) for point in starts]
        starts = [(point, objectives(point[None])[0]) for point in starts]
        rows = np.unique(np.linspace(0, len(X) - 1, min(len(X), _MEDOID_CANDIDATES)).astype(int))
        candidates = objectives(X[rows])
        starts.append((X[rows[np.argmin(candidates)]], candidates.min()))
        return [(point, bound) for point, bound in starts if not np.array_equal(point, first)]

    def _coordinate_mean(self, X, weights):
        """The weighted coordinate mean, projected onto the space when it has ``projection``."""
        mean = weights @ X
        return np.asarray(self.space.projection(mean), dtype=float) if hasattr(self.space, "projection") else mean

    def _fit_karcher(self, X, weights, mean, max_iter, tol, bar):
        def evaluate(point):
            logs, lengths, _, certified = _tangent.certified_log(self.space, X, point, self.n_jobs)
            metric = _tangent.metric_matrix(self.space, point)
            gradient = weights @ logs
            value = 0.5 * float(weights @ lengths**2)
            self.n_uncertified_ = int((~certified).sum())
            return value, gradient, float(np.sqrt(max(_tangent.squared_norm(gradient, metric), 0.0)))

        value, gradient, grad_norm = evaluate(mean)
        step, n_iter, stalls = 1.0, 0, 0
        while n_iter < max_iter:
            scale = np.sqrt(2.0 * value)
            if grad_norm <= tol * scale and not self.n_uncertified_:
                return mean, n_iter, grad_norm, True, scale
            if step < _MIN_KARCHER_STEP or stalls >= MAX_STALLS:  # no step decreases f beyond its round-off
                break
            n_iter += 1
            bar.update()
            candidate = _tangent.exp(self.space, (step * gradient)[None], mean)[0]
            n_uncertified = self.n_uncertified_
            cand_value, cand_gradient, cand_norm = evaluate(candidate)
            if cand_value <= value - ARMIJO * step * grad_norm**2:
                stalls = stalls + 1 if value - cand_value <= ROUND_OFF * value else 0
                mean, value, gradient, grad_norm = candidate, cand_value, cand_gradient, cand_norm
                step = min(1.0, 2.0 * step)
            else:
                self.n_uncertified_ = n_uncertified  # of the mean kept
                step *= 0.5
        scale = np.sqrt(2.0 * value)
        return mean, n_iter, grad_norm, grad_norm <= tol * scale and not self.n_uncertified_, scale

    def _fit_joint(self, X, weights, mean, max_iter, tol, bar):
        solver = self.space.metric.log_solver
        estimate, scale, self.error_estimate_, grad_norm, n_iter, converged = solver.joint_mean(
            X, weights, mean, self.rtol, self.n_segments, self.max_segments, tol, 20 * max_iter
        )
        bar.update()
        return estimate, n_iter, grad_norm, converged, scale
