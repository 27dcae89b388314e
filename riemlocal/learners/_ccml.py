r"""Class-conditional metric learning (CCML) and the class-conditional KNN rule (Im & Taylor)."""

import warnings
from functools import partial

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data
from tqdm.auto import tqdm

from ..utils.parallel import with_one_blas_thread
from ..utils.validation import (
    check_int,
    check_labels,
    check_option,
    check_params,
    check_points,
    check_positive,
    check_random_state,
    check_weights,
    optional,
    options,
)
from ._base import MetricLearner

__all__ = ["CCMLMetric"]


class CCMLMetric(MetricLearner):
    r"""Class-conditional metric learning (CCML [1]_): a linear map trained for the CCKNN rule.

    With :math:`z = Lx` and :math:`m_i^C = \frac1k \sum_{j=1}^k \|z_i - NN^C_j(z_i)\|^2`
    the mean squared distance from :math:`z_i` to its ``k`` nearest points of
    class :math:`C` (the point itself excluded), point :math:`i` is assigned
    to its class :math:`C_i` with probability

    * ``objective="class_conditional"`` (eq. 10): :math:`p_i = e^{-m_i^{C_i}} / \sum_{C} e^{-m_i^{C}}`;
    * ``objective="local"`` (eq. 15, correct class vs. rest):
      :math:`p_i = e^{-m_i^{C_i}} / (e^{-m_i^{C_i}} + e^{-m_i^{\bar C_i}})`, where
      :math:`m_i^{\bar C_i}` uses the ``k`` nearest points of all other classes,
      so far-away classes are not pushed further.

    The learner maximizes the expected accuracy :math:`\sum_i s_i p_i / \sum_i s_i`
    (eq. 11) minus a weight decay :math:`\alpha \|L\|_F^2`, by L-BFGS with the
    analytic gradient (eq. 12): with the neighbour sets held fixed,

    .. math::
        \frac{\partial p_i}{\partial L}
        = -\sum_C p_i\,([C = C_i] - q_i^C)\, \frac{2}{k} L \sum_{j \in NN^C(i)} (x_i - x_j)(x_i - x_j)^T,

    :math:`q_i` being the softmax over the candidate classes. Neighbour sets
    are recomputed at every evaluation (the objective is piecewise smooth).

    Sample weights: a sample of weight 0 is absent (neither anchor nor
    neighbour); otherwise it weights its own term :math:`p_i`.

    Parameters
    ----------
    n_components : int, default=None
        Number of rows of :math:`L` (dimension of the projection); ``None``
        means ``n_features``.
    n_neighbors : int, default=3
        Number ``k`` of nearest neighbours per class.
    objective : {"local", "class_conditional"}, default="local"
        Assignment probability, eq. (15) or eq. (10) of [1]_.
    alpha : float, default=0.1
        Weight decay :math:`\alpha \ge 0` on :math:`\|L\|_F^2`. Without it the
        objective saturates (:math:`p_i \to 1`) as :math:`L` grows; the default
        suits standardized features (and was chosen on wine, see the benchmark).
    init : {"auto", "identity", "pca", "random"} or array-like of shape (n_components, n_features), default="auto"
        Initial :math:`L`: ``"auto"`` is ``"identity"`` (the first
        ``n_components`` rows of the identity) when ``n_components ==
        n_features`` and ``"pca"`` (the leading principal axes) otherwise;
        ``"random"`` draws a Gaussian matrix scaled by :math:`1/\sqrt{D}`.
    max_iter : int, default=100
        Maximum number of L-BFGS iterations.
    tol : float, default=1e-5
        L-BFGS tolerance on the relative decrease and the projected gradient.
    random_state : int, numpy Generator or None, default=None
        Seed of ``init="random"``.
    verbose : bool, default=False
        Show a progress bar over the L-BFGS iterations.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Learned map :math:`L`.
    metric_ : ndarray of shape (n_features, n_features)
        :math:`L^T L` (PSD).
    n_iter_ : int
        Number of L-BFGS iterations run.
    objective_value_ : float
        Final objective (negative expected accuracy plus weight decay).
    classes_ : ndarray of shape (n_classes,)
        Class labels seen in ``fit``.
    n_features_in_ : int
        Number of features seen in ``fit``.

    See Also
    --------
    riemlocal.neighbors.ccknn_predict : the class-conditional KNN decision rule (eq. 14).

    References
    ----------
    .. [1] D. J. Im and G. W. Taylor, "Learning a metric for class-conditional
       KNN", IJCNN 2016.

    Examples
    --------
    >>> from sklearn.datasets import load_wine
    >>> from sklearn.preprocessing import StandardScaler
    >>> from riemlocal.learners import CCMLMetric
    >>> X, y = load_wine(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> CCMLMetric(n_components=2).fit(X, y).transform(X).shape
    (178, 2)
    """

    _parameter_checks = {
        "n_neighbors": check_int,
        "objective": options("local", "class_conditional"),
        "alpha": partial(check_positive, strict=False),
        "max_iter": check_int,
        "tol": check_positive,
        "random_state": check_random_state,
        "n_components": optional(check_int, None),
    }

    def __init__(
        self,
        n_components=None,
        *,
        n_neighbors=3,
        objective="local",
        alpha=0.1,
        init="auto",
        max_iter=100,
        tol=1e-5,
        random_state=None,
        verbose=False,
    ):
        self.n_components = n_components
        self.n_neighbors = n_neighbors
        self.objective = objective
        self.alpha = alpha
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    @with_one_blas_thread
    def fit(self, X, y, sample_weight=None):
        """Learn the linear map :math:`L` from labelled data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the per-point terms (0 = absent).

        Returns
        -------
        self : CCMLMetric
        """
        params = check_params(self, self._parameter_checks)
        n_neighbors, alpha, max_iter, tol = (params[name] for name in ("n_neighbors", "alpha", "max_iter", "tol"))
        X, y = validate_data(self, X, y, ensure_min_samples=2)
        check_classification_targets(check_labels(y))
        self.classes_, y = np.unique(y, return_inverse=True)
        weights = check_weights(sample_weight, X.shape[0])
        n_components = X.shape[1] if self.n_components is None else params["n_components"]
        if n_components > X.shape[1]:
            raise ValueError(f"n_components must be <= n_features={X.shape[1]}, got {n_components}")
        components = self._initial_components(X, weights, n_components)

        problem = _CCMLProblem(X, y, weights, n_neighbors, self.objective, alpha)
        with tqdm(total=max_iter, disable=not self.verbose, desc="CCML") as bar:
            result = minimize(
                problem.loss_and_gradient,
                components.ravel(),
                jac=True,
                method="L-BFGS-B",
                tol=tol,
                options={"maxiter": max_iter},
                callback=lambda _: bar.update(),
            )
        if not result.success:
            residual = np.abs(result.jac).max()
            warnings.warn(
                f"CCMLMetric did not converge ({result.message}) after {result.nit} iterations: "
                f"max |gradient| = {residual:.3g}",
                ConvergenceWarning,
            )
        self.n_iter_ = int(result.nit)
        self.objective_value_ = float(result.fun)
        return self._set_metric(components=result.x.reshape(n_components, X.shape[1]))

    def _initial_components(self, X, weights, n_components):
        n_features = X.shape[1]
        if not isinstance(self.init, str):  # an array-like matrix
            init = check_points(self.init, n_features, "init", min_ndim=2)
            if init.shape != (n_components, n_features):
                raise ValueError(f"init must have shape ({n_components}, {n_features}), got {init.shape}")
            return init.copy()
        init = check_option(self.init, "init", {"auto", "identity", "pca", "random"})
        if init == "auto":
            init = "identity" if n_components == n_features else "pca"
        if init == "identity":
            return np.eye(n_components, n_features)
        if init == "random":
            rng = check_random_state(self.random_state)
            return rng.standard_normal((n_components, n_features)) / np.sqrt(n_features)
        if X.shape[0] < n_components:
            raise ValueError(f"init='pca' needs n_samples >= n_components={n_components}, got {X.shape[0]} samples")
        return PCA(n_components).fit(X[weights > 0]).components_


