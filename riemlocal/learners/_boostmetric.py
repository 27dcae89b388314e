r"""BoostMetric: a PSD metric as a boosted sum of trace-one rank-one matrices (Shen et al.)."""

import warnings
from functools import partial

import numpy as np
from scipy.linalg import eigh
from scipy.sparse.linalg import LinearOperator, eigsh
from scipy.special import logsumexp, softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data
from tqdm.auto import tqdm

from ..utils.parallel import with_one_blas_thread
from ..utils.validation import check_int, check_labels, check_params, check_positive, check_weights, options
from ._base import MetricLearner, relative_weights

__all__ = ["BoostMetric"]

#: below this dimension "auto" uses a dense LAPACK solve for the top eigenpair
_DENSE_MAX_DIM = 32
#: bisection stops when the bracket of w_j is shorter than this times its upper end
_BISECTION_RTOL = 1e-12


class BoostMetric(MetricLearner):
    r"""Mahalanobis metric learned by boosting rank-one matrices (BoostMetric [1]_).

    Triplets :math:`(i, j, k)` pair every training point :math:`a_i` with each
    of its ``n_targets`` *targets* :math:`a_j` (nearest points of its class)
    and each of its ``n_targets`` *impostors* :math:`a_k` (nearest points of
    the other classes), both in the Euclidean metric, as in LMNN. With

    .. math::
        A_r = (a_i - a_k)(a_i - a_k)^T - (a_i - a_j)(a_i - a_j)^T,
        \qquad \rho_r = \langle A_r, M \rangle,

    the learner minimizes the log exponential loss plus a trace penalty,

    .. math::
        \min_{M \succeq 0} \; \log \sum_r c_r e^{-\rho_r} + \nu \operatorname{tr}(M),
        \qquad M = \sum_j w_j \xi_j \xi_j^T, \; \|\xi_j\| = 1, \; w_j \ge 0,

    by coordinate descent (Algorithm 2 of [1]_): the next weak learner
    :math:`\xi_j` is the top eigenvector of :math:`\hat A = \sum_r u_r A_r`
    (computed by Lanczos/ARPACK on an operator that never forms :math:`\hat A`
    when ``D`` is large), its weight :math:`w_j` is the root of the 1-D
    derivative :math:`\sum_r (H_{rj} - \nu) u_r e^{-w_j H_{rj}}` with
    :math:`H_{rj} = \xi_j^T A_r \xi_j`, found by bisection (Algorithm 1), and
    the dual weights are updated as :math:`u_r \propto u_r e^{-w_j H_{rj}}`.
    Iterations stop when :math:`\lambda_{max}(\hat A) < \nu` (no rank-one
    matrix violates the dual constraint any more). At the optimum the dual
    constraint is active, :math:`\lambda_{max}(\hat A) = \nu`, so the test is
    relaxed by ``tol`` times the initial :math:`\lambda_{max}`.

    Sample weights: a sample of weight 0 is absent (it is neither anchor,
    target nor impostor). Triplet :math:`r = (i, j, k)` has loss weight
    :math:`c_r \propto s_i s_j s_k` (normalized to sum 1, so the loss is 0 at
    :math:`M = 0`); neighbours are still chosen by Euclidean distance only.

    Parameters
    ----------
    nu : float, default=1e-7
        Trace regularization :math:`\nu \ge 0`; also the stopping threshold on
        :math:`\lambda_{max}(\hat A)`.
    max_iter : int, default=500
        Maximum number :math:`J` of weak learners.
    n_targets : int, default=3
        Number of targets and of impostors per point (``k`` in [1]_).
    eigen_solver : {"auto", "arpack", "dense"}, default="auto"
        Top eigenpair of :math:`\hat A`: ``"arpack"`` runs Lanczos on a
        matrix-free operator (cost :math:`O(|S| D)` per product); ``"dense"``
        forms :math:`\hat A` and asks LAPACK for its largest eigenpair only;
        ``"auto"`` is ``"dense"`` when ``D <= 32`` and ``"arpack"`` otherwise.
    tol : float, default=1e-8
        Converged when :math:`\lambda_{max}(\hat A) < \nu + tol \cdot
        \lambda_{max}(\hat A^{(0)})`, :math:`\hat A^{(0)}` being the
        uniform-``u`` start.
    verbose : bool, default=False
        Show a progress bar over the boosting iterations.

    Attributes
    ----------
    metric_ : ndarray of shape (n_features, n_features)
        Learned PSD matrix :math:`M = \sum_j w_j \xi_j \xi_j^T`.
    components_ : ndarray of shape (rank, n_features)
        :math:`L` with ``metric_ == L.T @ L``.
    weights_ : ndarray of shape (``n_iter_``,)
        Weights :math:`w_j` of the weak learners.
    bases_ : ndarray of shape (``n_iter_``, n_features)
        Unit vectors :math:`\xi_j` of the weak learners :math:`Z_j = \xi_j \xi_j^T`.
    objective_ : ndarray of shape (``n_iter_ + 1``,)
        Primal objective before the first and after every weak learner
        (non-increasing).
    lambda_max_ : ndarray of shape (``n_iter_ + 1``,)
        :math:`\lambda_{max}(\hat A)` before every weak learner and at the end.
    n_iter_ : int
        Number of weak learners added.
    n_triplets_ : int
        Number of triplets :math:`|S|`.
    classes_ : ndarray of shape (n_classes,)
        Class labels seen in ``fit``.
    n_features_in_ : int
        Number of features seen in ``fit``.

    References
    ----------
    .. [1] C. Shen, J. Kim, L. Wang and A. van den Hengel, "Positive
       semidefinite metric learning with boosting", NIPS 2009.

    Examples
    --------
    >>> from sklearn.datasets import load_wine
    >>> from riemlocal.learners import BoostMetric
    >>> X, y = load_wine(return_X_y=True)
    >>> learner = BoostMetric(max_iter=50).fit(X, y)
    >>> learner.metric_.shape
    (13, 13)
    """

    _parameter_checks = {
        "nu": partial(check_positive, strict=False),
        "max_iter": check_int,
        "n_targets": check_int,
        "eigen_solver": options("auto", "arpack", "dense"),
        "tol": check_positive,
    }

    def __init__(self, nu=1e-7, *, max_iter=500, n_targets=3, eigen_solver="auto", tol=1e-8, verbose=False):
        self.nu = nu
        self.max_iter = max_iter
        self.n_targets = n_targets
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.verbose = verbose

    @with_one_blas_thread
    def fit(self, X, y, sample_weight=None):
        """Learn the metric from labelled data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights (0 = absent); see the class docstring. Only
            their ratios matter: they are scaled to mean 1.

        Returns
        -------
        self : BoostMetric
        """
        params = check_params(self, self._parameter_checks)
        nu, max_iter, n_targets, tol = (params[name] for name in ("nu", "max_iter", "n_targets", "tol"))
        X, y = validate_data(self, X, y, ensure_min_samples=2)
        check_classification_targets(check_labels(y))
        self.classes_, y = np.unique(y, return_inverse=True)
        weights = relative_weights(check_weights(sample_weight, X.shape[0]))

        triplets = _Triplets(X, y, weights, n_targets)
        self.n_triplets_ = triplets.size
        dim = X.shape[1]
        dense = self.eigen_solver == "dense" or (self.eigen_solver == "auto" and dim <= _DENSE_MAX_DIM)
        log_c = np.log(triplets.weights)
        margins = np.zeros(triplets.size)
        bases, alphas = [], []
        objective = [0.0]
        u = triplets.weights
        lambda_max, basis = _top_eigenpair(triplets, u, dense, None)
        lambdas = [lambda_max]
        threshold = nu + tol * max(lambda_max, 0.0)
        for _ in tqdm(range(max_iter), disable=not self.verbose, desc="BoostMetric"):
            if lambda_max < threshold:
                break
            h = triplets.margins(basis)
            w = _bisect_weight(h, u, nu, _BISECTION_RTOL)
            bases.append(basis)
            alphas.append(w)
            margins += w * h
            objective.append(logsumexp(log_c - margins) + nu * sum(alphas))
            u = softmax(log_c - margins)
            lambda_max, basis = _top_eigenpair(triplets, u, dense, basis)
            lambdas.append(lambda_max)
        else:
            if lambda_max >= threshold:
                warnings.warn(
                    f"BoostMetric did not converge in max_iter={max_iter} iterations: "
                    f"lambda_max(A_hat) - nu = {lambda_max - nu:.3g} >= tol * lambda_max(A_hat_0) "
                    f"= {threshold - nu:.3g}",
                    ConvergenceWarning,
                )
        self.n_iter_ = len(alphas)
        self.weights_ = np.asarray(alphas)
        self.bases_ = np.asarray(bases).reshape(self.n_iter_, dim)
        self.objective_ = np.asarray(objective)
        self.lambda_max_ = np.asarray(lambdas)
        return self._set_metric(metric=(self.bases_.T * self.weights_) @ self.bases_)


