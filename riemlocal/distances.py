r"""Distance rules: turn a metric field :math:`M(x)` into a distance (Ramanan & Baker, Sec. II).

For a query :math:`x`, a candidate (training point) :math:`y` and :math:`d = y - x`:

=================  ================================================================  ==================
rule               value (a length)                                                  ``squared=True``
=================  ================================================================  ==================
``"test"``         :math:`\sqrt{d^T M(x) d}` (metric frozen at the query)            :math:`d^T M(x) d`
``"train"``        :math:`\sqrt{d^T M(y) d}` (metric frozen at the candidate)        :math:`d^T M(y) d`
``"line"``         :math:`\sqrt{E}`, :math:`E = d^T [\int_0^1 M(x + \lambda d)
                   d\lambda] d` (Ramanan & Baker eq. 18)                             :math:`E`
``"line_length"``  :math:`L = \int_0^1 \sqrt{d^T M(x + \lambda d) d}\,d\lambda`      :math:`L^2`
``"geodesic"``     length of the shortest curve (smooth fields only)                 its square
=================  ================================================================  ==================

:math:`E` is the energy of the straight segment traversed at constant
parameter speed, :math:`L` its length, and by Cauchy--Schwarz and
minimality :math:`d_{geo} \le L \le \sqrt{E}`. Identical points are at distance 0.

Each rule is one function in a registry (:data:`RULES`, :func:`register_rule`)
with the field structures (:attr:`~riemlocal.fields.MetricField.structure`)
it serves; a rule chooses its algorithm from the structure:

* ``"constant"``: every rule is the Mahalanobis distance;
* ``"piecewise_constant"``: the field lists the cells each segment crosses
  (:meth:`~riemlocal.fields.MetricField.segment_cells`: breakpoints
  :math:`0 = \lambda_0 < \dots < \lambda_m = 1`, metric :math:`M_k` on each
  piece), and both line rules are exact finite sums,
  :math:`E = \sum_k (\lambda_{k+1} - \lambda_k)\, d^T M_k d` and
  :math:`L = \sum_k (\lambda_{k+1} - \lambda_k) \sqrt{d^T M_k d}`;
  no geodesics;
* ``"piecewise_smooth"``: line rules by adaptive Gauss--Kronrod quadrature
  (relative accuracy about :math:`10^{-10}`); no geodesics;
* ``"smooth"``: line rules by quadrature, geodesics by a Log solver: the
  ``log_solver`` argument, that of a space
  (:class:`~riemlocal.manifold.LearnedMetricManifold`) given as ``field``, or
  by default :class:`~riemlocal.numerics.EnergyLogSolver`.

References
----------
.. [1] D. Ramanan and S. Baker, "Local distance functions: a taxonomy, new
   algorithms, and an evaluation", IEEE TPAMI 33(4), 2011, Sec. II-E, eq. 17--22.
"""

import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from joblib import effective_n_jobs
from scipy.integrate import quad_vec
from sklearn.exceptions import ConvergenceWarning

from .fields import STRUCTURES, MetricField
from .numerics import EnergyLogSolver
from .utils.arrays import MAX_PAIRS, TASK_ELEMENTS, quadratic_forms, unique_rows
from .utils.parallel import parallel_map
from .utils.validation import check_bool, check_n_jobs, check_option, check_points

__all__ = ["Rule", "RULES", "register_rule", "unregister_rule", "rules_for", "check_rule", "distance", "pairwise_distances"]

_CELL_PAIRS = 2**16  # pairs per segment_cells call (a field shares its per-point work within a call)
_QUADRATURE_PAIRS = 256  # pairs integrated together by quad_vec (they share subdivisions)
_QUADRATURE_RTOL = 1e-10
_GEODESIC_PAIRS = 256  # geodesic problems solved jointly (per pair, 4x cheaper than 16 at D = 10)
# coarsest segments of geodesic distances: a length is second order in the curve, so 6, 12, 24 segments
# certify rtol for 0.74-0.86x the time of Log's 8, 16, 32 (D = 2-20, 256 pairs; estimates as honest)
_GEODESIC_SEGMENTS = 6


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Rule:
    """A registered distance rule (:func:`register_rule`).

    Attributes
    ----------
    name : str
    function : callable
        ``function(field, X, Y, x_index, y_index, *, n_jobs, verbose, log_solver)`` -> squared
        distances of the pairs ``(X[x_index[p]], Y[y_index[p]])``, shape ``(n_pairs,)``. ``X`` and
        ``Y`` hold distinct rows, and no pair is of identical points (those are at distance 0).
    structures : tuple of str
        The field structures (:data:`~riemlocal.fields.STRUCTURES`) the rule serves.
    quantity : str
        What the rule measures, in one line (tables of ``riemlocal geodesic``).
    """

    name: str
    function: object
    structures: tuple
    quantity: str


