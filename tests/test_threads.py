"""BLAS threads: the command line and whole jobs run with one BLAS thread (issue 23).

On a 2-core machine shared with other work, BLAS worker threads on this library's small
matrices made the main job 4-5x slower. ``.ci/run`` also runs the quick main job pinned to
one core (``taskset``) under a time limit.
"""

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import riemlocal.cli as cli
import riemlocal.io as rio
from riemlocal import SmoothLocalField
from riemlocal.utils.parallel import one_blas_thread, with_one_blas_thread


def blas_threads():
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_one_blas_thread_limits_and_restores():
    with threadpool_limits(limits=2, user_api="blas"):
        assert blas_threads() == {2}
        with one_blas_thread():
            assert blas_threads() == {1}
        assert blas_threads() == {2}
        assert with_one_blas_thread(blas_threads)() == {1}
        assert blas_threads() == {2}


def test_every_command_runs_with_one_blas_thread(tmp_path, monkeypatch):
    seen = []

    def record(*args, **kwargs):
        seen.append(blas_threads())
        return {"markdown": ""}

    monkeypatch.setattr(cli, "run_geodesic", record)
    monkeypatch.setattr(cli.bodyshape, "run_bodyshape", record)
    monkeypatch.setattr(cli.taxonomy, "run_taxonomy", record)
    path = tmp_path / "field.npz"
    rio.save(SmoothLocalField([[0.0, 0.0], [1.0, 1.0]], [np.eye(2), 2 * np.eye(2)]), path)
    with threadpool_limits(limits=2, user_api="blas"):
        for argv in (["geodesic", str(path), "--from", "0,0", "--to", "1,1", "--out", str(tmp_path)], ["bodyshape"], ["taxonomy"]):
            assert cli.main(argv + ["--no-progress"]) == 0
    assert seen == [{1}] * 3


def test_statistics_run_with_one_blas_thread():
    """Estimators fit on small matrices with one BLAS thread: a user field records what its metric sees."""
    from riemlocal import LearnedMetricManifold
    from riemlocal.fields import MetricField
    from riemlocal.learning import FrechetMean

    seen = set()

    class Recording(MetricField):
        def __init__(self):
            super().__init__(dim=2)

        def metric_matrix(self, x):
            seen.update(blas_threads())
            x = np.asarray(x, dtype=float)
            return (1.0 + 0.1 * np.sum(x**2, axis=-1))[..., None, None] * np.eye(2)

    points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    with threadpool_limits(limits=2, user_api="blas"):
        FrechetMean(LearnedMetricManifold(Recording()), method="karcher").fit(points)
    assert seen == {1}


def test_estimator_warnings_point_at_the_callers_line():
    """``with_one_blas_thread`` adds a frame: the estimators' warnings still name the user's call."""
    import warnings

    from riemlocal import LearnedMetricManifold, SmoothLocalField
    from riemlocal.learning import FrechetMean, GeodesicRegression

    space = LearnedMetricManifold(SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2 * np.eye(2), np.eye(2)]))
    points = np.random.default_rng(0).uniform(1, 5, (8, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FrechetMean(space, method="karcher", max_iter=1).fit(points)
        GeodesicRegression(space, max_iter=1).fit(np.linspace(0, 1, 8), points)
    assert [w.filename for w in caught if "did not converge" in str(w.message)] == [__file__] * 2
