"""Fit a learner on weighted samples and condition its metric: one local metric of a field.

Shared by every placement (:mod:`riemlocal.placement`) and by the lazy field
(:class:`riemlocal.fields.LazyField`): Ramanan & Baker, Sec. II-C.
"""

import numbers
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import has_fit_parameter

from ..utils.validation import SPD_RTOL, check_labels, check_option, check_points, check_positive, check_weights

__all__ = [
    "fit_local_metric",
    "condition_metric",
    "CONDITION_WARNING",
    "condition_numbers",
    "bound_condition",
    "check_max_condition",
    "check_rank",
    "check_learner",
    "WEIGHT_FLOOR",
]

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
    rank :math:`d < D`) positive definite.

    Raises
    ------
    ValueError
        If ``metric`` is not a finite square matrix, or not positive
        semidefinite and nonzero (its smallest eigenvalue below
        ``-SPD_RTOL`` times the largest, or no positive eigenvalue).
    """
    ridge = check_positive(ridge, "ridge", strict=False)
    metric = check_points(metric, name="metric", min_ndim=2)
    if metric.ndim != 2 or metric.shape[0] != metric.shape[1] or not metric.size:
        raise ValueError(f"metric must be a square matrix of shape (dim, dim) with dim >= 1, got shape {metric.shape}")
    metric = 0.5 * (metric + metric.T)
    eigenvalues = np.linalg.eigvalsh(metric)
    if not eigenvalues[-1] > 0 or eigenvalues[0] < -SPD_RTOL * eigenvalues[-1]:
        raise ValueError(
            f"metric must be positive semidefinite and nonzero; its eigenvalues range from "
            f"{eigenvalues[0]:.3g} to {eigenvalues[-1]:.3g}"
        )
    dim = metric.shape[0]
    trace = np.trace(metric)
    if normalize:
        metric, trace = metric / trace, 1.0
    return metric + (ridge * trace / dim) * np.eye(dim)


#: smooth_field and rbf_field, and the geodesic solvers' warnings, name local metrics with a condition number
#: above this: measured on iris (LMNN per class, smooth field), geodesics between 60 points were all certified
#: in seconds with metrics bounded at 100, but took ten times longer, with pairs left uncertified, at 1000
CONDITION_WARNING = 1e3


def condition_numbers(metrics):
    """Condition numbers (largest over smallest eigenvalue) of PSD matrices ``(..., dim, dim)``, shape ``(...)``.

    Capped at ``1 / SPD_RTOL``, the value of the matrices singular by the library's rank rule.
    """
    eigenvalues = np.linalg.eigvalsh(metrics)
    largest = eigenvalues[..., -1]
    return largest / np.maximum(eigenvalues[..., 0], SPD_RTOL * largest)


def check_max_condition(max_condition, name="max_condition"):
    """Return ``max_condition`` as a float after checking it is ``None`` or a finite number > 1."""
    if max_condition is None:
        return None
    if isinstance(max_condition, bool) or not isinstance(max_condition, numbers.Real):
        raise TypeError(f"{name} must be None or a real number, got {max_condition!r}")
    if not (np.isfinite(max_condition) and max_condition > 1):
        raise ValueError(f"{name} must be None or a finite number > 1, got {max_condition!r}")
    return float(max_condition)


def bound_condition(metrics, max_condition):
    r"""Floor the eigenvalues of SPD ``metrics`` ``(..., dim, dim)`` at :math:`\lambda_{max} /` ``max_condition``.

    Each metric keeps its eigenvectors and largest eigenvalue; its condition
    number becomes at most ``max_condition``. Metrics already within the
    bound, and all with ``max_condition=None``, are returned unchanged.

    Returns
    -------
    bounded : ndarray of shape (..., dim, dim)
    n_clipped : ndarray of int of shape (...)
        Eigenvalues raised in each metric.
    """
    max_condition = check_max_condition(max_condition)
    metrics = np.array(metrics, dtype=float)
    if max_condition is None:
        return metrics, np.zeros(metrics.shape[:-2], dtype=int)
    eigenvalues, vectors = np.linalg.eigh(metrics)
    floor = eigenvalues[..., -1:] / max_condition
    n_clipped = (eigenvalues < floor).sum(axis=-1)
    rows = n_clipped > 0
    raised = np.maximum(eigenvalues[rows], floor[rows])
    bounded = (vectors[rows] * raised[..., None, :]) @ vectors[rows].swapaxes(-1, -2)
    metrics[rows] = 0.5 * (bounded + bounded.swapaxes(-1, -2))
    return metrics, n_clipped


def _set_rank(estimator, rank):
    """Set ``n_components`` of ``estimator`` when it has one and ``rank`` is not None."""
    if rank is not None and "n_components" in estimator.get_params(deep=False):
        estimator.set_params(n_components=int(rank))
    return estimator


def fit_local_metric(
    learner, X, y, sample_weight=None, *, rank="auto", normalize=True, ridge=1e-6, fallback=None, zero_metric="raise"
):
    """Fit a clone of ``learner`` on weighted samples and return one SPD metric.

    Samples with weight below ``WEIGHT_FLOOR`` times the largest weight are
    dropped. With ``rank="auto"`` a learner with an ``n_components``
    parameter (LDA) gets the number of distinct classes among the kept
    samples (Ramanan & Baker fix the LDA rank this way); an int fixes it;
    ``None`` leaves the learner alone. A region holding a single class
    carries no discriminative information: it gets ``fallback`` (default
    identity). A learner can also find nothing to separate and return a zero
    metric (BoostMetric on coinciding classes): that raises, unless
    ``zero_metric="fallback"``, which takes ``fallback`` with a warning. The
    result goes through :func:`condition_metric`.

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
    zero_metric : {"raise", "fallback"}, default="raise"

    Returns
    -------
    metric : ndarray of shape (dim, dim)
    """
    check_learner(learner)
    rank = check_rank(rank)
    check_option(zero_metric, "zero_metric", ("raise", "fallback"))
    X = check_points(X, name="X", min_ndim=2)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (n_samples, dim), got shape {X.shape}")
    y = check_labels(y)
    if y.shape != (len(X),):
        raise ValueError(f"y must have shape ({len(X)},) to match X, got shape {y.shape}")
    dim = X.shape[1]
    fallback = np.eye(dim) if fallback is None else fallback
    if sample_weight is not None:
        sample_weight = check_weights(sample_weight, len(X))
        keep = sample_weight >= WEIGHT_FLOOR * sample_weight.max()
        X, y, sample_weight = X[keep], y[keep], sample_weight[keep]
    n_classes = len(np.unique(y))
    if n_classes < 2:
        return condition_metric(fallback, normalize, ridge)
    estimator = _set_rank(clone(learner), min(n_classes, dim) if rank == "auto" else rank)
    if sample_weight is None or np.ptp(sample_weight) == 0:
        estimator.fit(X, y)
    elif has_fit_parameter(estimator, "sample_weight"):
        estimator.fit(X, y, sample_weight=sample_weight)
    else:
        raise TypeError(f"learner {type(learner).__name__} must accept sample_weight in fit for weighted local metrics")
    metric = estimator.metric_
    if zero_metric == "fallback" and not np.any(metric):
        warnings.warn(f"{type(learner).__name__} learned a zero metric; using the fallback metric instead", RuntimeWarning, stacklevel=2)
        metric = fallback
    return condition_metric(metric, normalize, ridge)


def check_learner(learner, name="learner"):
    """Return ``learner`` after checking it is a scikit-learn estimator (``fit`` and ``get_params``, so it clones)."""
    if not (callable(getattr(learner, "fit", None)) and callable(getattr(learner, "get_params", None))):
        raise TypeError(f"{name} must be a scikit-learn metric learner (with fit and metric_), got {learner!r}")
    return learner


def check_rank(rank, name="rank"):
    """Return ``rank`` after checking it is ``"auto"``, ``None`` or a positive int."""
    if rank is None or rank == "auto":
        return rank
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1:
        raise ValueError(f"{name} must be 'auto', None or a positive int, got {rank!r}")
    return int(rank)
