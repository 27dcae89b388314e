"""The :class:`LocalMetrics` estimator: a global metric, regions, one local fit per region."""

import warnings
from functools import partial

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, clone
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from tqdm.auto import tqdm

from ..fields import ConstantField, NearestLocalField, RBFLocalField, SmoothLocalField
from ..learners import (
    CONDITION_WARNING,
    LDAMetric,
    bound_condition,
    check_learner,
    check_max_condition,
    check_rank,
    condition_metric,
    condition_numbers,
    fit_local_metric,
)
from ..utils.parallel import with_one_blas_thread
from ..utils.validation import check_int, check_labels, check_n_jobs, check_option, check_params, check_positive, check_random_state, options
from ._regions import auto_bandwidth, class_weights, leave_one_out_smoothing, neighbourhoods, reference_weights

__all__ = [
    "LocalMetrics",
    "default_learner",
    "validate_classes",
    "PLACEMENTS",
    "NEIGHBOURHOOD_SIZES",
    "PROXIMITIES",
    "CONDITION_WARNING",
]

#: names accepted by ``LocalMetrics(where=...)``
PLACEMENTS = ("global", "class", "exemplar", "reference")
#: ``n_local="auto"``: neighbourhood size per placement (``"lazy"``: S of a LazyField)
NEIGHBOURHOOD_SIZES = {"class": 20, "exemplar": 50, "lazy": 50}
#: nearness of a nearest-center field: the global metric (eq. 13) or each center's own (eq. 21)
PROXIMITIES = ("global", "own")


def default_learner():
    """The default *how*: regularized LDA (Ramanan & Baker's best local learner)."""
    return LDAMetric()


def validate_classes(estimator, X, y):
    """Validate labelled data for ``estimator``, set its ``classes_`` (at least 2); return ``X`` and class indices."""
    X, y = validate_data(estimator, X, y, ensure_min_samples=2)
    check_classification_targets(check_labels(y))
    estimator.classes_, y_index = np.unique(y, return_inverse=True)
    if len(estimator.classes_) < 2:
        raise ValueError(f"y must hold at least 2 classes to learn a metric, got {len(estimator.classes_)} class")
    return X, y_index


