r"""Distance rules: turn a metric field :math:`M(x)` into a distance (Ramanan & Baker, Sec. II).

For a query :math:`x`, a candidate (training point) :math:`y` and :math:`d = y - x`:

=================  ================================================================  ==================
rule               value (a length)                                                  ``squared=True``
=================  ================================================================  ==================
``"test"``         :math:`\sqrt{d^T M(x) d}` (metric frozen at the query)            :math:`d^T M(x) d`
``"train"``        :math:`\sqrt{d^T M(y) d}` (metric frozen at the candidate)        :math:`d^T M(y) d`
``"line"``         :math:`\sqrt{E}`, :math:`E = d^T [\int_0^1 M(x + \lambda d)
                   d\lambda] d` (Ramanan & Baker eq. 18)                             :math:`E`
``"line_length"``  :math:`L = \int_0^1 \sqrt{d^T M(x + \lambda d) d}\,d\lambda`      :math:`L^2`
``"geodesic"``     length of the shortest curve (smooth fields only)                 its square
=================  ================================================================  ==================

:math:`E` is the energy of the straight segment traversed at constant
parameter speed, :math:`L` its length, and by Cauchy--Schwarz and
minimality :math:`d_{geo} \le L \le \sqrt{E}`.

For a :class:`~riemlocal.fields.NearestLocalField` both line rules are
computed *exactly*: along :math:`x + \lambda d` center :math:`r` scores the
parabola :math:`q_r(\lambda) = a_r \lambda^2 + b_r \lambda + c_r` with
:math:`a_r = d^T P_r d`, :math:`b_r = 2 d^T P_r (x - x_r)`,
:math:`c_r = (x - x_r)^T P_r (x - x_r)` (:math:`P_r` the proximity matrix of
center :math:`r`), the active cell is :math:`\arg\min_r q_r`, and the
segments are the pieces of the lower envelope of the :math:`R` parabolas on
:math:`[0, 1]`. Instead of sorting all :math:`R(R-1)` pairwise crossings and
looking each segment up again (the paper's :math:`O(R^3 K^2)` algorithm),
the envelope is walked from :math:`\lambda = 0`: from the active parabola,
jump to the first parabola that drops below it, :math:`O(R)` work per
breakpoint after :math:`O(R K^2)` work per distinct point. On a segment in
cell :math:`r` the integrand is the constant :math:`d^T M_r d`, so both
:math:`E` and :math:`L` are finite sums. Smooth fields use adaptive
Gauss--Kronrod quadrature (relative accuracy about :math:`10^{-10}`).

References
----------
.. [1] D. Ramanan and S. Baker, "Local distance functions: a taxonomy, new
   algorithms, and an evaluation", IEEE TPAMI 33(4), 2011, Sec. II-E, eq. 17--22.
"""

import warnings

import numpy as np
from scipy.integrate import quad_vec
from sklearn.exceptions import ConvergenceWarning

from .fields import ConstantField, MetricField, NearestLocalField
from .manifold import LearnedMetricManifold
from .utils.parallel import parallel_map
from .utils.validation import check_option, check_points

__all__ = ["RULES", "distance", "pairwise_distances"]

#: names accepted by the ``rule`` argument
RULES = ("test", "train", "line", "line_length", "geodesic")

_CHUNK_ELEMENTS = 2**22  # bound on the temporary arrays of one task (floats)
_MAX_PAIRS = 4096  # pairs per task
_WALK_ROWS = 512  # pairs walked together (their (pairs, R) arrays stay in cache)
_QUADRATURE_PAIRS = 256  # pairs integrated together by quad_vec (they share subdivisions)
_QUADRATURE_RTOL = 1e-10


