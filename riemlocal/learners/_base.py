"""Shared pieces of the metric learners: PSD factorization and transform."""

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["MetricLearner", "components_from_metric", "relative_weights"]


def relative_weights(weights):
    """Non-negative ``weights`` scaled to mean 1: ``c * weights`` gives the same result for every ``c > 0``.

    For the learners whose loss is a weighted sum (LMNN, BoostMetric), where only the
    ratios of the weights carry meaning; uniform weights of any scale become ones.
    """
    weights = weights / weights.max()  # first into [0, 1], so the mean neither overflows nor underflows
    return weights / weights.mean()


def components_from_metric(metric, tol=1e-12):
    """Return ``L`` with ``L.T @ L == metric`` for a symmetric PSD ``metric``.

    Rows are :math:`\\sqrt{\\lambda_i} u_i^T` for the eigenpairs with
    :math:`\\lambda_i > tol \\cdot \\lambda_{max}`, largest first; tiny negative
    eigenvalues from round-off are dropped.
    """
    metric = 0.5 * (metric + metric.T)
    eigvals, eigvecs = np.linalg.eigh(metric)
    order = np.argsort(eigvals)[::-1]
    eigvals, eigvecs = eigvals[order], eigvecs[:, order]
    keep = eigvals > tol * max(eigvals[0], 0.0)
    if not np.any(keep):
        keep[0] = True
    return np.sqrt(np.clip(eigvals[keep], 0.0, None))[:, None] * eigvecs[:, keep].T


class MetricLearner(TransformerMixin, BaseEstimator):
    """Base of the Mahalanobis learners: ``metric_ = components_.T @ components_``.

    Subclasses implement ``fit`` and set ``components_`` (and so ``metric_``)
    through :meth:`_set_metric`.
    """

    def _set_metric(self, metric=None, components=None):
        if components is None:
            components = components_from_metric(metric)
        self.components_ = np.asarray(components, dtype=float)
        self.metric_ = self.components_.T @ self.components_
        return self

    def transform(self, X):
        """Map ``X`` to the learned space, ``X @ components_.T``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return X @ self.components_.T

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
