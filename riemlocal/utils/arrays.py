"""Array helpers shared by fields and rules."""

from itertools import pairwise

import numpy as np

__all__ = ["CACHE_ELEMENTS", "TASK_ELEMENTS", "quadratic_forms", "unique_rows"]

#: floats in a temporary that should stay in cache, e.g. (chunk, R, D) blends of a field (512 KB:
#: 3x faster than 64 MB ones at D = 100)
CACHE_ELEMENTS = 2**16
#: floats in the temporaries of one task of a rule or one block of products (32 MB): large enough
#: that a matrix product reuses its operands, small enough for every worker's memory
TASK_ELEMENTS = 2**22


def unique_rows(points):
    """Distinct rows of a 2-D array and, per row, the index of its distinct row: ``(distinct, inverse)``."""
    points = np.ascontiguousarray(points)
    rows = points.view(np.dtype((np.void, points.dtype.itemsize * points.shape[1])))[:, 0]
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return points[first], inverse.ravel()


def quadratic_forms(matrices, index, vectors):
    r""":math:`v_p^T A_{i_p} v_p` for ``i = index``, ``v = vectors`` of shape ``(n, dim)``; for ``(n, m, dim)``,
    the Gram matrices :math:`V_p A_{i_p} V_p^T` of shape ``(n, m, m)``.

    Grouped by matrix: one product per distinct :math:`i`, so each matrix is read once.
    """
    stacked = vectors[:, None, :] if vectors.ndim == 2 else vectors
    order = np.argsort(index, kind="stable")
    index = index[order]
    bounds = np.r_[0, np.flatnonzero(np.diff(index)) + 1, len(index)]
    out = np.empty((len(index),) + stacked.shape[1:2] * 2)
    for lo, hi in pairwise(bounds):
        group = stacked[order[lo:hi]]
        product = (group.reshape(-1, group.shape[-1]) @ matrices[index[lo]]).reshape(group.shape)  # one GEMM
        out[order[lo:hi]] = np.einsum("pik,pjk->pij", product, group)
    return out[:, 0, 0] if vectors.ndim == 2 else out
