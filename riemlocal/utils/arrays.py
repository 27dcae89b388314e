"""Array helpers shared by fields and rules."""

import numpy as np

__all__ = ["unique_rows", "quadratic_forms", "CACHE_ELEMENTS", "TASK_ELEMENTS"]

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


def quadratic_forms(matrices, index, vectors, rows=None):
    r""":math:`v_{j_p}^T A_{i_p} v_{j_p}` for ``i = index``, ``j = rows`` (default: every row of ``vectors`` in turn).

    Grouped by matrix: one product per distinct :math:`i`, so each matrix is read once.
    """
    rows = np.arange(len(index)) if rows is None else rows
    order = np.argsort(index, kind="stable")
    index, rows = index[order], rows[order]
    bounds = np.r_[0, np.flatnonzero(np.diff(index)) + 1, len(index)]
    out = np.empty(len(index))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        group = vectors[rows[lo:hi]]
        out[order[lo:hi]] = np.einsum("pi,pi->p", group @ matrices[index[lo]], group)
    return out
