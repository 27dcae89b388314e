r"""Exact cells of segments in a nearest field: the lower envelope of parabolas.

Along :math:`x + \lambda d` center :math:`r` of a
:class:`~riemlocal.fields.NearestLocalField` scores the parabola
:math:`q_r(\lambda) = a_r \lambda^2 + b_r \lambda + c_r` with
:math:`a_r = d^T P_r d`, :math:`b_r = 2 d^T P_r (x - x_r)`,
:math:`c_r = (x - x_r)^T P_r (x - x_r)` (:math:`P_r` the proximity matrix of
center :math:`r`); the active cell is :math:`\arg\min_r q_r`, and the pieces
are those of the lower envelope of the :math:`R` parabolas on :math:`[0, 1]`.
Instead of sorting all :math:`R(R-1)` pairwise crossings and looking each
piece up again (Ramanan & Baker's :math:`O(R^3 K^2)` algorithm, Sec. II-E), the
envelope is walked from :math:`\lambda = 0`: from the active parabola, jump to
the first parabola that drops below it, :math:`O(R)` work per breakpoint after
:math:`O(R K^2)` work per distinct point.
"""

import numpy as np

from ..utils.arrays import TASK_ELEMENTS, unique_rows

__all__ = ["envelope_cells"]

_MAX_PAIRS = 4096  # pairs per block
_WALK_ROWS = 512  # pairs walked together (their (pairs, R) arrays stay in cache)


def envelope_cells(field, start, end):
    """Pieces of the segments ``start[p] -> end[p]`` (two ``(n, dim)`` arrays) in a nearest field.

    Returns ``pair, cell, span`` (one entry per piece, in order along each
    segment). Per-point work is done once per distinct start and end point.
    """
    X, x_index = unique_rows(start)
    Y, y_index = unique_rows(end)
    order = np.argsort(x_index, kind="stable")
    x_index, y_index = x_index[order], y_index[order]
    context = _envelope_context(field, Y)
    max_pairs = max(1, min(_MAX_PAIRS, TASK_ELEMENTS // (2 * field.n_centers)))
    pieces = []
    for block in _blocks(x_index, max_pairs):
        pair, cell, span = _block_cells(context, X, Y, x_index[block], y_index[block])
        pieces.append((order[block][pair], cell, span))
    return tuple(np.concatenate(arrays) for arrays in zip(*pieces))


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
        if run > max_pairs:  # one query with many candidates: several blocks
            blocks.extend(slice(lo, min(lo + max_pairs, stop)) for lo in range(start, stop, max_pairs))
            begin = stop
            continue
        n_queries, widest = n_queries + 1, max(widest, run)
    if begin < len(x_index):
        blocks.append(slice(begin, len(x_index)))
    return blocks


def _envelope_context(field, Y):
    r"""Per-field and per-candidate data of the walk.

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
        step = max(1, TASK_ELEMENTS // len(rows))
        candidate_norms = np.concatenate(
            [_packed_norms(packed, shifted[lo : lo + step]) for lo in range(0, len(Y), step)]
        )
    else:
        projected_centers, candidate_norms = centers @ field.proximity, None
    return field, origin, centers, projected_centers, candidate_norms


def _packed_norms(packed, points):
    """:math:`p^T P_r p` from packed upper triangles (off-diagonals doubled), shape ``(n, R)``."""
    rows, cols = np.triu_indices(points.shape[1])
    return (points[:, rows] * points[:, cols]) @ packed.T


def _block_cells(context, X, Y, x_index, y_index):
    """Pieces ``pair, cell, span`` of one block of pairs (sorted by query); ``pair`` indexes the block."""
    field = context[0]
    queries, local = np.unique(x_index, return_inverse=True)
    coefficients = np.empty((3, len(x_index), field.n_centers))  # a_r, b_r, c_r per pair
    step = max(1, TASK_ELEMENTS // (field.n_centers * field.dim))  # queries whose P_r x fit in memory
    for lo in range(0, len(queries), step):
        rows = slice(*np.searchsorted(local, [lo, lo + step]))
        coefficients[:, rows] = _parabolas(context, X[queries[lo : lo + step]], Y, local[rows] - lo, y_index[rows])
    offsets = range(0, len(x_index), _WALK_ROWS)
    walks = [_lower_envelope(*coefficients[:, lo : lo + _WALK_ROWS]) for lo in offsets]
    pair = np.concatenate([walk[0] + lo for walk, lo in zip(walks, offsets)])
    cell, span = (np.concatenate([walk[k] for walk in walks]) for k in (1, 2))
    return pair, cell, span


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