_RULES = {}
#: the registered rules, name -> :class:`Rule` (read-only; see :func:`register_rule`)
RULES = MappingProxyType(_RULES)


def register_rule(name, structures, quantity):
    """Decorator registering ``function`` as the rule ``name`` for fields of ``structures``.

    Parameters
    ----------
    name : str
        The value of ``rule`` that selects it; not yet registered.
    structures : sequence of str
        Field structures it serves, from :data:`~riemlocal.fields.STRUCTURES`.
    quantity : str
        What it measures, in one line.

    Returns
    -------
    decorator : callable
        Registers the function (see :attr:`Rule.function`) and returns it unchanged.
    """
    if not isinstance(name, str) or name in _RULES:
        raise ValueError(f"name must be a string not yet registered (registered: {sorted(_RULES)}), got {name!r}")
    structures = tuple(structures)
    for structure in structures:
        check_option(structure, "structures", STRUCTURES)

    def register(function):
        _RULES[name] = Rule(name, function, structures, quantity)
        return function

    return register


def unregister_rule(name):
    """Remove the rule ``name`` from the registry."""
    _RULES.pop(check_option(name, "name", tuple(_RULES)))


def rules_for(structure):
    """Names of the registered rules that serve fields of ``structure``."""
    return tuple(name for name, rule in _RULES.items() if structure in rule.structures)


def check_rule(rule, structure, source):
    """Return ``rule`` after checking it is registered and serves ``structure`` (the structure of ``source``)."""
    check_option(rule, "rule", tuple(_RULES))
    served = _RULES[rule].structures
    if structure not in served:
        raise ValueError(
            f"rule={rule!r} serves fields of structure {' or '.join(map(repr, served))}, but {source} has "
            f"structure={structure!r}; the rules for it are {', '.join(map(repr, rules_for(structure)))}"
        )
    return rule


# --------------------------------------------------------------------------- public functions


def distance(field, x, y, rule="test", squared=False, *, log_solver=None, n_jobs=None, verbose=False):
    """Distance from query points ``x`` to candidate points ``y`` under a metric field.

    Parameters
    ----------
    field : MetricField or LearnedMetricManifold
        Any metric field; its ``structure`` decides the algorithm (module
        docstring). A space stands for its field, and its ``metric.log_solver``
        solves the geodesics.
    x : array-like of shape (..., dim)
        Query points (where the ``"test"`` rule freezes the metric).
    y : array-like of shape (..., dim)
        Candidate points; the leading axes of ``x`` and ``y`` broadcast.
        Per-point work is done once per distinct point, so a query against its
        shortlist is best asked as ``distance(field, x[:, None, :], shortlist)``
        with ``shortlist`` of shape ``(n, S, dim)``.
    rule : str, default="test"
        A registered rule (:data:`RULES`): ``"test"``, ``"train"``, ``"line"``,
        ``"line_length"``, ``"geodesic"``; see the module docstring.
    squared : bool, default=False
        Return the squared length; for ``"line"`` the segment energy
        :math:`E = d^T [\\int_0^1 M]\\, d` itself.
    log_solver : object, default=None
        Solver of the geodesic rule: any object with ``dist(point_a, point_b)``,
        or with ``log(point, base_point)`` (then the length is the norm of the
        Log). ``None``: that of the space, else an
        :class:`~riemlocal.numerics.EnergyLogSolver` of ``field``.
    n_jobs : int, default=None
        Parallel workers (joblib; ``None`` means 1 unless in a
        :func:`joblib.parallel_config` context). A Log solver given (or the
        space's) that has an ``n_jobs`` option runs with this one for the call;
        ``None`` leaves it its own.
    verbose : bool, default=False
        Show a progress bar.

    Returns
    -------
    distances : ndarray of shape (...)
        The broadcast leading shape of ``x`` and ``y`` (a 0-d value for two points).
    """
    field, log_solver = _check_arguments(field, rule, squared, log_solver, n_jobs)
    x = check_points(x, field.dim, "x")
    y = check_points(y, field.dim, "y")
    try:
        batch = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    except ValueError as exc:
        raise ValueError(
            f"the leading axes of x {x.shape[:-1]} and y {y.shape[:-1]} do not broadcast"
        ) from exc
    x_index = np.broadcast_to(np.arange(x[..., 0].size).reshape(x.shape[:-1]), batch).ravel()
    y_index = np.broadcast_to(np.arange(y[..., 0].size).reshape(y.shape[:-1]), batch).ravel()
    options = {"n_jobs": n_jobs, "verbose": verbose, "log_solver": log_solver}
    values = _evaluate(field, x.reshape(-1, field.dim), y.reshape(-1, field.dim), x_index, y_index, rule, squared, options)
    if not np.all(np.isfinite(values)):
        raise ValueError("x and y are too far apart for this field: their distances overflow float64")
    return values.reshape(batch)[()]


