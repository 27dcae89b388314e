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
the first parabola that drops below it, :math:`O(R)` work per breakpoint.

With each center's own metric the coefficients cost :math:`O(K^2)` per
center and distinct point, the bulk of the work. They are first estimated in
float32 with a rigorous rounding-error bound, :math:`|\tilde q_r - q_r| \le \epsilon_r`
on :math:`[0, 1]`; the parabolas bracketed by :math:`\tilde q_r \pm \epsilon_r` show
which centers can never be active (:func:`_envelope_candidates`), and only the
others get exact float64 coefficients. The cells and sums are those of the unpruned walk.
"""

import math
from collections import namedtuple

import numpy as np

from ..utils.arrays import MAX_PAIRS, TASK_ELEMENTS, quadratic_forms, unique_rows
from ..utils.compiled import cached_njit

__all__ = ["EnvelopeArrays", "envelope_arrays", "envelope_cells"]

_WALK_ROWS = 512  # pairs walked together (their (pairs, R) arrays stay in cache)
_UNIT32 = 2.0**-24  # unit roundoff of float32
_TINY32 = 2.0**-126  # smallest normal float32: the most an operation loses to underflow
_UNIT64 = 2.0**-53
_MARGIN = 1.0 + 1e-6  # covers the float64 rounding of the bounds themselves

EnvelopeArrays = namedtuple(
    "EnvelopeArrays", ["packed", "full", "scale", "spread", "rows", "cols", "norm_error", "product_error", "float64_error"]
)
EnvelopeArrays.__doc__ = r"""Per-field data of the float32 estimates and their bounds (own metrics).

