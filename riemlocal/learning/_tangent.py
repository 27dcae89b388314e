"""Batched Log / Exp on any space with a geomstats-style metric, split across joblib workers.

Every estimator of :mod:`riemlocal.learning` reaches the geometry only through
these helpers, so it runs on a :class:`~riemlocal.manifold.LearnedMetricManifold`
and on any geomstats space (``space.metric.exp``, ``log``, ``metric_matrix``)
alike. Batches are cut into ``effective_n_jobs(n_jobs)`` chunks and mapped with
:class:`joblib.Parallel`, so ``joblib.parallel_config(backend="dask")`` sends
them to a ``dask.distributed`` cluster.
"""

import warnings

import numpy as np
from joblib import effective_n_jobs
from sklearn.exceptions import ConvergenceWarning

from ..utils.parallel import parallel_map
from ..utils.validation import check_n_jobs

__all__ = ["point_dim", "log", "certified_log", "warn_uncertified", "exp", "exp_differential", "exp_derivative", "jacobi_end", "metric_matrix", "squared_norm", "squared_dist"]


def point_dim(space):
    """Length of a point's coordinate vector (``space.shape[-1]``, else ``space.dim``).

    Raises
    ------
    TypeError
        If ``space`` has no ``metric`` with ``exp`` and ``log``.
    """
    metric = getattr(space, "metric", None)
    if metric is None or not all(callable(getattr(metric, name, None)) for name in ("exp", "log")):
        raise TypeError(f"space must have a .metric with exp and log (a geomstats space), got {type(space).__name__}")
    shape = getattr(space, "shape", None)
    return int(shape[-1]) if shape else int(space.dim)


def _map(function, batched, shared, n_jobs):
    """``function(*batched_chunk, *shared)`` over chunks of the leading axis, concatenated."""
    n_samples = len(batched[0])
    n_chunks = min(n_samples, effective_n_jobs(check_n_jobs(n_jobs)))
    if n_chunks <= 1:
        return np.asarray(function(*batched, *shared), dtype=float)
    chunks = np.array_split(np.arange(n_samples), n_chunks)
    parts = parallel_map(function, [(*(a[c] for a in batched), *shared) for c in chunks], n_jobs)
    return np.concatenate([np.asarray(p, dtype=float) for p in parts])


def log(space, points, base_point, n_jobs=None):
    r""":math:`\mathrm{Log}_{b}(x_i)` for ``points`` (n, D) and one ``base_point`` (D,) or one per point (n, D)."""
    if np.ndim(base_point) == 1:
        return _map(space.metric.log, [points], [base_point], n_jobs)
    return _map(space.metric.log, [points, base_point], [], n_jobs)


def _log_with_status(space, points, base_point):
    """Log maps and, per pair, the distance, the Log's absolute error estimate and whether the solver certified it."""
    with warnings.catch_warnings():  # the solver's own: the caller counts the uncertified pairs and warns
        warnings.simplefilter("ignore", ConvergenceWarning)
        logs = np.asarray(space.metric.log(points, base_point), dtype=float)
    result = getattr(getattr(space.metric, "log_solver", None), "last_result_", None)
    if result is not None and np.array_equal(result.initial_velocity, logs):  # this call's result
        status = [result.length, result.log_error_estimate * result.length, result.converged]
    else:  # a space whose Log has no error estimates (geomstats' closed forms)
        norms = np.sqrt(np.maximum(squared_norm(logs, metric_matrix(space, base_point)), 0.0))
        status = [norms, np.zeros(len(logs)), np.ones(len(logs))]
    return np.column_stack([logs] + [np.asarray(part, dtype=float) for part in status])


def certified_log(space, points, base_point, n_jobs=None):
    r"""As :func:`log`, with the Log solver's word on every pair (``space.metric.log_solver.last_result_``).

    Returns
    -------
    logs : ndarray of shape (n, D)
    lengths : ndarray of shape (n,)
        Geodesic distances as the solver measured them (the norm of the Log on spaces without a solver result).
    errors : ndarray of shape (n,)
        Estimated error of each Log vector in the norm :math:`M(b)` (0 without a solver result).
    certified : ndarray of bool of shape (n,)
        Whether the solver certified the pair (``last_result_.converged``; true without a solver result).
    """
    if np.ndim(base_point) == 1:
        both = _map(lambda p, b: _log_with_status(space, p, b), [points], [base_point], n_jobs)
    else:
        both = _map(lambda p, b: _log_with_status(space, p, b), [points, base_point], [], n_jobs)
    dim = both.shape[1] - 3
    return both[:, :dim], both[:, dim], np.nan_to_num(both[:, dim + 1], nan=np.inf), both[:, dim + 2] > 0.5