def pairwise_distances(field, X, Y=None, rule="test", squared=False, *, log_solver=None, n_jobs=None, verbose=False):
    """Distances between every row of ``X`` (queries) and every row of ``Y`` (candidates).

    Parameters
    ----------
    field : MetricField or LearnedMetricManifold
    X : array-like of shape (n_samples_X, dim)
    Y : array-like of shape (n_samples_Y, dim), default=None
        ``None`` means ``X``.
    rule, squared, log_solver, n_jobs, verbose
        As in :func:`distance`; the work is split in chunks of rows of ``X``.

    Returns
    -------
    distances : ndarray of shape (n_samples_X, n_samples_Y)
    """
    field, log_solver = _check_arguments(field, rule, squared, log_solver, n_jobs)
    X = _check_matrix(X, field.dim, "X")
    Y = X if Y is None else _check_matrix(Y, field.dim, "Y")
    x_index = np.repeat(np.arange(len(X)), len(Y))
    y_index = np.tile(np.arange(len(Y)), len(X))
    options = {"n_jobs": n_jobs, "verbose": verbose, "log_solver": log_solver}
    values = _evaluate(field, X, Y, x_index, y_index, rule, squared, options)
    if not np.all(np.isfinite(values)):
        raise ValueError("X and Y are too far apart for this field: their distances overflow float64")
    return values.reshape(len(X), len(Y))


def _check_arguments(field, rule, squared, log_solver, n_jobs):
    """The field (of a space given as ``field``) and the Log solver, after checking every argument before any work."""
    space_solver = getattr(getattr(field, "metric", None), "log_solver", None)
    if space_solver is not None and isinstance(getattr(field, "field", None), MetricField):  # a LearnedMetricManifold
        if log_solver is not None:
            raise TypeError("give the Log solver once: either a space as field or log_solver, not both")
        field, log_solver = field.field, space_solver
    if not isinstance(field, MetricField):
        raise TypeError(f"field must be a MetricField or a LearnedMetricManifold, got {type(field).__name__}")
    if log_solver is not None and not (hasattr(log_solver, "dist") or hasattr(log_solver, "log")):
        raise TypeError(f"log_solver must have a method dist(point_a, point_b) or log(point, base_point), got {log_solver!r}")
    name = type(field).__name__
    check_rule(rule, field.structure, name)
    check_bool(squared, "squared")
    check_n_jobs(n_jobs)
    if (
        rule in ("line", "line_length")
        and field.structure == "piecewise_constant"
        and type(field).segment_cells is MetricField.segment_cells
    ):
        raise ValueError(
            f"rule={rule!r} integrates a piecewise-constant field over the cells a segment crosses, but {name} "
            "declares structure='piecewise_constant' without implementing segment_cells(start_point, end_point)"
        )
    return field, log_solver


def _check_matrix(points, dim, name):
    points = check_points(points, dim, name, min_ndim=2)
    if points.ndim != 2:
        raise ValueError(f"{name} must have shape (n_samples, dim={dim}), got {points.shape}")
    return points


def _evaluate(field, X, Y, x_index, y_index, rule, squared, options):
    """Distances for the pairs ``(X[x_index[p]], Y[y_index[p]])`` by the registered ``rule``, shape ``(n_pairs,)``."""
    X, x_distinct = unique_rows(X)
    Y, y_distinct = unique_rows(Y)
    x_index, y_index = x_distinct[x_index], y_distinct[y_index]
    values = np.zeros(len(x_index))
    moving = np.flatnonzero(np.any(X[x_index] != Y[y_index], axis=1))  # identical points are at distance 0
    if moving.size:
        values[moving] = RULES[rule].function(field, X, Y, x_index[moving], y_index[moving], **options)
    return values if squared else np.sqrt(values)


