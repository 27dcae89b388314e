"""Input validation shared by every module: clear errors naming the argument."""

import math
import numbers

import numpy as np
from scipy.linalg.lapack import dposv

__all__ = [
    "check_points",
    "check_not_text",
    "check_spd",
    "check_positive",
    "check_fraction",
    "check_tolerance",
    "MIN_RTOL",
    "check_option",
    "check_bool",
    "check_random_state",
    "check_int",
    "check_weights",
    "check_broadcast",
    "broadcast_flat",
    "check_n_jobs",
    "check_labels",
    "check_spread",
    "solve_spd",
    "SPD_RTOL",
    "is_positive_definite",
    "check_callable",
    "options",
    "optional",
    "check_params",
]

#: eigenvalues at or below ``SPD_RTOL`` times the largest one count as zero (rank and definiteness
#: decisions): far above the rounding of a symmetric eigensolver (about dim * eps relative) for any
#: dim this library handles, so the decision does not depend on the BLAS kernel
SPD_RTOL = 1e-10


def is_positive_definite(matrices, rtol=SPD_RTOL):
    """Whether each symmetric matrix of ``(..., D, D)`` is positive definite, shape ``(...)``.

    Decided by eigenvalues relative to the largest in magnitude, never by whether a
    Cholesky factorization happens to succeed (its last pivot can be a rounding
    residue such as 1e-8 on a rank-deficient matrix).
    """
    eigenvalues = np.linalg.eigvalsh(matrices)
    largest = np.abs(eigenvalues).max(axis=-1)
    return (eigenvalues[..., 0] > rtol * largest) & (largest > 0)


def check_points(x, dim=None, name="x", min_ndim=1):
    """Return ``x`` as a finite float array of shape ``(..., dim)``.

    Raises
    ------
    TypeError
        If ``x`` is not an array of real numbers (complex or strings included).
    ValueError
        If ``x`` has NaN/inf, fewer than ``min_ndim`` axes or a last axis
        other than ``dim``.
    """
    try:
        arr = np.asarray(x)
        if arr.dtype.kind not in "biufO":  # complex (whose imaginary part a cast would drop), strings, bytes
            raise TypeError(f"dtype {arr.dtype}")
        arr = arr.astype(float, copy=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array of real numbers, got {type(x).__name__} ({exc})") from exc
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axis(es) of shape (..., dim), got shape {arr.shape}")
    if dim is not None and arr.shape[-1] != dim:
        raise ValueError(f"{name} must have last axis of length dim={dim}, got shape {arr.shape}")
    if not math.isfinite(arr.sum()) and not np.isfinite(arr).all():  # a finite sum has finite terms
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def check_not_text(x, name):
    """Return ``x`` after checking it holds no text (strings or bytes, also as elements of an object array).

    For the estimators, whose further validation is scikit-learn's: it describes the array
    instead of naming it, and ``check_estimator`` requires its ``ValueError`` for complex data.
    """
    try:
        arr = np.asarray(x)
    except ValueError:  # ragged: left to the caller's validation
        return x
    if arr.dtype.kind in "SU" or (arr.dtype == object and any(isinstance(v, (str, bytes)) for v in arr.flat)):
        raise TypeError(f"{name} must be a numeric array of real numbers, got text ({type(x).__name__} of dtype {arr.dtype})")
    return x


def check_broadcast(dim, *named):
    """Validate named point arrays ``(value, name)`` of shape ``(..., dim)`` and check they broadcast together.

    Returns the broadcast shape and the validated (not yet broadcast) arrays;
    the error names every argument with its shape.
    """
    arrays = [check_points(value, dim, name) for value, name in named]
    shapes = {array.shape for array in arrays}
    try:
        shape = shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*(array.shape for array in arrays))
    except ValueError:
        listed = " and ".join(f"{name} of shape {array.shape}" for array, (_, name) in zip(arrays, named))
        raise ValueError(f"{listed} do not broadcast together") from None
    return shape, arrays


def broadcast_flat(dim, *named):
    """:func:`check_broadcast`, then every array broadcast and flattened to ``(n, dim)``; also returns the batch shape."""
    shape, arrays = check_broadcast(dim, *named)
    return shape[:-1], [(array if array.shape == shape else np.broadcast_to(array, shape)).reshape(-1, dim) for array in arrays]


