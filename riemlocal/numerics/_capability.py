r"""The capability object: what a metric field evaluates in compiled code, declared by the field.

A field that evaluates itself in compiled code says so with its attribute
``capability``, a :class:`CompiledCapability`; ``None`` (the default of
:class:`~riemlocal.fields.MetricField`) means numpy methods only. The capability's
``data`` is a namedtuple of the field's arrays. Its type selects the compiled
evaluators that the field's module registered with :func:`register_evaluators`;
the compiled solvers call them through the generic functions below, which numba
resolves by that type while it compiles. A new field plugs in by declaring a
capability and registering its evaluators; no solver changes.

=============================================================  =========================================================================
evaluator                                                      what it computes (``False``: it failed, e.g. an overflow or a metric that is not SPD)
=============================================================  =========================================================================
``point_work(data)``                                           work arrays of the point evaluators
``point_metric(data, x, metric, work)``                        :math:`M(x)` into ``metric`` ``(dim, dim)``
``acceleration(data, x, v, out, work)``                        the geodesic acceleration :math:`c'' = -\Gamma(v, v)` at ``x`` into ``out``
``acceleration_derivative(data, x, v, dx, dv, out, work)``     its derivative along :math:`(\delta x, \delta v)` (Jacobi fields), called after ``acceleration`` at ``(x, v)`` with the same ``work``
``curve_work(data, n_segments)``                               work arrays of the curve evaluators, for up to ``n_segments`` segments
``curve_terms(data, curve, work, terms)``                      :math:`M(m_s) d_s` and :math:`\nabla_x (d^T M(x) d)` at the midpoints, ``(2, dim, N)``
``curve_hessian(data, n_segments, work, blocks)``              the blocks :math:`C, K, A` of the second derivatives of the last ``curve_terms``
``curve_trapezoid(data, curve, work)``                         :math:`N \sum_s \tfrac12 (d_s^T M(c_s) d_s + d_s^T M(c_{s+1}) d_s)` (NaN: failed)
``curve_quadratics(data, points, vectors, n, work, out)``      :math:`v_s^T M(x_s) v_s` for the first ``n`` columns of ``points`` and ``vectors`` ``(dim, >= n)`` into ``out``
``relative_scratch(data)``, ``relative_to(data, origin, s)``   the field in coordinates relative to ``origin`` (arrays in the scratch ``s``)
``hidden_weight(data, x0, x1, work)``                          a bound on the weight a part of the field unseen at both ends of the chord takes on it (0: none; Exp's steps)
=============================================================  =========================================================================

The curve evaluators take ``data`` relative to the curve's first node and use only
differences of the curve's nodes, so nothing cancels at large offsets. The formulas
of :meth:`~riemlocal.fields.MetricField.segment_energy_terms` define ``terms`` and
``blocks``; a field's numpy methods and its evaluators agree to 1e-12 (its tests).
"""

import math
from collections import namedtuple

import numpy as np
from numba import types
from numba.extending import overload

from ..utils.compiled import cached_njit, refcount_free

__all__ = [
    "COMPILED_MAX_WORK",
    "HIDDEN_WEIGHT",
    "CURVE_MAX_DIM",
    "QUADRATURE_MAX_DIM",
    "EVALUATORS",
    "CompiledCapability",
    "compiled_data",
    "register_evaluators",
    "point_work",
    "point_metric",
    "acceleration",
    "acceleration_derivative",
    "curve_work",
    "curve_terms",
    "curve_hessian",
    "curve_trapezoid",
    "curve_quadratics",
    "polyline_quadratics",
    "relative_scratch",
    "relative_to",
    "hidden_weight",
    "geodesic_rhs",
    "accelerations",
    "acceleration_derivatives",
    "segment_energy_terms",
]

#: Exp's steps: a part of the field whose weight stays below this at both ends of a step but may exceed it in between
#: makes the step unresolved (``hidden_weight``; :meth:`MetricField.hidden_weight`): its stages may all miss that part
HIDDEN_WEIGHT = 1e-3
#: compiled point evaluation for ``n_points * point_cost`` up to this; above, numpy's batched BLAS
#: products are faster (Exp of an R = 10 blend: compiled 4x faster for one geodesic at dim = 50,
#: numpy 1.8x faster at dim = 100; equal for 16 geodesics at dim = 20)
COMPILED_MAX_WORK = 50_000
#: ... except the curve evaluators up to this dimension, at any batch: their vectorized loops beat numpy there
#: (segment terms with Hessians of 4 x 8 to 64 x 32 segments of a blend: 1.0-4.9x the speed at dim = 2 and 5
#: for R = 3, 10, 100; at dim = 10 from 0.5x to 1.8x)
CURVE_MAX_DIM = 5
#: ... and curve lengths (:func:`polyline_quadratics`) up to this dimension: 40 straight curves of 64 segments, 8 points
#: each, against numpy: 1.2-3.4x faster for R = 10 and 150 distinct metrics at dim = 5 to 20, 4.4-7.7x for the
#: per-class fields of iris, wine and digits (150-1797 centers sharing 3-10 metrics)
QUADRATURE_MAX_DIM = 20

