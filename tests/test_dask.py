"""Log / Exp batches, geodesic distance matrices and the statistics run on a dask.distributed cluster through joblib."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from riemlocal.distances import pairwise_distances
from riemlocal.fields import SmoothLocalField
from riemlocal.learning import FrechetMean, PrincipalGeodesicAnalysis
from riemlocal.learning._tangent import log
from riemlocal.manifold import LearnedMetricManifold

distributed = pytest.importorskip("dask.distributed")
joblib = pytest.importorskip("joblib")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as client:
        yield client


def test_statistics_on_dask_equal_sequential(client):
    field = SmoothLocalField([[-1.0, 0.0], [1.0, 0.5]], [[[4.0, 0.5], [0.5, 1.0]], [[1.0, -0.3], [-0.3, 3.0]]])
    space = LearnedMetricManifold(field)
    X = np.random.default_rng(0).normal(size=(12, 2))
    base = np.array([0.2, -0.1])
    halves = np.array_split(np.arange(12), 2)  # the two chunks that n_jobs=2 sends to the workers
    chunked_logs = np.concatenate([log(space, X[half], base) for half in halves])
    sequential_pga = PrincipalGeodesicAnalysis(space).fit(X)
    karcher = FrechetMean(space, method="karcher", init=sequential_pga.mean_)  # 0-1 iterations: fast
    sequential_mean = karcher.fit(X).estimate_
    with distributed.get_task_stream(client) as stream, joblib.parallel_config(backend="dask"):
        logs = log(space, X, base, n_jobs=2)
        pga = PrincipalGeodesicAnalysis(space, n_jobs=2).fit(X)
        mean = karcher.set_params(n_jobs=2).fit(X).estimate_
    workers = {task["worker"] for task in stream.data}
    assert len(workers) == 2  # the batches really ran on both workers of the cluster
    assert_allclose(logs, chunked_logs, rtol=0, atol=1e-12)  # same work, same numbers
    # the manifold solves each chunk as one joint problem, so other chunks agree to solver tolerance
    assert_allclose(logs, log(space, X, base), atol=1e-4)
    assert_allclose(pga.mean_, sequential_pga.mean_, atol=1e-12)  # joint solver: no Log batches
    assert_allclose(pga.transform(X), sequential_pga.transform(X), atol=1e-4)
    assert_allclose(mean, sequential_mean, atol=1e-5)


def test_geodesic_distance_matrix_on_dask_equals_sequential(client):
    """``pairwise_distances(rule="geodesic")`` sends its pairs to the cluster's workers; each pair is solved by
    itself (compiled, one after the other), so the matrix is the sequential one to rounding."""
    field = SmoothLocalField([[-1.0, 0.0], [1.0, 0.5], [0.0, 1.5]], [[[4.0, 0.5], [0.5, 1.0]], [[1.0, -0.3], [-0.3, 3.0]], np.eye(2)])
    space = LearnedMetricManifold(field)
    X = np.random.default_rng(1).normal(size=(14, 2))
    sequential = pairwise_distances(space, X, rule="geodesic")
    with distributed.get_task_stream(client) as stream, joblib.parallel_config(backend="dask"):
        distances = pairwise_distances(space, X, rule="geodesic", n_jobs=2)
    assert len({task["worker"] for task in stream.data}) == 2
    assert_allclose(distances, sequential, rtol=1e-12, atol=0)
    assert_allclose(distances, distances.T, rtol=1e-12)
    assert np.all(np.diag(distances) == 0) and np.all(distances[~np.eye(len(X), dtype=bool)] > 0)
