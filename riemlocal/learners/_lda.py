"""Weighted, regularized LDA as a metric learner (Ramanan & Baker, eq. LDA)."""

import numbers
from functools import partial

import numpy as np
import scipy.linalg
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..utils.parallel import with_one_blas_thread
from ..utils.validation import (
    check_fraction,
    check_labels,
    check_params,
    check_positive,
    check_weights,
    is_positive_definite,
    options,
)
from ._base import MetricLearner

__all__ = ["LDAMetric"]


def _class_statistics(X, y_index, weights, n_classes):
    """Weighted class totals, means and within-class covariances.

    Returns ``totals`` :math:`N_j=\\sum_{y_i=j} w_i` (``(C,)``), ``means``
    :math:`\\mu_j` (``(C, D)``) and ``covariances``
    :math:`S_j=\\sum_{y_i=j} w_i (x_i-\\mu_j)(x_i-\\mu_j)^T / N_j` (``(C, D, D)``).
    """
    one_hot = np.zeros((X.shape[0], n_classes))
    one_hot[np.arange(X.shape[0]), y_index] = weights
    totals = one_hot.sum(axis=0)
    means = (one_hot.T @ X) / totals[:, None]
    centered = X - means[y_index]
    covariances = np.einsum("nc,nd,ne->cde", one_hot, centered, centered) / totals[:, None, None]
    return totals, means, covariances


