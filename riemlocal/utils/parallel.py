"""One way to run batches in parallel: joblib (any backend, e.g. dask) with one BLAS thread per worker."""

from joblib import Parallel, delayed, effective_n_jobs
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from .validation import check_n_jobs

__all__ = ["parallel_map"]


def parallel_map(function, tasks, n_jobs=None, verbose=False, description=None):
    """``[function(*task) for task in tasks]`` through :class:`joblib.Parallel`.

    With more than one worker, BLAS is limited to one thread inside each, so
    workers do not oversubscribe the cores; ``verbose`` shows a tqdm bar.
    """
    n_jobs, tasks = check_n_jobs(n_jobs), list(tasks)
    limit = effective_n_jobs(n_jobs) > 1
    results = Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(_single_threaded)(function, task, limit) for task in tasks
    )
    return list(tqdm(results, total=len(tasks), desc=description, disable=not verbose))


def _single_threaded(function, task, limit):
    if not limit:
        return function(*task)
    with threadpool_limits(limits=1):
        return function(*task)
