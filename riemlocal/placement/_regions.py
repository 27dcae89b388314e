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
    r"""Median squared distance from each point to its nearest center other than itself.

    .. math::
        \sigma = \operatorname{median}_i \min_{r:\, x_r \ne x_i\ \text{as a sample}} \|z_i - z_r\|^2 .

    Leaving the point's own center out (as eq. 16 does) keeps :math:`\sigma`
    positive when half or more of the points are centers, where the plain
    nearest-center median is 0. Raises when it is still 0 (coincident points).
    """
    centers = mapped[center_indices]
    n_query = min(2, len(centers))
    distances, nearest = NearestNeighbors(n_neighbors=n_query).fit(centers).kneighbors(mapped)
    is_self = center_indices[nearest[:, 0]] == np.arange(len(mapped))
    other = distances[:, 1] if n_query == 2 else np.full(len(mapped), np.inf)
    sq_nearest = np.where(is_self, other, distances[:, 0]) ** 2
    sigma = float(np.median(sq_nearest[np.isfinite(sq_nearest)]))
    if not sigma > 0.0:
        raise ValueError(
            "sigma='auto' is 0: at least half of the samples coincide with a center (duplicated points?); "
            "pass a positive sigma"
        )
    return sigma


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
