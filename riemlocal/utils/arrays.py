"""Array helpers shared by fields and rules."""

import numpy as np

__all__ = ["unique_rows"]


def unique_rows(points):
    """Distinct rows of a 2-D array and, per row, the index of its distinct row: ``(distinct, inverse)``."""
    points = np.ascontiguousarray(points)
    rows = points.view(np.dtype((np.void, points.dtype.itemsize * points.shape[1])))[:, 0]
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return points[first], inverse.ravel()