class _Triplets:
    r"""Triplets stored as two sets of difference vectors and index maps.

    Row ``r`` pairs target difference ``targets[target_index[r]]``
    (:math:`a_i - a_j`) with impostor difference
    ``impostors[impostor_index[r]]`` (:math:`a_i - a_k`), so
    :math:`\hat A v` costs one product with each stack.
    """

    def __init__(self, X, y, weights, k):
        active = np.flatnonzero(weights > 0)
        targets, impostors, target_index, impostor_index, triplet_weights = [], [], [], [], []
        n_targets = n_impostors = 0
        for label in np.unique(y[active]):
            members = active[y[active] == label]
            others = active[y[active] != label]
            n_t, n_i = min(k, members.size - 1), min(k, others.size)
            if n_t < 1 or n_i < 1:
                continue
            near = NearestNeighbors(n_neighbors=n_t).fit(X[members]).kneighbors(return_distance=False)
            far = NearestNeighbors(n_neighbors=n_i).fit(X[others]).kneighbors(X[members], return_distance=False)
            near, far = members[near], others[far]
            targets.append((X[members, None, :] - X[near]).reshape(-1, X.shape[1]))
            impostors.append((X[members, None, :] - X[far]).reshape(-1, X.shape[1]))
            # triplet (anchor a, target t, impostor m) for every t < n_t and m < n_i
            anchor = np.arange(members.size)[:, None, None]
            t = np.arange(n_t)[None, :, None]
            m = np.arange(n_i)[None, None, :]
            shape = (members.size, n_t, n_i)
            target_index.append(np.broadcast_to(n_targets + anchor * n_t + t, shape).ravel())
            impostor_index.append(np.broadcast_to(n_impostors + anchor * n_i + m, shape).ravel())
            triplet_weights.append(
                (weights[members][:, None, None] * weights[near][:, :, None] * weights[far][:, None, :]).ravel()
            )
            n_targets += near.size
            n_impostors += far.size
        if not targets:
            raise ValueError(
                "BoostMetric needs at least one triplet: some class must have two samples "
                "with positive sample_weight and another class one"
            )
        self.targets, self.impostors = np.concatenate(targets), np.concatenate(impostors)
        self.target_index, self.impostor_index = np.concatenate(target_index), np.concatenate(impostor_index)
        weights = np.concatenate(triplet_weights)
        self.weights = weights / weights.sum()
        self.size = weights.size

    def margins(self, basis):
        r""":math:`H_r = \xi^T A_r \xi` for every triplet."""
        return (self.impostors @ basis)[self.impostor_index] ** 2 - (self.targets @ basis)[self.target_index] ** 2

    def pair_weights(self, u):
        """Weights of the impostor and target outer products in :math:`\\hat A`."""
        return (
            np.bincount(self.impostor_index, u, minlength=self.impostors.shape[0]),
            np.bincount(self.target_index, u, minlength=self.targets.shape[0]),
        )


