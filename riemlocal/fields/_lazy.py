r"""The *Lazy* field: the metric at ``x`` is learned on demand from ``x``'s neighbours.

Ramanan & Baker, Sec. II-D.2 (eq. 11--12): :math:`M(x)` is learned from the
:math:`S` training points nearest to :math:`x` in a global metric, with
weight 1 on them and 0 elsewhere. Read at the test point (rule ``"test"``)
this is the classic Lazy algorithm; read at training points (rule
``"train"``) it is online Per-exemplar, learning only the exemplars asked for.
"""

from collections import OrderedDict, namedtuple

import numpy as np
from joblib import Parallel, delayed
from sklearn.neighbors import NearestNeighbors
from tqdm.auto import tqdm

from ..learners import fit_local_metric
from ..utils.validation import check_int, check_labels, check_n_jobs, check_points, check_spd
from ._base import MetricField

__all__ = ["LazyField"]

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "currsize", "maxsize"])


def _learn(learner, X, y, neighbour_sets, options):
    # relative to the first neighbour: metric learners are translation invariant, their sums at offsets of 1e8 are not
    return [fit_local_metric(learner, X[idx] - X[idx[0]], y[idx], **options) for idx in neighbour_sets]


class LazyField(MetricField):
    r"""Metric learned at each queried point from its ``n_neighbors`` nearest training points.

    The neighbours are found with the global metric ``proximity``; the
    metric comes from :func:`riemlocal.learners.fit_local_metric` (clone of
    ``learner``, LDA rank = number of classes among the neighbours,
    trace-normalized). A neighbourhood holding a single class gets the
    (trace-normalized) proximity metric.

    Results are cached per point, keyed by the bytes of its float64
    coordinates, in a least-recently-used cache of ``cache_size`` entries.
    :math:`M(x)` depends on :math:`x` only through its neighbour set, so the
    field is piecewise constant (on order-:math:`S` Voronoi cells): it is not
    smooth and its derivative is zero almost everywhere.

    Parameters
    ----------
    learner : estimator
        Local learner with ``fit(X, y[, sample_weight])`` and ``metric_``.
    X : array-like of shape (n_samples, dim)
        Training points.
    y : array-like of shape (n_samples,)
        Their labels.
    n_neighbors : int, default=50
        Neighbourhood size :math:`S` (clipped to ``n_samples``).
    proximity : array-like of shape (dim, dim), default=None
        Global SPD metric defining the neighbours; ``None`` is Euclidean.
    rank : "auto", int or None, default="auto"
    normalize : bool, default=True
    ridge : float, default=1e-6
        See :func:`riemlocal.learners.fit_local_metric`.
    cache_size : int, default=100000
        Maximum number of cached metrics.
    n_jobs : int, default=None
        Cache misses are learned in parallel through joblib.
    verbose : bool, default=False
        Progress bar over cache misses.

    References
    ----------
    .. [1] D. Ramanan and S. Baker, "Local Distance Functions: A Taxonomy,
       New Algorithms, and an Evaluation", IEEE TPAMI 33(4), 2011, Sec. II-D.2.
    """

    is_smooth = False

    def __init__(
        self,
        learner,
        X,
        y,
        n_neighbors=50,
        proximity=None,
        *,
        rank="auto",
        normalize=True,
        ridge=1e-6,
        cache_size=100_000,
        n_jobs=None,
        verbose=False,
    ):
        X = check_points(X, name="X", min_ndim=2)
        if X.ndim != 2 or len(X) == 0:
            raise ValueError(f"X must have shape (n_samples, dim) with n_samples >= 1, got {X.shape}")
        y = check_labels(y)
        if y.shape != (len(X),):
            raise ValueError(f"y must have shape ({len(X)},) to match X, got {y.shape}")
        n_neighbors, cache_size = check_int(n_neighbors, "n_neighbors"), check_int(cache_size, "cache_size")
        super().__init__(X.shape[1])
        if proximity is not None:
            proximity = check_spd(proximity, "proximity", dim=self.dim)
            if proximity.ndim != 2:
                raise ValueError(f"proximity must be one (dim, dim) matrix or None, got shape {proximity.shape}")
        self.learner, self.X, self.y = learner, X, y
        self.n_neighbors = int(min(n_neighbors, len(X)))
        self.proximity = proximity
        self.rank, self.normalize, self.ridge = rank, normalize, ridge
        self.cache_size, self.n_jobs, self.verbose = int(cache_size), check_n_jobs(n_jobs), verbose
        self._map = np.eye(self.dim) if proximity is None else np.linalg.cholesky(proximity)
        self._index = NearestNeighbors(n_neighbors=self.n_neighbors).fit(X @ self._map)
        self._cache = OrderedDict()
        self._hits = self._misses = 0

    def neighbors(self, base_point):
        """Indices of the ``n_neighbors`` training points nearest to each point, shape ``(..., n_neighbors)``."""
        x = self._check(base_point)
        flat = x.reshape(-1, self.dim)
        return self._index.kneighbors(flat @ self._map, return_distance=False).reshape(x.shape[:-1] + (-1,))

    def metric_matrix(self, base_point):
        x = np.ascontiguousarray(self._check(base_point))
        flat = x.reshape(-1, self.dim)
        keys = [row.tobytes() for row in flat]
        found, missing = {}, {}
        for key, row in zip(keys, flat):
            if key in found or key in missing:
                continue
            if key in self._cache:
                self._cache.move_to_end(key)
                found[key] = self._cache[key]
                self._hits += 1
            else:
                missing[key] = row
        if missing:
            self._misses += len(missing)
            learned = dict(zip(missing, self._learn_at(np.array(list(missing.values())))))
            self._store(learned)
            found.update(learned)
        out = np.stack([found[key] for key in keys]) if keys else np.empty((0, self.dim, self.dim))
        return out.reshape(x.shape + (self.dim,))

    def _learn_at(self, points):
        neighbour_sets = self._index.kneighbors(points @ self._map, return_distance=False)
        options = dict(rank=self.rank, normalize=self.normalize, ridge=self.ridge, fallback=self.proximity)
        n_tasks = len(points) if self.n_jobs in (None, 1) else min(len(points), 4 * abs(self.n_jobs) + 4)
        batches = np.array_split(np.arange(len(points)), max(n_tasks, 1))
        results = Parallel(n_jobs=self.n_jobs, return_as="generator")(
            delayed(_learn)(self.learner, self.X, self.y, neighbour_sets[batch], options) for batch in batches
        )
        metrics = []
        for part in tqdm(results, total=len(batches), disable=not self.verbose, desc="lazy metrics"):
            metrics.extend(part)
        return metrics

    def _store(self, learned):
        for key, metric in learned.items():
            self._cache[key] = metric
            self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def cache_info(self):
        """Cache statistics ``(hits, misses, currsize, maxsize)``, as :func:`functools.lru_cache`."""
        return CacheInfo(self._hits, self._misses, len(self._cache), self.cache_size)

    def cache_clear(self):
        """Empty the cache and reset its statistics."""
        self._cache.clear()
        self._hits = self._misses = 0

    def metric_derivative(self, base_point):
        """Zero almost everywhere (the field is piecewise constant)."""
        x = self._check(base_point)
        return np.zeros(x.shape[:-1] + (self.dim,) * 3)

    def __repr__(self):
        return f"LazyField(n_samples={len(self.X)}, dim={self.dim}, n_neighbors={self.n_neighbors})"