def distance(field, x, y, rule="test", squared=False, *, n_jobs=None, verbose=False):
    """Distance from query points ``x`` to candidate points ``y`` under a metric field.

    Parameters
    ----------
    field : MetricField
        Any metric field; :class:`~riemlocal.fields.ConstantField` and
        :class:`~riemlocal.fields.NearestLocalField` have exact fast paths.
    x : array-like of shape (..., dim)
        Query points (where the ``"test"`` rule freezes the metric).
    y : array-like of shape (..., dim)
        Candidate points; the leading axes of ``x`` and ``y`` broadcast.
        Per-point work is done once per distinct point, so a query against its
        shortlist is best asked as ``distance(field, x[:, None, :], shortlist)``
        with ``shortlist`` of shape ``(n, S, dim)``.
    rule : {"test", "train", "line", "line_length", "geodesic"}, default="test"
        See the module docstring.
    squared : bool, default=False
        Return the squared length; for ``"line"`` the segment energy
        :math:`E = d^T [\\int_0^1 M]\\, d` itself.
    n_jobs : int, default=None
        Parallel workers (joblib; ``None`` means 1 unless in a
        :func:`joblib.parallel_config` context).
    verbose : bool, default=False
        Show a progress bar.

    Returns
    -------
    distances : ndarray of shape (...)
        The broadcast leading shape of ``x`` and ``y`` (a 0-d value for two points).
    """
    rule = _check_rule(field, rule)
    x = check_points(x, field.dim, "x")
    y = check_points(y, field.dim, "y")
    try:
        batch = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    except ValueError as exc:
        raise ValueError(
            f"the leading axes of x {x.shape[:-1]} and y {y.shape[:-1]} do not broadcast"
        ) from exc
    x_index = np.broadcast_to(np.arange(x[..., 0].size).reshape(x.shape[:-1]), batch).ravel()
    y_index = np.broadcast_to(np.arange(y[..., 0].size).reshape(y.shape[:-1]), batch).ravel()
    values = _evaluate(
        field, x.reshape(-1, field.dim), y.reshape(-1, field.dim), x_index, y_index, rule, squared, n_jobs, verbose
    )
    if not np.all(np.isfinite(values)):
        raise ValueError("x and y are too far apart for this field: their distances overflow float64")
    return values.reshape(batch)[()]


def pairwise_distances(field, X, Y=None, rule="test", squared=False, n_jobs=None, verbose=False):
    """Distances between every row of ``X`` (queries) and every row of ``Y`` (candidates).

    Parameters
    ----------
    field : MetricField
    X : array-like of shape (n_samples_X, dim)
    Y : array-like of shape (n_samples_Y, dim), default=None
        ``None`` means ``X``.
    rule, squared, n_jobs, verbose
        As in :func:`distance`; the work is split in chunks of rows of ``X``.

    Returns
    -------
    distances : ndarray of shape (n_samples_X, n_samples_Y)
    """
    rule = _check_rule(field, rule)
    X = _check_matrix(X, field.dim, "X")
    Y = X if Y is None else _check_matrix(Y, field.dim, "Y")
    x_index = np.repeat(np.arange(len(X)), len(Y))
    y_index = np.tile(np.arange(len(Y)), len(X))
    values = _evaluate(field, X, Y, x_index, y_index, rule, squared, n_jobs, verbose)
    if not np.all(np.isfinite(values)):
        raise ValueError("X and Y are too far apart for this field: their distances overflow float64")
    return values.reshape(len(X), len(Y))


def _check_rule(field, rule):
    if not isinstance(field, MetricField):
        raise TypeError(f"field must be a MetricField, got {type(field).__name__}")
    check_option(rule, "rule", RULES)
    if rule == "geodesic" and not field.is_smooth:
        raise ValueError(
            f"rule='geodesic' needs a smooth field, but {type(field).__name__} is not smooth "
            "(it has no geodesics); use rule='line' or 'line_length'"
        )
    return rule


def _check_matrix(points, dim, name):
    points = check_points(points, dim, name, min_ndim=2)
    if points.ndim != 2:
        raise ValueError(f"{name} must have shape (n_samples, dim={dim}), got {points.shape}")
    return points


# --------------------------------------------------------------------------- dispatch


