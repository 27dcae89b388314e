r"""Nearest-neighbour classification with local metrics (Ramanan & Baker, Sec. III-A).

A global metric shortlists candidates with a KD-tree; a local metric field,
read through a distance rule, re-ranks them; a vote (KNN) or the
class-conditional rule (CCKNN) decides.
"""


import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .distances import distance
from .fields import LazyField
from .placement import LocalMetrics, default_learner
from .utils.validation import check_int, check_labels, check_n_jobs, check_option, check_points, check_positive

__all__ = ["LocalMetricKNN", "ccknn_scores", "ccknn_predict"]

_WHERE = {"global", "class", "exemplar", "reference", "lazy"}
_RULES = {"test", "train", "line", "line_length", "geodesic"}
_INTERPOLATION = {"nearest", "rbf", "smooth"}
_DECISIONS = {"knn", "ccknn"}


def ccknn_scores(distances_sq, y_train, n_neighbors, classes=None):
    r"""Class-conditional KNN scores: per class, the sum of the ``n_neighbors`` smallest squared distances.

    .. math::
        s_C(z) = \sum_{j=1}^{k} \|z - NN^C_j(z)\|^2,

    eq. (14) of Im & Taylor [1]_. A class with fewer than ``k`` training
    points ``n_C`` scores :math:`\tfrac{k}{n_C}` times the sum over all of them
    (the mean distance times ``k``), so small classes are not favoured.

    Parameters
    ----------
    distances_sq : array-like of shape (n_queries, n_train)
        Squared distances from each query to each training point, in any
        metric (Mahalanobis, local, geodesic...).
    y_train : array-like of shape (n_train,)
        Labels of the training points.
    n_neighbors : int
        Number ``k`` of nearest neighbours summed per class.
    classes : array-like of shape (n_classes,), default=None
        Classes to score, in this order (default: ``np.unique(y_train)``);
        each must occur in ``y_train``.

    Returns
    -------
    scores : ndarray of shape (n_queries, n_classes)
        Lower is better.

    References
    ----------
    .. [1] D. J. Im and G. W. Taylor, "Learning a metric for class-conditional
       KNN", IJCNN 2016.
    """
    distances_sq = check_points(distances_sq, name="distances_sq", min_ndim=2)
    if distances_sq.ndim != 2:
        raise ValueError(f"distances_sq must have shape (n_queries, n_train), got {distances_sq.shape}")
    y_train = np.asarray(y_train)
    if y_train.shape != distances_sq.shape[1:]:
        raise ValueError(f"y_train must have shape ({distances_sq.shape[1]},), got {y_train.shape}")
    n_neighbors = check_int(n_neighbors, "n_neighbors")
    classes = np.unique(y_train) if classes is None else np.asarray(classes)
    scores = np.empty((distances_sq.shape[0], classes.size))
    for c, label in enumerate(classes):
        columns = distances_sq[:, y_train == label]
        if columns.shape[1] == 0:
            raise ValueError(f"classes contains {label!r}, which does not occur in y_train")
        k = min(n_neighbors, columns.shape[1])
        scores[:, c] = n_neighbors * np.partition(columns, k - 1, axis=1)[:, :k].mean(axis=1)
    return scores


def ccknn_predict(distances_sq, y_train, n_neighbors, classes=None):
    """Class-conditional KNN decision (CCKNN): the class of smallest :func:`ccknn_scores`.

    Parameters are those of :func:`ccknn_scores`; ties go to the first class
    in ``classes``.

    Returns
    -------
    y_pred : ndarray of shape (n_queries,)
    """
    classes = np.unique(np.asarray(y_train)) if classes is None else np.asarray(classes)
    return classes[np.argmin(ccknn_scores(distances_sq, y_train, n_neighbors, classes), axis=1)]


