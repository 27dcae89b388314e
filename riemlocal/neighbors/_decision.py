"""Decision rules on re-ranked candidates: the k-NN vote and the class-conditional rule (CCKNN)."""

import numpy as np

from ..utils.validation import check_int, check_points

__all__ = ["DECISIONS", "knn_votes", "ccknn_scores", "ccknn_predict"]

#: names accepted by ``decision``: majority vote, or Im & Taylor's class-conditional rule
DECISIONS = ("knn", "ccknn")


def knn_votes(distances_sq, candidate_labels, n_neighbors, n_classes):
    """Votes ``(n_queries, n_classes)`` of the ``n_neighbors`` nearest candidates (stable ties: first candidate).

    Parameters
    ----------
    distances_sq : ndarray of shape (n_queries, n_candidates)
    candidate_labels : ndarray of shape (n_queries, n_candidates)
        Class indices in ``range(n_classes)``.
    n_neighbors : int
    n_classes : int
    """
    nearest = np.argsort(distances_sq, axis=1, kind="stable")[:, :n_neighbors]
    labels = np.take_along_axis(candidate_labels, nearest, axis=1)
    return np.stack([np.bincount(row, minlength=n_classes) for row in labels])


def ccknn_scores(distances_sq, y_train, n_neighbors, classes=None):
    r"""Class-conditional KNN scores: per class, the sum of the ``n_neighbors`` smallest squared distances.

    .. math::
        s_C(z) = \sum_{j=1}^{k} \|z - NN^C_j(z)\|^2,

    eq. (14) of Im & Taylor [1]_. A class with fewer than ``k`` training
    points ``n_C`` scores :math:`\tfrac{k}{n_C}` times the sum over all of them
    (the mean distance times ``k``), so small classes are not favoured.

    Parameters
    ----------
    distances_sq : array-like of shape (n_queries, n_train)
        Squared distances from each query to each training point, in any
        metric (Mahalanobis, local, geodesic...).
    y_train : array-like of shape (n_train,)
        Labels of the training points.
    n_neighbors : int
        Number ``k`` of nearest neighbours summed per class.
    classes : array-like of shape (n_classes,), default=None
        Classes to score, in this order (default: ``np.unique(y_train)``);
        each must occur in ``y_train``.

    Returns
    -------
    scores : ndarray of shape (n_queries, n_classes)
        Lower is better.

    References
    ----------
    .. [1] D. J. Im and G. W. Taylor, "Learning a metric for class-conditional
       KNN", IJCNN 2016.
    """
    distances_sq = check_points(distances_sq, name="distances_sq", min_ndim=2)
    if distances_sq.ndim != 2:
        raise ValueError(f"distances_sq must have shape (n_queries, n_train), got {distances_sq.shape}")
    y_train = np.asarray(y_train)
    if y_train.shape != distances_sq.shape[1:]:
        raise ValueError(f"y_train must have shape ({distances_sq.shape[1]},), got {y_train.shape}")
    n_neighbors = check_int(n_neighbors, "n_neighbors")
    classes = np.unique(y_train) if classes is None else np.asarray(classes)
    scores = np.empty((distances_sq.shape[0], classes.size))
    for c, label in enumerate(classes):
        columns = distances_sq[:, y_train == label]
        if columns.shape[1] == 0:
            raise ValueError(f"classes contains {label!r}, which does not occur in y_train")
        k = min(n_neighbors, columns.shape[1])
        scores[:, c] = n_neighbors * np.partition(columns, k - 1, axis=1)[:, :k].mean(axis=1)
    return scores


def ccknn_predict(distances_sq, y_train, n_neighbors, classes=None):
    """Class-conditional KNN decision (CCKNN): the class of smallest :func:`ccknn_scores`.

    Parameters are those of :func:`ccknn_scores`; ties go to the first class
    in ``classes``.

    Returns
    -------
    y_pred : ndarray of shape (n_queries,)
    """
    classes = np.unique(np.asarray(y_train)) if classes is None else np.asarray(classes)
    return classes[np.argmin(ccknn_scores(distances_sq, y_train, n_neighbors, classes), axis=1)]
