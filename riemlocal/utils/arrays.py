"""Array helpers shared by fields and rules."""

from itertools import pairwise

import numpy as np

from .compiled import cached_njit

__all__ = ["CACHE_ELEMENTS", "MAX_PAIRS", "TASK_ELEMENTS", "pair_squared_distances", "quadratic_forms", "unique_rows"]

#: floats in a temporary that should stay in cache, e.g. (chunk, R, D) blends of a field (512 KB:
#: 3x faster than 64 MB ones at D = 100)
CACHE_ELEMENTS = 2**16
#: floats in the temporaries of one task of a rule or one block of products (32 MB): large enough
#: that a matrix product reuses its operands, small enough for every worker's memory
TASK_ELEMENTS = 2**22
#: point pairs per task of a distance or envelope computation
MAX_PAIRS = 4096
#: vectors per matrix up to which :func:`quadratic_forms` makes one compiled pass over the pairs rather
#: than one product per matrix (at dim = 164: 0.3x the time at 1, 0.87x at 16, 1.2x at 32)
_GRAM_VECTORS = 16


def unique_rows(points):
    """Distinct rows of a 2-D array and, per row, the index of its distinct row: ``(distinct, inverse)``."""
    points = np.ascontiguousarray(points)
    rows = points.view(np.dtype((np.void, points.dtype.itemsize * points.shape[1])))[:, 0]
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return points[first], inverse.ravel()


@cached_njit
def pair_squared_distances(points, first, second):
    r""":math:`\|z_{a_p} - z_{b_p}\|^2` for row pairs ``(first[p], second[p])`` of ``points`` ``(n, dim)``.

    One compiled pass without temporaries: 3-4x numpy's gather, subtract and row sums on the
    100,000 pairs of an LMNN objective (the pairs sorted by their first row, which keeps it in cache).
    """
    out = np.empty(len(first))
    for p in range(len(first)):
        a, b = points[first[p]], points[second[p]]
        total = 0.0
        for k in range(len(a)):
            step = a[k] - b[k]
            total += step * step
        out[p] = total
    return out


def quadratic_forms(matrices, index, vectors, compiled=None):
    r""":math:`v_p^T A_{i_p} v_p` for ``i = index``, ``v = vectors`` of shape ``(n, dim)``; for ``(n, m, dim)``,
    the Gram matrices :math:`V_p A_{i_p} V_p^T` of shape ``(n, m, m)``.

    Grouped by matrix, so each matrix is read once per group: one product per distinct :math:`i`,
    or with ``compiled`` one pass over the pairs in that order (:func:`_compiled_gram`), faster when
    the groups are small (one query's segments: no numpy call per group). ``None`` chooses the
    compiled pass for at most ``_GRAM_VECTORS`` vectors per matrix on average.
    """
    stacked = vectors[:, None, :] if vectors.ndim == 2 else vectors
    order = np.argsort(index, kind="stable")
    index = index[order]
    bounds = np.r_[0, np.flatnonzero(np.diff(index)) + 1, len(index)]
    if compiled is None:
        compiled = stacked.shape[0] * stacked.shape[1] <= _GRAM_VECTORS * (len(bounds) - 1)
    if compiled:
        out = _compiled_gram(np.asarray(matrices, dtype=float), index, order, np.asarray(stacked, dtype=float))
        return out[:, 0, 0] if vectors.ndim == 2 else out
    out = np.empty((len(index),) + stacked.shape[1:2] * 2)
    for lo, hi in pairwise(bounds):
        group = stacked[order[lo:hi]]
        product = (group.reshape(-1, group.shape[-1]) @ matrices[index[lo]]).reshape(group.shape)  # one GEMM
        out[order[lo:hi]] = np.einsum("pik,pjk->pij", product, group)
    return out[:, 0, 0] if vectors.ndim == 2 else out


@cached_njit
def _compiled_gram(matrices, index, order, vectors):
    r"""Gram matrices of :func:`quadratic_forms`, pair ``order[k]`` with matrix ``index[k]``: :math:`u_a = v_a^T A`
    from the rows of :math:`A` (contiguous), four at a time (a quarter of the loads and stores of
    :math:`u_a`: 0.78x the time at dim = 164), then :math:`u_a \cdot v_b`."""
    n_pairs, m, dim = vectors.shape
    out = np.empty((n_pairs, m, m))
    rows = np.empty((m, dim))
    top = dim - dim % 4
    for k in range(n_pairs):
        p, matrix = order[k], matrices[index[k]]
        rows[:] = 0.0
        for i in range(0, top, 4):
            for a in range(m):
                w0, w1, w2, w3 = vectors[p, a, i], vectors[p, a, i + 1], vectors[p, a, i + 2], vectors[p, a, i + 3]
                for j in range(dim):
                    rows[a, j] += (w0 * matrix[i, j] + w1 * matrix[i + 1, j]) + (w2 * matrix[i + 2, j] + w3 * matrix[i + 3, j])
        for i in range(top, dim):
            for a in range(m):
                weight = vectors[p, a, i]
                for j in range(dim):
                    rows[a, j] += weight * matrix[i, j]
        for a in range(m):
            for b in range(m):
                total = 0.0
                for j in range(dim):
                    total += rows[a, j] * vectors[p, b, j]
                out[p, a, b] = total
    return out