class LocalMetricKNN(ClassifierMixin, BaseEstimator):
    r"""K-nearest-neighbour classifier with local metrics (how x where x when x rule).

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
    rule : {"test", "train", "line", "line_length", "geodesic"}, default="test"
        Distance rule of :mod:`riemlocal.distances`. ``"test"`` and
        ``"train"`` evaluate the field once per distinct query / candidate
        (:func:`riemlocal.distances.distance` does the bookkeeping).
        ``"geodesic"`` needs a smooth field (``interpolation="rbf"`` or
        ``"smooth"``); a :class:`LazyField` supports only ``"test"`` and ``"train"``.
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
        Neighbourhood size of local fits: ``n_neighbors`` of
        :class:`LocalMetrics` (``"auto"``: 20 for ``"class"``, 50 for
        ``"exemplar"``) and :math:`S` of the :class:`LazyField` (``"auto"``: 50).
    n_references : int, default=50
        Reference points for ``where="reference"``.
    sigma : float or "auto", default="auto"
        RBF temperature (eq. 15), see :class:`LocalMetrics`.
    rho : float, default=1.0
        Sharpness of ``interpolation="smooth"``.
    cv_smoothing : bool, default=True
        Cross-validated smoothing of reference metrics (eq. 16).
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
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state

    def _check_params(self):
        check_option(self.where, "where", _WHERE)
        check_option(self.rule, "rule", _RULES)
        check_option(self.decision, "decision", _DECISIONS)
        check_option(self.interpolation, "interpolation", _INTERPOLATION)
        check_int(self.n_neighbors, "n_neighbors")
        if check_int(self.shortlist, "shortlist") < self.n_neighbors:
            raise ValueError(f"shortlist must be >= n_neighbors={self.n_neighbors}, got {self.shortlist!r}")
        if self.n_local != "auto":
            check_int(self.n_local, "n_local")
        check_positive(self.rho, "rho")
        if self.where == "lazy" and self.rule not in ("test", "train"):
            raise ValueError(
                f"rule={self.rule!r} needs the metric along whole curves; a lazy field is learned at points "
                "only, so use rule='test' (Lazy) or 'train' (online per-exemplar)"
            )
        smooth = self.where == "global" or (self.where != "lazy" and self.interpolation != "nearest")
        if self.rule == "geodesic" and not smooth:
            raise ValueError(
                "rule='geodesic' needs a smooth field; a piecewise-constant field (interpolation='nearest' "
                "or where='lazy') has no geodesics: use rule='line' or interpolation='rbf'/'smooth'"
            )

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
        check_n_jobs(self.n_jobs)
        X, y = validate_data(self, X, y)
        check_classification_targets(check_labels(y))
        self.classes_, y_index = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"y must hold at least 2 classes, got {len(self.classes_)} class")
        counts = np.bincount(y_index)
        if self.decision == "ccknn" and self.n_neighbors > counts.min():
            raise ValueError(
                f"n_neighbors={self.n_neighbors} is larger than the smallest class "
                f"({self.classes_[counts.argmin()]!r} has {counts.min()} samples) for decision='ccknn'"
            )
        if self.decision == "knn" and self.n_neighbors > len(X):
            raise ValueError(f"n_neighbors={self.n_neighbors} must be <= n_samples={len(X)}")
        learner = default_learner() if self.learner is None else self.learner
        local_learner = learner if self.local_learner is None else self.local_learner
        placement = LocalMetrics(
            local_learner,
            where="global" if self.where == "lazy" else self.where,
            global_learner=learner,
            n_neighbors=self.n_local,
            n_references=self.n_references,
            sigma=self.sigma,
            cv_smoothing=self.cv_smoothing,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
            random_state=self.random_state,
        ).fit(X, y_index)
        self.global_metric_ = placement.global_metric_
        if self.where == "lazy":
            self.placement_ = None
            self.field_ = LazyField(
                local_learner,
                X,
                y_index,
                n_neighbors=50 if self.n_local == "auto" else self.n_local,
                proximity=self.global_metric_,
                verbose=self.verbose,
            )  # predict parallelizes over queries; each worker learns its distinct points
        else:
            self.placement_ = placement
            if self.interpolation == "nearest":
                self.field_ = placement.nearest_field()
            elif self.interpolation == "rbf":
                self.field_ = placement.rbf_field()
            else:
                self.field_ = placement.smooth_field(self.rho)
        self.fit_X_, self.fit_y_ = X, y_index
        self._indexes = None
        self._global_indexes()
        return self

    def _global_indexes(self):
        """KD-trees on the globally mapped training data, per class for CCKNN.

        Built on first use from the fitted arrays, so a model restored by
        :func:`riemlocal.io.load` rebuilds them.
        """
        if getattr(self, "_indexes", None) is None:
            mapped = self.fit_X_ @ np.linalg.cholesky(self.global_metric_)
            if self.decision == "knn":
                members = [np.arange(len(mapped))]
            else:
                members = [np.flatnonzero(self.fit_y_ == c) for c in range(len(self.classes_))]
            self._indexes = [(m, NearestNeighbors(algorithm="kd_tree").fit(mapped[m])) for m in members]
        return self._indexes

    def _shortlist(self, X):
        """Candidate indices ``(n, S)`` and their class indices ``(S,)`` layout (per-class blocks for CCKNN)."""
        mapped = X @ np.linalg.cholesky(self.global_metric_)
        blocks = []
        for members, index in self._global_indexes():
            size = min(self.shortlist, len(members))
            blocks.append(members[index.kneighbors(mapped, n_neighbors=size, return_distance=False)])
        return np.concatenate(blocks, axis=1)

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
        candidates = self._shortlist(X)
        distances_sq = distance(
            self.field_, X[:, None, :], self.fit_X_[candidates], rule=self.rule, squared=True,
            n_jobs=self.n_jobs, verbose=self.verbose,
        )
        return candidates, distances_sq

    def _votes(self, X):
        candidates, distances = self.local_distances(X)
        nearest = np.argsort(distances, axis=1, kind="stable")[:, : self.n_neighbors]
        labels = self.fit_y_[np.take_along_axis(candidates, nearest, axis=1)]
        return np.stack([np.bincount(row, minlength=len(self.classes_)) for row in labels])

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
        candidates, distances = self.local_distances(X)
        block_labels = self.fit_y_[candidates[0]] if len(candidates) else np.zeros(0, dtype=int)
        return ccknn_scores(distances, block_labels, self.n_neighbors, classes=np.arange(len(self.classes_)))

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
