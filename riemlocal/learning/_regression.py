r"""Regression with manifold-valued responses (geodesic) or predictors (tangent space)."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.utils.validation import check_is_fitted, validate_data
from tqdm.auto import tqdm

from ..utils.validation import check_int, check_n_jobs, check_positive, check_weights
from . import _tangent
from ._frechet import FrechetMean
from ._pga import PrincipalGeodesicAnalysis

__all__ = ["GeodesicRegression", "TangentSpaceRegression"]

_ARMIJO = 1e-4
_MIN_STEP = 2.0**-10


def _as_design(t):
    """Covariates as a 2-D array: a 1-D ``t`` is one covariate."""
    t = np.asarray(t)
    return t.reshape(-1, 1) if t.ndim == 1 else t


class GeodesicRegression(BaseEstimator):
    r"""Fletcher's geodesic regression :math:`y \approx \mathrm{Exp}_p(\sum_k t_k v_k)`.

    Minimizes the weighted sum of squared geodesic residuals

    .. math::
        F(p, V) = \sum_i w_i\, d^2\big(\mathrm{Exp}_p(V^T t_i),\, y_i\big),
        \qquad V = [v_1, \dots, v_K]^T .

    **Initialization**: ordinary least squares of
    :math:`\mathrm{Log}_\mu(y_i) \approx a + V^T t_i` in the tangent space at
    the Fréchet mean :math:`\mu`, then :math:`p = \mathrm{Exp}_\mu(a)`.

    **Minimization**: damped Gauss--Newton. With :math:`\hat y_i = \mathrm{Exp}_p(V^T t_i)`,
    the residual :math:`r_i = \mathrm{Log}_{\hat y_i}(y_i)` satisfies
    :math:`d^2(\hat y_i, y_i) = \|r_i\|^2_{M(\hat y_i)}` and
    :math:`-2 r_i` is the Riemannian gradient of :math:`d^2(\cdot, y_i)` at
    :math:`\hat y_i`. The differential of :math:`\mathrm{Exp}` is approximated
    by the identity of the chart (coordinates are carried unchanged from
    :math:`p` to :math:`\hat y_i`, i.e. parallel transport and Jacobi fields
    are those of a flat space), so each step solves the linearized problem

    .. math::
        \min_{\Delta a, \Delta V} \sum_i w_i \big\| r_i - \Delta a - \Delta V^T t_i \big\|^2_{M(\hat y_i)},

    a :math:`(K+1) D` linear system, and moves
    :math:`p \leftarrow \mathrm{Exp}_p(s \Delta a)`, :math:`V \leftarrow V + s \Delta V`
    (projected onto the new tangent space when the space has ``to_tangent``),
    halving :math:`s` until :math:`F` decreases by the Armijo amount. Every
    evaluation of :math:`F` is exact (one batch of Exp and one of Log), so
    :math:`F` decreases monotonically. It stops when the decrement is small
    or when the line search fails below :math:`s = 2^{-10}` (the linearized
    direction no longer descends: stationary up to the linearization). The fixed point satisfies
    :math:`\sum_i w_i [1, t_i] \otimes M(\hat y_i) r_i = 0`, the exact
    stationarity condition when :math:`d\mathrm{Exp}` is the identity
    (constant metric: the fit *is* ordinary least squares); on a curved space
    the neglected Jacobi-field terms are of order
    curvature :math:`\times \|V^T t\|^2`, so the fit is a near-stationary point
    (on the unit sphere with :math:`\|V^T t\|` up to 1.2 rad its objective is
    within :math:`10^{-3}` (relative) of the true minimum; measured
    :math:`10^{-4}`, see the tests).

    Parameters
    ----------
    space : geomstats-style space
        See :class:`FrechetMean`.
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
        :math:`F / \sum_i w_i`, the weighted mean squared geodesic residual.
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

    def __init__(self, space, *, max_iter=50, tol=1e-6, n_jobs=None, verbose=False):
        self.space = space
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.verbose = verbose

    def fit(self, t, Y, sample_weight=None):
        """Fit covariates ``t`` of shape (n_samples,) or (n_samples, n_covariates) to points ``Y`` (n_samples, dim)."""
        dim = _tangent.point_dim(self.space)
        max_iter = check_int(self.max_iter, "max_iter")
        tol = check_positive(self.tol, "tol")
        check_n_jobs(self.n_jobs)
        t, Y = validate_data(self, _as_design(t), Y, dtype=float, multi_output=True, y_numeric=True, ensure_min_samples=2)
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
        step, n_iter, converged = 1.0, 0, False
        with tqdm(total=max_iter, desc="geodesic regression", disable=not self.verbose) as bar:
            while True:
                delta, decrement = self._gauss_newton_step(design, weights, residuals, metrics)
                if decrement <= tol**2 * value:
                    converged = True
                    break
                if step < _MIN_STEP:  # no descent along the linearized direction: stationary up to the
                    converged = True  # error of the flat-Exp linearization
                    break
                if n_iter >= max_iter:
                    break
                n_iter += 1
                bar.update()
                new_base = _tangent.exp(self.space, step * delta[:1], base)[0]
                new_coef = self._to_tangent(coef + step * delta[1:], new_base)
                new_value, new_residuals, new_metrics = evaluate(new_base, new_coef)
                if new_value <= value - 2.0 * _ARMIJO * step * decrement:
                    base, coef, value, residuals, metrics = new_base, new_coef, new_value, new_residuals, new_metrics
                    step = min(1.0, 2.0 * step)
                else:
                    step *= 0.5
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

    @staticmethod
    def _gauss_newton_step(design, weights, residuals, metrics):
        """Solve the linearized weighted least squares; return the step (K+1, D) and the decrement."""
        n_params, dim = design.shape[1], residuals.shape[1]
        hessian = np.einsum("i,ia,ib,ide->adbe", weights, design, design, metrics).reshape(n_params * dim, -1)
        gradient = np.einsum("i,ia,ide,ie->ad", weights, design, metrics, residuals).ravel()
        delta = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        return delta.reshape(n_params, dim), float(gradient @ delta)

    def predict(self, t):
        r"""Points :math:`\mathrm{Exp}_p(V^T t)` for covariates ``t``."""
        check_is_fitted(self)
        t = validate_data(self, _as_design(t), dtype=float, reset=False)
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
        X, y = validate_data(self, X, y, dtype=float, multi_output=True, y_numeric=True, ensure_min_samples=2)
        self.pga_ = PrincipalGeodesicAnalysis(
            self.space, self.n_components, max_iter=self.max_iter, tol=self.tol, n_jobs=self.n_jobs, verbose=self.verbose
        )
        coordinates = self.pga_.fit_transform(X)
        self.mean_ = self.pga_.mean_
        self.estimator_ = clone(LinearRegression() if self.estimator is None else self.estimator)
        fit_params = {} if sample_weight is None else {"sample_weight": sample_weight}
        self.estimator_.fit(coordinates, y, **fit_params)
        return self

    def predict(self, X):
        """Predict responses from points ``X``."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=float, reset=False)
        return self.estimator_.predict(self.pga_.transform(X))
