r"""The *Lazy* field: the metric at ``x`` is learned on demand from ``x``'s neighbours.

Ramanan & Baker, Sec. II-D.2 (eq. 11--12): :math:`M(x)` is learned from the
:math:`S` training points nearest to :math:`x` in a global metric, with
weight 1 on them and 0 elsewhere. Read at the test point (rule ``"test"``)
this is the classic Lazy algorithm; read at training points (rule
``"train"``) it is online Per-exemplar, learning only the exemplars asked for.

The field is piecewise constant: :math:`M` changes only where the set of the
:math:`S` nearest training points changes. Along a segment :math:`x + \lambda d`
the squared proximities :math:`\lambda^2 d^T P d + 2 \lambda d^T P (x - x_n) + \|x - x_n\|_P^2`
share their :math:`\lambda^2` term, so the set changes where two *lines*
:math:`b_n \lambda + c_n` cross; :meth:`LazyField.segment_cells` walks these
crossings (a kinetic walk) and fits one metric per cell.
"""

from collections import OrderedDict, namedtuple

import numpy as np
from joblib import Parallel, delayed
from sklearn.neighbors import NearestNeighbors
from tqdm.auto import tqdm

from ..learners import check_learner, check_rank, fit_local_metric
from ..utils.arrays import unique_rows
from ..utils.validation import check_int, check_labels, check_n_jobs, check_option, check_points, check_positive, check_spd, check_spread
from ._base import MetricField, SegmentCells

__all__ = ["LazyField"]

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "currsize", "maxsize"])


def _learn(learner, X, y, neighbour_sets, options):
    # relative to the first neighbour: metric learners are translation invariant, their sums at offsets of 1e8 are not
    return [fit_local_metric(learner, X[idx] - X[idx[0]], y[idx], **options) for idx in neighbour_sets]


