r"""Fréchet (Karcher) mean on a Riemannian manifold.

The mean minimizes :math:`f(\mu) = \frac{1}{2 W} \sum_i w_i\, d^2(\mu, x_i)`,
:math:`W = \sum_i w_i`, whose Riemannian gradient is
:math:`-\bar v(\mu)`, :math:`\bar v(\mu) = \frac1W \sum_i w_i \mathrm{Log}_\mu(x_i)`
(Pennec 1999; Hauberg, Freifeld & Black 2012, sec. 3.1.1).
"""

import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import validate_data
from tqdm.auto import tqdm

from ..geodesics import laplacian_inverse_sqrt, curve_energy
from ..utils.validation import check_int, check_n_jobs, check_option, check_points, check_positive, check_weights
from . import _tangent

__all__ = ["FrechetMean"]

_ARMIJO = 1e-4  # sufficient-decrease constant of the Karcher line search
_MIN_STEP = 2.0**-30


def _joint_level(field, curves, weights, factor, tol, max_iter, callback):
    r"""Minimize :math:`\sum_i p_i E(c_i)` jointly over the shared first node and all interior nodes.

    Node :math:`j` of curve :math:`i` is
    :math:`c_{ij} = c^0_{ij} + (1 - j/N)\,(\mu - \mu^0) + \delta_{ij}`, so moving
    the mean drags every curve along while the far endpoints :math:`x_i` stay
    fixed. Variables are scaled by the inverse square root of the Hessian of a
    constant metric :math:`\bar M = L L^T`:
    :math:`\mu - \mu^0 = L^{-T} b / \sqrt 2` and
    :math:`\delta_i = (2 N p_i)^{-1/2}\, S \Lambda^{-1/2} S z_i\, L^{-1}`
    (:math:`S` the orthonormal DST-I, :math:`\Lambda` the Laplacian eigenvalues),
    for which the problem is the identity quadratic (straight lines and
    interior offsets decouple exactly).

    Returns the minimized curves, the Euclidean gradient of the objective with
    respect to :math:`\mu`, the iteration count and whether L-BFGS converged.
    """
    n_curves, n_nodes, dim = curves.shape
    n_segments = n_nodes - 1
    taper = (1.0 - np.arange(n_nodes) / n_segments)[None, :, None]
    preconditioner = laplacian_inverse_sqrt(n_segments)
    curve_scales = 1.0 / np.sqrt(2.0 * n_segments * weights[:, None, None])
    inverse_factor = np.linalg.inv(factor)  # L^{-1}
    start = curves.copy()
    n_mean = dim

    def to_curves(z):
        shift = (z[:n_mean] @ inverse_factor) / np.sqrt(2.0)  # L^{-T} b / sqrt(2), as a row
        offsets = z[n_mean:].reshape(n_curves, n_segments - 1, dim)
        offsets = curve_scales * (preconditioner @ offsets)
        full = start + taper * shift
        full[:, 1:-1, :] += offsets @ inverse_factor
        return full

    def objective(z):
        energy, gradient = curve_energy(field, to_curves(z))
        gradient *= weights[:, None, None]
        mean_gradient = np.einsum("n,bnd->d", taper[0, :, 0], gradient)
        inner = gradient[:, 1:-1, :] @ inverse_factor.T  # rows L^{-1} g
        grad_offsets = curve_scales * (preconditioner @ inner)
        grad_mean = inverse_factor @ mean_gradient / np.sqrt(2.0)
        return float(weights @ energy), np.concatenate([grad_mean, grad_offsets.ravel()])

    result = minimize(
        objective,
        np.zeros(n_mean + n_curves * (n_segments - 1) * dim),
        jac=True,
        method="L-BFGS-B",
        callback=callback,
        options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-15, "maxcor": 10},
    )
    final = to_curves(result.x)
    _, gradient = curve_energy(field, final)
    mean_gradient = np.einsum("b,bd->d", weights, gradient[:, 0, :])
    converged = result.status == 0 or np.abs(result.jac).max(initial=0.0) <= 10 * tol
    return final, mean_gradient, result.nit, bool(converged)