CompiledCapability = namedtuple("CompiledCapability", ["data", "point_cost", "max_work", "curve_max_dim"], defaults=(COMPILED_MAX_WORK, CURVE_MAX_DIM))
CompiledCapability.__doc__ = """What a field evaluates in compiled code (its attribute ``capability``).

``data``: a namedtuple of the field's arrays, whose type has evaluators (:func:`register_evaluators`);
``point_cost``: the work of one point evaluation (for a blend of R metrics, ``R * dim**2``);
compiled evaluation is used while ``n_points * point_cost <= max_work``, and for curves at any
batch up to ``curve_max_dim`` dimensions (:func:`compiled_data`).
"""


def compiled_data(field, n_points, curves=False):
    """``field.capability.data`` where compiled evaluation is the faster path for ``n_points`` points (segments for ``curves``), else ``None``."""
    capability = getattr(field, "capability", None)
    if capability is None:
        return None
    if n_points * capability.point_cost > capability.max_work and not (curves and field.dim <= capability.curve_max_dim):
        return None
    return capability.data


def _evaluator(name, parameters, doc):
    """A generic evaluator ``name(parameters)``: the name compiled code calls, resolved by the type of ``data``."""

    def stub(*args):
        raise TypeError(f"{name} is called from compiled code only, with a capability's data")

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    stub.parameters = parameters
    return stub


point_work = _evaluator("point_work", "data", "Work arrays of the point evaluators of ``data``.")
point_metric = _evaluator("point_metric", "data, x, metric, work", ":math:`M(x)` into ``metric``; False on failure.")
acceleration = _evaluator("acceleration", "data, x, v, out, work", "Geodesic acceleration at ``x`` with velocity ``v`` into ``out``; False on failure.")
acceleration_derivative = _evaluator(
    "acceleration_derivative",
    "data, x, v, dx, dv, out, work",
    "Derivative of the acceleration along ``(dx, dv)`` into ``out``, after :func:`acceleration` at ``(x, v)`` on ``work``; False on failure.",
)
curve_work = _evaluator("curve_work", "data, n_segments", "Work arrays of the curve evaluators for up to ``n_segments`` segments.")
curve_terms = _evaluator("curve_terms", "data, curve, work, terms", "Segment terms of a curve into ``terms`` ``(2, dim, N)``; False on failure.")
curve_hessian = _evaluator("curve_hessian", "data, n_segments, work, blocks", "Hessian blocks of the last :func:`curve_terms` into ``blocks`` ``(3, dim, dim, N)``.")
curve_trapezoid = _evaluator("curve_trapezoid", "data, curve, work", "Trapezoid energy of a curve; NaN on failure.")
curve_quadratics = _evaluator(
    "curve_quadratics",
    "data, points, vectors, n, work, out",
    ":math:`v^T M(x) v` at the first ``n`` columns of ``points`` and ``vectors`` ``(dim, >= n)``, ``n`` at most the curve work's nodes, into ``out``; False on failure.",
)
relative_scratch = _evaluator("relative_scratch", "data", "Scratch arrays of :func:`relative_to`.")
relative_to = _evaluator("relative_to", "data, origin, scratch", "``data`` in coordinates relative to ``origin``, in the arrays of ``scratch``.")
hidden_weight = _evaluator(
    "hidden_weight",
    "data, x0, x1, work",
    "A bound on the weight that a part of the field unseen at both ends of the chord from ``x0`` to ``x1`` takes on it (0: none), with the point evaluators' ``work``.",
)

EVALUATORS = {
    stub.__name__: stub
    for stub in (point_work, point_metric, acceleration, acceleration_derivative, curve_work, curve_terms, curve_hessian, curve_trapezoid, curve_quadratics, relative_scratch, relative_to, hidden_weight)
}