# --------------------------------------------------------------------------- the rules


@register_rule("test", STRUCTURES, "sqrt(d^T M(x) d), metric frozen at the first point")
def _test_rule(field, X, Y, x_index, y_index, *, n_jobs, verbose, **_):
    return _per_query(_frozen_task, field, X, Y, x_index, y_index, n_jobs, verbose, "test distances")[0]


@register_rule("train", STRUCTURES, "sqrt(d^T M(y) d), metric frozen at the second point")
def _train_rule(field, X, Y, x_index, y_index, **options):
    """The test rule with the roles swapped: d -> -d, the same quadratic form."""
    return _test_rule(field, Y, X, y_index, x_index, **options)


@register_rule("line", STRUCTURES, "sqrt of the straight segment's energy, sqrt(d^T [int_0^1 M(x + t d) dt] d)")
def _line_rule(field, X, Y, x_index, y_index, *, n_jobs, verbose, **_):
    return _segment_integrals(field, X, Y, x_index, y_index, n_jobs, verbose, "line distances")[0]


@register_rule("line_length", STRUCTURES, "length of the straight segment, int_0^1 sqrt(d^T M(x + t d) d) dt")
def _line_length_rule(field, X, Y, x_index, y_index, *, n_jobs, verbose, **_):
    return _segment_integrals(field, X, Y, x_index, y_index, n_jobs, verbose, "line_length distances")[1] ** 2


@register_rule("geodesic", ("constant", "smooth"), "length of the shortest curve (smooth fields only)")
def _geodesic_rule(field, X, Y, x_index, y_index, *, n_jobs, verbose, log_solver):
    if field.structure == "constant":
        return _test_rule(field, X, Y, x_index, y_index, n_jobs=n_jobs, verbose=verbose)
    if log_solver is None:
        log_solver = EnergyLogSolver(
            field, n_segments=_GEODESIC_SEGMENTS, chunk_size=_GEODESIC_PAIRS, n_jobs=n_jobs, verbose=verbose
        )
    start, end = X[x_index], Y[y_index]
    with _workers(log_solver, n_jobs):
        if hasattr(log_solver, "dist"):
            return log_solver.dist(start, end) ** 2
        velocity = log_solver.log(end, start)
    return np.einsum("pi,pi->p", field.metric_vector_product(velocity, start), velocity)


@contextmanager
def _workers(log_solver, n_jobs):
    """A given solver with an ``n_jobs`` option runs with the call's ``n_jobs`` (when not ``None``); its own is restored after."""
    if n_jobs is None or not hasattr(log_solver, "n_jobs"):
        yield
        return
    own, log_solver.n_jobs = log_solver.n_jobs, n_jobs
    try:
        yield
    finally:
        log_solver.n_jobs = own


# --------------------------------------------------------------------------- tasks


def _per_query(task, field, X, Y, x_index, y_index, n_jobs, verbose, description, size=MAX_PAIRS):
    """``task`` on chunks of at most ``size`` pairs sorted by query; its outputs in the order of the pairs."""
    order = np.argsort(x_index, kind="stable")
    x_index, y_index = x_index[order], y_index[order]
    parts = parallel_map(
        task,
        [(field, X, Y, x_index[lo : lo + size], y_index[lo : lo + size]) for lo in range(0, len(x_index), size)],
        n_jobs,
        verbose,
        description,
    )
    outputs = []
    for output in zip(*parts):
        values = np.empty(len(order))
        values[order] = np.concatenate(output)
        outputs.append(values)
    return outputs


