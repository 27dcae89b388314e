r"""Regions of local fits: which samples, with which weights, each local metric sees (Ramanan & Baker, Sec. II-C).

Every function works on points already mapped by the global metric,
:math:`z = C^T x` with :math:`M_G = C C^T`, so Euclidean distances of ``z``
are global-metric distances.
"""

import numpy as np
from scipy.special import softmax
from sklearn.neighbors import NearestNeighbors

__all__ = ["neighbourhoods", "class_weights", "auto_bandwidth", "reference_weights", "leave_one_out_smoothing"]


def neighbourhoods(mapped, size):
    """Indices ``(n, size)`` of the ``size`` nearest neighbours of every point, itself included."""
    size = min(size, len(mapped))
    return NearestNeighbors(n_neighbors=size).fit(mapped).kneighbors(mapped, return_distance=False)


def class_weights(neighbours, y, n_classes):
    """Per class :math:`j`, weight 1 on its members and their neighbours, 0 elsewhere (eq. 6)."""
    weights = np.zeros((n_classes, len(y)))
    for label in range(n_classes):
        weights[label, neighbours[y == label].ravel()] = 1.0
    return list(weights)


def auto_bandwidth(mapped, center_indices):
    """Median squared distance from each point to its nearest center (its nearest other center when all are centers)."""
    centers = mapped[center_indices]
    if len(center_indices) == len(mapped):
        distances = NearestNeighbors(n_neighbors=2).fit(centers).kneighbors(mapped)[0][:, 1]
    else:
        distances = np.sqrt((((mapped[:, None] - centers) ** 2).sum(-1)).min(1))
    return float(max(np.median(distances**2), np.finfo(float).tiny))


def reference_weights(sq_distances, sigma):
    r""":math:`w_{ij} = \mathrm{softmax}_j(-d_G(x_i, x_{RP_j}) / \sigma)` (eq. 15), shape ``(n, R)``."""
    return softmax(-sq_distances / sigma, axis=1)


def leave_one_out_smoothing(metrics, between_sq, sigma):
    r"""Each reference metric replaced by the RBF blend of the *other* references at it (eq. 16).

    .. math::
        M^{CV}_j = \frac{1}{Z_j} \sum_{i \ne j} w_i(x_{RP_j}) M_i .
    """
    between_sq = between_sq.copy()
    np.fill_diagonal(between_sq, np.inf)
    return np.einsum("ji,idk->jdk", reference_weights(between_sq, sigma), metrics)
