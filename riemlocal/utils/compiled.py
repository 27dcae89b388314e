"""Compiled kernels: numba's ``njit`` with its on-disk cache in a per-user directory, never inside the package.

numba caches a compiled function beside its source file (``__pycache__``) when that folder is
writable, which for an installed package is ``site-packages``: files pip does not know of, left
behind when the package is uninstalled (a leftover ``riemlocal/__pycache__`` then shadows an
editable install). :func:`cached_njit` points numba's cache at :func:`cache_dir` while it decorates,
and compiles without a disk cache when that directory cannot be written.
"""

import os
from pathlib import Path

import numba
from numba import njit

__all__ = ["cached_njit", "cache_dir"]


def cache_dir():
    """``NUMBA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/riemlocal/numba`` (default ``~/.cache/riemlocal/numba``)."""
    if numba.config.CACHE_DIR:
        return Path(numba.config.CACHE_DIR)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "riemlocal" / "numba"


def _writable(directory):
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK | os.X_OK)


def cached_njit(function=None, **options):
    """``numba.njit(**options)``, cached on disk in :func:`cache_dir` (``@cached_njit`` or ``@cached_njit(...)``).

    numba finds a function's cache when it decorates it (``numba.config.CACHE_DIR``
    first, then the source folder), so the setting is only in force meanwhile.
    """
    if function is None:
        return lambda function: cached_njit(function, **options)
    directory = cache_dir()
    if not _writable(directory):
        return njit(**options)(function)
    previous, numba.config.CACHE_DIR = numba.config.CACHE_DIR, str(directory)
    try:
        return njit(cache=True, **options)(function)
    finally:
        numba.config.CACHE_DIR = previous
