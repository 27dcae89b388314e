r"""Regression with manifold-valued responses (geodesic) or predictors (tangent space)."""

import warnings
from collections import namedtuple

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.utils.validation import check_is_fitted, validate_data
from tqdm.auto import tqdm

from ..utils.optimize import ARMIJO
from ..utils.parallel import with_one_blas_thread
from ..utils.validation import check_int, check_n_jobs, check_not_text, check_params, check_tolerance, check_weights, options
from . import _tangent
from ._frechet import given_mean
from ._pga import PrincipalGeodesicAnalysis

__all__ = ["GeodesicRegression", "TangentSpaceRegression"]

# a step predicting less than this relative decrease of the objective is below what it resolves
_RESOLUTION = 1e-13
_ROUND_OFF = 1e-10  # resolution of the Gauss-Newton decrement, relative to the spread of the data
_Fit = namedtuple("_Fit", "base coef value residuals metrics noise n_uncertified")
_DIFFERENCE_STEP = 1e-6  # central differences of Exp for spaces without exp_differential
_OVERSHOOT = 0.5  # a step that decreases the objective by less than this fraction of the predicted decrease is shortened ...
_STEP_RANGE = (0.1, 1.0)  # ... to the parabola's minimizer, if that is this many times the step


def _as_design(t):
    """Covariates as a 2-D array: a 1-D ``t`` is one covariate."""
    t = np.asarray(t)
    return t.reshape(-1, 1) if t.ndim == 1 else t