def _top_eigenpair(triplets, u, dense, v0):
    r"""Largest eigenvalue and unit eigenvector of :math:`\hat A = \sum_r u_r A_r`."""
    alpha_imp, alpha_tar = triplets.pair_weights(u)
    P, Q = triplets.impostors, triplets.targets
    dim = P.shape[1]
    if dense or dim < 3:
        a_hat = (P.T * alpha_imp) @ P - (Q.T * alpha_tar) @ Q
        values, vectors = eigh(a_hat, subset_by_index=[dim - 1, dim - 1])
        return values[0], vectors[:, 0]

    def matvec(v):
        v = np.ravel(v)
        return P.T @ (alpha_imp * (P @ v)) - Q.T @ (alpha_tar * (Q @ v))

    operator = LinearOperator((dim, dim), matvec=matvec, dtype=float)
    values, vectors = eigsh(operator, k=1, which="LA", v0=v0)
    return values[0], vectors[:, 0]


def _weight_derivative(w, h, log_u, nu):
    r"""Rescaled l.h.s. of eq. (8): :math:`\sum_r (H_r - \nu) u_r e^{-w H_r} / \sum_r u_r e^{-w H_r}`.

    Same sign as eq. (8); it equals :math:`-C_p'(w)`, minus the derivative of
    the primal objective along the new weak learner. ``log_u`` is
    :math:`\log u_r` (``-inf`` allowed).
    """
    exponent = log_u - w * h
    factor = np.exp(exponent - exponent.max())
    return factor @ h / factor.sum() - nu


def _bisect_weight(h, u, nu, rtol):
    """Root of :func:`_weight_derivative` in ``w > 0`` by bisection (Algorithm 1 of Shen et al.).

    The derivative is positive at 0 (``lambda_max > nu``) and decreasing; the
    upper end of the bracket is found by doubling. If it never turns negative
    (every triplet gains margin along the new direction, so the loss decreases
    without bound) the largest end tried is returned.
    """
    with np.errstate(divide="ignore"):
        log_u = np.log(u)
    upper = 1.0 / max(np.abs(h).max(), np.finfo(float).tiny)
    for _ in range(200):
        if _weight_derivative(upper, h, log_u, nu) <= 0:
            break
        upper *= 2.0
    else:
        return upper
    lower = 0.0
    while upper - lower > rtol * upper:
        middle = 0.5 * (lower + upper)
        if _weight_derivative(middle, h, log_u, nu) > 0:
            lower = middle
        else:
            upper = middle
    return 0.5 * (lower + upper)