def check_spd(matrices, name="metric", dim=None, rtol=1e-8):
    """Return ``matrices`` of shape ``(..., D, D)`` after checking they are symmetric positive definite.

    Symmetry is checked to relative tolerance ``rtol`` and the matrices are then
    symmetrized exactly; positive definiteness is decided by eigenvalues
    (:func:`is_positive_definite`: the smallest above ``SPD_RTOL`` times the largest).
    """
    arr = check_points(matrices, name=name, min_ndim=2)
    if arr.shape[-1] != arr.shape[-2] or arr.shape[-1] == 0:
        raise ValueError(f"{name} must be square matrices of shape (..., D, D) with D >= 1, got shape {arr.shape}")
    if dim is not None and arr.shape[-1] != dim:
        raise ValueError(f"{name} must be {dim}x{dim} matrices, got shape {arr.shape}")
    asym = np.abs(arr - np.swapaxes(arr, -1, -2)).max(initial=0.0)
    scale = np.abs(arr).max(initial=0.0)
    if asym > rtol * max(scale, 1e-300):
        raise ValueError(f"{name} must be symmetric; max |M - M^T| = {asym:.3g}")
    arr = 0.5 * (arr + np.swapaxes(arr, -1, -2))
    definite = is_positive_definite(arr)
    if not np.all(definite):
        worst = np.linalg.eigvalsh(arr[~definite] if arr.ndim > 2 else arr).reshape(-1, arr.shape[-1])[0]
        raise ValueError(
            f"{name} must be positive definite; eigenvalues range from {worst[0]:.3g} to {worst[-1]:.3g} "
            f"(the smallest must exceed {SPD_RTOL:g} times the largest)"
        )
    return arr