class LDAMetric(MetricLearner):
    r"""Weighted regularized LDA metric of Ramanan & Baker [1]_.

    With weighted class means :math:`\mu_j = \sum_{y_i=j} w_i x_i / N_j`,
    :math:`N_j = \sum_{y_i=j} w_i`, and :math:`C` classes of positive weight,

    .. math::

        \Sigma_W = \frac{\sum_i w_i (x_i - \mu_{y_i})(x_i - \mu_{y_i})^T}{\sum_i w_i},
        \qquad
        \Sigma_B = \frac{1}{C}\sum_j \bar\mu_j \bar\mu_j^T,
        \quad \bar\mu_j = \mu_j - \frac{1}{C}\sum_l \mu_l .

    The paper bags :math:`\Sigma_B`: it averages the between-class scatter of
    random subsamples so that its rank exceeds :math:`C - 1`. We use the
    limit of infinitely many bags in closed form (deterministic, no sampling
    noise): if each bag keeps a fraction :math:`f` (``subsample``) of every
    class, the subsample mean of class :math:`j` has covariance
    :math:`\Psi_j = \frac{1-f}{f N_j} S_j` (weights read as counts, finite
    population factor :math:`N_j/(N_j-1)` dropped) and

    .. math::

        \mathbb{E}[\Sigma_B^{bag}] = \Sigma_B + \frac{1}{C}\Big(1 - \frac{1}{C}\Big) \sum_j \Psi_j .

    The basis :math:`V` (``d x D``) maximizes :math:`\mathrm{tr}(V\Sigma_B V^T)`
    subject to :math:`V(\Sigma_W + \lambda I)V^T = I` (the top ``d`` generalized
    eigenvectors); Gram-Schmidt gives the orthonormal :math:`V_G` and
    :math:`M = V_G^T V_G`, the orthogonal projector onto the discriminant
    subspace (``form="basis"``). ``form="scatter"`` gives the full-rank
    alternative :math:`M = (\Sigma_W + \lambda I)^{-1} \Sigma_B (\Sigma_W + \lambda I)^{-1}`.
    The regularization is relative to the data scale:
    :math:`\lambda = \texttt{reg} \cdot \mathrm{tr}(\Sigma_T) / D` with
    :math:`\Sigma_T` the weighted total covariance (``reg`` itself when all
    points coincide), so ``reg=1`` matches the paper's :math:`\lambda = 1` on
    standardized data.

    Without between-class information (fewer than two classes of positive
    weight, or coinciding class means) the metric falls back to the
    regularized within-class Mahalanobis metric :math:`(\Sigma_W + \lambda I)^{-1}`
    instead of failing, so that local fits on one-class neighbourhoods work.

    Parameters
    ----------
    n_components : int, default=None
        Rank :math:`d` of the ``"basis"`` metric. ``None``: the number of
        classes of positive weight minus one (at least 1, at most ``D``).
        Ignored by ``form="scatter"`` and by the one-class fallback.
    reg : float, default=1.0
        Relative regularization of :math:`\Sigma_W` (see above), ``>= 0``.
    subsample : float, default=0.5
        Fraction :math:`f \in (0, 1]` of each class in a bag; ``1.0`` gives the
        plain (unbagged) :math:`\Sigma_B` of rank at most :math:`C - 1`.
    form : {"basis", "scatter"}, default="basis"
        Low-rank projector :math:`V_G^T V_G` or full-rank scatter metric.
    trace_to_dim : bool, default=True
        Scale the metric to :math:`\mathrm{tr}(M) = D` (``n_features_in_``),
        so that metrics fitted on different neighbourhoods are comparable and
        the Euclidean metric is its own normalized form. The paper uses unit
        trace (``normalize`` of :func:`condition_metric`); the two differ by
        the common factor :math:`D`, which changes no comparison between
        distances.

    Attributes
    ----------
    metric_ : ndarray of shape (n_features, n_features)
        Learned PSD metric :math:`M`.
    components_ : ndarray of shape (rank, n_features)
        :math:`L` with ``metric_ == components_.T @ components_``.
    classes_ : ndarray of shape (n_classes,)
        Labels that carry positive weight.
    n_features_in_ : int
        Number of features seen in ``fit``.

    See Also
    --------
    LMNNMetric : large-margin metric learning.

    References
    ----------
    .. [1] D. Ramanan and S. Baker, "Local distance functions: a taxonomy, new
       algorithms, and an evaluation", IEEE TPAMI 33(4), 2011, Section II-B.

    Examples
    --------
    >>> import numpy as np
    >>> from riemlocal.learners import LDAMetric
    >>> X = np.array([[0.0, 0.0], [0.1, 3.0], [1.0, 0.2], [1.1, 2.9]])
    >>> lda = LDAMetric(subsample=1.0).fit(X, [0, 0, 1, 1])
    >>> round(float(np.trace(lda.metric_)), 6)
    2.0
    """

    def __init__(self, n_components=None, *, reg=1.0, subsample=0.5, form="basis", trace_to_dim=True):
        self.n_components = n_components
        self.reg = reg
        self.subsample = subsample
        self.form = form
        self.trace_to_dim = trace_to_dim

    _parameter_checks = {
        "reg": partial(check_positive, strict=False),
        "subsample": check_fraction,
        "form": options("basis", "scatter"),
    }

    def _check_params(self, n_features):
        check_params(self, self._parameter_checks)
        if self.n_components is not None:
            if isinstance(self.n_components, bool) or not isinstance(self.n_components, numbers.Integral):
                raise TypeError(f"n_components must be an int or None, got {self.n_components!r}")
            if not 1 <= self.n_components <= n_features:
                raise ValueError(f"n_components must be in [1, n_features={n_features}], got {self.n_components}")

    @with_one_blas_thread
    def fit(self, X, y, sample_weight=None):
        """Fit the LDA metric.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights :math:`w_i`, read as counts; weight 0 means
            the sample is absent. At least one must be positive.

        Returns
        -------
        self : LDAMetric
        """
        X, y = validate_data(self, X, y)
        check_classification_targets(check_labels(y))
        self._check_params(X.shape[1])
        weights = check_weights(sample_weight, X.shape[0])
        present = weights > 0
        X, y, weights = X[present], y[present], weights[present]
        self.classes_, y_index = np.unique(y, return_inverse=True)
        n_classes, n_features = len(self.classes_), X.shape[1]

        totals, means, covariances = _class_statistics(X, y_index, weights, n_classes)
        within = np.einsum("c,cde->de", totals, covariances) / totals.sum()
        centered_means = means - means.mean(axis=0)
        between = centered_means.T @ centered_means / n_classes
        bagging = (1.0 - self.subsample) / self.subsample * (1.0 - 1.0 / n_classes) / n_classes
        between += bagging * np.einsum("c,cde->de", 1.0 / totals, covariances)

        overall = weights @ X / weights.sum()
        total_scale = weights @ ((X - overall) ** 2).sum(axis=1) / weights.sum() / n_features
        lam = self.reg * total_scale if total_scale > 0 else self.reg
        regularized = within + lam * np.eye(n_features)
        if not is_positive_definite(regularized):
            raise ValueError(f"the within-class scatter is singular with reg={self.reg!r}; use reg > 0")

        if np.trace(between) <= 1e-12 * max(total_scale * n_features, np.finfo(float).tiny):
            metric = np.linalg.inv(regularized)
        elif self.form == "scatter":
            inverse = np.linalg.inv(regularized)
            metric = inverse @ between @ inverse
        else:
            rank = self.n_components or min(max(n_classes - 1, 1), n_features)
            _, basis = scipy.linalg.eigh(between, regularized)
            orthonormal, _ = np.linalg.qr(basis[:, ::-1][:, :rank])
            components = orthonormal.T
            if self.trace_to_dim:
                components = components * np.sqrt(n_features / rank)
            return self._set_metric(components=components)
        metric = 0.5 * (metric + metric.T)
        if self.trace_to_dim:
            metric = metric * (n_features / np.trace(metric))
        return self._set_metric(metric=metric)