class LocalMetrics(BaseEstimator):
    r"""Learn local metrics at classes, exemplars or reference points and build fields from them.

    A global metric :math:`M_G` is learned first (``global_learner``, all
    samples). It decides *where*: neighbourhoods, RBF weights and the
    proximity of the fields are measured with :math:`d^T M_G d`. Local
    metrics are then learned with ``learner`` and sample weights:

    * ``"global"`` -- only :math:`M_G` (eq. 5).
    * ``"class"`` -- metric :math:`M_j` per class from class :math:`j` and the
      ``n_local`` nearest neighbours of its members (so LDA sees the
      classes it must be told apart from; its rank is the number of those
      classes). A learner with a ``per_class`` parameter (LMNN) instead
      learns all :math:`M_j` jointly (eq. 8); they are then comparable and
      not trace-normalized. Field centers are the training points, each
      carrying its class metric, so the ``"train"`` rule gives eq. 7: the
      fields have one center per training point (150 on iris), not one per
      class; the per-class metrics are ``class_metrics_``.
    * ``"exemplar"`` -- one metric per training point from its
      ``n_local`` nearest neighbours, all learned *offline* (eq. 9--10;
      Ramanan & Baker's "small DB only" cell). The *online* per-exemplar
      variant learns only the metrics of shortlisted exemplars: use a
      :class:`~riemlocal.fields.LazyField` with the ``"train"`` rule.
    * ``"reference"`` -- ``n_references`` training points drawn at random;
      reference :math:`j` is learned with weights
      :math:`w_{ij} = \mathrm{softmax}_j(-d_G(x_i, x_{RP_j})/\sigma)` (eq. 15).
      With ``cv_smoothing`` each is then replaced by the RBF interpolation
      of the *other* references at its location (eq. 16),

      .. math::
          M^{CV}_j = \frac{1}{Z_j} \sum_{i \ne j} w_i(x_{RP_j}) M_i .

    Independently learned metrics are trace-normalized (``normalize``) so
    that distances under different metrics are comparable.

    The *hybrid* scheme of Ramanan & Baker (Sec. II-B.3) is
    ``LocalMetrics(LDAMetric(), global_learner=LMNNMetric())``.

    Parameters
    ----------
    learner : estimator, default=None
        Local learner with ``fit(X, y, sample_weight)`` and ``metric_``;
        cloned per fit. ``None`` means :class:`~riemlocal.learners.LDAMetric`.
    where : {"global", "class", "exemplar", "reference"}, default="class"
        Where the local metrics live. ``"class"`` and ``"exemplar"`` put a
        field center at every training point (with ``"class"``, each
        carries the metric of its class); ``"reference"`` only at the
        ``n_references`` reference points.
    global_learner : estimator, default=None
        Learner of :math:`M_G`; ``None`` uses ``learner``.
    n_local : int or "auto", default="auto"
        Neighbourhood size :math:`S` of the local fits: ``"auto"`` is
        ``NEIGHBOURHOOD_SIZES[where]``, 20 for ``"class"`` (the paper's
        shortlist size: the points a class competes with) and 50 for
        ``"exemplar"`` (Ramanan & Baker's S).
    n_references : int, default=50
        Number :math:`R` of reference points (clipped to the sample count).
    sigma : float or "auto", default="auto"
        RBF temperature of eq. 15 in squared global distance units;
        ``"auto"`` is the median squared distance of the training points to
        their nearest reference other than themselves (:func:`auto_bandwidth`).
    cv_smoothing : bool, default=True
        Apply eq. 16 to the reference metrics.
    rank : "auto", int or None, default="auto"
        Rank passed to learners with ``n_components``, see :func:`fit_local_metric`.
    normalize : bool, default=True
        Scale independently learned local metrics to unit trace.
    ridge : float, default=1e-6
        Relative ridge making the metrics positive definite (:func:`condition_metric`).
    max_condition : float > 1 or None, default=None
        Bound on the condition number of each local metric: eigenvalues below
        the largest over ``max_condition`` are raised to it
        (:func:`~riemlocal.learners.bound_condition`); the global metric
        used for proximity is left alone. Learned metrics are near-singular
        as a rule (LDA has rank below the dimension, LMNN collapses
        directions): only the ridge keeps them definite, with condition
        numbers near ``dim / ridge``. Nearest-center rules do not mind, but
        geodesics on the smooth and RBF fields then bend sharply where the
        metrics change and need many segments: on standardized iris with
        LMNN per class, the distances between 60 points took 25 minutes with
        a third of them uncertified, and seconds, all certified, with
        ``max_condition=100`` (``benchmarks/bench_learned_fields.py``).
        The default ``None`` keeps the learned metrics (and the results of
        existing experiments) as they are, and :meth:`smooth_field` and
        :meth:`rbf_field` warn when a condition number exceeds
        ``CONDITION_WARNING`` (1e3); bounding them changes
        the metrics, so it is asked for explicitly. Weighted means of
        bounded metrics are bounded too: the smooth and RBF fields obey the
        bound everywhere.
    zero_metric : {"raise", "fallback"}, default="raise"
        A local fit whose learner returns a zero metric raises, or, with
        ``"fallback"``, gets the global metric with a warning (:func:`fit_local_metric`).
    n_jobs : int, default=None
        Local fits run in parallel through joblib.
    verbose : bool, default=False
        Progress bar over local fits.
    random_state : int, Generator or None, default=None
        Draw of the reference points.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    global_metric_ : ndarray of shape (n_features, n_features)
        :math:`M_G` (SPD, not normalized).
    centers_ : ndarray of shape (n_centers, n_features)
    metrics_ : ndarray of shape (n_centers, n_features, n_features)
        Metric at each center.
    class_metrics_ : ndarray of shape (n_classes, n_features, n_features)
        Only for ``where="class"``.
    reference_indices_ : ndarray of shape (n_references,)
        Only for ``where="reference"``.
    sigma_ : float
        Only for ``where="reference"``: the RBF temperature used.
    learned_condition_numbers_ : ndarray of shape (n_centers,)
        Condition number of each center's metric as learned (with the ridge).
    condition_numbers_ : ndarray of shape (n_centers,)
        Condition number of each center's metric in ``metrics_``: at most
        ``max_condition`` (up to rounding).
    n_clipped_eigenvalues_ : ndarray of int of shape (n_centers,)
        Eigenvalues of each center's metric raised by ``max_condition``.
    n_features_in_ : int

    References
    ----------
    .. [1] D. Ramanan and S. Baker, "Local Distance Functions: A Taxonomy,
       New Algorithms, and an Evaluation", IEEE TPAMI 33(4), 2011.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from riemlocal.learners import LDAMetric
    >>> X, y = load_iris(return_X_y=True)
    >>> placement = LocalMetrics(LDAMetric(), where="class").fit(X, y)  # doctest: +SKIP
    >>> placement.nearest_field()  # doctest: +SKIP
    NearestLocalField(n_centers=150, dim=4)
    """

    def __init__(
        self,
        learner=None,
        *,
        where="class",
        global_learner=None,
        n_local="auto",
        n_references=50,
        sigma="auto",
        cv_smoothing=True,
        rank="auto",
        normalize=True,
        ridge=1e-6,
        max_condition=None,
        zero_metric="raise",
        n_jobs=None,
        verbose=False,
        random_state=None,
    ):
        self.learner = learner
        self.where = where
        self.global_learner = global_learner
        self.n_local = n_local
        self.n_references = n_references
        self.sigma = sigma
        self.cv_smoothing = cv_smoothing
        self.rank = rank
        self.normalize = normalize
        self.ridge = ridge
        self.max_condition = max_condition
        self.zero_metric = zero_metric
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state

    _parameter_checks = {
        "where": options(*PLACEMENTS),
        "rank": check_rank,
        "ridge": partial(check_positive, strict=False),
        "max_condition": check_max_condition,
        "zero_metric": options("raise", "fallback"),
        "n_jobs": check_n_jobs,
        "random_state": check_random_state,
    }

    @with_one_blas_thread
    def fit(self, X, y):
        """Learn the global metric, then the local metrics at the chosen places.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : LocalMetrics
        """
        check_params(self, self._parameter_checks)
        X, y = validate_classes(self, X, y)
        learner = default_learner() if self.learner is None else check_learner(self.learner)
        global_learner = learner if self.global_learner is None else check_learner(self.global_learner, "global_learner")
        self.global_metric_ = condition_metric(clone(global_learner).fit(X, y).metric_, normalize=False, ridge=self.ridge)
        mapped = X @ np.linalg.cholesky(self.global_metric_)  # |z_a - z_b|^2 = d_G(a, b)
        getattr(self, f"_fit_{self.where}")(learner, X, y, mapped)
        self._bound_condition(y)
        return self

    def _bound_condition(self, y):
        """Apply ``max_condition`` to the local metrics (per class for ``where="class"``), or warn without it."""
        self.learned_condition_numbers_ = condition_numbers(self.metrics_)
        if self.where == "class":
            self.class_metrics_, n_clipped = bound_condition(self.class_metrics_, self.max_condition)
            self.metrics_, self.n_clipped_eigenvalues_ = self.class_metrics_[y], n_clipped[y]
        else:
            self.metrics_, self.n_clipped_eigenvalues_ = bound_condition(self.metrics_, self.max_condition)
        self.condition_numbers_ = condition_numbers(self.metrics_)

    def _smooth_field(self, build):
        """``build()`` a smooth field of the local metrics, warning when they are near-singular and left unbounded."""
        field = self._field_or_constant(build)
        high = self.condition_numbers_ > CONDITION_WARNING
        if self.max_condition is None and len(self.centers_) > 1 and high.any():
            warnings.warn(
                f"{int(high.sum())} of {len(high)} local metrics have condition numbers above {CONDITION_WARNING:g} "
                f"(worst {self.condition_numbers_.max():.3g}): geodesics on their smooth or RBF field are slow "
                "and may stay uncertified; bound them with LocalMetrics(max_condition=...), e.g. 100",
                UserWarning,
                stacklevel=3,  # the user's call of smooth_field or rbf_field
            )
        return field

    # -- placements: each sets centers_ and metrics_ ---------------------------------------------

    def _fit_global(self, learner, X, y, mapped):
        self.centers_ = X.mean(axis=0, keepdims=True)
        self.metrics_ = self.global_metric_[None]

    def _fit_class(self, learner, X, y, mapped):
        if "per_class" in learner.get_params(deep=False):  # joint per-class learner (LMNN, eq. 8)
            joint = clone(learner).set_params(per_class=True).fit(X, y)
            metrics = [condition_metric(m, normalize=False, ridge=self.ridge) for m in joint.metrics_]
        else:
            neighbours = neighbourhoods(mapped, self._neighbourhood_size())
            metrics = self._fit_local(learner, X, y, class_weights(neighbours, y, len(self.classes_)))
        self.class_metrics_ = np.stack(metrics)
        self.centers_ = X
        self.metrics_ = self.class_metrics_[y]

    def _fit_exemplar(self, learner, X, y, mapped):
        neighbours = neighbourhoods(mapped, self._neighbourhood_size())
        self.centers_ = X
        self.metrics_ = np.stack(self._fit_local(learner, X, y, neighbours, subsets=True))

    def _fit_reference(self, learner, X, y, mapped):
        n_references = min(check_int(self.n_references, "n_references"), len(X))
        rng = check_random_state(self.random_state)
        self.reference_indices_ = np.sort(rng.choice(len(X), size=n_references, replace=False))
        if self.sigma == "auto":
            self.sigma_ = auto_bandwidth(mapped, self.reference_indices_)
        else:
            self.sigma_ = check_positive(self.sigma, "sigma")
        sq_distances = ((mapped[:, None, :] - mapped[self.reference_indices_]) ** 2).sum(-1)  # (n, R)
        weights = reference_weights(sq_distances, self.sigma_)
        metrics = np.stack(self._fit_local(learner, X, y, list(weights.T)))
        if self.cv_smoothing and n_references > 1:
            metrics = leave_one_out_smoothing(metrics, sq_distances[self.reference_indices_], self.sigma_)
        self.centers_ = X[self.reference_indices_]
        self.metrics_ = metrics

    def _neighbourhood_size(self):
        return NEIGHBOURHOOD_SIZES[self.where] if self.n_local == "auto" else check_int(self.n_local, "n_local")

    def _fit_local(self, learner, X, y, regions, subsets=False):
        """Fit one metric per region: weight vectors, or index subsets when ``subsets``."""
        options = dict(
            rank=self.rank, normalize=self.normalize, ridge=self.ridge, fallback=self.global_metric_, zero_metric=self.zero_metric
        )
        if subsets:
            tasks = (delayed(fit_local_metric)(learner, X[idx], y[idx], None, **options) for idx in regions)
        else:
            tasks = (delayed(fit_local_metric)(learner, X, y, w, **options) for w in regions)
        results = Parallel(n_jobs=self.n_jobs, return_as="generator")(tasks)
        return list(tqdm(results, total=len(regions), disable=not self.verbose, desc=f"local metrics ({self.where})"))

    # -- fields -----------------------------------------------------------------------------------

    def _field_or_constant(self, build):
        check_is_fitted(self)
        if len(self.centers_) == 1:
            return ConstantField(self.metrics_[0])
        return build()

    def nearest_field(self, proximity="global"):
        """Piecewise-constant field: the metric of the nearest center (eq. 13, 20--21).

        Parameters
        ----------
        proximity : {"global", "own"}, default="global"
            Nearness in the global metric (eq. 13) or in each center's own
            metric (the anisotropic Voronoi diagram, eq. 21).

        Returns
        -------
        field : NearestLocalField, or ConstantField for ``where="global"``
        """
        check_option(proximity, "proximity", PROXIMITIES)
        return self._field_or_constant(
            lambda: NearestLocalField(
                self.centers_, self.metrics_, self.global_metric_ if proximity == "global" else None
            )
        )

    def rbf_field(self, sigma=None):
        """Smooth RBF interpolation of the local metrics in the global metric (eq. 14--15).

        Parameters
        ----------
        sigma : float, default=None
            Temperature; ``None`` uses ``sigma_`` (reference placement) or
            :func:`auto_bandwidth` of the centers (the median squared global
            distance between a center and its nearest other center).

        Returns
        -------
        field : RBFLocalField, or ConstantField for ``where="global"``
        """
        return self._smooth_field(
            lambda: RBFLocalField(self.centers_, self.metrics_, self._default_sigma(sigma), self.global_metric_)
        )

    def _default_sigma(self, sigma):
        if sigma is not None:
            return check_positive(sigma, "sigma")
        if hasattr(self, "sigma_"):
            return self.sigma_
        mapped = self.centers_ @ np.linalg.cholesky(self.global_metric_)
        return auto_bandwidth(mapped, np.arange(len(mapped)))

    def smooth_field(self, rho=1.0):
        """Hauberg et al.'s smooth field, each center's own metric as proximity.

        Returns
        -------
        field : SmoothLocalField, or ConstantField for ``where="global"``
        """
        return self._smooth_field(lambda: SmoothLocalField(self.centers_, self.metrics_, rho))
