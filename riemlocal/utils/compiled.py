"""Compiled kernels: numba's ``njit`` with its on-disk cache in a per-user directory, never inside the package; helpers of compiled code.

numba caches a compiled function beside its source file (``__pycache__``) when that folder is
writable, which for an installed package is ``site-packages``: files pip does not know of, left
behind when the package is uninstalled (a leftover ``riemlocal/__pycache__`` then shadows an
editable install). :func:`cached_njit` points numba's cache at :func:`cache_dir` while it decorates,
and compiles without a disk cache when that directory cannot be written. Only
specializations for riemlocal's own types are written to disk (:class:`_LibraryCache`).
"""

import functools
import hashlib
import math
import os
import pickle
from pathlib import Path

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.caching import FunctionCache
from numba.core.sigutils import normalize_signature
from numba.extending import intrinsic

__all__ = ["cached_njit", "cache_dir", "refcount_free", "exp_nonpositive"]


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
        dispatcher = njit(cache=True, **options)(function)
        dispatcher._cache = _LibraryCache(dispatcher.py_func)
        return dispatcher
    finally:
        numba.config.CACHE_DIR = previous


def _foreign(numba_type):
    """Whether a numba type names a Python class outside riemlocal (a namedtuple of a user's field, say)."""
    owner = getattr(numba_type, "instance_class", None)
    if owner is not None and not owner.__module__.startswith("riemlocal."):
        return True
    return any(_foreign(item) for item in getattr(numba_type, "types", ()) if isinstance(item, types.Type))


@functools.lru_cache(maxsize=1)
def _sources_digest():
    """SHA-256 of every source file of the package."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


class _LibraryCache(FunctionCache):
    """numba's disk cache of a function, for signatures of riemlocal's own types only.

    A generic compiled solver is specialized for each field's capability data
    (:mod:`riemlocal.numerics`); a cache index that names a class of a user's
    script or test module could not be read by a later process that cannot
    import it, which would then fail. Such specializations are compiled once per
    process; an index that cannot be read is emptied and rebuilt. Entries are
    keyed by the package's sources too, so that an edit anywhere recompiles.
    """

    def _index_key(self, sig, codegen):
        """numba's key (the signature, the CPU, this function's bytecode) and the digest of riemlocal's sources.

        A compiled function inlines the evaluators and constants of other modules; numba
        checks only its own file, so an edit elsewhere would otherwise leave stale code.
        """
        return super()._index_key(sig, codegen) + (_sources_digest(),)

    def _save_overload(self, sig, data):
        if not any(_foreign(item) for item in normalize_signature(sig)[0]):
            super()._save_overload(sig, data)

    def _load_overload(self, sig, target_context):
        try:
            return super()._load_overload(sig, target_context)
        except (ImportError, AttributeError, pickle.UnpicklingError):  # an index naming a class this process cannot import
            self._cache_file.flush()
            return None


def refcount_free(function):
    """``numba.njit`` without reference counting, for kernels that allocate nothing and return no array to counted code.

    Numba counts references to every array argument, tuple item and view with an
    atomic increment and decrement (a fifth of a D = 2 Log); a kernel that only
    reads and writes arrays its caller owns needs none of them (numba's ``_nrt`` option;
    a numba without that option compiles the kernel with reference counting).
    """
    try:
        return cached_njit(function, _nrt=False)
    except (KeyError, TypeError, ValueError):  # numba 0.68: KeyError "Unrecognized options"
        return cached_njit(function)


@intrinsic
def _bits_to_float(typingctx, bits):
    """The float64 with the bit pattern of the int64 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


_LOG2_E, _LN2_HIGH, _LN2_LOW = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10  # Cody--Waite split of ln 2


@cached_njit
def exp_nonpositive(x):
    r""":math:`e^x` for :math:`x \le 0` in operations the compiler vectorizes (``math.exp`` is a libm call per element).

    :math:`x = k \ln 2 + r`, :math:`|r| \le \tfrac12 \ln 2`, :math:`e^r` by its Taylor polynomial of
    degree 13 (remainder below :math:`10^{-17}`), :math:`2^k` from the exponent bits: within 1 ulp of
    libm's ``exp`` (tested); 0 below :math:`-708` (no subnormals: weights that small count as 0), NaN for NaN.
    """
    k = math.floor(x * _LOG2_E + 0.5)
    r = (x - k * _LN2_HIGH) - k * _LN2_LOW
    p = 1.0 / 6227020800.0
    for coefficient in (1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0,
                        1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
        p = p * r + coefficient
    scaled = p * _bits_to_float((np.int64(max(k, -1022.0)) + 1023) << 52)
    return scaled if x >= -708.0 else (0.0 if x < -708.0 else x)
