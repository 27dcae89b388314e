"""Large-margin nearest neighbour metric learning, global or jointly per class."""

import numbers
import warnings
from functools import partial

import numpy as np
import scipy.optimize
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data
from tqdm.auto import tqdm

from ..utils.arrays import pair_squared_distances
from ..utils.parallel import with_one_blas_thread
from ..utils.validation import (
    check_fraction,
    check_int,
    check_labels,
    check_option,
    check_params,
    check_points,
    check_positive,
    check_random_state,
    check_weights,
)
from ._base import MetricLearner, components_from_metric, relative_weights

__all__ = ["LMNNMetric"]

#: L-BFGS iterations before the first refresh of the impostor candidates; doubled at each refresh
_FIRST_ROUND_ITERATIONS = 5
#: candidates are the pairs within (1 + _CANDIDATE_SLACK) times the hinge radius
_CANDIDATE_SLACK = 0.25
#: bound on the number of entries of one block of pairwise distances
_BLOCK_ENTRIES = 2**20


def target_neighbors(Z, class_index, n_targets):
    """Same-class nearest neighbours of every point in the coordinates ``Z``.

    Returns ``targets`` of shape ``(n, k)`` (padded with the point itself) and
    the boolean ``valid`` mask; a class with ``m`` points gives each of them
    ``min(k, m - 1)`` targets.
    """
    n_samples = Z.shape[0]
    targets = np.repeat(np.arange(n_samples)[:, None], n_targets, axis=1)
    valid = np.zeros((n_samples, n_targets), dtype=bool)
    for c in np.unique(class_index):
        members = np.flatnonzero(class_index == c)
        k = min(n_targets, len(members) - 1)
        if k == 0:
            continue
        index = NearestNeighbors(n_neighbors=k).fit(Z[members]).kneighbors(return_distance=False)
        # kneighbors() without X already excludes each point itself
        targets[members, :k] = members[index]
        valid[members, :k] = True
    return targets, valid