class LazyField(MetricField):
    r"""Metric learned at each queried point from its ``n_local`` nearest training points.

    The neighbours are found with the global metric ``proximity``; the
    metric comes from :func:`riemlocal.learners.fit_local_metric` (clone of
    ``learner``, LDA rank = number of classes among the neighbours,
    trace-normalized). A neighbourhood holding a single class gets the
    (trace-normalized) proximity metric.

    :math:`M(x)` depends on :math:`x` only through its neighbour set, so the
    field is piecewise constant (on order-:math:`S` Voronoi cells): it is not
    smooth and its derivative is zero almost everywhere. Fitted metrics are
    cached per neighbour set (points of one cell share their fit) in a
    least-recently-used cache of ``cache_size`` entries; both line rules are
    exact (:meth:`segment_cells`).

    Parameters
    ----------
    learner : estimator
        Local learner with ``fit(X, y[, sample_weight])`` and ``metric_``.
    X : array-like of shape (n_samples, dim)
        Training points.
    y : array-like of shape (n_samples,)
        Their labels.
    n_local : int, default=50
        Neighbourhood size :math:`S` (clipped to ``n_samples``).
    proximity : array-like of shape (dim, dim), default=None
        Global SPD metric defining the neighbours; ``None`` is Euclidean.
    rank : "auto", int or None, default="auto"
    normalize : bool, default=True
    ridge : float, default=1e-6
    zero_metric : {"raise", "fallback"}, default="raise"
        See :func:`riemlocal.learners.fit_local_metric` (the fallback is ``proximity``).
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

    structure = "piecewise_constant"

    def __init__(
        self,
        learner,
        X,
        y,
        n_local=50,
        proximity=None,
        *,
        rank="auto",
        normalize=True,
        ridge=1e-6,
        zero_metric="raise",
        cache_size=100_000,
        n_jobs=None,
        verbose=False,
    ):
        check_learner(learner)
        X = check_points(X, name="X", min_ndim=2)
        if X.ndim != 2 or len(X) == 0:
            raise ValueError(f"X must have shape (n_samples, dim) with n_samples >= 1, got {X.shape}")
        check_spread(X)
        y = check_labels(y)
        if y.shape != (len(X),):
            raise ValueError(f"y must have shape ({len(X)},) to match X, got {y.shape}")
        n_local, cache_size = check_int(n_local, "n_local"), check_int(cache_size, "cache_size")
        super().__init__(X.shape[1])
        if proximity is not None:
            proximity = check_spd(proximity, "proximity", dim=self.dim)
            if proximity.ndim != 2:
                raise ValueError(f"proximity must be one (dim, dim) matrix or None, got shape {proximity.shape}")
        self.learner, self.X, self.y = learner, X, y
        self.n_local = int(min(n_local, len(X)))
        self.proximity = proximity
        self.rank, self.normalize, self.ridge = check_rank(rank), normalize, check_positive(ridge, "ridge", strict=False)
        self.zero_metric = check_option(zero_metric, "zero_metric", ("raise", "fallback"))
        self.cache_size, self.n_jobs, self.verbose = int(cache_size), check_n_jobs(n_jobs), verbose
        self._origin = X.mean(axis=0)  # neighbours are searched in centered coordinates (stable at any offset)
        self._map = np.eye(self.dim) if proximity is None else np.linalg.cholesky(proximity)
        self._index = NearestNeighbors(n_neighbors=self.n_local).fit((X - self._origin) @ self._map)
        self._cache = OrderedDict()
        self._hits = self._misses = 0

    def _mapped(self, points):
        return (points - self._origin) @ self._map

    def neighbors(self, base_point):
        """Indices of the ``n_local`` training points nearest to each point, shape ``(..., n_local)``."""
        x = self._check(base_point)
        flat = x.reshape(-1, self.dim)
        return self._index.kneighbors(self._mapped(flat), return_distance=False).reshape(x.shape[:-1] + (-1,))

    def metric_matrix(self, base_point):
        x = self._check(base_point)
        neighbour_sets = self.neighbors(x).reshape(-1, self.n_local)
        return self._fitted(neighbour_sets).reshape(x.shape + (self.dim,))

    def segment_cells(self, start_point, end_point):
        r"""Cells crossed by each segment, found by a kinetic walk over crossing lines.

        Along :math:`x + \lambda d`, training point :math:`n` has the squared
        proximity :math:`a \lambda^2 + b_n \lambda + c_n` with
        :math:`b_n = 2 d^T P (x - x_n)` and :math:`c_n = \|x - x_n\|^2_P`
        (computed from the differences :math:`x - x_n`). The :math:`S` nearest
        are the :math:`S` lowest lines :math:`b_n \lambda + c_n`; the set changes
        at the first crossing of a member by an outsider, i.e. where the
        members' maximum meets the outsiders' minimum. Each distinct set is
        fitted once (cached).
        """
        start, end = self._segments(start_point, end_point)
        walks = [self._walk(x, y) for x, y in zip(start, end)]
        pair = np.repeat(np.arange(len(walks)), [len(spans) for spans, _ in walks])
        span = np.concatenate([spans for spans, _ in walks])
        neighbour_sets, cell = unique_rows(np.sort(np.concatenate([sets for _, sets in walks]), axis=1))
        return SegmentCells(pair, span, cell, self._fitted(neighbour_sets))

    def _walk(self, x, y):
        """Spans and neighbour sets, shape ``(m,)`` and ``(m, n_local)``, of the pieces of ``x -> y``."""
        n_samples, size = len(self.X), self.n_local
        if size == n_samples:
            return np.ones(1), np.arange(n_samples)[None]
        candidates = self._candidates(x, y)
        if len(candidates) == size:  # no outsider can enter: one cell
            return np.ones(1), candidates[None]
        offsets = x - self.X[candidates]
        steered = offsets if self.proximity is None else offsets @ self.proximity
        slope, intercept = 2.0 * steered @ (y - x), np.einsum("ni,ni->n", steered, offsets)
        member = np.zeros(len(candidates), dtype=bool)
        member[np.lexsort((slope, intercept))[:size]] = True  # the S lowest lines just after 0
        lam, spans, sets = 0.0, [], []
        for _ in range(len(candidates) ** 2 + 2):  # every swap is a distinct crossing of two lines
            inside, outside = np.flatnonzero(member), np.flatnonzero(~member)
            closing = slope[inside, None] - slope[outside]  # > 0: the outsider gains on the member
            with np.errstate(divide="ignore", invalid="ignore"):
                meet = np.where(closing > 0, (intercept[outside] - intercept[inside, None]) / closing, np.inf)
            event = np.argmin(meet)
            when = max(meet.flat[event], lam)
            if min(when, 1.0) > lam:
                spans.append(min(when, 1.0) - lam)
                sets.append(candidates[inside])
            if when >= 1.0:
                return np.array(spans), np.array(sets)
            leaving, entering = np.unravel_index(event, meet.shape)
            member[inside[leaving]], member[outside[entering]] = False, True
            lam = when
        raise RuntimeError("the kinetic walk of the S nearest points did not terminate; please report this input")

    def _candidates(self, x, y):
        r"""Training points that can be among the :math:`S` nearest somewhere on ``x -> y``.

        With :math:`m` the midpoint and :math:`\rho` the distance of the
        :math:`S`-th nearest point (1-Lipschitz), a point nearest at
        :math:`p` lies within :math:`\rho(m) + \|d\|_P` of :math:`m`.
        """
        mapped = self._mapped(np.stack([0.5 * (x + y)]))
        reach = self._index.kneighbors(mapped)[0][0, -1] + np.linalg.norm((y - x) @ self._map)
        reach += 1e-8 * (reach + np.linalg.norm(mapped))  # the tree's rounding
        return np.sort(self._index.radius_neighbors(mapped, reach, return_distance=False)[0])

    def _fitted(self, neighbour_sets):
        """Metrics learned on each neighbour set (rows of training indices), through the cache; ``(n, dim, dim)``."""
        keys = [row.tobytes() for row in np.sort(neighbour_sets, axis=1)]
        found, missing = {}, {}
        for key, row in zip(keys, neighbour_sets):
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
            learned = dict(zip(missing, self._learn(np.array(list(missing.values())))))
            self._store(learned)
            found.update(learned)
        return np.stack([found[key] for key in keys]) if keys else np.empty((0, self.dim, self.dim))

    def _learn(self, neighbour_sets):
        options = dict(
            rank=self.rank, normalize=self.normalize, ridge=self.ridge, fallback=self.proximity, zero_metric=self.zero_metric
        )
        n_sets = len(neighbour_sets)
        n_tasks = n_sets if self.n_jobs in (None, 1) else min(n_sets, 4 * abs(self.n_jobs) + 4)
        batches = np.array_split(np.arange(n_sets), max(n_tasks, 1))
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
        return f"LazyField(n_samples={len(self.X)}, dim={self.dim}, n_local={self.n_local})"