def _segment_integrals(field, X, Y, x_index, y_index, n_jobs, verbose, description):
    """Energy and length of the straight segments, by the field's structure: exact, sums over cells, or quadrature."""
    if field.structure == "constant":
        return _per_query(_frozen_task, field, X, Y, x_index, y_index, n_jobs, verbose, description)
    if field.structure == "piecewise_constant":
        n_tasks = max(effective_n_jobs(n_jobs), -(-len(x_index) // _CELL_PAIRS))
        size = -(-len(x_index) // n_tasks)
        return _per_query(_cells_task, field, X, Y, x_index, y_index, n_jobs, verbose, description, size)
    return _per_query(_quadrature_task, field, X, Y, x_index, y_index, n_jobs, verbose, description)


def _point_chunks(n_points, per_point):
    step = max(1, TASK_ELEMENTS // per_point)
    return [slice(lo, lo + step) for lo in range(0, n_points, step)]


def _frozen_task(field, X, Y, x_index, y_index):
    r"""Squared lengths :math:`d^T M(x) d` (every rule on a constant field)."""
    d = Y[y_index] - X[x_index]
    if field.structure == "constant":
        energy = np.einsum("pi,pi->p", d @ field.metric_matrix(X[0]), d)
        return energy, np.sqrt(energy)
    used, local = np.unique(x_index, return_inverse=True)
    energy = np.empty(len(d))
    for chunk in _point_chunks(len(used), field.dim**2):
        mask = (local >= chunk.start) & (local < chunk.stop)
        metrics = field.metric_matrix(X[used[chunk]])
        energy[mask] = quadratic_forms(metrics, local[mask] - chunk.start, d[mask])
    return energy, np.sqrt(energy)


# --------------------------------------------------------------------------- exact sums over cells


def _cells_task(field, X, Y, x_index, y_index):
    r"""Energy and length of straight segments through a piecewise-constant field: finite sums over its cells."""
    start, end = X[x_index], Y[y_index]
    pair, span, cell, metrics = field.segment_cells(start, end)
    n = len(start)
    covered = np.bincount(pair, weights=span, minlength=n)
    if len(covered) != n or not np.allclose(covered, 1.0, rtol=0.0, atol=1e-9) or np.any(span < 0):
        raise ValueError(
            f"{type(field).__name__}.segment_cells must return, for each of the {n} segments, pieces of "
            "non-negative span summing to 1"
        )
    d = (end - start)[pair]
    speed2 = quadratic_forms(np.asarray(metrics, dtype=float), cell, d)
    return (
        np.bincount(pair, weights=span * speed2, minlength=n),
        np.bincount(pair, weights=span * np.sqrt(np.maximum(speed2, 0.0)), minlength=n),
    )


# --------------------------------------------------------------------------- quadrature


def _quadrature_task(field, X, Y, x_index, y_index):
    r"""Energy and length of straight segments by adaptive quadrature over :math:`\lambda`.

    The pairs of one ``quad_vec`` call share its subdivision; each integrand is
    divided by :math:`d^T (M(x) + M(y)) d` so that the max-norm error criterion is relative per pair.
    Far from the origin (:math:`|x| > 10^3 |d|`) a node :math:`x + \lambda d` is
    rounded by much more than :math:`\epsilon |d|`; the integrand is then
    corrected to first order, :math:`d^T M(p) d \approx d^T M(\tilde p) d +
    \nabla_x (d^T M d)|_{\tilde p} \cdot (p - \tilde p)`, with the exact
    rounding error :math:`p - \tilde p` of the sum (TwoSum), so the rules stay
    translation invariant.
    """
    energy, length = np.empty(len(x_index)), np.empty(len(x_index))
    for lo in range(0, len(x_index), _QUADRATURE_PAIRS):
        part = slice(lo, lo + _QUADRATURE_PAIRS)
        start, d = X[x_index[part]], Y[y_index[part]] - X[x_index[part]]
        far = np.max(np.abs(start)) > 1e3 * np.min(np.max(np.abs(d), axis=1))

        def speed2(lam):
            step = lam * d
            node = start + step
            if not far:
                return np.einsum("pi,pi->p", field.metric_vector_product(d, node), d)
            back = node - start
            rounding = (start - (node - back)) + (step - back)  # start + step = node + rounding, exactly
            product, gradient = field.energy_terms(d, node)
            return np.einsum("pi,pi->p", product, d) + np.einsum("pi,pi->p", gradient, rounding)

        scale = speed2(0.0) + speed2(1.0)
        scale[scale == 0] = 1.0  # d = 0: the integrand vanishes

        def integrand(lam):
            ratio = np.maximum(speed2(lam), 0.0) / scale
            return np.concatenate([ratio, np.sqrt(ratio)])

        integral, error, info = quad_vec(
            integrand, 0.0, 1.0, epsabs=0.0, epsrel=_QUADRATURE_RTOL, norm="max", full_output=True
        )
        if info.status != 0:
            warnings.warn(
                f"line quadrature did not reach rtol={_QUADRATURE_RTOL:g}: estimated error {error:.3g} "
                f"({info.message})",
                ConvergenceWarning,
                stacklevel=4,
            )
        n = len(d)
        energy[part], length[part] = integral[:n] * scale, integral[n:] * np.sqrt(scale)
    return energy, length