``packed`` ``(K(K+1)/2, R)`` float32: the upper triangles of :math:`P_r / \sigma_r`, one column
per center, off-diagonals doubled; ``full`` ``(K, R K)`` float32: the stacked :math:`P_r / \sigma_r`,
transposed (:math:`x^T` ``full`` lists the :math:`P_r x / \sigma_r`, one product for many points;
one point reads ``packed`` instead, half the bytes: :func:`_packed_products`);
``scale`` the powers of two :math:`\sigma_r \ge \max |P_r|` (entries within [-1, 1],
nothing overflows); ``spread`` :math:`\nu_r \ge \| |P_r| \|_2` (the largest absolute
row sum); ``rows, cols`` the triangle's indices; the error factors of
:func:`_parabolas`: a float32 norm :math:`y^T P_r y` is off by at most ``norm_error``
:math:`\nu_r |y|^2` (:func:`_packed_norms`), a float32 product :math:`P_r x` (from ``full``
or from ``packed``) by at most ``product_error`` :math:`\nu_r |x|` (in norm), float64 rounding by at most
``float64_error`` :math:`\nu_r (|x| + |y| + |x_r|)^2`.
"""


def envelope_arrays(field):
    """The :class:`EnvelopeArrays` of a field with own metrics (read-only; fields cache them)."""
    rows, cols = np.triu_indices(field.dim)
    packed = field.metrics[:, rows, cols] * np.where(rows == cols, 1.0, 2.0)
    scale = np.ldexp(1.0, np.frexp(np.max(np.abs(packed), axis=1))[1])
    spread = _MARGIN * np.max(np.sum(np.abs(field.metrics), axis=2), axis=1)
    # scaled by powers of two, s <= 2 max|p_i| <= 2 |p| and sigma_r <= 2 max|packed| <= 4 nu_r: underflow adds
    # at most 4 n 2^-126 s^2 sigma_r <= 64 n 2^-126 nu_r |p|^2 to a norm, 5 (K + 1) 2^-126 s sigma_r <= 40 (K + 1)
    # 2^-126 nu_r |x| to a product (n terms after 4 roundings of their factors: gamma_{n+4}; K terms after 2 from
    # full, gamma_{K+2}, or K + 1 from packed, the diagonal's in two halves and x halved: gamma_{K+3}, 5 operations)
    size, dim = len(rows), field.dim
    norm_error = _gamma32(size + 4) + 64 * size * _TINY32
    product_error = _gamma32(dim + 3) + 40 * (dim + 1) * _TINY32
    float64_error = 16 * (dim + 2) * _UNIT64  # (8K + 16) u: every float64 sum and product of the estimates and exact values
    packed = np.ascontiguousarray((packed / scale[:, None]).astype(np.float32).T)
    full = (field.metrics / scale[:, None, None]).astype(np.float32).transpose(2, 0, 1).reshape(dim, -1)
    for array in (packed, full, scale, spread, rows, cols):
        array.flags.writeable = False
    return EnvelopeArrays(packed, full, scale, spread, rows, cols, *(_MARGIN * e for e in (norm_error, product_error, float64_error)))


def _gamma32(n_operations):
    """Relative error bound of ``n_operations`` float32 roundings, :math:`n u / (1 - n u)`."""
    return n_operations * _UNIT32 / (1.0 - n_operations * _UNIT32)


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
    max_pairs = max(1, min(MAX_PAIRS, TASK_ELEMENTS // (2 * field.n_centers)))
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


_Context = namedtuple("_Context", ["field", "centers", "candidate_norms", "candidate_squares"])


def _envelope_context(field, Y):
    r"""Per-call data of the walk: the field, its centers relative to the mean center
    (less cancellation) and, with own metrics, every candidate's :math:`y^T P_r y`
    as float32 estimates (:func:`_packed_norms`) and :math:`|y|^2`."""
    centers = field.centers - field._origin
    if field.proximity is not None:
        return _Context(field, centers, None, None)
    shifted = Y - field._origin
    return _Context(field, centers, _candidate_norms(field, Y), np.einsum("pi,pi->p", shifted, shifted))


def _candidate_norms(field, Y):
    """:func:`_packed_norms` of the rows of ``Y`` ``(n, R)``, remembered per field (``field._norm_memo``,
    keyed by the rows' bytes, up to ``TASK_ELEMENTS`` numbers): per-query calls share their candidates."""
    arrays, memo = field._envelope_arrays, field._norm_memo
    keys = [row.tobytes() for row in Y]
    cached = [memo.get(key) for key in keys]  # read once: safe if another thread clears the memo
    new = {key: row for key, row, value in zip(keys, Y, cached) if value is None}
    found = {}
    if new:
        shifted = np.array(list(new.values())) - field._origin
        step = max(1, TASK_ELEMENTS // len(arrays.rows))
        norms = np.concatenate([_packed_norms(arrays, shifted[lo : lo + step]) for lo in range(0, len(shifted), step)])
        found = dict(zip(new, norms))
    result = np.array([found[key] if value is None else value for key, value in zip(keys, cached)])
    result = result.reshape(len(keys), field.n_centers)
    if (len(memo) + len(found)) * field.n_centers > TASK_ELEMENTS:
        memo.clear()
    if len(found) * field.n_centers <= TASK_ELEMENTS:
        memo.update(found)
    return result


def _packed_norms(arrays, points):
    r""":math:`p^T P_r p` computed in float32, shape ``(n, R)`` (float64).

    Rows are scaled by powers of two :math:`s \ge \max_i |p_i|`, so nothing overflows and
    underflow loses at most :math:`2^{-126}` per operation. A dot product of :math:`n`
    float32 terms (any order, with or without FMA), after 4 roundings of each
    term's factors, is off by at most :math:`\gamma_{n+4} \sum |p_i p_j| |P_{ij}|
    \le \gamma_{n+4} \nu_r |p|^2`, :math:`\gamma_m = m u / (1 - m u)`, :math:`u = 2^{-24}`;
    underflow adds at most :math:`4 n 2^{-126} s^2 \sigma_r \le 64 n 2^{-126} \nu_r |p|^2`.
    """
    scale = np.ldexp(1.0, np.frexp(np.max(np.abs(points), axis=1, initial=0.0))[1])
    scaled = (points / scale[:, None]).astype(np.float32)
    return (_triangle_products(scaled) @ arrays.packed).astype(float) * (scale[:, None] ** 2 * arrays.scale)  # exact powers of two


@cached_njit
def _triangle_products(points):
    r"""Float32 products :math:`p_i p_j`, :math:`i \le j`, of each row, in the order of the packed triangles."""
    n_points, dim = points.shape
    out = np.empty((n_points, dim * (dim + 1) // 2), dtype=np.float32)
    for p in range(n_points):
        start = 0
        for i in range(dim):
            out[p, start : start + dim - i] = points[p, i] * points[p, i:]
            start += dim - i
    return out


@cached_njit
def _packed_products(packed, point):
    r"""Float32 :math:`P'_r h` of one point, :math:`h = p / 2`, from the packed triangles :math:`P'_r` (doubled
    off-diagonals), shape ``(K, R)``: :math:`P_r p / \sigma_r`. Row :math:`i` of the triangles adds
    :math:`P'_{ij} h_i` to entry :math:`j \ge i` (one loop over the row's entries and centers) and
    :math:`\sum_{j \ge i} P'_{ij} h_j` to entry :math:`i` (a product with the row's block): each
    diagonal term comes in two halves. The triangles are read once (:class:`EnvelopeArrays`, ``product_error``).
    """
    n_centers, dim = packed.shape[1], len(point)
    half = point * np.float32(0.5)
    out = np.zeros((dim, n_centers), dtype=np.float32)
    flat_out, flat_packed = out.reshape(-1), packed.reshape(-1)
    start = 0
    for i in range(dim):
        size, weight = (dim - i) * n_centers, half[i]
        target = flat_out[i * n_centers : i * n_centers + size]
        source = flat_packed[start * n_centers : start * n_centers + size]
        for k in range(size):
            target[k] += weight * source[k]
        out[i] += np.dot(half[i:], packed[start : start + dim - i])
        start += dim - i
    return out


def _block_cells(context, X, Y, x_index, y_index):
    """Pieces ``pair, cell, span`` of one block of pairs (sorted by query); ``pair`` indexes the block."""
    field = context.field
    queries, local = np.unique(x_index, return_inverse=True)
    coefficients = np.empty((5, len(x_index), field.n_centers))  # a_r, b_r, c_r and two error bounds per pair
    step = max(1, TASK_ELEMENTS // (field.n_centers * field.dim))  # queries whose P_r x fit in memory
    for lo in range(0, len(queries), step):
        rows = slice(*np.searchsorted(local, [lo, lo + step]))
        coefficients[:, rows] = _parabolas(context, X[queries[lo : lo + step]], Y, local[rows] - lo, y_index[rows])
    rows = np.arange(len(x_index))[:, None]
    # prune in two passes on the bracketing parabolas: coarse on all centers, fine on the survivors
    index, real = _compact(_envelope_candidates(*coefficients, n_pieces=8))
    coefficients = coefficients[:, rows, index]
    fine, real = _compact(_envelope_candidates(*coefficients, n_pieces=64) & real)
    index, (quadratic, linear, constant) = index[rows, fine], coefficients[:3, rows, fine]
    if field.proximity is None:  # exact coefficients of the survivors; padding copies the first
        pair, slot = np.nonzero(real)
        exact = _exact_parabolas(field, X[x_index], Y[y_index], pair, index[pair, slot])
        for part, values in zip((quadratic, linear, constant), exact):
            part[pair, slot] = values
        quadratic, linear, constant = (np.where(real, part, part[:, :1]) for part in (quadratic, linear, constant))
    offsets = range(0, len(x_index), _WALK_ROWS)
    walks = [_lower_envelope(*(part[lo : lo + _WALK_ROWS] for part in (quadratic, linear, constant))) for lo in offsets]
    pair = np.concatenate([walk[0] + lo for walk, lo in zip(walks, offsets)])
    cell = np.concatenate([walk[1] for walk in walks])
    return pair, index[pair, cell], np.concatenate([walk[2] for walk in walks])


def _parabolas(context, queries, Y, local, y_index):
    r"""Coefficients :math:`a_r, b_r, c_r` of the pairs ``(queries[local], Y[y_index])`` and error bounds.

    Each ``(n, R)``, then the bounds :math:`\alpha_r, \beta_r` (also ``(n, R)``):
    :math:`|\tilde q_r(\lambda) - q_r(\lambda)| \le \beta_r + \alpha_r \lambda^2` on [0, 1].
    Per query: :math:`h_r = P_r (x - x_r)` and :math:`c_r = h_r^T (x - x_r)`
    (reused by all its candidates); per pair :math:`b_r = 2 d^T h_r` and
    :math:`a_r = y^T P_r y - 2 y^T P_r x + x^T P_r x`. With own metrics, :math:`P_r x` and
    :math:`y^T P_r y` come from float32 products (error bound from :class:`EnvelopeArrays`);
    with one global :math:`P` everything is exact float64 (bounds 0).
    """
    field, centers, candidate_norms, candidate_squares = context
    x = queries - field._origin
    projected_centers = field._shifted_products  # P_r x_r
    if field.proximity is None:
        arrays = field._envelope_arrays
        scale = np.ldexp(1.0, np.frexp(np.max(np.abs(x), axis=1, initial=0.0))[1])  # powers of two
        scaled = (x / scale[:, None]).astype(np.float32)
        if len(x) == 1:
            products = _packed_products(arrays.packed, scaled[0]).T[None].astype(float, order="C")
        else:
            products = (scaled @ arrays.full).astype(float).reshape(len(x), field.n_centers, field.dim)
        products *= (scale[:, None] * arrays.scale)[:, :, None]
        half_gradients = products - projected_centers
    else:
        half_gradients = (x @ field.proximity)[:, None, :] - projected_centers
    constant = np.einsum("brd,bd->br", half_gradients, x) - np.einsum("brd,rd->br", half_gradients, centers)

    # lay the candidates of each query out as (B, S), padding with its first candidate
    starts = np.searchsorted(local, np.arange(len(x)))
    position = np.arange(len(local)) - starts[local]
    layout = np.repeat(y_index[starts][:, None], position.max() + 1, axis=1)
    layout[local, position] = y_index
    candidates = Y[layout] - field._origin  # (B, S, D)
    steps = candidates - x[:, None, :]
    linear = 2.0 * (steps @ half_gradients.transpose(0, 2, 1))[local, position]
    if field.proximity is None:
        cross = (candidates @ products.transpose(0, 2, 1))[local, position]
        query_norms = np.einsum("brd,bd->br", products, x)
        quadratic = candidate_norms[y_index] - 2.0 * cross + query_norms[local]
        # with |P_r x - products| <= eta_r = product_error nu_r |x|: a is off by eta_r (2 |y| + |x|) plus the
        # float32 norm's error; c by eta_r (|x| + |x_r|), b by 2 eta_r |d|, float64 rounding by
        # float64_error nu_r (|x| + |y| + |x_r|)^2: these (small) go into the offset bound
        x_norm, y_norm = np.sqrt(np.einsum("bd,bd->b", x, x))[local], np.sqrt(candidate_squares[y_index])
        d_norm = np.sqrt(np.einsum("pd,pd->p", steps[local, position], steps[local, position]))
        center_norms = np.sqrt(np.einsum("rd,rd->r", centers, centers))
        curvature_error = arrays.norm_error * y_norm**2 + arrays.product_error * x_norm * (2 * y_norm + x_norm)
        ends = x_norm + y_norm
        offset_error = (arrays.product_error * x_norm * (x_norm + 2 * d_norm) + arrays.float64_error * ends**2)[:, None]
        offset_error = offset_error + (arrays.product_error * x_norm + 2 * arrays.float64_error * ends)[:, None] * center_norms
        offset_error += arrays.float64_error * center_norms**2
        return quadratic, linear, constant[local], curvature_error[:, None] * arrays.spread, offset_error * arrays.spread
    step = steps[local, position]
    quadratic = np.repeat(np.einsum("pi,pi->p", step @ field.proximity, step)[:, None], field.n_centers, axis=1)
    return quadratic, linear, constant[local], np.zeros_like(quadratic), np.zeros_like(quadratic)


def _exact_parabolas(field, start, end, pair, center):
    r"""Float64 coefficients of the pairs ``(start[pair], end[pair])`` and centers ``center``, shape ``(3, n)``.

    From the Gram matrices of :math:`(d, v)`, :math:`v = x - x_r`, in :math:`P_r` (one product
    per distinct center): :math:`a = d^T P_r d`, :math:`b = 2 d^T P_r v`, :math:`c = v^T P_r v`,
    all from differences (translation invariant).
    """
    out = np.empty((3, len(pair)))
    step = max(1, TASK_ELEMENTS // (2 * field.dim))
    for lo in range(0, len(pair), step):
        p, r = pair[lo : lo + step], center[lo : lo + step]
        gram = quadratic_forms(field.metrics, r, np.stack([end[p] - start[p], start[p] - field.centers[r]], axis=1))
        out[:, lo : lo + step] = gram[:, 0, 0], 2.0 * gram[:, 0, 1], gram[:, 1, 1]
    return out


def _lower_envelope(quadratic, linear, constant):
    r"""Walk the lower envelope of :math:`q_r(\lambda) = a_r\lambda^2 + b_r\lambda + c_r` on [0, 1], row by row (one pair per row).

    After dropping the parabolas that cannot reach the envelope (:func:`_envelope_candidates`):
    from :math:`\lambda = 0` and the active :math:`r = \arg\min_r c_r`, the next breakpoint is
    the first entering root after :math:`\lambda`; the segment is then checked at its midpoint
    against all parabolas (ties at a breakpoint, a start on a cell boundary or several cells
    meeting in one point can make the root order ambiguous in floating point), and re-walked
    from the same :math:`\lambda` with the parabola found there when another one is lower
    beyond rounding (:func:`_compiled_walk`).

    Returns
    -------
    pair, cell, span : ndarray of shape (n_segments,)
        Row, active parabola and length (in :math:`\lambda`) of each segment, row by row and in order along each row.
    """
    keep = _compact(_envelope_candidates(quadratic, linear, constant))[0]
    rows = np.arange(len(keep))[:, None]
    pair, cell, span, finished = _compiled_walk(quadratic[rows, keep], linear[rows, keep], constant[rows, keep])
    if not finished:
        raise RuntimeError("the lower-envelope walk did not terminate; please report this input")
    return pair, keep[pair, cell], span


@cached_njit(error_model="numpy")
def _compiled_walk(quadratic, linear, constant):
    """:func:`_lower_envelope`'s walk, one row at a time: ``pair, cell, span`` and whether every row finished."""
    n_rows, n_parabolas = constant.shape
    n_steps = 4 * n_parabolas + 16
    pair, cell = np.empty(n_rows * n_steps, dtype=np.int64), np.empty(n_rows * n_steps, dtype=np.int64)
    span = np.empty(n_rows * n_steps)
    entry, values = np.empty(n_parabolas), np.empty(n_parabolas)
    tiny = 16.0 * np.finfo(np.float64).eps
    n_pieces = 0
    for p in range(n_rows):
        a, b, c = quadratic[p], linear[p], constant[p]
        active, lam, finished = np.argmin(c), 0.0, False
        for _ in range(n_steps):
            r = active
            for s in range(n_parabolas):
                entry[s] = _entering_root(a[s] - a[r], b[s] - b[r], c[s] - c[r])
                if entry[s] <= lam:
                    entry[s] = np.inf
            following = np.argmin(entry)
            stop = entry[following]
            end = np.minimum(stop, 1.0)
            mid = 0.5 * (lam + end)
            for s in range(n_parabolas):
                values[s] = (a[s] * mid + b[s]) * mid + c[s]
            best = np.argmin(values)
            slack = tiny * (
                (abs(a[r]) + abs(a[best])) * (mid * mid) + (abs(b[r]) + abs(b[best])) * mid + abs(c[r]) + abs(c[best])
            )
            if values[best] < values[r] - slack:
                active = best
                continue
            pair[n_pieces], cell[n_pieces], span[n_pieces] = p, r, end - lam
            n_pieces += 1
            lam, active = stop, following
            if not stop < 1.0:
                finished = True
                break
        if not finished:
            return pair[:n_pieces], cell[:n_pieces], span[:n_pieces], False
    return pair[:n_pieces], cell[:n_pieces], span[:n_pieces], True


@cached_njit(error_model="numpy")
def _entering_root(da, db, dc):
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
    sign = np.sign(db) if db != 0 else np.sign(da)
    q = -0.5 * (db + sign * np.sqrt(np.maximum(disc, 0.0)))
    first, second = q / da, dc / q
    root = np.fmin(first, second) if da > 0 else np.fmax(first, second)
    if da == 0:
        root = second
    return root if disc > 0 and (da != 0 or db < 0) else np.inf


def _envelope_candidates(quadratic, linear, constant, curvature_error=0.0, offset_error=0.0, n_pieces=4):
    r"""Mask ``(n_rows, R)`` of the parabolas that may reach the lower envelope on [0, 1].

    Each :math:`q_r` is known to within :math:`\beta_r + \alpha_r \lambda^2` on [0, 1]
    (``offset_error`` :math:`\beta_r`, ``curvature_error`` :math:`\alpha_r`; 0 when exact):
    it lies between the parabolas :math:`\underline q_r` and :math:`\bar q_r` of curvatures
    :math:`\max(a_r - \alpha_r, 0)` and :math:`a_r + \alpha_r` (all true curvatures are
    :math:`\ge 0`), shifted by :math:`\mp \beta_r`. On each of ``n_pieces`` equal pieces
    :math:`[l, h]` of [0, 1] the envelope lies below :math:`U = \min_s \max(\bar q_s(l), \bar q_s(h))`
    (convex), so parabola :math:`r` with :math:`\min_{[l, h]} \underline q_r > U` (beyond a slack
    of 1e-12 of the row's largest coefficients) on every piece is never active. A row with
    anything not finite is kept whole. Row by row in compiled code (:func:`_compiled_candidates`).
    """
    shape = constant.shape
    errors = (np.broadcast_to(curvature_error, shape), np.broadcast_to(offset_error, shape))
    return _compiled_candidates(quadratic, linear, constant, *errors, np.linspace(0.0, 1.0, n_pieces + 1))


@cached_njit
def _compiled_candidates(quadratic, linear, constant, curvature_error, offset_error, grid):
    """:func:`_envelope_candidates` row by row."""
    n_rows, n_parabolas = constant.shape
    keep = np.ones((n_rows, n_parabolas), dtype=np.bool_)
    bound = np.empty(len(grid) - 1)
    for p in range(n_rows):
        largest = 0.0
        for r in range(n_parabolas):
            size = abs(quadratic[p, r] + curvature_error[p, r]) + abs(linear[p, r]) + abs(constant[p, r])
            if not math.isfinite(size) or math.isnan(offset_error[p, r]):
                largest = np.inf
                break
            largest = max(largest, size)
        if not math.isfinite(largest):  # numpy's slack or bounds are not finite: it keeps the row
            continue
        slack = 1e-12 * largest
        bound[:] = np.inf
        for r in range(n_parabolas):
            upper, b, c = quadratic[p, r] + curvature_error[p, r], linear[p, r], constant[p, r]
            previous = (upper * grid[0] + b) * grid[0] + c + offset_error[p, r]
            for k in range(len(grid) - 1):
                t = grid[k + 1]
                value = (upper * t + b) * t + c + offset_error[p, r]
                bound[k] = min(bound[k], max(previous, value))
                previous = value
        for r in range(n_parabolas):
            lower, b, c = max(quadratic[p, r] - curvature_error[p, r], 0.0), linear[p, r], constant[p, r]
            if lower > 0:
                vertex = -0.5 * b / lower
            else:
                vertex = -np.inf if b > 0 else np.inf
            drop = True
            for k in range(len(grid) - 1):
                inside = min(max(vertex, grid[k]), grid[k + 1])
                if not ((lower * inside + b) * inside + c - offset_error[p, r] > bound[k] + slack):
                    drop = False
                    break
            keep[p, r] = not drop
    return keep


def _compact(keep):
    """Column indices of the ``True`` entries of each row of ``keep``, in order, shape ``(n_rows, K)``,
    and which of them are real: short rows are padded with their first entry (a copy of a parabola,
    which never enters)."""
    order = np.argsort(~keep, axis=1, kind="stable")[:, : keep.sum(axis=1).max()]
    real = np.take_along_axis(keep, order, axis=1)
    return np.where(real, order, order[:, :1]), real