def _forward(stub, data_type, implementation):
    """numba's typing of ``stub`` for ``data_type``: a call inlined into the caller, so the implementation runs
    with its own compile options (the caller's reference counting, or none, is not imposed on a wrapper)."""
    source = (
        f"def typer({stub.parameters}):\n"
        f"    if isinstance(data, BaseNamedTuple) and data.instance_class is data_type:\n"
        f"        return lambda {stub.parameters}: implementation({stub.parameters})\n"
    )
    namespace = {"BaseNamedTuple": types.BaseNamedTuple, "data_type": data_type, "implementation": implementation}
    exec(source, namespace)  # the typer must have the stub's parameter names
    overload(stub, inline="always")(namespace["typer"])


def register_evaluators(data_type, **evaluators):
    """Register compiled evaluators (numba functions, one per name of :data:`EVALUATORS`) for capability data of ``data_type``."""
    if set(evaluators) != set(EVALUATORS):
        raise ValueError(f"evaluators must be exactly {sorted(EVALUATORS)}, got {sorted(evaluators)}")
    for name, stub in EVALUATORS.items():
        _forward(stub, data_type, evaluators[name])


@refcount_free
def geodesic_rhs(params, state, out):
    r"""Right-hand side :math:`(x, v, r) \mapsto (v, c'', r')` of a geodesic and the riders after it in ``state``; False on failure.

    ``params = (data, point_work(data), dim, equation, scratch)``: ``equation`` 0 for riders
    :math:`[J, J']` of the variational equation, 1 for transported vectors (the codes of
    :data:`~riemlocal.numerics._riders.EQUATIONS`, the formulas of :func:`~riemlocal.numerics._riders.rider_rhs`);
    ``scratch`` ``(3, dim)``.
    """
    data, work, dim, equation, scratch = params
    x, v = state[:dim], state[dim : 2 * dim]
    for i in range(dim):
        out[i] = v[i]
    if not acceleration(data, x, v, out[dim : 2 * dim], work):
        return False
    width = 2 * dim if equation == 0 else dim
    for start in range(2 * dim, len(state), width):
        rider, derivative = state[start : start + width], out[start : start + width]
        if equation == 0:
            for i in range(dim):
                derivative[i] = rider[dim + i]
            if not acceleration_derivative(data, x, v, rider[:dim], rider[dim:], derivative[dim:], work):
                return False
        elif not _transport(data, x, v, rider, derivative, work, scratch):
            return False
    return True


@refcount_free
def _transport(data, x, v, vector, out, work, scratch):
    r""":math:`-\Gamma(v, V)` into ``out`` by polarization of the acceleration (:func:`~riemlocal.numerics._riders.christoffel_polarization`)."""
    norm_v = norm_r = 0.0
    for i in range(len(v)):
        norm_v += v[i] * v[i]
        norm_r += vector[i] * vector[i]
    if norm_v == 0.0 or norm_r == 0.0:
        for i in range(len(v)):
            out[i] = 0.0
        return True
    alpha = math.sqrt(norm_v) / math.sqrt(norm_r)
    for i in range(len(v)):
        scratch[0, i] = v[i] + alpha * vector[i]
        scratch[1, i] = v[i] - alpha * vector[i]
    if not acceleration(data, x, scratch[0], out, work) or not acceleration(data, x, scratch[1], scratch[2], work):
        return False
    for i in range(len(v)):
        out[i] = (out[i] - scratch[2, i]) / (4.0 * alpha)
    return True


#: columns of one :func:`curve_quadratics` call in :func:`polyline_quadratics`
QUADRATURE_BLOCK = 32


