r"""Regression with manifold-valued responses (geodesic) or predictors (tangent space)."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.utils.validation import check_is_fitted, validate_data
from tqdm.auto import tqdm

from ..utils.optimize import ARMIJO
from ..utils.validation import check_int, check_n_jobs, check_not_text, check_option, check_positive, check_weights
from . import _tangent
from ._frechet import FrechetMean
from ._pga import PrincipalGeodesicAnalysis

__all__ = ["GeodesicRegression", "TangentSpaceRegression"]

_MIN_GAUSS_NEWTON_STEP = 2.0**-10
# a rejected step predicting less than this relative decrease is below the accuracy of the Log residuals
_RESOLUTION = 1e-8
_DIFFERENCE_STEP = 1e-6  # central differences of Exp for spaces without exp_differential


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

    **Initialization**: ordinary least squares of
    :math:`\mathrm{Log}_\mu(y_i) \approx a + V^T t_i` in the tangent space at
    the Fréchet mean :math:`\mu`, then :math:`p = \mathrm{Exp}_\mu(a)`.

    **Minimization**: damped Gauss--Newton. The residual
    :math:`r_i = \mathrm{Log}_{\hat y_i}(y_i)` gives
    :math:`d^2(\hat y_i, y_i) = \|r_i\|^2_{M(\hat y_i)}` and the gradient
    :math:`\nabla_{\hat y_i} d^2 = -2 M(\hat y_i) r_i`, so with :math:`J_i` the
    Jacobian of :math:`\hat y_i` in the step :math:`\delta = (\Delta a, \Delta V)`
    of the update :math:`p \leftarrow \mathrm{Exp}_p(\Delta a)`, :math:`V \leftarrow V + \Delta V`,

    .. math::
        \nabla F = -2 \sum_i w_i J_i^T M(\hat y_i)\, r_i, \qquad
        \min_\delta \sum_i w_i \| r_i - J_i \delta \|^2_{M(\hat y_i)}

    is the Gauss--Newton step, taken with an Armijo line search on the exact
    :math:`F` (one batch of Exp and one of Log per evaluation), so :math:`F`
    decreases monotonically.

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
      :math:`\times \|V^T t\|^2`, and the fit stops above the minimum (5% on
      a strongly curved 2-D field, see the tests). Cheaper per iteration.

    Parameters
    ----------
    space : geomstats-style space
        See :class:`FrechetMean`.
    method : {"exact", "flat"}, default="exact"
        Jacobian of the fitted points: exact (Jacobi fields) or the flat-chart approximation.
    max_iter : int, default=50
        Gauss--Newton iterations.
    tol : float, default=1e-6
        Stop when the Gauss--Newton decrement :math:`\lambda^2 = g^T H^{-1} g`
        is at most ``tol**2`` times :math:`F`.
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
    n_iter_ : int
    n_features_in_ : int
        Number of covariates.

    References
    ----------
    .. [1] P. T. Fletcher, "Geodesic regression and the theory of least
       squares on Riemannian manifolds", IJCV 105(2), 2013.
    """

    def __init__(self, space, *, method="exact", max_iter=50, tol=1e-6, n_jobs=None, verbose=False):
        self.space = space
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.verbose = verbose

    def fit(self, t, Y, sample_weight=None):
        """Fit covariates ``t`` of shape (n_samples,) or (n_samples, n_covariates) to points ``Y`` (n_samples, dim)."""
        dim = _tangent.point_dim(self.space)
        method = check_option(self.method, "method", ("exact", "flat"))
        max_iter = check_int(self.max_iter, "max_iter")
        tol = check_positive(self.tol, "tol")
        check_n_jobs(self.n_jobs)
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

        mean = FrechetMean(self.space, n_jobs=self.n_jobs).fit(Y, sample_weight=weights).estimate_
        logs = _tangent.log(self.space, Y, mean, self.n_jobs)
        root = np.sqrt(weights)[:, None]
        beta = np.linalg.lstsq(design * root, logs * root, rcond=None)[0]
        base = _tangent.exp(self.space, beta[:1], mean)[0]
        coef = self._to_tangent(beta[1:], base)

        def evaluate(base, coef):
            fitted = _tangent.exp(self.space, t @ coef, base, self.n_jobs)
            residuals = _tangent.log(self.space, Y, fitted, self.n_jobs)
            metrics = _tangent.metric_matrix(self.space, fitted)
            return float(weights @ _tangent.squared_norm(residuals, metrics)), residuals, metrics

        value, residuals, metrics = evaluate(base, coef)
        jacobians = self._jacobians(method, t, design, base, coef)
        step, n_iter, converged = 1.0, 0, False
        with tqdm(total=max_iter, desc="geodesic regression", disable=not self.verbose) as bar:
            while True:
                delta, decrement = self._gauss_newton_step(weights, residuals, metrics, jacobians)
                if decrement <= tol**2 * value:
                    converged = True
                    break
                if step < _MIN_GAUSS_NEWTON_STEP or (step < 1.0 and decrement <= _RESOLUTION * value):
                    # no descent along the Gauss-Newton direction: stationary to the accuracy of the
                    # Log residuals (or, with "flat", of the linearization)
                    converged = True
                    break
                if n_iter >= max_iter:
                    break
                n_iter += 1
                bar.update()
                new_base, new_coef = self._move(base, coef, step * delta)
                new_value, new_residuals, new_metrics = evaluate(new_base, new_coef)
                if new_value <= value - 2.0 * ARMIJO * step * decrement:
                    base, coef, value, residuals, metrics = new_base, new_coef, new_value, new_residuals, new_metrics
                    jacobians = self._jacobians(method, t, design, base, coef)
                    step = min(1.0, 2.0 * step)
                else:
                    step *= 0.5
        fitted = _tangent.exp(self.space, t @ coef, base, self.n_jobs)
        value = float(weights @ _tangent.squared_dist(self.space, fitted, Y, self.n_jobs))
        self.intercept_, self.coef_ = base, coef.T
        self.objective_, self.grad_norm_, self.n_iter_ = value, float(np.sqrt(max(decrement, 0.0))), n_iter
        if not converged:
            warnings.warn(
                f"GeodesicRegression did not converge in {n_iter} iterations: Gauss-Newton decrement "
                f"{self.grad_norm_:.3g} > tol * sqrt(objective) = {tol * np.sqrt(value):.3g}",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

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
    def _gauss_newton_step(weights, residuals, metrics, jacobians):
        """Solve the linearized weighted least squares; return the step (K+1, D) and the decrement."""
        weighted = np.einsum("i,ide,iep->idp", weights, metrics, jacobians)  # w_i M_i J_i
        hessian = np.einsum("idq,idp->qp", jacobians, weighted)
        gradient = np.einsum("idp,id->p", weighted, residuals)
        delta = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        return delta.reshape(-1, residuals.shape[1]), float(gradient @ delta)

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
    max_iter, tol, n_jobs, verbose
        Passed to :class:`PrincipalGeodesicAnalysis`.

    Attributes
    ----------
    pga_ : PrincipalGeodesicAnalysis
    estimator_ : regressor
    mean_ : ndarray of shape (dim,)
    n_features_in_ : int
    """

    def __init__(self, space, estimator=None, n_components=None, *, max_iter=100, tol=1e-5, n_jobs=None, verbose=False):
        self.space = space
        self.estimator = estimator
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.verbose = verbose

    def fit(self, X, y, sample_weight=None):
        """Fit on points ``X`` (n_samples, dim) and responses ``y``; ``sample_weight`` goes to the estimator."""
        X, y = validate_data(
            self, check_not_text(X, "X"), check_not_text(y, "y"), dtype=float, multi_output=True, y_numeric=True, ensure_min_samples=2
        )
        fit_params = {} if sample_weight is None else {"sample_weight": check_weights(sample_weight, len(X))}
        self.pga_ = PrincipalGeodesicAnalysis(
            self.space, self.n_components, max_iter=self.max_iter, tol=self.tol, n_jobs=self.n_jobs, verbose=self.verbose
        )
        coordinates = self.pga_.fit_transform(X)
        self.mean_ = self.pga_.mean_
        self.estimator_ = clone(LinearRegression() if self.estimator is None else self.estimator)
        self.estimator_.fit(coordinates, y, **fit_params)
        return self

    def predict(self, X):
        """Predict responses from points ``X``."""
        check_is_fitted(self)
        X = validate_data(self, check_not_text(X, "X"), dtype=float, reset=False)
        return self.estimator_.predict(self.pga_.transform(X))