class GeodesicRegression(BaseEstimator):
    r"""Fletcher's geodesic regression :math:`y \approx \mathrm{Exp}_p(\sum_k t_k v_k)`.

    Minimizes the weighted sum of squared geodesic residuals

    .. math::
        F(p, V) = \sum_i w_i\, d^2\big(\hat y_i, y_i\big), \qquad
        \hat y_i = \mathrm{Exp}_p(V^T t_i), \quad V = [v_1, \dots, v_K]^T .

    **Initialization**: the best, by :math:`F`, of a few cheap fits: least
    squares of the coordinates :math:`y_i \approx a + V^T t_i` (the chart),
    least squares of :math:`\mathrm{Log}_\mu(y_i) \approx a + V^T t_i` (then
    :math:`p = \mathrm{Exp}_\mu(a)`) at the chart fit's base point and at a
    given Fréchet mean :math:`\mu` (``mean``), and, for one covariate, the geodesics through the
    samples of extreme and of quartile :math:`t`.

    **Minimization**: Levenberg--Marquardt. The residual
    :math:`r_i = \mathrm{Log}_{\hat y_i}(y_i)` gives
    :math:`d^2(\hat y_i, y_i) = \|r_i\|^2_{M(\hat y_i)}` and the gradient
    :math:`\nabla_{\hat y_i} d^2 = -2 M(\hat y_i) r_i`, so with :math:`J_i` the
    Jacobian of :math:`\hat y_i` in the step :math:`\delta = (\Delta a, \Delta V)`
    of the update :math:`p \leftarrow \mathrm{Exp}_p(\Delta a)`, :math:`V \leftarrow V + \Delta V`,

    .. math::
        \nabla F = -2 \sum_i w_i J_i^T M(\hat y_i)\, r_i, \qquad
        \min_\delta \sum_i w_i \| r_i - J_i \delta \|^2_{M(\hat y_i)} + \lambda\, \delta^T D \delta

    is the damped Gauss--Newton step (:math:`D` the diagonal of the
    Gauss--Newton matrix). A step is taken when the exact :math:`F` (one batch
    of Exp and one of Log, from the solver's distances) decreases by at least
    :math:`10^{-4}` of the decrease the linearization predicts; :math:`\lambda`
    grows after a rejected step and shrinks after a good one. A step that gains
    less than half its predicted decrease is shortened to the minimizer of the
    parabola through :math:`F` along it, where that is lower (Gauss--Newton's
    matrix misses the residuals' second derivatives, and full steps can then
    overshoot back and forth). The fit is
    ``converged_`` only when the stopping test below holds at the returned
    point with every Log residual certified by the space's Log solver;
    otherwise (iterations exhausted, or no step the objective resolves) it
    warns with a ``ConvergenceWarning``.

    * ``method="exact"`` (default): :math:`J_i = [\partial_x \mathrm{Exp},\ t_{i1} \partial_v \mathrm{Exp}, \dots]`
      exactly, from the Jacobi fields of ``space.metric.exp_differential``
      (:func:`riemlocal.connection.exp_differential`); spaces without it (geomstats'
      own) get central differences of the update map through ``space.metric.exp``
      (error :math:`\sim 10^{-10}` for closed-form Exp). The fixed point is a
      true stationary point of :math:`F` (Fletcher 2013, sec. 4).
    * ``method="flat"``: **an approximation**: :math:`J_i = [I, t_{i1} I, \dots]`,
      i.e. :math:`d\mathrm{Exp}` replaced by the identity of the chart (flat
      parallel transport and Jacobi fields). Exact for a constant metric; on a
      curved space the neglected terms are of order curvature
      :math:`\times \|V^T t\|^2`, and the fit stops above the minimum (6% on
      a strongly curved 2-D field, see the tests; several times the minimum on
      sharper fields). Cheaper per iteration.

    Parameters
    ----------
    space : geomstats-style space
        See :class:`FrechetMean`.
    method : {"exact", "flat"}, default="exact"
        Jacobian of the fitted points: exact (Jacobi fields) or the flat-chart approximation.
    max_iter : int, default=50
        Levenberg--Marquardt iterations (steps tried).
    tol : float, default=1e-6
        Stop when the Gauss--Newton decrement :math:`\lambda = \sqrt{g^T H^{-1} g}`
        is at most ``tol`` times :math:`\sqrt{F}` plus the estimated error of
        the Log residuals, :math:`(\sum_i w_i \epsilon_i^2)^{1/2}` (which bounds its effect on :math:`\lambda`).
    mean : array-like of shape (dim,) or FrechetMean, default=None
        A precomputed Fréchet mean of ``Y`` (a point or a fitted :class:`FrechetMean`):
        adds the least squares of the Logs at it to the starting fits. ``None``
        computes no mean.
    n_jobs : int, default=None
        Workers (joblib) for the batches of Exp and Log maps.
    verbose : bool, default=False

    Attributes
    ----------
    intercept_ : ndarray of shape (dim,)
        Base point :math:`p`.
    coef_ : ndarray of shape (dim, n_covariates)
        Tangent vectors :math:`v_k` at :math:`p` as columns (the layout of
        :attr:`sklearn.linear_model.LinearRegression.coef_`).
    objective_ : float
        :math:`F / \sum_i w_i`, the weighted mean squared geodesic residual (``space.metric.squared_dist`` at the fit).
    grad_norm_ : float
        :math:`\lambda / \sqrt{\sum_i w_i}` at the last iterate.
    converged_ : bool
        Whether the stopping test holds at the fit, with every residual certified.
    n_uncertified_ : int
        Log residuals at the fit that the space's Log solver did not certify
        (``space.metric.log_solver.last_result_.converged``); with any, the fit warns and is not ``converged_``.
    n_iter_ : int
    n_features_in_ : int
        Number of covariates.

    References
    ----------
    .. [1] P. T. Fletcher, "Geodesic regression and the theory of least
       squares on Riemannian manifolds", IJCV 105(2), 2013.
    """

    def __init__(self, space, *, method="exact", max_iter=50, tol=1e-6, mean=None, n_jobs=None, verbose=False):
        self.space = space
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.mean = mean
        self.n_jobs = n_jobs
        self.verbose = verbose

    _parameter_checks = {"method": options("exact", "flat"), "max_iter": check_int, "tol": check_tolerance, "n_jobs": check_n_jobs}

    @with_one_blas_thread
    def fit(self, t, Y, sample_weight=None):
        """Fit covariates ``t`` of shape (n_samples,) or (n_samples, n_covariates) to points ``Y`` (n_samples, dim)."""
        dim = _tangent.point_dim(self.space)
        params = check_params(self, self._parameter_checks)
        method, max_iter, tol = params["method"], params["max_iter"], params["tol"]
        t, Y = validate_data(
            self, _as_design(check_not_text(t, "t")), check_not_text(Y, "Y"),
            dtype=float, multi_output=True, y_numeric=True, ensure_min_samples=2,
        )
        Y = np.asarray(Y, dtype=float).reshape(len(Y), -1)
        if Y.shape[1] != dim:
            raise ValueError(f"Y must have {dim} columns to match the space, got shape {Y.shape}")
        weights = check_weights(sample_weight, len(t))
        t, Y, weights = t[weights > 0], Y[weights > 0], weights[weights > 0] / weights.sum()
        design = np.hstack([np.ones((len(t), 1)), t])
        if np.linalg.matrix_rank(design * np.sqrt(weights)[:, None]) < design.shape[1]:
            raise ValueError("t must have linearly independent columns and vary across samples (design is rank deficient)")

        starts, spread = self._starts(t, Y, design, weights, given_mean(self.mean, dim))
        fit = min((self._evaluate(t, Y, weights, base, coef) for base, coef in starts), key=lambda fit: fit.value)
        jacobians = self._jacobians(method, t, design, fit.base, fit.coef)
        round_off = _ROUND_OFF * spread  # what a zero-residual fit resolves
        damping, n_iter, converged = 0.0, 0, False
        with tqdm(total=max_iter, desc="geodesic regression", disable=not self.verbose) as bar:
            while True:
                hessian, gradient = self._normal_equations(weights, fit, jacobians)
                decrement = float(gradient @ np.linalg.lstsq(hessian, gradient, rcond=None)[0])
                # the stopping test, to within the error of the Log residuals (their weighted norm bounds that of sqrt(decrement))
                if not fit.n_uncertified and np.sqrt(max(decrement, 0.0)) <= tol * np.sqrt(fit.value) + fit.noise + round_off:
                    converged = True
                    break
                if n_iter >= max_iter:
                    break
                scaling = np.maximum(np.diag(hessian), 1e-12 * np.diag(hessian).max())
                delta = np.linalg.lstsq(hessian + damping * np.diag(scaling), gradient, rcond=None)[0]
                predicted = float(2.0 * gradient @ delta - delta @ hessian @ delta)  # decrease of the linearized F
                if not predicted > _RESOLUTION * fit.value:
                    break  # no step the objective resolves: stalled, not converged
                n_iter += 1
                bar.update()
                trial = self._evaluate(t, Y, weights, *self._move(fit.base, fit.coef, delta.reshape(-1, dim)))
                if (fit.value - trial.value) / predicted < _OVERSHOOT:
                    trial, predicted = self._rescale(t, Y, weights, fit, trial, float(gradient @ delta), predicted, delta)
                ratio = (fit.value - trial.value) / predicted
                if ratio > ARMIJO:
                    fit = trial
                    jacobians = self._jacobians(method, t, design, fit.base, fit.coef)
                    damping *= max(1.0 / 3.0, 1.0 - (2.0 * min(ratio, 1.0) - 1.0) ** 3)  # Nielsen's update
                    damping = damping if damping > 1e-8 else 0.0
                else:
                    damping = max(4.0 * damping, 1e-3)
        fitted = _tangent.exp(self.space, t @ fit.coef, fit.base, self.n_jobs)
        value = float(weights @ _tangent.squared_dist(self.space, fitted, Y, self.n_jobs))
        self.intercept_, self.coef_ = fit.base, fit.coef.T
        self.objective_, self.grad_norm_, self.n_iter_ = value, float(np.sqrt(max(decrement, 0.0))), n_iter
        self.converged_, self.n_uncertified_ = converged, fit.n_uncertified
        _tangent.warn_uncertified("GeodesicRegression", self.n_uncertified_, len(Y), "residuals at the fit")
        if not converged:
            reason = (
                f"{fit.n_uncertified} of {len(Y)} Log residuals are not certified (Gauss-Newton decrement {self.grad_norm_:.3g})"
                if fit.n_uncertified
                else f"Gauss-Newton decrement {self.grad_norm_:.3g} > tol * sqrt(objective) = {tol * np.sqrt(value):.3g}"
                f" (+ {fit.noise:.3g} for the error of the Log residuals)"
            )
            warnings.warn(
                f"GeodesicRegression did not converge in {n_iter} iterations: {reason}",
                ConvergenceWarning,
                stacklevel=3,  # the user's call, past with_one_blas_thread
            )
        return self

    def _starts(self, t, Y, design, weights, mean):
        """Cheap starting fits ``(base, coef)`` and the rms distance of ``Y`` from the first one's base point.

        Chart least squares, least squares of the Logs at its base point and at ``mean``, two-point geodesics.
        """
        root = np.sqrt(weights)[:, None]
        beta = np.linalg.lstsq(design * root, Y * root, rcond=None)[0]
        chart = np.asarray(self.space.projection(beta[0]), dtype=float) if hasattr(self.space, "projection") else beta[0]
        starts, spread = [(chart, self._to_tangent(beta[1:], chart))], None
        for anchor in [chart] + ([] if mean is None else [mean[0]]):
            logs, lengths, _, _ = _tangent.certified_log(self.space, Y, anchor, self.n_jobs)
            beta = np.linalg.lstsq(design * root, logs * root, rcond=None)[0]
            base = _tangent.exp(self.space, beta[:1], anchor)[0]
            starts.append((base, self._to_tangent(beta[1:], base)))
            if spread is None:  # the rms distance from the chart fit's base point
                spread = np.sqrt(weights @ lengths**2)
        if t.shape[1] == 1:  # geodesics through the extreme and through the quartile samples
            order = np.argsort(t[:, 0], kind="stable")
            for low, high in ((order[0], order[-1]), (order[len(t) // 4], order[-1 - len(t) // 4])):
                if t[high, 0] > t[low, 0]:
                    velocity = _tangent.log(self.space, Y[high : high + 1], Y[low]) / (t[high, 0] - t[low, 0])
                    base = _tangent.exp(self.space, -t[low, 0] * velocity, Y[low])[0]
                    far = high if abs(t[high, 0]) >= abs(t[low, 0]) else low
                    starts.append((base, _tangent.log(self.space, Y[far : far + 1], base) / t[far, 0]))
        return starts, spread

    def _evaluate(self, t, Y, weights, base, coef):
        """The fit ``(base, coef)`` with its objective, residuals, metrics and the Log solver's word on them."""
        fitted = _tangent.exp(self.space, t @ coef, base, self.n_jobs)
        residuals, lengths, errors, certified = _tangent.certified_log(self.space, Y, fitted, self.n_jobs)
        value = float(weights @ lengths**2)
        noise = float(np.sqrt(weights @ np.where(certified, errors, 0.0) ** 2))
        metrics = _tangent.metric_matrix(self.space, fitted)
        return _Fit(base, coef, value if np.isfinite(value) else np.inf, residuals, metrics, noise, int((~certified).sum()))

    def _rescale(self, t, Y, weights, fit, trial, slope, predicted, delta):
        r"""The step :math:`\alpha \delta` that minimizes the parabola through :math:`F` at the fit, its slope
        :math:`-2 g^T \delta` (``slope`` is :math:`g^T \delta`) and :math:`F` at the full step, where that step decreased
        :math:`F` by less than half the ``predicted`` decrease :math:`2 g^T \delta - \delta^T H \delta` (:math:`\alpha` in
        ``_STEP_RANGE``); the better of the two trials, with its predicted decrease
        :math:`2 \alpha g^T \delta - \alpha^2 \delta^T H \delta` (positive for :math:`\alpha \le 1`).

        Gauss--Newton's matrix lacks the second derivatives of the residuals: with large residuals on a curved
        field it can misjudge the curvature along its own step, and the full steps then overshoot back and forth
        (on a benchmark field, seed ``[5, 99]``: 50 iterations each 0.87 times the last, unconverged).
        """
        curvature = trial.value - fit.value + 2.0 * slope  # of the parabola alpha -> F(alpha delta)
        alpha = slope / curvature if curvature > 0 else 0.0
        if _STEP_RANGE[0] <= alpha < _STEP_RANGE[1]:
            rescaled = self._evaluate(t, Y, weights, *self._move(fit.base, fit.coef, alpha * delta.reshape(-1, len(fit.base))))
            if rescaled.value < trial.value:
                return rescaled, 2.0 * alpha * slope - alpha**2 * (2.0 * slope - predicted)
        return trial, predicted

    def _to_tangent(self, vectors, base_point):
        if hasattr(self.space, "to_tangent"):
            return np.asarray(self.space.to_tangent(vectors, base_point), dtype=float)
        return vectors

    def _move(self, base, coef, delta):
        r"""The update :math:`p \leftarrow \mathrm{Exp}_p(\Delta a)`, :math:`V \leftarrow V + \Delta V` (kept tangent)."""
        new_base = _tangent.exp(self.space, self._to_tangent(delta[:1], base), base)[0]
        return new_base, self._to_tangent(coef + delta[1:], new_base)

    def _jacobians(self, method, t, design, base, coef):
        r"""Jacobians :math:`J_i` of the fitted points in the step, shape ``(n, D, (K + 1) D)``."""
        n_samples, n_params = design.shape
        dim = len(base)
        if method == "flat":
            return np.einsum("ia,de->idae", design, np.eye(dim)).reshape(n_samples, dim, n_params * dim)
        tangent_vecs = t @ coef
        exact = _tangent.exp_differential(self.space, tangent_vecs, np.broadcast_to(base, tangent_vecs.shape), self.n_jobs)
        if exact is not None:
            d_vector, d_base = exact
            blocks = [d_base] + [t[:, k, None, None] * d_vector for k in range(n_params - 1)]
            return np.concatenate(blocks, axis=-1)
        h = _DIFFERENCE_STEP * (1.0 + np.abs(np.r_[base, coef.ravel()]).max())
        columns = []
        for index in range(n_params * dim):
            step = np.zeros((n_params, dim))
            step.flat[index] = h
            ends = [_tangent.exp(self.space, t @ c, b, self.n_jobs) for b, c in (self._move(base, coef, s) for s in (step, -step))]
            columns.append((ends[0] - ends[1]) / (2.0 * h))
        return np.stack(columns, axis=-1)

    @staticmethod
    def _normal_equations(weights, fit, jacobians):
        r"""Gauss--Newton matrix :math:`\sum_i w_i J_i^T M_i J_i` and :math:`\sum_i w_i J_i^T M_i r_i` of the linearized least squares."""
        weighted = np.einsum("i,ide,iep->idp", weights, fit.metrics, jacobians)  # w_i M_i J_i
        return np.einsum("idq,idp->qp", jacobians, weighted), np.einsum("idp,id->p", weighted, fit.residuals)

    def predict(self, t):
        r"""Points :math:`\mathrm{Exp}_p(V^T t)` for covariates ``t``."""
        check_is_fitted(self)
        t = validate_data(self, _as_design(check_not_text(t, "t")), dtype=float, reset=False)
        return _tangent.exp(self.space, t @ self.coef_.T, self.intercept_, self.n_jobs)


class TangentSpaceRegression(RegressorMixin, BaseEstimator):
    r"""Regress a response on the tangent coordinates of manifold-valued predictors.

    Maps every :math:`x_i` to :math:`\mathrm{Log}_\mu(x_i)` at the Fréchet
    mean, expressed in the :math:`M(\mu)`-orthonormal principal geodesic
    coordinates (:class:`PrincipalGeodesicAnalysis`; keeping all components
    is a rotation of the whitened tangent space, which linear regression does
    not see), optionally truncated to ``n_components``, and fits
    ``estimator`` there (Hauberg, Freifeld & Black 2012, sec. 3.1.1 and 4.1).

    Parameters
    ----------
    space : geomstats-style space
    estimator : regressor, default=None
        Cloned and fitted on the coordinates; ``None`` uses
        :class:`~sklearn.linear_model.LinearRegression`.
    n_components : int, default=None
        Principal geodesic coordinates kept; ``None`` keeps all.
    max_iter, tol, mean, n_jobs, verbose
        Passed to :class:`PrincipalGeodesicAnalysis` (``mean``: a precomputed Fréchet mean, a point or a fitted
        :class:`FrechetMean`, used instead of computing one).

    Attributes
    ----------
    pga_ : PrincipalGeodesicAnalysis
    estimator_ : regressor
    mean_ : ndarray of shape (dim,)
    n_features_in_ : int
    """

    def __init__(
        self, space, estimator=None, n_components=None, *, max_iter=100, tol=1e-5, mean=None, n_jobs=None, verbose=False
    ):
        self.space = space
        self.estimator = estimator
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.mean = mean
        self.n_jobs = n_jobs
        self.verbose = verbose

    @with_one_blas_thread
    def fit(self, X, y, sample_weight=None):
        """Fit on points ``X`` (n_samples, dim) and responses ``y``; ``sample_weight`` goes to the estimator."""
        X, y = validate_data(
            self, check_not_text(X, "X"), check_not_text(y, "y"), dtype=float, multi_output=True, y_numeric=True, ensure_min_samples=2
        )
        fit_params = {} if sample_weight is None else {"sample_weight": check_weights(sample_weight, len(X))}
        self.pga_ = PrincipalGeodesicAnalysis(
            self.space, self.n_components, max_iter=self.max_iter, tol=self.tol, mean=self.mean, n_jobs=self.n_jobs,
            verbose=self.verbose,
        )
        coordinates = self.pga_.fit_transform(X)
        self.mean_ = self.pga_.mean_
        self.estimator_ = clone(LinearRegression() if self.estimator is None else self.estimator)
        self.estimator_.fit(coordinates, y, **fit_params)
        return self

    @with_one_blas_thread
    def predict(self, X):
        """Predict responses from points ``X``."""
        check_is_fitted(self)
        X = validate_data(self, check_not_text(X, "X"), dtype=float, reset=False)
        return self.estimator_.predict(self.pga_.transform(X))