def _nearest(Z, queries, candidates, k, block=1024):
    """The ``k`` nearest ``candidates`` (indices into ``Z``) of each of the ``queries``, never the query itself."""
    nearest = np.empty((queries.size, k), dtype=int)
    norms = np.einsum("ij,ij->i", Z, Z)
    for start in range(0, queries.size, block):
        query = queries[start : start + block]
        sq = norms[query, None] + norms[candidates] - 2.0 * Z[query] @ Z[candidates].T
        sq[query[:, None] == candidates] = np.inf
        nearest[start : start + block] = candidates[np.argpartition(sq, k - 1, axis=1)[:, :k]]
    return nearest


class _CCMLProblem:
    """Objective of CCML and its gradient for a flattened :math:`L`.

    Each anchor ``i`` has candidate groups ``g`` (its own class first); the
    neighbour pairs ``(i, j)`` of group ``g`` carry ``1/k_g`` in the mean
    :math:`m_i^g`.
    """

    def __init__(self, X, y, weights, n_neighbors, objective, alpha):
        self.X, self.y, self.n_neighbors, self.alpha = X, y, n_neighbors, alpha
        self.active = np.flatnonzero(weights > 0)
        labels, counts = np.unique(y[self.active], return_counts=True)
        if labels.size < 2:
            raise ValueError("CCMLMetric needs samples of at least two classes with positive sample_weight")
        anchors = self.active[counts[np.searchsorted(labels, y[self.active])] >= 2]
        if anchors.size == 0:
            raise ValueError("CCMLMetric needs a class with two samples of positive sample_weight")
        self.anchors = anchors
        # own class is group 0; "local": group 1 = all other classes; else one group per other class
        n_groups = 2 if objective == "local" else labels.size
        self.objective = objective
        self.n_groups = n_groups
        self.labels = labels
        self.scale = weights[anchors] / weights[anchors].sum()

    def _neighbours(self, Z):
        """Pairs ``(anchor_row, group, neighbour)`` and the ``1/k_g`` of each pair."""
        rows, groups, neighbours, inverse_k = [], [], [], []
        anchor_row = np.full(self.X.shape[0], -1)
        anchor_row[self.anchors] = np.arange(self.anchors.size)
        active_labels = self.y[self.active]
        for label in self.labels:
            members = self.active[active_labels == label]
            anchors = members[anchor_row[members] >= 0]
            if anchors.size == 0:
                continue
            k = min(self.n_neighbors, members.size - 1)
            self._append(rows, groups, neighbours, inverse_k, anchor_row[anchors], 0, _nearest(Z, anchors, members, k))
            if self.objective == "local":
                others = [self.active[active_labels != label]]
            else:
                others = [self.active[active_labels == other] for other in self.labels if other != label]
            for g, candidates in enumerate(others, start=1):
                k = min(self.n_neighbors, candidates.size)
                nearest = _nearest(Z, anchors, candidates, k)
                self._append(rows, groups, neighbours, inverse_k, anchor_row[anchors], g, nearest)
        return tuple(np.concatenate(part) for part in (rows, groups, neighbours, inverse_k))

    @staticmethod
    def _append(rows, groups, neighbours, inverse_k, anchor_rows, group, index):
        k = index.shape[1]
        rows.append(np.repeat(anchor_rows, k))
        groups.append(np.full(index.size, group))
        neighbours.append(index.ravel())
        inverse_k.append(np.full(index.size, 1.0 / k))

    def loss_and_gradient(self, flat_components):
        """Negative weighted expected accuracy plus weight decay, and its gradient."""
        L = flat_components.reshape(-1, self.X.shape[1])
        Z = self.X @ L.T
        rows, groups, neighbours, inverse_k = self._neighbours(Z)
        anchors = self.anchors[rows]
        z_diff = Z[anchors] - Z[neighbours]
        mean_sq = np.zeros((self.anchors.size, self.n_groups))
        np.add.at(mean_sq, (rows, groups), inverse_k * np.einsum("ij,ij->i", z_diff, z_diff))
        log_q = log_softmax(-mean_sq, axis=1)
        p = np.exp(log_q[:, 0])
        loss = -self.scale @ p + self.alpha * np.sum(L * L)
        # d loss / d m_ig = s_i p_i ([g = own] - q_ig)
        d_mean = (self.scale * p)[:, None] * (np.eye(1, self.n_groups) - np.exp(log_q))
        gamma = d_mean[rows, groups] * inverse_k
        x_diff = self.X[anchors] - self.X[neighbours]
        gradient = 2.0 * (z_diff.T * gamma) @ x_diff + 2.0 * self.alpha * L
        return loss, gradient.ravel()