def check_positive(value, name, strict=True):
    """Return ``value`` as float after checking it is a finite (strictly) positive number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (strict and value == 0):
        bound = "> 0" if strict else ">= 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return value


def check_fraction(value, name, strict=True):
    """Return ``value`` as float after checking it lies in ``(0, 1]`` (``[0, 1]`` if not ``strict``)."""
    value = check_positive(value, name, strict)
    if value > 1:
        raise ValueError(f"{name} must be in {'(0' if strict else '[0'}, 1], got {value!r}")
    return value


#: the smallest relative tolerance float64 can honor in an iterative solver: a thousand roundings
#: (a tighter one can never be met, and an absolute tolerance derived from it underflows)
MIN_RTOL = 1e3 * np.finfo(float).eps


def check_tolerance(value, name, minimum=MIN_RTOL):
    """Return ``value`` as float after checking it is a finite relative tolerance in ``[minimum, 1]``."""
    value = check_positive(value, name)
    if not minimum <= value <= 1.0:
        raise ValueError(
            f"{name} must lie in [{minimum:.3g}, 1] (float64 cannot honor a relative tolerance below it), got {value!r}"
        )
    return value


def check_bool(value, name):
    """Return ``value`` as bool after checking it is one (``bool`` or ``numpy.bool_``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_option(value, name, options):
    """Return ``value`` after checking it is one of ``options``."""
    if value not in options:
        raise ValueError(f"{name} must be one of {sorted(options)}, got {value!r}")
    return value


def check_random_state(seed, name="random_state"):
    """Return a :class:`numpy.random.Generator` from ``None``, an int or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and seed < 0:
        raise ValueError(f"{name} must be None, a non-negative int or a numpy Generator, got {seed!r}")
    if seed is None or (isinstance(seed, (numbers.Integral, np.random.SeedSequence)) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    if isinstance(seed, np.random.RandomState):
        return np.random.default_rng(seed.randint(2**31 - 1))
    raise TypeError(f"{name} must be None, an int or a numpy Generator, got {seed!r}")


def check_int(value, name, minimum=1):
    """Return ``value`` as int after checking it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def check_weights(sample_weight, n_samples):
    """Return non-negative finite weights of shape ``(n_samples,)`` (``None`` -> ones)."""
    if sample_weight is None:
        return np.ones(n_samples)
    weights = np.asarray(sample_weight)
    if weights.dtype.kind not in "biuf":
        raise TypeError(f"sample_weight must be an array of real numbers, got dtype {weights.dtype}")
    weights = weights.astype(float)
    if weights.shape != (n_samples,):
        raise ValueError(f"sample_weight must have shape ({n_samples},), got {weights.shape}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    if not np.any(weights > 0):
        raise ValueError("sample_weight must not be all zero weights (at least one positive entry is needed)")
    return weights


def check_n_jobs(n_jobs, name="n_jobs"):
    """Return ``n_jobs`` after checking it is ``None`` or a nonzero int (joblib: -1 is all cores, -2 all but one)."""
    if n_jobs is None:
        return None
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"{name} must be None or an int, got {n_jobs!r}")
    if n_jobs == 0:
        raise ValueError(f"{name} must be None or a nonzero int (1: no parallelism, -1: all cores), got 0")
    return int(n_jobs)


def check_spread(X, name="X"):
    """Return points ``X`` of shape ``(n, dim)`` after checking their squared distances fit in float64.

    Statistics of ``X`` (covariances, scatter matrices) square its differences; beyond a
    spread of about 1e154 they overflow and later computations fail without a clear cause.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        squared_spread = np.square(np.abs(X - X[:1]).max(initial=0.0)) * X.shape[-1]
    if not np.isfinite(squared_spread):
        raise ValueError(f"{name} spans too far (about 1e154 or more): its squared distances overflow float64")
    return X


def check_labels(y, name="y"):
    """Return class labels ``y`` as an array after checking they are all strings or all numbers.

    A mix (``[0, "a"]``) has no order in which to sort classes, so it is a ``TypeError``.
    """
    y = np.asarray(y)
    if y.dtype.kind == "c":
        raise TypeError(f"{name} must hold real numbers or strings as labels, got complex values")
    if y.dtype == object:
        kinds = {"string" if isinstance(label, str) else "number" if isinstance(label, numbers.Real) else type(label).__name__
                 for label in y.flat}
        if len(kinds) > 1:
            raise TypeError(f"{name} must hold labels of one type (all strings or all numbers), got a mix of {sorted(kinds)}")
    return y


def solve_spd(matrices, vectors):
    """Solve :math:`M x = b` for SPD ``matrices`` (..., D, D) and ``vectors`` (..., D).

    One system goes through LAPACK's Cholesky solver ``dposv`` (about 1.5x
    faster than the LU of :func:`numpy.linalg.solve` at D = 100, which matters
    inside ODE right-hand sides); batches use :func:`numpy.linalg.solve`.
    """
    if matrices.ndim == 3 and len(matrices) == 1 and vectors.shape == matrices.shape[:-1]:
        # M^T = M, and the transpose of a C-ordered matrix is the Fortran order LAPACK reads without reordering
        _, solution, info = dposv(matrices[0].T, vectors[0], lower=1)
        if info == 0:
            return solution[None]
    return np.linalg.solve(matrices, vectors[..., None])[..., 0]


# --------------------------------------------------------------------------- declarative parameter checks
# An estimator lists its parameters' constraints in a table (name -> constraint), in the spirit of
# scikit-learn's ``_parameter_constraints``. A constraint is a function ``(value, name) -> value`` that
# raises a TypeError or ValueError naming the parameter: a ``check_*`` helper above, or one made below.


def check_callable(value, name):
    """Return ``value`` after checking it is callable."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {value!r}")
    return value


def options(*values):
    """The constraint "one of ``values``" (:func:`check_option`)."""
    return lambda value, name: check_option(value, name, values)


def optional(constraint, *literals):
    """The constraint "one of ``literals`` (e.g. ``None``, ``"auto"``), or a value meeting ``constraint``"."""

    def check(value, name):
        if (value is None or isinstance(value, str)) and value in literals:
            return value
        return constraint(value, name)

    return check


def check_params(owner, constraints):
    """Check the attributes of ``owner`` named in ``constraints`` (name -> constraint); return their checked values by name."""
    return {name: constraint(getattr(owner, name), name) for name, constraint in constraints.items()}