@cached_njit
def polyline_quadratics(data, curves, offsets):
    r""":math:`d_s^T M(c_s + t d_s)\, d_s` for the segments :math:`d_s = c_{s+1} - c_s` of curves ``(n, N + 1, dim)``
    at the fractions ``offsets`` ``(k,)`` of each segment, ``(n, N, k)``; also whether every point succeeded.

    Consecutive curves that start at the same node (the legs from a point to every center, the edges of a graph
    from one node) form a run: the field relative to that node (:func:`relative_to`) once per run, the run's points in
    blocks of ``QUADRATURE_BLOCK`` columns of :func:`curve_quadratics`, whose loops over the points vectorize.
    """
    n_curves, n_nodes, dim = curves.shape
    n_offsets = len(offsets)
    per_curve = (n_nodes - 1) * n_offsets
    out = np.empty(n_curves * per_curve)
    work, scratch = curve_work(data, QUADRATURE_BLOCK - 1), relative_scratch(data)
    points, vectors, block = np.empty((dim, QUADRATURE_BLOCK)), np.empty((dim, QUADRATURE_BLOCK)), np.empty(QUADRATURE_BLOCK)
    first = 0
    while first < n_curves:
        last = first + 1
        while last < n_curves and np.array_equal(curves[last, 0], curves[first, 0]):
            last += 1
        relative = relative_to(data, curves[first, 0], scratch)
        for lo in range(first * per_curve, last * per_curve, QUADRATURE_BLOCK):
            n = min(QUADRATURE_BLOCK, last * per_curve - lo)
            for column in range(n):
                c, rest = (lo + column) // per_curve, (lo + column) % per_curve
                s, k = rest // n_offsets, rest % n_offsets
                for i in range(dim):
                    step = curves[c, s + 1, i] - curves[c, s, i]
                    points[i, column] = (curves[c, s, i] - curves[first, 0, i]) + offsets[k] * step
                    vectors[i, column] = step
            if not curve_quadratics(relative, points, vectors, n, work, block):
                return out.reshape((n_curves, n_nodes - 1, n_offsets)), False
            for column in range(n):
                out[lo + column] = block[column]
        first = last
    return out.reshape((n_curves, n_nodes - 1, n_offsets)), True


@cached_njit
def accelerations(data, x, v):
    """:func:`acceleration` for rows ``(n, dim)``; also whether every row succeeded."""
    out, work = np.empty_like(x), point_work(data)
    for n in range(len(x)):
        if not acceleration(data, x[n], v[n], out[n], work):
            return out, False
    return out, True


@cached_njit
def acceleration_derivatives(data, x, v, dx, dv):
    """:func:`acceleration_derivative` for rows ``(n, dim)``; also whether every row succeeded."""
    out, work = np.empty_like(x), point_work(data)
    for n in range(len(x)):
        if not acceleration(data, x[n], v[n], out[n], work) or not acceleration_derivative(data, x[n], v[n], dx[n], dv[n], out[n], work):
            return out, False
    return out, True


@cached_njit
def segment_energy_terms(data, nodes, hessian):
    r""":func:`curve_terms` (and with ``hessian`` :func:`curve_hessian`) of every segment of curves ``(n, N + 1, dim)``.

    The terms of :meth:`~riemlocal.fields.MetricField.segment_energy_terms`, each curve relative to its
    first node: :math:`M d_i`, :math:`\nabla_x f` ``(n N, dim)`` and the three Hessian blocks ``(n N, dim, dim)``
    (empty without ``hessian``); also whether every segment succeeded.
    """
    n_curves, n_nodes, dim = nodes.shape
    n_segments = n_nodes - 1
    n_rows, n_blocks = n_curves * n_segments, n_curves * n_segments if hessian else 0
    out = (np.empty((n_rows, dim)), np.empty((n_rows, dim)), np.empty((n_blocks, dim, dim)), np.empty((n_blocks, dim, dim)), np.empty((n_blocks, dim, dim)))
    terms, blocks = np.empty((2, dim, n_segments)), np.empty((3, dim, dim, n_segments))
    work, scratch = curve_work(data, n_segments), relative_scratch(data)
    return out, _segment_terms_into(data, nodes, hessian, out, work, scratch, terms, blocks)


@cached_njit
def _segment_terms_into(data, nodes, hessian, out, work, scratch, terms, blocks):
    """The loop of :func:`segment_energy_terms` into its arrays ``out``; False on failure (counts references: ``relative_to`` returns arrays)."""
    n_curves, n_nodes, dim = nodes.shape
    n_segments = n_nodes - 1
    metric_v, gradient, hessian_x, mixed, hessian_v = out
    for c in range(n_curves):
        relative = relative_to(data, nodes[c, 0], scratch)
        if not curve_terms(relative, nodes[c], work, terms):
            return False
        if hessian:
            curve_hessian(relative, n_segments, work, blocks)
        for s in range(n_segments):
            row = c * n_segments + s
            for i in range(dim):
                metric_v[row, i], gradient[row, i] = terms[0, i, s], terms[1, i, s]
                if hessian:
                    for j in range(dim):
                        hessian_x[row, i, j], mixed[row, i, j], hessian_v[row, i, j] = blocks[0, i, j, s], blocks[1, i, j, s], blocks[2, i, j, s]
    return True
