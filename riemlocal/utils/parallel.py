"""One way to run batches in parallel: joblib (any backend, e.g. dask) with one BLAS thread per worker; BLAS thread limits."""

import functools

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from threadpoolctl import ThreadpoolController
from tqdm.auto import tqdm

from .validation import check_n_jobs

__all__ = ["map_chunks", "parallel_imap", "parallel_map", "one_blas_thread", "with_one_blas_thread"]


def one_blas_thread():
    """Context manager: BLAS and OpenMP pools of this process limited to one thread (threadpoolctl).

    On the small matrices of this library (dimensions up to a few hundred) a second BLAS
    thread saves little and, on a machine whose cores are busy, costs several times the
    work: its threads wait for cores. Entering costs about 30 microseconds, so it wraps
    whole jobs (``fit``, the command line, workers), never single Log or Exp calls.
    """
    return _controller().limit(limits=1)


@functools.lru_cache(maxsize=1)
def _controller():
    """The process's ThreadpoolController, made on first use (after numpy and scipy loaded their BLAS)."""
    return ThreadpoolController()


def with_one_blas_thread(method):
    """Decorator: run ``method`` inside :func:`one_blas_thread`."""

    @functools.wraps(method)
    def limited(*args, **kwargs):
        with one_blas_thread():
            return method(*args, **kwargs)

    return limited


def parallel_imap(function, tasks, n_jobs=None):
    """``function(*task)`` for each task, yielded in task order as they finish, through :class:`joblib.Parallel`.

    With more than one worker, BLAS is limited to one thread inside each, so
    workers do not oversubscribe the cores.
    """
    n_jobs = check_n_jobs(n_jobs)
    limit = effective_n_jobs(n_jobs) > 1
    return Parallel(n_jobs=n_jobs, return_as="generator")(delayed(_single_threaded)(function, task, limit) for task in tasks)


def parallel_map(function, tasks, n_jobs=None, verbose=False, description=None):
    """``[function(*task) for task in tasks]`` by :func:`parallel_imap`; ``verbose`` shows a tqdm bar."""
    tasks = list(tasks)
    return list(tqdm(parallel_imap(function, tasks, n_jobs), total=len(tasks), desc=description, disable=not verbose))


def map_chunks(solve, arrays, chunk_size, n_jobs, verbose, description):
    """``solve(*chunk)`` on chunks of at most ``chunk_size`` rows of ``arrays`` (a tuple, rows aligned), at least one
    per worker (joblib); outputs concatenated."""
    n_rows, n_jobs = len(arrays[0]), check_n_jobs(n_jobs)
    n_workers = 1 if n_rows == 1 else effective_n_jobs(n_jobs)  # no worker would share one row
    if n_rows <= chunk_size and not verbose and n_workers == 1:  # one chunk, in this process
        return list(solve(*arrays))
    size = max(1, min(chunk_size, -(-n_rows // n_workers)))
    chunks = [slice(i, i + size) for i in range(0, n_rows, size)]
    parts = parallel_map(solve, [tuple(array[c] for array in arrays) for c in chunks], n_jobs, verbose, description)
    return [np.concatenate(outputs) for outputs in zip(*parts)]


def _single_threaded(function, task, limit):
    if not limit:
        return function(*task)
    with one_blas_thread():
        return function(*task)
