"""Fit a learner on weighted samples and condition its metric: one local metric of a field.

Shared by every placement (:mod:`riemlocal.placement`) and by the lazy field
(:class:`riemlocal.fields.LazyField`): Ramanan & Baker, Sec. II-C.
"""

import numbers

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import has_fit_parameter

from ..utils.validation import check_weights

__all__ = ["fit_local_metric", "condition_metric", "check_rank", "WEIGHT_FLOOR"]

#: samples whose weight is below this fraction of the largest weight are dropped
#: before a local fit (weight 0 means absent; this also trims RBF tails)
WEIGHT_FLOOR = 1e-3


def condition_metric(metric, normalize=True, ridge=1e-6):
    r"""Make a learned PSD metric a comparable SPD one.

    .. math::
        M \leftarrow M / \operatorname{tr} M \ \text{(if normalize)}, \qquad
        M \leftarrow M + \text{ridge}\, \tfrac{\operatorname{tr} M}{D} I .

    Unit trace makes metrics learned independently comparable (Ramanan &
    Baker, Sec. II-C.2); the relative ridge makes low-rank metrics (LDA has
    rank :math:`d < D`) positive definite. A zero metric becomes :math:`I`.
    """
    metric = np.asarray(metric, dtype=float)
    metric = 0.5 * (metric + metric.T)
    dim = metric.shape[0]
    trace = np.trace(metric)
    if not trace > 1e-300:
        metric, trace = np.eye(dim), float(dim)
    if normalize:
        metric, trace = metric / trace, 1.0
    return metric + (ridge * trace / dim) * np.eye(dim)


def _set_rank(estimator, rank):
    """Set ``n_components`` of ``estimator`` when it has one and ``rank`` is not None."""
    if rank is not None and "n_components" in estimator.get_params(deep=False):
        estimator.set_params(n_components=int(rank))
    return estimator


def fit_local_metric(learner, X, y, sample_weight=None, *, rank="auto", normalize=True, ridge=1e-6, fallback=None):
    """Fit a clone of ``learner`` on weighted samples and return one SPD metric.

    Samples with weight below ``WEIGHT_FLOOR`` times the largest weight are
    dropped. With ``rank="auto"`` a learner with an ``n_components``
    parameter (LDA) gets the number of distinct classes among the kept
    samples (Ramanan & Baker fix the LDA rank this way); an int fixes it;
    ``None`` leaves the learner alone. A region holding a single class
    carries no discriminative information: it gets ``fallback`` (default
    identity). The result goes through :func:`condition_metric`.

    Parameters
    ----------
    learner : estimator with ``fit(X, y, sample_weight)`` and ``metric_``
    X : ndarray of shape (n_samples, dim)
    y : ndarray of shape (n_samples,)
    sample_weight : ndarray of shape (n_samples,), default=None
    rank : "auto", int or None, default="auto"
    normalize : bool, default=True
    ridge : float, default=1e-6
    fallback : ndarray of shape (dim, dim), default=None

    Returns
    -------
    metric : ndarray of shape (dim, dim)
    """
    dim = X.shape[1]
    if sample_weight is not None:
        sample_weight = check_weights(sample_weight, len(X))
        keep = sample_weight >= WEIGHT_FLOOR * sample_weight.max()
        X, y, sample_weight = X[keep], y[keep], sample_weight[keep]
    n_classes = len(np.unique(y))
    if n_classes < 2:
        return condition_metric(np.eye(dim) if fallback is None else fallback, normalize, ridge)
    estimator = _set_rank(clone(learner), min(n_classes, dim) if rank == "auto" else rank)
    if sample_weight is None or np.ptp(sample_weight) == 0:
        estimator.fit(X, y)
    elif has_fit_parameter(estimator, "sample_weight"):
        estimator.fit(X, y, sample_weight=sample_weight)
    else:
        raise TypeError(f"learner {type(learner).__name__} must accept sample_weight in fit for weighted local metrics")
    return condition_metric(estimator.metric_, normalize, ridge)


def check_rank(rank):
    """Return ``rank`` after checking it is ``"auto"``, ``None`` or a positive int."""
    if rank is None or rank == "auto":
        return rank
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1:
        raise ValueError(f"rank must be 'auto', None or a positive int, got {rank!r}")
    return int(rank)