def _evaluate(field, X, Y, x_index, y_index, rule, squared, n_jobs, verbose):
    """Distances for the pairs ``(X[x_index[p]], Y[y_index[p]])``, shape ``(n_pairs,)``."""
    values = np.empty(len(x_index))
    if len(x_index) == 0:
        return values
    X, x_index = _distinct(X, x_index)
    Y, y_index = _distinct(Y, y_index)
    if rule == "train":  # the test rule with the roles swapped: d -> -d, same quadratic form
        X, Y, x_index, y_index = Y, X, y_index, x_index
    if rule == "geodesic" and not isinstance(field, ConstantField):
        metric = LearnedMetricManifold(field, n_jobs=n_jobs, verbose=verbose).metric
        return (metric.squared_dist if squared else metric.dist)(X[x_index], Y[y_index])
    length_rule = rule in ("line_length", "geodesic")

    order = np.argsort(x_index, kind="stable")
    x_index, y_index = x_index[order], y_index[order]
    if isinstance(field, ConstantField) or rule in ("test", "train"):
        context = _frozen_context(field, X, n_jobs, verbose)
        task = _frozen_task
    elif isinstance(field, NearestLocalField):
        context = _envelope_context(field, X, Y, n_jobs, verbose)
        task = _envelope_task
    else:
        context, task = field, _quadrature_task
    parts = parallel_map(
        task,
        [(context, X, Y, x_index[block], y_index[block]) for block in _blocks(x_index, _block_pairs(field))],
        n_jobs,
        verbose,
        f"{rule} distances",
    )
    energy, length = (np.concatenate(part) for part in zip(*parts))
    raw = length if length_rule else energy
    values[order] = raw**2 if (squared and length_rule) else (raw if (squared or length_rule) else np.sqrt(raw))
    return values


def _distinct(points, index):
    """Drop repeated rows of ``points``; return the distinct rows and the re-mapped ``index``."""
    points = np.ascontiguousarray(points)
    rows = points.view(np.dtype((np.void, points.dtype.itemsize * points.shape[1])))[:, 0]
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return points[first], inverse.ravel()[index]