class _LargeMarginObjective:
    r"""LMNN loss and gradient in the factors :math:`L_g`, for a fixed set of candidate impostor pairs.

    The distance of a pair :math:`(a, b)` is :math:`\|L_{g(b)}(x_a - x_b)\|^2`,
    measured with the metric of the group :math:`g(b)` of the second point
    (one group for a global metric, the classes for per-class metrics). With
    targets :math:`j \in T(i)`, impostor candidates :math:`l` of :math:`i`,
    :math:`\mu` = ``push_weight`` and :math:`h(s) = \max(s, 0)`,

    .. math::

        f = (1-\mu) \sum_i w_i \sum_{j \in T(i)} d_{ij}
            + \mu \sum_i w_i \sum_{j \in T(i)} \sum_l h(1 + d_{ij} - d_{il}).

    Every term is :math:`c_{ab} d_{ab}`, so
    :math:`\partial f / \partial L_g = 2 L_g \sum_{g(b) = g} c_{ab} (x_a - x_b)(x_a - x_b)^T
    = 2 Z_g^T (\mathrm{diag}(C_g 1 + C_g^T 1) - C_g - C_g^T) X` with :math:`Z_g = X L_g^T`
    and the sparse coefficients :math:`C_g` of the group's pairs: :math:`O(\mathrm{nnz}\,D + G n d D)`.
    """

    def __init__(self, X, weights, class_index, groups, n_groups, n_components, targets, valid, push_weight):
        self.X, self.weights, self.class_index = X, weights, class_index
        self.groups, self.n_groups, self.n_components = groups, n_groups, n_components
        self.valid, self.push_weight = valid, push_weight
        self.target_rows, self.target_cols = np.nonzero(valid)[0], targets[valid]
        self.set_candidates(np.zeros(0, dtype=int), np.zeros(0, dtype=int))

    def factors(self, params):
        return params.reshape(self.n_groups, self.n_components, self.X.shape[1])

    def _coordinates(self, params):
        """All images :math:`L_g x_n`, stacked as rows ``g * n_samples + n``."""
        return np.matmul(self.X, self.factors(params).transpose(0, 2, 1)).reshape(-1, self.n_components)

    def _flat_pairs(self, rows, cols):
        offset = self.groups[cols] * self.X.shape[0]
        return offset + rows, offset + cols

    @staticmethod
    def _squared_distances(Z, flat_pairs):
        return pair_squared_distances(Z, *flat_pairs)

    def _target_distances(self, Z):
        distances = np.zeros(self.valid.shape)
        distances[self.valid] = self._squared_distances(Z, self._flat_pairs(self.target_rows, self.target_cols))
        return distances

    def set_candidates(self, anchors, impostors):
        """Fix the impostor candidate pairs ``(anchors[p], impostors[p])``; build the sparse patterns."""
        n_samples, n_pairs = self.X.shape[0], len(anchors)
        self.anchors, self.impostors = anchors, impostors
        self.anchor_sum = scipy.sparse.csr_array(
            (np.ones(n_pairs), (anchors, np.arange(n_pairs))), shape=(n_samples, n_pairs)
        )
        # all pairs, targets first; row g * n + a of the stacked (G n, n) matrices holds group g
        self.pairs = self._flat_pairs(np.r_[self.target_rows, anchors], np.r_[self.target_cols, impostors])
        rows, cols = self.pairs
        self.patterns = [self._pattern(rows, cols % n_samples), self._pattern(cols, rows % n_samples)]

    def _pattern(self, rows, cols):
        order = np.lexsort((cols, rows))
        return order, cols[order], np.searchsorted(rows[order], np.arange(self.n_groups * self.X.shape[0] + 1))

    def loss_grad(self, params):
        """Loss :math:`f` and its gradient (flat, like ``params``)."""
        mu, w, n_targets = self.push_weight, self.weights, len(self.target_rows)
        Z = self._coordinates(params)
        distances = self._squared_distances(Z, self.pairs)
        target_distances = np.zeros(self.valid.shape)
        target_distances[self.valid] = distances[:n_targets]
        margins = 1.0 + target_distances[self.anchors] - distances[n_targets:, None]
        active = (margins > 0) & self.valid[self.anchors]
        anchor_weights = w[self.anchors]
        loss = (1 - mu) * (w @ target_distances.sum(axis=1)) + mu * (anchor_weights @ (margins * active).sum(axis=1))

        violations = self.anchor_sum @ active.astype(float)
        target_coef = ((1 - mu) + mu * violations[self.valid]) * w[self.target_rows]
        impostor_coef = -mu * anchor_weights * active.sum(axis=1)
        coef = np.concatenate([target_coef, impostor_coef])

        # Laplacian products (diag(C 1 + C^T 1) - C - C^T) X of every group, stacked
        X, n_stacked = self.X, self.n_groups * self.X.shape[0]
        degree = np.bincount(self.pairs[0], coef, n_stacked) + np.bincount(self.pairs[1], coef, n_stacked)
        laplacian_X = degree[:, None] * np.tile(X, (self.n_groups, 1))
        for order, cols, indptr in self.patterns:
            laplacian_X -= scipy.sparse.csr_array((coef[order], cols, indptr), shape=(n_stacked, X.shape[0])) @ X
        shape = (self.n_groups, X.shape[0], -1)
        grad = 2.0 * Z.reshape(shape).transpose(0, 2, 1) @ laplacian_X.reshape(shape)
        return loss, grad.ravel()

    def impostor_pairs(self, params, slack):
        r"""Pairs :math:`(i, l)`, :math:`y_l \ne y_i`, with :math:`d_{il} < (1 + \text{slack})(1 + \max_j d_{ij})`.

        With ``slack=0`` these are exactly the pairs with an active hinge term;
        all pairwise distances are computed blockwise, once per call.
        """
        Z = self._coordinates(params)
        target_distances = self._target_distances(Z)
        has_target = self.valid.any(axis=1)
        radius = (1.0 + slack) * (1.0 + np.where(self.valid, target_distances, -np.inf).max(axis=1))
        anchors, impostors = [], []
        for c in np.unique(self.class_index):
            inside = self.class_index == c
            rows, cols = np.flatnonzero(~inside & has_target), np.flatnonzero(inside)
            offset = self.groups[cols[0]] * len(self.class_index)
            Zg = Z[offset : offset + len(self.class_index)]
            col_norms = np.einsum("nd,nd->n", Zg[cols], Zg[cols])
            step = max(1, _BLOCK_ENTRIES // len(cols))
            for start in range(0, len(rows), step):
                block = rows[start : start + step]
                block_norms = np.einsum("nd,nd->n", Zg[block], Zg[block])
                distances = block_norms[:, None] + col_norms - 2 * Zg[block] @ Zg[cols].T
                r, s = np.nonzero(distances < radius[block, None])
                anchors.append(block[r])
                impostors.append(cols[s])
        anchors, impostors = np.concatenate(anchors), np.concatenate(impostors)
        order = np.lexsort((impostors, anchors))
        return anchors[order], impostors[order]


class LMNNMetric(MetricLearner):
    r"""Large-margin nearest neighbour metric (Weinberger & Saul [1]_), weighted as in Ramanan & Baker [2]_.

    Minimizes, over :math:`M = L^T L`,

    .. math::

        f(L) = (1-\mu) \sum_i w_i \sum_{j \in T(i)} \|L(x_i - x_j)\|^2
             + \mu \sum_i w_i \sum_{j \in T(i)} \sum_{l: y_l \ne y_i}
               h\big(1 + \|L(x_i - x_j)\|^2 - \|L(x_i - x_l)\|^2\big),

    with :math:`h(s) = \max(s, 0)`, the targets :math:`T(i)` the ``n_targets``
    nearest same-class points in the initial metric, and the sample weights
    :math:`w_i` weighting every term anchored at :math:`i` (eq. LMNN of [2]_).

    The factor :math:`L` is optimized directly with L-BFGS and the analytic
    (sub)gradient. This keeps the problem unconstrained and smooth away from
    the hinge kinks, needs no eigendecomposition per step (unlike a projected
    gradient on :math:`M`), allows a rank ``n_components < D``, and for full
    rank :math:`L` loses nothing: the factorization of the convex problem in
    :math:`M` has no spurious local minima in practice.

    Impostors are not searched at every step: L-BFGS runs in rounds on a
    fixed candidate set (the differently labelled pairs within 1.25 times the
    hinge radius :math:`1 + \max_j d_{ij}`), recomputed from all pairwise
    distances after each round; rounds last 5, 10, 20, ... iterations, so the
    candidates follow the fast early changes of the metric (its scale adapts
    to the unit margin first) and are rarely refreshed later. The fit ends
    only when L-BFGS stops on its own *and* no active impostor lies outside
    the candidates, so the result is a stationary point of the exact loss.

    ``per_class=True`` learns one metric :math:`M_c = L_c^T L_c` per class
    jointly (eq. 8 of [2]_): the distance from :math:`x_i` to a training point
    :math:`x_b` uses the metric of *b*'s class,
    :math:`\|L_{y_b}(x_i - x_b)\|^2`, for targets (:math:`y_b = y_i`) as well
    as impostors. This is the rule ``"train"`` used at query time and the
    multiple-metric LMNN of [1]_; eq. 8 of [2]_ writes :math:`M_{y_i}`, which
    would decouple the classes. The joint fit makes the class metrics
    comparable. The class metrics start from the fitted global metric: with
    all :math:`L_c` equal the per-class loss is the global one, so the global
    optimum is the natural start of the larger problem (same targets; the
    iterations of both stages count in ``n_iter_`` and ``max_iter``).

    A fit with no triplet (fewer than two classes of positive weight, or no
    class with two points) has nothing to learn and keeps the initial metric.

    Parameters
    ----------
    n_targets : int, default=3
        Number :math:`k` of target neighbours per point (metric-learn's ``n_neighbors``).
    n_components : int, default=None
        Rank of :math:`L` (rows); ``None``: ``n_features`` (or ``init.shape[0]``).
    push_weight : float, default=0.5
        Weight :math:`\mu \in [0, 1]` of the impostor term.
    init : {"identity", "pca", "random"} or ndarray of shape (n_components, n_features), default="identity"
        Initial :math:`L` (for every class when ``per_class``); also the
        metric in which target neighbours are chosen. ``"pca"``: the leading
        principal axes (weighted); ``"random"``: Gaussian, from ``random_state``.
    per_class : bool, default=False
        Learn one metric per class jointly (see above).
    max_iter : int, default=1000
        Maximum total number of L-BFGS iterations.
    tol : float, default=1e-7
        Relative decrease of the loss under which L-BFGS stops.
    random_state : int, Generator or None, default=None
        Seed for ``init="random"``.
    verbose : bool, default=False
        Show a progress bar over the iterations.

    Attributes
    ----------
    metric_ : ndarray of shape (n_features, n_features)
        :math:`M = L^T L`; with ``per_class``, the mean of the class metrics
        (a global summary used by :meth:`transform`).
    components_ : ndarray of shape (n_components, n_features)
        :math:`L`, with ``metric_ == components_.T @ components_``.
    metrics_ : ndarray of shape (n_classes, n_features, n_features)
        Only with ``per_class``: the class metrics :math:`M_c`, in the order of ``classes_``.
    class_components_ : ndarray of shape (n_classes, n_components, n_features)
        Only with ``per_class``: the factors :math:`L_c`.
    classes_ : ndarray of shape (n_classes,)
        Labels that carry positive weight.
    n_features_in_ : int
        Number of features seen in ``fit``.
    n_iter_ : int
        Number of L-BFGS iterations run.

    See Also
    --------
    LDAMetric : regularized LDA metric, easier to fit on small local samples.

    References
    ----------
    .. [1] K. Q. Weinberger and L. K. Saul, "Distance metric learning for large
       margin nearest neighbor classification", JMLR 10, 2009.
    .. [2] D. Ramanan and S. Baker, "Local distance functions: a taxonomy, new
       algorithms, and an evaluation", IEEE TPAMI 33(4), 2011, Section II-B.

    Examples
    --------
    >>> import numpy as np
    >>> from riemlocal.learners import LMNNMetric
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 20)
    >>> X = np.c_[y + 0.3 * rng.normal(size=40), 5 * rng.normal(size=40)]
    >>> lmnn = LMNNMetric().fit(X, y)
    >>> bool(lmnn.metric_[0, 0] > lmnn.metric_[1, 1])
    True
    """

    def __init__(
        self,
        n_targets=3,
        *,
        n_components=None,
        push_weight=0.5,
        init="identity",
        per_class=False,
        max_iter=1000,
        tol=1e-7,
        random_state=None,
        verbose=False,
    ):
        self.n_targets = n_targets
        self.n_components = n_components
        self.push_weight = push_weight
        self.init = init
        self.per_class = per_class
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    _parameter_checks = {
        "n_targets": check_int,
        "max_iter": check_int,
        "tol": partial(check_positive, strict=False),
        "push_weight": partial(check_fraction, strict=False),
        "random_state": check_random_state,
    }

    def _initial_components(self, X, weights):
        n_features = X.shape[1]
        if isinstance(self.init, str):
            check_option(self.init, "init", {"identity", "pca", "random"})
            n_components = n_features if self.n_components is None else self.n_components
        else:
            init = check_points(self.init, n_features, "init", min_ndim=2)
            if init.ndim != 2:
                raise ValueError(f"init must have shape (n_components, {n_features}), got {init.shape}")
            n_components = init.shape[0] if self.n_components is None else self.n_components
            if init.shape[0] != n_components:
                raise ValueError(f"init has {init.shape[0]} rows but n_components={n_components}")
        if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral):
            raise TypeError(f"n_components must be an int or None, got {n_components!r}")
        if not 1 <= n_components <= n_features:
            raise ValueError(f"n_components must be in [1, n_features={n_features}], got {n_components}")
        if not isinstance(self.init, str):
            return init
        if self.init == "identity":
            return np.eye(n_components, n_features)
        if self.init == "random":
            rng = check_random_state(self.random_state)
            return rng.standard_normal((n_components, n_features)) / np.sqrt(n_features)
        centered = X - weights @ X / weights.sum()
        _, axes = np.linalg.eigh((centered * weights[:, None]).T @ centered)
        return axes[:, ::-1][:, :n_components].T

    @with_one_blas_thread
    def fit(self, X, y, sample_weight=None):
        """Fit the metric (or the class metrics).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the terms anchored at each sample; weight
            0 removes the sample (it is neither target nor impostor). Only their
            ratios matter: they are scaled to mean 1.

        Returns
        -------
        self : LMNNMetric
        """
        X, y = validate_data(self, X, y)
        check_classification_targets(check_labels(y))
        check_params(self, self._parameter_checks)
        weights = relative_weights(check_weights(sample_weight, X.shape[0]))
        present = weights > 0
        X, y, weights = X[present], y[present], weights[present]
        self.classes_, class_index = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        initial = self._initial_components(X, weights)
        targets, valid = target_neighbors(X @ initial.T, class_index, self.n_targets)
        shared = np.zeros(len(y), dtype=int)
        stages = [(shared, 1)] + ([(class_index, n_classes)] if self.per_class else [])
        factors = initial[None]
        self.n_iter_ = 0
        for groups, n_groups in stages:
            objective = _LargeMarginObjective(
                X, weights, class_index, groups, n_groups, initial.shape[0], targets, valid, self.push_weight
            )
            params = np.repeat(factors[:1], n_groups, axis=0).ravel()
            if n_classes > 1 and valid.any() and self.n_iter_ < self.max_iter:
                params = self._minimize(objective, params)
            factors = objective.factors(params)
        return self._set_factors(factors)

    def _minimize(self, objective, params):
        """L-BFGS rounds on refreshed impostor candidates until no active impostor is missing."""
        objective.set_candidates(*objective.impostor_pairs(params, _CANDIDATE_SLACK))
        round_iterations = _FIRST_ROUND_ITERATIONS
        losses = [objective.loss_grad(params)[0]]
        with tqdm(total=self.max_iter, initial=self.n_iter_, disable=not self.verbose, desc="LMNN") as bar:

            def record(intermediate_result):
                losses.append(intermediate_result.fun)
                bar.update()

            while True:
                result = scipy.optimize.minimize(
                    objective.loss_grad,
                    params,
                    jac=True,
                    method="L-BFGS-B",
                    callback=record,
                    options={
                        "maxiter": min(round_iterations, self.max_iter - self.n_iter_),
                        "ftol": self.tol,
                        "gtol": 0.0,
                    },
                )
                params = result.x
                self.n_iter_ += result.nit
                bar.set_postfix(loss=result.fun)
                stopped = result.status != 1  # 1: iteration limit; 0 or 2: L-BFGS cannot decrease the loss further
                anchors, impostors = objective.impostor_pairs(params, 0.0)
                n_samples = objective.X.shape[0]
                missing = np.setdiff1d(
                    anchors * n_samples + impostors, objective.anchors * n_samples + objective.impostors
                )
                if stopped and missing.size == 0:
                    return params
                if self.n_iter_ >= self.max_iter:
                    decrease = (losses[max(len(losses) - 2, 0)] - losses[-1]) / max(abs(losses[-1]), 1.0)
                    warnings.warn(
                        f"LMNNMetric did not converge in max_iter={self.max_iter} iterations: "
                        f"relative loss decrease {decrease:.3g} "
                        f"in the last iteration (tol={self.tol}), loss {result.fun:.6g}, "
                        f"{missing.size} active impostor pairs outside the candidates",
                        ConvergenceWarning,
                    )
                    return params
                objective.set_candidates(*objective.impostor_pairs(params, _CANDIDATE_SLACK))
                round_iterations *= 2

    def _set_factors(self, factors):
        if not self.per_class:
            return self._set_metric(components=factors[0])
        self.class_components_ = factors
        self.metrics_ = np.einsum("gdi,gdj->gij", factors, factors)
        return self._set_metric(components=components_from_metric(self.metrics_.mean(axis=0)))