class FrechetMean(BaseEstimator):
    r"""Weighted Fréchet mean :math:`\arg\min_\mu \sum_i w_i\, d^2(\mu, x_i)`.

    Two solvers:

    * ``"karcher"`` (any space with ``exp``/``log``): Riemannian gradient
      descent :math:`\mu \leftarrow \mathrm{Exp}_\mu(s\, \bar v(\mu))`,
      :math:`\bar v = \sum_i w_i \mathrm{Log}_\mu(x_i) / W`, with step
      :math:`s \le 1` halved until the Armijo condition
      :math:`f(\mu') \le f(\mu) - 10^{-4} s \|\bar v\|^2_\mu` holds (and doubled
      back after a success). Each iteration is one batch of Log maps.
    * ``"joint"`` (a :class:`~riemlocal.manifold.LearnedMetricManifold`, or
      any space with a smooth ``field``): one L-BFGS minimization of
      :math:`\sum_i w_i E(c_i)` over the mean *and* all interior nodes of
      the discrete curves :math:`c_i` from the mean to every :math:`x_i`
      (:func:`riemlocal.geodesics.curve_energy`), since
      :math:`\min_c E(c) = d^2` at constant speed. No Log map is solved
      separately. The solve runs with ``n_nodes`` segments and again
      with twice as many (warm started), and the mean is Richardson
      extrapolated, :math:`(4\mu_{2N} - \mu_N)/3` (the midpoint rule is
      second order).

    ``"auto"`` takes ``"joint"`` when the space has a smooth ``field``.

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
        Starting point; ``None`` takes the weighted coordinate mean,
        projected onto the space when it has ``projection``.
    n_nodes : int, default=8
        Segments of the coarse discrete curves of ``"joint"`` (the fine ones
        have twice as many). With the extrapolation the error of the mean
        is about :math:`10^{-6}` (relative to the spread) on the body-shape
        manifold and :math:`10^{-4}` on a strongly curved 2-D field at 8;
        16 gives :math:`10^{-6}` there, at about twice the cost.
    n_jobs : int, default=None
        Workers (joblib) for the batches of Log maps.
    verbose : bool, default=False
        Show a progress bar.

    Attributes
    ----------
    estimate_ : ndarray of shape (dim,)
        The mean.
    n_iter_ : int
        Karcher iterations (including rejected steps) or total L-BFGS iterations.
    grad_norm_ : float
        :math:`\|\bar v(\mu)\|_{M(\mu)}`, the norm of the Riemannian gradient
        of :math:`f`. For ``"joint"`` it is computed from the discrete
        energy gradient, :math:`\tfrac12 \sqrt{g^T M(\mu)^{-1} g}` with
        :math:`g = \nabla_\mu \sum_i w_i E(c_i) / W`.
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
        self, space, *, method="auto", max_iter=100, tol=1e-5, init=None, n_nodes=8, n_jobs=None, verbose=False
    ):
        self.space = space
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.n_nodes = n_nodes
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _resolve_method(self):
        check_option(self.method, "method", {"auto", "karcher", "joint"})
        field = getattr(self.space, "field", None)
        smooth = field is not None and getattr(field, "is_smooth", False)
        if self.method == "joint" and not smooth:
            raise ValueError("method='joint' needs a space with a smooth `field` (a LearnedMetricManifold)")
        return "joint" if self.method == "joint" or (self.method == "auto" and smooth) else "karcher"

    def fit(self, X, y=None, sample_weight=None):
        """Compute the mean of ``X`` (n_samples, dim); ``y`` is ignored.

        Samples with weight 0 are absent.
        """
        dim = _tangent.point_dim(self.space)
        method = self._resolve_method()
        max_iter = check_int(self.max_iter, "max_iter")
        check_int(self.n_nodes, "n_nodes", minimum=2)
        tol = check_positive(self.tol, "tol")
        check_n_jobs(self.n_jobs)
        X = validate_data(self, X, dtype=float)
        if X.shape[1] != dim:
            raise ValueError(f"X must have {dim} features to match the space, got shape {X.shape}")
        weights = check_weights(sample_weight, len(X))
        X, weights = X[weights > 0], weights[weights > 0] / weights.sum()
        if self.init is None:
            start = weights @ X
            if hasattr(self.space, "projection"):
                start = np.asarray(self.space.projection(start), dtype=float)
        else:
            start = check_points(self.init, dim, "init")
            if start.shape != (dim,):
                raise ValueError(f"init must have shape ({dim},), got {start.shape}")
        total = max_iter if method == "karcher" else None  # L-BFGS iterations of "joint" have no set count
        with tqdm(total=total, desc=f"Frechet mean ({method})", disable=not self.verbose) as bar:
            solve = self._fit_joint if method == "joint" else self._fit_karcher
            self.estimate_, self.n_iter_, self.grad_norm_, converged, scale = solve(X, weights, start, max_iter, tol, bar)
        if not converged:
            warnings.warn(
                f"FrechetMean ({method}) did not converge in {self.n_iter_} iterations: "
                f"gradient norm {self.grad_norm_:.3g} (rms distance {scale:.3g}, tol={tol:.3g})",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _fit_karcher(self, X, weights, mean, max_iter, tol, bar):
        def evaluate(point):
            logs = _tangent.log(self.space, X, point, self.n_jobs)
            metric = _tangent.metric_matrix(self.space, point)
            gradient = weights @ logs
            value = 0.5 * float(weights @ _tangent.squared_norm(logs, metric))
            return value, gradient, float(np.sqrt(max(_tangent.squared_norm(gradient, metric), 0.0)))

        value, gradient, grad_norm = evaluate(mean)
        step, n_iter = 1.0, 0
        while n_iter < max_iter:
            scale = np.sqrt(2.0 * value)
            if grad_norm <= tol * scale:
                return mean, n_iter, grad_norm, True, scale
            if step < _MIN_STEP:
                break
            n_iter += 1
            bar.update()
            candidate = _tangent.exp(self.space, (step * gradient)[None], mean)[0]
            cand_value, cand_gradient, cand_norm = evaluate(candidate)
            if cand_value <= value - _ARMIJO * step * grad_norm**2:
                mean, value, gradient, grad_norm = candidate, cand_value, cand_gradient, cand_norm
                step = min(1.0, 2.0 * step)
            else:
                step *= 0.5
        scale = np.sqrt(2.0 * value)
        return mean, n_iter, grad_norm, grad_norm <= tol * scale, scale

    def _fit_joint(self, X, weights, mean, max_iter, tol, bar):
        field = self.space.field
        n_segments = self.n_nodes
        t = np.linspace(0.0, 1.0, n_segments + 1)[None, :, None]
        curves = mean + t * (X - mean)[:, None, :]
        factor = np.linalg.cholesky(_tangent.metric_matrix(self.space, mean))
        means, n_iter, converged = [], 0, True
        for level in range(2):
            if level:
                fine = np.empty((len(X), 2 * n_segments + 1, X.shape[1]))
                fine[:, ::2], fine[:, 1::2] = curves, 0.5 * (curves[:, 1:] + curves[:, :-1])
                curves, n_segments = fine, 2 * n_segments
            curves, mean_gradient, level_iter, level_converged = _joint_level(
                field, curves, weights, factor, tol, 20 * max_iter, lambda _: bar.update()
            )
            means.append(curves[0, 0].copy())
            n_iter += level_iter
            converged = converged and level_converged
        estimate = (4.0 * means[1] - means[0]) / 3.0
        metric = _tangent.metric_matrix(self.space, means[1])
        grad_norm = 0.5 * float(np.sqrt(max(mean_gradient @ np.linalg.solve(metric, mean_gradient), 0.0)))
        scale = float(np.sqrt(weights @ curve_energy(field, curves)[0]))
        return estimate, n_iter, grad_norm, converged, scale
