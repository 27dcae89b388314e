"""Batched Log / Exp on any space with a geomstats-style metric, split across joblib workers.

Every estimator of :mod:`riemlocal.learning` reaches the geometry only through
these helpers, so it runs on a :class:`~riemlocal.manifold.LearnedMetricManifold`
and on any geomstats space (``space.metric.exp``, ``log``, ``metric_matrix``)
alike. Batches are cut into ``effective_n_jobs(n_jobs)`` chunks and mapped with
:class:`joblib.Parallel`, so ``joblib.parallel_config(backend="dask")`` sends
them to a ``dask.distributed`` cluster.
"""

import numpy as np
from joblib import effective_n_jobs

from ..utils.parallel import parallel_map
from ..utils.validation import check_n_jobs

__all__ = ["point_dim", "log", "exp", "metric_matrix", "squared_norm"]


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


def exp(space, tangent_vecs, base_point, n_jobs=None):
    r""":math:`\mathrm{Exp}_{b}(v_i)` for ``tangent_vecs`` (n, D) and one ``base_point`` (D,) or one per vector."""
    if np.ndim(base_point) == 1:
        return _map(space.metric.exp, [tangent_vecs], [base_point], n_jobs)
    return _map(space.metric.exp, [tangent_vecs, base_point], [], n_jobs)


def metric_matrix(space, base_point):
    """Metric :math:`M(b)` of shape ``(..., D, D)``, symmetrized."""
    matrix = np.asarray(space.metric.metric_matrix(base_point), dtype=float)
    return 0.5 * (matrix + np.swapaxes(matrix, -1, -2))


def squared_norm(tangent_vecs, matrix):
    """:math:`v^T M v` for ``tangent_vecs`` (..., D) and ``matrix`` (..., D, D)."""
    return np.einsum("...i,...ij,...j->...", tangent_vecs, matrix, tangent_vecs)