def warn_uncertified(estimator, n_uncertified, n_pairs, what, depth=1):
    """ConvergenceWarning from ``estimator`` when ``n_uncertified`` of its ``n_pairs`` Log maps were not certified.

    ``depth``: calls between the public method (which runs inside ``with_one_blas_thread``) and this one,
    so that the warning points at the user's call.
    """
    if n_uncertified:
        warnings.warn(
            f"{estimator}: {n_uncertified} of {n_pairs} Log maps ({what}) were not certified by the Log solver "
            f"(n_uncertified_={n_uncertified}); results that depend on them are not exact",
            ConvergenceWarning,
            stacklevel=depth + 3,
        )


def exp(space, tangent_vecs, base_point, n_jobs=None):
    r""":math:`\mathrm{Exp}_{b}(v_i)` for ``tangent_vecs`` (n, D) and one ``base_point`` (D,) or one per vector."""
    if np.ndim(base_point) == 1:
        return _map(space.metric.exp, [tangent_vecs], [base_point], n_jobs)
    return _map(space.metric.exp, [tangent_vecs, base_point], [], n_jobs)


def exp_differential(space, tangent_vecs, base_points, n_jobs=None):
    r"""Jacobians of :math:`\mathrm{Exp}_{b_i}(v_i)` in :math:`v_i` and in :math:`b_i`, each ``(n, D, D)``.

    ``None`` when ``space.metric`` has no ``exp_differential`` (geomstats' own spaces).
    """
    function = getattr(space.metric, "exp_differential", None)
    if function is None:
        return None
    both = _map(lambda v, b: np.stack(function(v, b), axis=1), [tangent_vecs, base_points], [], n_jobs)
    return both[:, 0], both[:, 1]


def exp_derivative(space, tangent_vecs, base_point, directions, n_jobs=None):
    r""":math:`\partial_v \mathrm{Exp}_b(v_i)\, e_k` for ``tangent_vecs`` (n, D), one ``base_point`` and ``directions`` (K, D).

    Jacobi fields with :math:`J(0) = 0`, :math:`J'(0) = e_k` (``space.metric.jacobi_field``), the K of
    a geodesic integrated with it; shape (n, D, K).
    """
    n_samples = len(tangent_vecs)
    fields = jacobi_end(space, tangent_vecs, base_point, np.broadcast_to(directions, (n_samples,) + np.shape(directions)), n_jobs)
    return fields.transpose(0, 2, 1)


def jacobi_end(space, tangent_vecs, base_point, initial_derivatives, n_jobs=None):
    r""":math:`J(1)` of the Jacobi fields with :math:`J(0) = 0`, :math:`J'(0) = w_i` along :math:`\mathrm{Exp}_{b}(t v_i)`, shape (n, D).

    One ``base_point`` (D,) or one per vector (n, D). ``initial_derivatives`` of shape (n, K, D):
    K fields along each geodesic, which ride one integration of it; then shape (n, K, D).
    """

    def jacobi(v, w, b):
        shared = (len(v),) + (1,) * (w.ndim - 2) + v.shape[1:]  # the geodesic's shape: constant along the K fields
        return space.metric.jacobi_field(v.reshape(shared), b if b.ndim == 1 else b.reshape(shared), np.zeros_like(w), w)

    if np.ndim(base_point) == 1:
        return _map(jacobi, [tangent_vecs, initial_derivatives], [base_point], n_jobs)
    return _map(jacobi, [tangent_vecs, initial_derivatives, base_point], [], n_jobs)


def metric_matrix(space, base_point):
    """Metric :math:`M(b)` of shape ``(..., D, D)``, symmetrized."""
    matrix = np.asarray(space.metric.metric_matrix(base_point), dtype=float)
    return 0.5 * (matrix + np.swapaxes(matrix, -1, -2))


def squared_norm(tangent_vecs, matrix):
    """:math:`v^T M v` for ``tangent_vecs`` (..., D) and ``matrix`` (..., D, D)."""
    return np.einsum("...i,...ij,...j->...", tangent_vecs, matrix, tangent_vecs)


def squared_dist(space, points_a, points_b, n_jobs=None):
    """Squared geodesic distances between paired rows of ``points_a`` and ``points_b`` (n, D)."""
    return _map(space.metric.squared_dist, [points_a, points_b], [], n_jobs)
