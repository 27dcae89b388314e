r"""Principal geodesic analysis: tangent PCA at the Fréchet mean in the inner product :math:`M(\mu)`."""

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from . import _tangent
from ._frechet import FrechetMean

__all__ = ["PrincipalGeodesicAnalysis"]


class PrincipalGeodesicAnalysis(TransformerMixin, BaseEstimator):
    r"""Principal geodesic analysis (Fletcher et al. 2004) in its tangent-space form.

    With :math:`\mu` the Fréchet mean, :math:`v_i = \mathrm{Log}_\mu(x_i)` and
    :math:`M(\mu) = L L^T` (Cholesky), the whitened tangent vectors
    :math:`z_i = L^T v_i` have Euclidean inner products equal to the
    Riemannian ones at :math:`\mu`. PCA of the second-moment matrix
    :math:`C = \frac{1}{n-1} \sum_i z_i z_i^T` (about the mean, where
    :math:`\sum_i v_i = 0`; the ``n - 1`` matches :class:`sklearn.decomposition.PCA`)
    gives eigenpairs :math:`(\lambda_k, u_k)`, and the principal directions
    :math:`e_k = L^{-T} u_k` are orthonormal in :math:`M(\mu)`. The principal
    geodesics are :math:`t \mapsto \mathrm{Exp}_\mu(t e_k)` (Hauberg et al.
    eq. 13).

    Parameters
    ----------
    space : geomstats-style space
        See :class:`FrechetMean`.
    n_components : int, default=None
        Components kept; ``None`` keeps ``min(n_samples, dim)``.
    max_iter, tol, n_jobs, verbose
        Passed to :class:`FrechetMean`; ``n_jobs`` also splits the Log and
        Exp batches of ``transform`` / ``inverse_transform``.

    Attributes
    ----------
    mean_ : ndarray of shape (dim,)
        Fréchet mean :math:`\mu`.
    metric_matrix_ : ndarray of shape (dim, dim)
        :math:`M(\mu)`.
    components_ : ndarray of shape (n_components, dim)
        Tangent vectors :math:`e_k` at the mean, orthonormal in :math:`M(\mu)`
        (``components_ @ metric_matrix_ @ components_.T == I``), by
        decreasing variance; each sign is fixed so that the largest entry
        of :math:`u_k` is positive.
    explained_variance_ : ndarray of shape (n_components,)
        :math:`\lambda_k`.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        :math:`\lambda_k / \sum_j \lambda_j` (over all ``dim`` eigenvalues).
    n_iter_ : int
        Iterations of the Fréchet mean.
    n_features_in_ : int

    References
    ----------
    .. [1] P. T. Fletcher, C. Lu, S. M. Pizer and S. Joshi, "Principal
       geodesic analysis for the study of nonlinear statistics of shape",
       IEEE TMI 23(8), 2004.
    .. [2] S. Hauberg, O. Freifeld and M. J. Black, "A geometric take on
       metric learning", NIPS 2012, sec. 3.1.1.
    """

    def __init__(self, space, n_components=None, *, max_iter=100, tol=1e-5, n_jobs=None, verbose=False):
        self.space = space
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.verbose = verbose

    def fit(self, X, y=None):
        """Fit on points ``X`` of shape (n_samples, dim); ``y`` is ignored."""
        self._fit(X)
        return self

    def fit_transform(self, X, y=None):
        """Fit and return the tangent coordinates of ``X`` (one batch of Log maps)."""
        return self._fit(X) @ self.metric_matrix_ @ self.components_.T

    def _fit(self, X):
        X = validate_data(self, X, dtype=float, ensure_min_samples=2)
        n_samples, dim = X.shape
        n_components = min(n_samples, dim) if self.n_components is None else self.n_components
        if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
            raise TypeError(f"n_components must be an int or None, got {self.n_components!r}")
        if not 1 <= n_components <= dim:
            raise ValueError(f"n_components must be in [1, {dim}], got {n_components}")
        mean = FrechetMean(self.space, max_iter=self.max_iter, tol=self.tol, n_jobs=self.n_jobs, verbose=self.verbose)
        mean.fit(X)
        self.mean_, self.n_iter_ = mean.estimate_, mean.n_iter_
        logs = _tangent.log(self.space, X, self.mean_, self.n_jobs)
        self.metric_matrix_ = _tangent.metric_matrix(self.space, self.mean_)
        factor = np.linalg.cholesky(self.metric_matrix_)
        whitened = logs @ factor
        eigvals, eigvecs = np.linalg.eigh(whitened.T @ whitened / (n_samples - 1))
        eigvals, eigvecs = np.clip(eigvals[::-1], 0.0, None), eigvecs[:, ::-1]
        signs = np.sign(eigvecs[np.argmax(np.abs(eigvecs), axis=0), np.arange(dim)])
        eigvecs = eigvecs * signs
        self.components_ = np.linalg.solve(factor.T, eigvecs[:, :n_components]).T
        self.explained_variance_ = eigvals[:n_components]
        self.explained_variance_ratio_ = self.explained_variance_ / max(eigvals.sum(), np.finfo(float).tiny)
        self.n_components_ = n_components
        return logs

    def transform(self, X):
        r"""Tangent coordinates :math:`\langle e_k, \mathrm{Log}_\mu(x)\rangle_{M(\mu)}`, shape (n_samples, n_components)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=float, reset=False)
        return _tangent.log(self.space, X, self.mean_, self.n_jobs) @ self.metric_matrix_ @ self.components_.T

    def inverse_transform(self, X):
        r"""Points :math:`\mathrm{Exp}_\mu(\sum_k a_k e_k)` from coordinates ``X`` of shape (n_samples, n_components)."""
        check_is_fitted(self)
        X = check_array(X, dtype=float, input_name="X")
        if X.shape[1] != self.n_components_:
            raise ValueError(f"X must have n_components={self.n_components_} columns, got shape {X.shape}")
        return _tangent.exp(self.space, X @ self.components_, self.mean_, self.n_jobs)

    def principal_geodesic(self, index, t):
        r"""Points on the ``index``-th principal geodesic, :math:`\mathrm{Exp}_\mu(t \sqrt{\lambda_k}\, e_k)`.

        Parameters
        ----------
        index : int
            Component :math:`k` (0-based).
        t : array-like of shape (n_points,)
            Positions in units of the component's standard deviation
            :math:`\sqrt{\lambda_k}` (e.g. ``np.linspace(-3, 3, 7)``).

        Returns
        -------
        ndarray of shape (n_points, dim)
            Computed from two geodesics (``space.metric.geodesic``), one per
            direction, each evaluated at all :math:`|t|`.
        """
        check_is_fitted(self)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < self.n_components_:
            raise ValueError(f"index must be an int in [0, {self.n_components_}), got {index!r}")
        t = np.asarray(t, dtype=float).reshape(-1)
        if not np.all(np.isfinite(t)):
            raise ValueError("t contains NaN or infinite values")
        direction = np.sqrt(self.explained_variance_[index]) * self.components_[index]
        times, position = np.unique(np.abs(t), return_inverse=True)
        path = self.space.metric.geodesic(self.mean_, initial_tangent_vec=np.stack([direction, -direction]))
        both = np.asarray(path(times), dtype=float).reshape(2, len(times), -1)[:, position]  # one curve per sign
        return np.where((t >= 0)[:, None], both[0], both[1])