def _block_pairs(field):
    """Pairs per task: arrays of shape (pairs, R) stay near ``_CHUNK_ELEMENTS / 2``."""
    if isinstance(field, NearestLocalField):
        return max(1, min(_MAX_PAIRS, _CHUNK_ELEMENTS // (2 * field.n_centers)))
    return _MAX_PAIRS


def _blocks(x_index, max_pairs):
    """Split pairs sorted by query into slices of at most ``max_pairs`` pairs such that
    (queries x most candidates of one query) also stays below ``max_pairs`` (padded layouts)."""
    bounds = np.flatnonzero(np.diff(x_index)) + 1
    starts, stops = np.r_[0, bounds], np.r_[bounds, len(x_index)]
    blocks, begin, n_queries, widest = [], 0, 0, 0
    for start, stop in zip(starts, stops):
        run = stop - start
        if n_queries and (n_queries + 1) * max(widest, run) > max_pairs:
            blocks.append(slice(begin, start))
            begin, n_queries, widest = start, 0, 0
        if run > max_pairs:  # one query with many candidates: several tasks
            blocks.extend(slice(lo, min(lo + max_pairs, stop)) for lo in range(start, stop, max_pairs))
            begin = stop
            continue
        n_queries, widest = n_queries + 1, max(widest, run)
    if begin < len(x_index):
        blocks.append(slice(begin, len(x_index)))
    return blocks


def _point_chunks(n_points, per_point):
    step = max(1, _CHUNK_ELEMENTS // per_point)
    return [slice(lo, lo + step) for lo in range(0, n_points, step)]


def _quadratic_forms(matrices, index, vectors):
    r""":math:`v_p^T A_{i_p} v_p` for each row, grouped by matrix (one product per distinct :math:`i`)."""
    order = np.argsort(index, kind="stable")
    index, vectors = index[order], vectors[order]
    bounds = np.r_[0, np.flatnonzero(np.diff(index)) + 1, len(index)]
    out = np.empty(len(vectors))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = vectors[lo:hi]
        out[order[lo:hi]] = np.einsum("pi,pi->p", rows @ matrices[index[lo]], rows)
    return out


# --------------------------------------------------------------------------- frozen rules


def _frozen_context(field, X, n_jobs, verbose):
    """What the test rule needs per query: the cell index for a nearest field."""
    if isinstance(field, NearestLocalField):
        tasks = [(X[chunk],) for chunk in _point_chunks(len(X), field.n_centers * field.dim)]
        return field, np.concatenate(parallel_map(field.nearest_center, tasks, n_jobs, verbose, "cells"))
    return field, None


def _frozen_task(context, X, Y, x_index, y_index):
    r"""Squared lengths :math:`d^T M(x) d` (every rule on a constant field)."""
    field, cells = context
    d = Y[y_index] - X[x_index]
    if isinstance(field, ConstantField):
        energy = np.einsum("pi,pi->p", d @ field.metric, d)
    elif cells is not None:
        energy = _quadratic_forms(field.metrics, cells[x_index], d)
    else:
        used, local = np.unique(x_index, return_inverse=True)
        energy = np.empty(len(d))
        for chunk in _point_chunks(len(used), field.dim**2):
            mask = (local >= chunk.start) & (local < chunk.stop)
            metrics = field.metric_matrix(X[used[chunk]])
            energy[mask] = _quadratic_forms(metrics, local[mask] - chunk.start, d[mask])
    return energy, np.sqrt(energy)


# --------------------------------------------------------------------------- quadrature


def _quadrature_task(field, X, Y, x_index, y_index):
    r"""Energy and length of straight segments by adaptive quadrature over :math:`\lambda`.

    The pairs of one ``quad_vec`` call share its subdivision; each integrand is
    divided by :math:`d^T (M(x) + M(y)) d` so that the max-norm error criterion is relative per pair.
    """
    energy, length = np.empty(len(x_index)), np.empty(len(x_index))
    for lo in range(0, len(x_index), _QUADRATURE_PAIRS):
        part = slice(lo, lo + _QUADRATURE_PAIRS)
        start, d = X[x_index[part]], Y[y_index[part]] - X[x_index[part]]

        def speed2(lam):
            return np.einsum("pi,pi->p", field.metric_vector_product(d, start + lam * d), d)

        scale = speed2(0.0) + speed2(1.0)
        scale[scale == 0] = 1.0  # d = 0: the integrand vanishes

        def integrand(lam):
            ratio = np.maximum(speed2(lam), 0.0) / scale
            return np.concatenate([ratio, np.sqrt(ratio)])

        integral, error, info = quad_vec(
            integrand, 0.0, 1.0, epsabs=0.0, epsrel=_QUADRATURE_RTOL, norm="max", full_output=True
        )
        if info.status != 0:
            warnings.warn(
                f"line quadrature did not reach rtol={_QUADRATURE_RTOL:g}: estimated error {error:.3g} "
                f"({info.message})",
                ConvergenceWarning,
                stacklevel=4,
            )
        n = len(d)
        energy[part], length[part] = integral[:n] * scale, integral[n:] * np.sqrt(scale)
    return energy, length


# --------------------------------------------------------------------------- exact envelope walk


def _envelope_context(field, X, Y, n_jobs, verbose):
    r"""Per-field and per-candidate data of the exact line integral.

    Coordinates are shifted to the mean center (less cancellation). With each
    center's own metric as proximity (:math:`P_r = M_r`), every candidate gets
    :math:`y^T P_r y` for all :math:`r`, its :math:`O(R K^2)` share, done once
    per distinct point as one product with the packed upper triangles of the :math:`P_r`.
    """
    origin = field.centers.mean(axis=0)
    centers = field.centers - origin
    if field.proximity is None:
        projected_centers = np.einsum("rij,rj->ri", field.metrics, centers)  # P_r x_r
        rows, cols = np.triu_indices(field.dim)
        packed = field.metrics[:, rows, cols] * np.where(rows == cols, 1.0, 2.0)
        shifted = Y - origin
        tasks = [(packed, shifted[chunk]) for chunk in _point_chunks(len(Y), len(rows))]
        candidate_norms = np.concatenate(parallel_map(_packed_norms, tasks, n_jobs, verbose, "candidates"))
    else:
        projected_centers, candidate_norms = centers @ field.proximity, None
    return field, origin, centers, projected_centers, candidate_norms


def _packed_norms(packed, points):
    """:math:`p^T P_r p` from packed upper triangles (off-diagonals doubled), shape ``(n, R)``."""
    rows, cols = np.triu_indices(points.shape[1])
    return (points[:, rows] * points[:, cols]) @ packed.T


def _envelope_task(context, X, Y, x_index, y_index):
    """Exact energy and length of the segments of one block of pairs (sorted by query)."""
    field = context[0]
    queries, local = np.unique(x_index, return_inverse=True)
    coefficients = np.empty((3, len(x_index), field.n_centers))  # a_r, b_r, c_r per pair
    step = max(1, _CHUNK_ELEMENTS // (field.n_centers * field.dim))  # queries whose P_r x fit in memory
    for lo in range(0, len(queries), step):
        rows = slice(*np.searchsorted(local, [lo, lo + step]))
        coefficients[:, rows] = _parabolas(context, X[queries[lo : lo + step]], Y, local[rows] - lo, y_index[rows])
    offsets = range(0, len(x_index), _WALK_ROWS)
    walks = [_lower_envelope(*coefficients[:, lo : lo + _WALK_ROWS]) for lo in offsets]
    pair = np.concatenate([walk[0] + lo for walk, lo in zip(walks, offsets)])
    cell, span = (np.concatenate([walk[k] for walk in walks]) for k in (1, 2))
    d = Y[y_index] - X[x_index]
    speed2 = _quadratic_forms(field.metrics, cell, d[pair])  # d^T M_r d on each segment
    return (
        np.bincount(pair, weights=span * speed2, minlength=len(d)),
        np.bincount(pair, weights=span * np.sqrt(speed2), minlength=len(d)),
    )


def _parabolas(context, queries, Y, local, y_index):
    r"""Coefficients :math:`a_r, b_r, c_r` of the pairs ``(queries[local], Y[y_index])``, each ``(n, R)``.

    Per query: :math:`h_r = P_r (x - x_r)` and :math:`c_r = h_r^T (x - x_r)`
    (reused by all its candidates); per pair :math:`b_r = 2 d^T h_r` and
    :math:`a_r = y^T P_r y - 2 y^T P_r x + x^T P_r x` (own metrics) or :math:`d^T P d`.
    """
    field, origin, centers, projected_centers, candidate_norms = context
    x = queries - origin
    if field.proximity is None:
        products = field._local_products(x)  # P_r x = M_r x, (B, R, D)
        half_gradients = products - projected_centers
    else:
        half_gradients = (x @ field.proximity)[:, None, :] - projected_centers
    constant = np.einsum("brd,bd->br", half_gradients, x) - np.einsum("brd,rd->br", half_gradients, centers)

    # lay the candidates of each query out as (B, S), padding with its first candidate
    starts = np.searchsorted(local, np.arange(len(x)))
    position = np.arange(len(local)) - starts[local]
    layout = np.repeat(y_index[starts][:, None], position.max() + 1, axis=1)
    layout[local, position] = y_index
    candidates = Y[layout] - origin  # (B, S, D)
    steps = candidates - x[:, None, :]
    linear = 2.0 * (steps @ half_gradients.transpose(0, 2, 1))[local, position]
    if field.proximity is None:
        cross = (candidates @ products.transpose(0, 2, 1))[local, position]
        query_norms = np.einsum("brd,bd->br", products, x)
        quadratic = candidate_norms[y_index] - 2.0 * cross + query_norms[local]
    else:
        step = steps[local, position]
        quadratic = np.repeat(np.einsum("pi,pi->p", step @ field.proximity, step)[:, None], field.n_centers, axis=1)
    return quadratic, linear, constant[local]


def _entering_roots(da, db, dc):
    r"""Where :math:`g = \Delta a \lambda^2 + \Delta b \lambda + \Delta c` turns from positive to negative.

    ``g = q_s - q_r`` for the active parabola :math:`r`; the answer is the root
    with :math:`g' < 0` (the smaller root when :math:`\Delta a > 0`, the
    larger one when :math:`\Delta a < 0`), ``inf`` when there is none
    (no real root, a double root, which only touches, or an increasing line).
    Both roots come from the cancellation-free pair :math:`\{q/\Delta a, \Delta c/q\}`,
    :math:`q = -(\Delta b + \mathrm{sign}\,\sqrt{\mathrm{disc}})/2`, which is
    invariant under :math:`g \to -g`: the exit root of :math:`s` is bit for bit the
    entry root of :math:`r` seen from :math:`s`, so a walk cannot lose a thin cell.
    """
    disc = db * db - 4.0 * da * dc
    sign = np.where(db != 0, np.sign(db), np.sign(da))
    with np.errstate(divide="ignore", invalid="ignore"):
        q = -0.5 * (db + sign * np.sqrt(np.maximum(disc, 0.0)))
        first, second = q / da, dc / q
    root = np.where(da > 0, np.fmin(first, second), np.fmax(first, second))
    root = np.where(da == 0, second, root)
    return np.where((disc > 0) & ((da != 0) | (db < 0)), root, np.inf)


def _lower_envelope(quadratic, linear, constant):
    r"""Walk the lower envelope of :math:`q_r(\lambda) = a_r\lambda^2 + b_r\lambda + c_r` on [0, 1].

    Vectorized over pairs (rows), after dropping the parabolas that cannot
    reach the envelope (:func:`_envelope_candidates`). From :math:`\lambda = 0` and the active
    :math:`r = \arg\min_r c_r`, the next breakpoint is the first entering root
    after :math:`\lambda`; the segment is then checked at its midpoint against
    all parabolas (ties at a breakpoint, a start on a cell boundary or several
    cells meeting in one point can make the root order ambiguous in floating
    point), and re-walked from the same :math:`\lambda` with the parabola found
    there when another one is lower beyond rounding.

    Returns
    -------
    pair, cell, span : ndarray of shape (n_segments,)
        Row, active parabola and length (in :math:`\lambda`) of each segment.
    """
    keep = _envelope_candidates(quadratic, linear, constant)
    rows = np.arange(len(keep))[:, None]
    quadratic, linear, constant = quadratic[rows, keep], linear[rows, keep], constant[rows, keep]
    n_rows, n_parabolas = constant.shape
    start = np.zeros(n_rows)
    active = np.argmin(constant, axis=1)
    alive = np.arange(n_rows)
    pairs, cells, spans = [], [], []
    tiny = 16.0 * np.finfo(float).eps
    for _ in range(4 * n_parabolas + 16):  # an envelope of R parabolas has at most 2R - 1 pieces
        if alive.size == 0:
            break
        a, b, c = quadratic[alive], linear[alive], constant[alive]
        rows, r, lam = np.arange(alive.size), active[alive], start[alive]
        entry = _entering_roots(a - a[rows, r, None], b - b[rows, r, None], c - c[rows, r, None])
        entry[entry <= lam[:, None]] = np.inf
        following = np.argmin(entry, axis=1)
        stop = entry[rows, following]
        end = np.minimum(stop, 1.0)
        mid = 0.5 * (lam + end)
        values = (a * mid[:, None] + b) * mid[:, None] + c
        best = np.argmin(values, axis=1)
        slack = tiny * (
            (np.abs(a[rows, r]) + np.abs(a[rows, best])) * mid**2
            + (np.abs(b[rows, r]) + np.abs(b[rows, best])) * mid
            + np.abs(c[rows, r])
            + np.abs(c[rows, best])
        )
        wrong = values[rows, best] < values[rows, r] - slack
        active[alive[wrong]] = best[wrong]
        done = ~wrong
        pairs.append(alive[done])
        cells.append(r[done])
        spans.append((end - lam)[done])
        start[alive[done]], active[alive[done]] = stop[done], following[done]
        alive = alive[wrong | (stop < 1.0)]
    else:
        raise RuntimeError("the lower-envelope walk did not terminate; please report this input")
    pair = np.concatenate(pairs)
    return pair, keep[pair, np.concatenate(cells)], np.concatenate(spans)


def _envelope_candidates(quadratic, linear, constant, n_pieces=4):
    r"""Indices of the parabolas that may reach the lower envelope, shape ``(n_rows, K)``.

    On each of ``n_pieces`` equal pieces :math:`[l, h]` of [0, 1] the envelope
    lies below :math:`U = \min_s \max(q_s(l), q_s(h))` (the :math:`q_s` are
    convex), so parabola :math:`r` with :math:`\min_{[l, h]} q_r > U` on every
    piece is never active. Survivors keep their order (ties still go to the
    lowest index); short rows are padded with their first survivor, a copy that never enters.
    """
    with np.errstate(divide="ignore", invalid="ignore"):  # minimizer of q_r on the real line
        vertex = np.where(quadratic > 0, -0.5 * linear / quadratic, np.where(linear > 0, -np.inf, np.inf))
    slack = 1e-12 * np.max(np.abs(quadratic) + np.abs(linear) + np.abs(constant), axis=1, keepdims=True)
    keep = np.zeros(constant.shape, dtype=bool)
    grid = np.linspace(0.0, 1.0, n_pieces + 1)
    values = [(quadratic * t + linear) * t + constant for t in grid]
    for low, high, at_low, at_high in zip(grid[:-1], grid[1:], values[:-1], values[1:]):
        inside = np.clip(vertex, low, high)
        lowest = (quadratic * inside + linear) * inside + constant
        keep |= lowest <= np.min(np.maximum(at_low, at_high), axis=1, keepdims=True) + slack
    order = np.argsort(~keep, axis=1, kind="stable")[:, : keep.sum(axis=1).max()]
    return np.where(np.take_along_axis(keep, order, axis=1), order, order[:, :1])
