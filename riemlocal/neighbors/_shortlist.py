"""Candidates of a query: its nearest training points under the global metric (Ramanan & Baker, Sec. III-A)."""

import numpy as np
from sklearn.neighbors import NearestNeighbors

__all__ = ["GlobalShortlist"]


class GlobalShortlist:
    r"""KD-trees on the globally mapped training points :math:`C^T x_i` (:math:`M_G = C C^T`), one per group.

    Parameters
    ----------
    X : ndarray of shape (n_samples, dim)
        Training points.
    global_metric : ndarray of shape (dim, dim)
        SPD :math:`M_G`.
    groups : list of ndarray of int
        Index sets searched separately (one set of all points for the k-NN
        vote, one per class for CCKNN).
    """

    def __init__(self, X, global_metric, groups):
        self.map = np.linalg.cholesky(global_metric)
        mapped = X @ self.map
        self.indexes = [(members, NearestNeighbors(algorithm="kd_tree").fit(mapped[members])) for members in groups]

    def __call__(self, X, size):
        """Indices ``(n_queries, n_candidates)``: the ``size`` nearest of every group (clipped to its size), group after group."""
        mapped = X @ self.map
        blocks = []
        for members, index in self.indexes:
            found = index.kneighbors(mapped, n_neighbors=min(size, len(members)), return_distance=False)
            blocks.append(members[found])
        return np.concatenate(blocks, axis=1)
