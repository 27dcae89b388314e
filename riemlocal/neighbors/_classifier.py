"""The k-NN classifier with local metrics, composed of a field, a shortlist, a rule and a decision."""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from ..distances import distance
from ..placement import default_learner, place_field, validate_classes
from ..utils.parallel import with_one_blas_thread
from ..utils.validation import check_callable, check_int, check_n_jobs, check_params, check_positive, optional, options
from ._decision import DECISIONS, ccknn_scores, knn_votes
from ._shortlist import GlobalShortlist
from ._taxonomy import check_where_rule

__all__ = ["LocalMetricKNN"]


class LocalMetricKNN(ClassifierMixin, BaseEstimator):
    r"""K-nearest-neighbour classifier with local metrics (how x where x when x rule).

    A composition of small parts: :func:`~riemlocal.placement.place_field`
    builds the field (:class:`~riemlocal.placement.LocalMetrics` and
    :func:`~riemlocal.placement.interpolate`, or a
    :class:`~riemlocal.fields.LazyField`),
    :class:`GlobalShortlist` gives the candidates,
    :func:`~riemlocal.distances.distance` re-ranks them by ``rule``, and
    :func:`knn_votes` or :func:`ccknn_scores` decide.

    ``fit`` learns a global metric :math:`M_G` with ``learner`` on all data,
    builds a KD-tree on the transformed points :math:`C^T x` (:math:`M_G =
    C C^T`) and places local metrics (``where``) learned with
    ``local_learner``. ``predict`` takes the ``shortlist`` nearest training
    points under :math:`M_G` (per class for CCKNN), re-ranks them with the
    squared distance of ``rule`` under the local field and decides by
    majority vote of the ``n_neighbors`` nearest (``"knn"``) or by the class
    with the smallest sum of its ``n_neighbors`` smallest squared distances
    (``"ccknn"``, Im & Taylor eq. 14).

    The cells of Ramanan & Baker's taxonomy are settings of this one class:

    ==========================  =========================================================
    Global                      ``where="global"`` (any rule gives :math:`d^T M_G d`)
    Per-class (offline)         ``where="class", rule="train"``
    Per-exemplar (offline)      ``where="exemplar", rule="train"``
    Per-exemplar (online)       ``where="lazy", rule="train"`` (learns shortlisted exemplars)
    Lazy (online, test point)   ``where="lazy", rule="test"``
    Interpolated train / test   ``where="reference", rule="train"`` / ``"test"``
    Line integral               ``where="reference", rule="line"`` (exact, piecewise constant)
    Hybrid                      ``learner=LMNNMetric(), local_learner=LDAMetric()``
    ==========================  =========================================================

    Parameters
    ----------
    learner : estimator, default=None
        Global metric learner (``fit(X, y[, sample_weight])``, ``metric_``);
        ``None`` means :class:`~riemlocal.learners.LDAMetric`.
    where : {"global", "class", "exemplar", "reference", "lazy"}, default="global"
        Placement of the local metrics (:class:`~riemlocal.placement.LocalMetrics`),
        or ``"lazy"`` for a :class:`~riemlocal.fields.LazyField`.
    rule : str, default="test"
        A registered distance rule (:data:`riemlocal.distances.RULES`:
        ``"test"``, ``"train"``, ``"line"``, ``"line_length"``, ``"geodesic"``).
        ``"test"`` and ``"train"`` evaluate the field once per distinct query / candidate
        (:func:`riemlocal.distances.distance` does the bookkeeping).
        ``"geodesic"`` needs a smooth field (``interpolation="rbf"`` or
        ``"smooth"``); a :class:`LazyField` is piecewise constant, so its
        line rules are exact sums over its cells. The legal pairs follow from
        the structures each rule serves in the registry.
    n_neighbors : int, default=3
        :math:`k` of the decision.
    shortlist : int, default=20
        Candidates kept by the global metric (per class for ``"ccknn"``);
        clipped to the number of training points (of the class).
    decision : {"knn", "ccknn"}, default="knn"
    local_learner : estimator, default=None
        Learner of the local metrics; ``None`` uses ``learner``.
    interpolation : {"nearest", "rbf", "smooth"}, default="nearest"
        Field built from placed metrics (eq. 13, eq. 14, Hauberg et al. eq. 6).
    n_local : int or "auto", default="auto"
        Neighbourhood size :math:`S` of local fits: ``n_local`` of
        :class:`LocalMetrics` and of the :class:`LazyField`
        (``"auto"``: :data:`riemlocal.placement.NEIGHBOURHOOD_SIZES`, 20 for
        ``"class"``, 50 for ``"exemplar"`` and ``"lazy"``).
    n_references : int, default=50
        Reference points for ``where="reference"``.
    sigma : float or "auto", default="auto"
        RBF temperature (eq. 15), see :class:`LocalMetrics`.
    rho : float, default=1.0
        Sharpness of ``interpolation="smooth"``.
    cv_smoothing : bool, default=True
        Cross-validated smoothing of reference metrics (eq. 16).
    max_condition : float > 1 or None, default=None
        Bound on the condition number of each placed local metric
        (:class:`~riemlocal.placement.LocalMetrics`); not for ``where="lazy"``,
        whose metrics are learned at the query.
    log_solver : callable, default=None
        ``log_solver(field)`` builds the Log solver of rules that solve geodesics
        (e.g. ``functools.partial(EnergyLogSolver, rtol=1e-4)``); ``None``: the
        default of :func:`~riemlocal.distances.distance`.
    n_jobs : int, default=None
        Parallel local fits and rule evaluations (joblib).
    verbose : bool, default=False
        Progress bars on long fits and predictions.
    random_state : int, Generator or None, default=None
        Draw of the reference points.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    global_metric_ : ndarray of shape (n_features, n_features)
    field_ : MetricField
        The local metric field read by ``rule``.
    placement_ : LocalMetrics or None
        The fitted placement (``None`` for ``where="lazy"``).
    fit_X_ : ndarray of shape (n_samples, n_features)
        Training points (the candidates of every query).
    fit_y_ : ndarray of shape (n_samples,)
        Their class indices into ``classes_``.
    n_features_in_ : int

    References
    ----------
    .. [1] D. Ramanan and S. Baker, "Local Distance Functions: A Taxonomy,
       New Algorithms, and an Evaluation", IEEE TPAMI 33(4), 2011.
    .. [2] D. J. Im and G. W. Taylor, "Learning a metric for class-conditional
       KNN", IJCNN 2016.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = LocalMetricKNN(where="lazy", rule="test").fit(X, y)  # doctest: +SKIP
    >>> clf.score(X, y) > 0.9  # doctest: +SKIP
    True
    """

    def __init__(
        self,
        learner=None,
        *,
        where="global",
        rule="test",
        n_neighbors=3,
        shortlist=20,
        decision="knn",
        local_learner=None,
        interpolation="nearest",
        n_local="auto",
        n_references=50,
        sigma="auto",
        rho=1.0,
        cv_smoothing=True,
        max_condition=None,
        log_solver=None,
        n_jobs=None,
        verbose=False,
        random_state=None,
    ):
        self.learner = learner
        self.where = where
        self.rule = rule
        self.n_neighbors = n_neighbors
        self.shortlist = shortlist
        self.decision = decision
        self.local_learner = local_learner
        self.interpolation = interpolation
        self.n_local = n_local
        self.n_references = n_references
        self.sigma = sigma
        self.rho = rho
        self.cv_smoothing = cv_smoothing
        self.max_condition = max_condition
        self.log_solver = log_solver
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state

    _parameter_checks = {
        "decision": options(*DECISIONS),
        "n_neighbors": check_int,
        "shortlist": check_int,
        "n_local": optional(check_int, "auto"),
        "rho": check_positive,
        "log_solver": optional(check_callable, None),
        "n_jobs": check_n_jobs,
    }

    def _check_params(self):
        check_where_rule(self.where, self.interpolation, self.rule)
        check_params(self, self._parameter_checks)
        if self.where == "lazy" and self.max_condition is not None:
            raise ValueError("max_condition bounds placed local metrics; where='lazy' learns them at the query: use max_condition=None")
        if self.shortlist < self.n_neighbors:
            raise ValueError(f"shortlist must be >= n_neighbors={self.n_neighbors}, got {self.shortlist!r}")

    def _check_class_sizes(self, n_samples, counts):
        if self.decision == "ccknn" and self.n_neighbors > counts.min():
            raise ValueError(
                f"n_neighbors={self.n_neighbors} is larger than the smallest class "
                f"({self.classes_[counts.argmin()]!r} has {counts.min()} samples) for decision='ccknn'"
            )
        if self.decision == "knn" and self.n_neighbors > n_samples:
            raise ValueError(f"n_neighbors={self.n_neighbors} must be <= n_samples={n_samples}")

    @with_one_blas_thread
    def fit(self, X, y):
        """Learn the global metric, the shortlist index and the local metric field.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : LocalMetricKNN
        """
        self._check_params()
        X, y_index = validate_classes(self, X, y)
        self._check_class_sizes(len(X), np.bincount(y_index))
        learner = default_learner() if self.learner is None else self.learner
        placement, self.field_ = place_field(
            learner if self.local_learner is None else self.local_learner,
            X,
            y_index,
            self.where,
            self.interpolation,
            self.rho,
            global_learner=learner,
            n_local=self.n_local,
            n_references=self.n_references,
            sigma=self.sigma,
            cv_smoothing=self.cv_smoothing,
            max_condition=self.max_condition,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
            random_state=self.random_state,
        )  # predict parallelizes over queries; each worker of a LazyField learns its distinct points
        self.global_metric_ = placement.global_metric_
        self.placement_ = None if self.where == "lazy" else placement
        self.fit_X_, self.fit_y_ = X, y_index
        self._candidates = None
        self._shortlist()
        return self

    def _shortlist(self):
        """The :class:`GlobalShortlist` (per class for CCKNN), built on first use from the fitted arrays,
        so a model restored by :func:`riemlocal.io.load` rebuilds it."""
        if getattr(self, "_candidates", None) is None:
            if self.decision == "knn":
                groups = [np.arange(len(self.fit_X_))]
            else:
                groups = [np.flatnonzero(self.fit_y_ == c) for c in range(len(self.classes_))]
            self._candidates = GlobalShortlist(self.fit_X_, self.global_metric_, groups)
        return self._candidates

    def local_distances(self, X):
        """Shortlisted candidates and their squared rule distances.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)

        Returns
        -------
        candidates : ndarray of shape (n_queries, n_candidates)
            Indices into the training set.
        distances_sq : ndarray of shape (n_queries, n_candidates)
            Squared distance of ``rule`` under ``field_`` (for ``"line"``,
            the segment energy; for ``"line_length"`` and ``"geodesic"``,
            the squared length).
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        candidates = self._shortlist()(X, self.shortlist)
        distances_sq = distance(
            self.field_, X[:, None, :], self.fit_X_[candidates], rule=self.rule, squared=True,
            log_solver=None if self.log_solver is None else self.log_solver(self.field_),
            n_jobs=self.n_jobs, verbose=self.verbose,
        )
        return candidates, distances_sq

    def _votes(self, X):
        candidates, distances_sq = self.local_distances(X)
        return knn_votes(distances_sq, self.fit_y_[candidates], self.n_neighbors, len(self.classes_))

    @with_one_blas_thread
    def predict(self, X):
        """Predict class labels.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_queries,)
        """
        check_is_fitted(self)
        if self.decision == "knn":
            return self.classes_[np.argmax(self._votes(X), axis=1)]
        return self.classes_[np.argmin(self.decision_scores(X), axis=1)]

    def _is_ccknn(self):
        return self.decision == "ccknn"

    @available_if(_is_ccknn)
    def decision_scores(self, X):
        """CCKNN scores (lower is better): per class, the sum of the ``n_neighbors`` smallest squared distances.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)

        Returns
        -------
        scores : ndarray of shape (n_queries, n_classes)
        """
        check_is_fitted(self)
        candidates, distances_sq = self.local_distances(X)
        block_labels = self.fit_y_[candidates[0]] if len(candidates) else np.zeros(0, dtype=int)
        return ccknn_scores(distances_sq, block_labels, self.n_neighbors, classes=np.arange(len(self.classes_)))

    def _has_votes(self):
        return self.decision == "knn"

    @available_if(_has_votes)
    def predict_proba(self, X):
        """Fractions of the ``n_neighbors`` re-ranked neighbours in each class (``decision="knn"``).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)

        Returns
        -------
        proba : ndarray of shape (n_queries, n_classes)
        """
        check_is_fitted(self)
        return self._votes(X) / self.n_neighbors
