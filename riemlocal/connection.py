r"""The Levi-Civita connection of a smooth :class:`~riemlocal.fields.MetricField`, in full.

Everything is a function of the field and is batched over leading axes
(points of shape ``(..., dim)``); index orders and sign conventions are
geomstats' (``Connection`` / ``RiemannianMetric``).

* **Christoffel symbols** :math:`\Gamma^k_{ij}` and their derivatives
  :math:`\partial_l \Gamma^k_{ij}` (from :meth:`~riemlocal.fields.MetricField.metric_second_derivative`).
* **Curvature**: :math:`R^l_{ijk} = dx^l(R(\partial_j, \partial_k)\partial_i)`,
  :math:`R(X, Y)Z = \nabla_X \nabla_Y Z - \nabla_Y \nabla_X Z - \nabla_{[X, Y]} Z`,
  Ricci, scalar and sectional curvature.
* **Parallel transport** along a geodesic: :math:`V' = -\Gamma(c', V)`,
  integrated together with :math:`c'' = -\Gamma(c', c')` by the Exp solver
  (:meth:`~riemlocal.numerics.ODEExpSolver.integrate_with`: a space's
  ``exp_solver``, else ``ODEExpSolver(field, rtol=INTEGRATION_RTOL)``).
* **Jacobi fields** and the **differential of Exp**: the variational equation
  :math:`\delta x' = \delta v`, :math:`\delta v' = -(\partial_{\delta x}\Gamma)(v, v) - 2\Gamma(v, \delta v)`
  along the geodesic, from the field's fused
  :meth:`~riemlocal.fields.MetricField.acceleration_derivative` (no :math:`D^4`
  array for the local fields).

References: do Carmo, *Riemannian Geometry*, ch. 4--5; Fletcher, *Geodesic
regression and the theory of least squares on Riemannian manifolds*, IJCV 2013.
"""

import math

import numpy as np

from .fields import MetricField
from .numerics import INTEGRATION_RTOL, ODEExpSolver, christoffel_polarization
from .utils.validation import check_broadcast, check_points

__all__ = [
    "christoffels",
    "christoffel_derivative",
    "riemann_tensor",
    "curvature",
    "ricci_tensor",
    "scalar_curvature",
    "sectional_curvature",
    "christoffel_product",
    "parallel_transport",
    "jacobi_field",
    "exp_differential",
]

_CHUNK_ENTRIES = 2**20  # D^4 arrays of the curvature are formed for this many entries at a time


def _field(field):
    if not isinstance(field, MetricField):
        raise TypeError(f"field must be a riemlocal MetricField, got {type(field).__name__}")
    if not field.is_smooth:
        raise ValueError(f"field must be smooth to have a Levi-Civita connection; {type(field).__name__} is not")
    return field


def _per_point(function, field, base_point):
    """``function(x)`` over flat chunks of points ``(n, dim)``, restoring the batch shape."""
    x = check_points(base_point, _field(field).dim, "base_point")
    flat = x.reshape(-1, field.dim)
    size = max(1, _CHUNK_ENTRIES // field.dim**4)
    result = np.concatenate([function(flat[start : start + size]) for start in range(0, max(len(flat), 1), size)])
    return result.reshape(x.shape[:-1] + result.shape[1:])


def _christoffels(field, x):
    derivative = field.metric_derivative(x)  # [..., a, b, c] = d_c M_ab
    lowered = np.einsum("...lji->...lij", derivative) + derivative - np.einsum("...ijl->...lij", derivative)
    return 0.5 * np.einsum("...kl,...lij->...kij", np.linalg.inv(field.metric_matrix(x)), lowered)


def christoffels(field, base_point):
    r"""Christoffel symbols :math:`\Gamma^k_{ij}` at ``[..., k, i, j]``.

    .. math::
        \Gamma^k_{ij} = \tfrac12 M^{kl} (\partial_i M_{lj} + \partial_j M_{li} - \partial_l M_{ij}).
    """
    return _per_point(lambda x: _christoffels(field, x), field, base_point)


def _christoffel_derivative(field, x):
    metric, derivative, second = field.metric_matrix(x), field.metric_derivative(x), field.metric_second_derivative(x)
    gamma = _christoffels(field, x)
    lowered = np.einsum("...mjil->...mijl", second) + second - np.einsum("...ijml->...mijl", second)
    rhs = 0.5 * lowered - np.einsum("...abl,...bij->...aijl", derivative, gamma)
    return np.einsum("...ka,...aijl->...kijl", np.linalg.inv(metric), rhs)


def christoffel_derivative(field, base_point):
    r"""Derivatives :math:`\partial_l \Gamma^k_{ij}` at ``[..., k, i, j, l]``.

    .. math::
        \partial_l \Gamma^k_{ij} = M^{ka}\big(\tfrac12 (\partial_l \partial_i M_{aj}
        + \partial_l \partial_j M_{ai} - \partial_l \partial_a M_{ij}) - \partial_l M_{ab}\, \Gamma^b_{ij}\big).
    """
    return _per_point(lambda x: _christoffel_derivative(field, x), field, base_point)


def _riemann(field, x):
    gamma, dgamma = _christoffels(field, x), _christoffel_derivative(field, x)
    return (
        np.einsum("...lkij->...ijkl", dgamma)
        - np.einsum("...ljik->...ijkl", dgamma)
        + np.einsum("...ljm,...mki->...ijkl", gamma, gamma)
        - np.einsum("...lkm,...mji->...ijkl", gamma, gamma)
    )


def riemann_tensor(field, base_point):
    r"""Riemann tensor :math:`R^l_{ijk} = dx^l(R(\partial_j, \partial_k)\partial_i)` at ``[..., i, j, k, l]`` (geomstats' order).

    .. math::
        R^l_{ijk} = \partial_j \Gamma^l_{ki} - \partial_k \Gamma^l_{ji}
                    + \Gamma^l_{jm} \Gamma^m_{ki} - \Gamma^l_{km} \Gamma^m_{ji}.
    """
    return _per_point(lambda x: _riemann(field, x), field, base_point)


def curvature(field, tangent_vec_a, tangent_vec_b, tangent_vec_c, base_point):
    r""":math:`R(a, b)c`, i.e. ``[..., l] =`` :math:`R^l_{ijk} a^j b^k c^i`."""
    vectors = [check_points(v, field.dim, name) for v, name in zip((tangent_vec_a, tangent_vec_b, tangent_vec_c), "abc")]
    return np.einsum("...ijkl,...j,...k,...i->...l", riemann_tensor(field, base_point), *vectors)


def ricci_tensor(field, base_point):
    r"""Ricci tensor :math:`\mathrm{Ric}_{ik} = R^j_{ijk}`, shape ``(..., dim, dim)``."""
    return np.einsum("...ijkj->...ik", riemann_tensor(field, base_point))


def scalar_curvature(field, base_point):
    r"""Scalar curvature :math:`S = M^{ik} \mathrm{Ric}_{ik}`, shape ``(...)`` (6 on the unit 3-sphere)."""

    def scalar(x):
        return np.einsum("...ik,...ik->...", np.linalg.inv(field.metric_matrix(x)), np.einsum("...ijkj->...ik", _riemann(field, x)))

    return _per_point(scalar, field, base_point)


def sectional_curvature(field, tangent_vec_a, tangent_vec_b, base_point):
    r"""Sectional curvature :math:`K(a, b) = \langle R(a, b)b, a\rangle / (|a|^2 |b|^2 - \langle a, b\rangle^2)`, shape ``(...)``."""
    a, b = check_points(tangent_vec_a, field.dim, "tangent_vec_a"), check_points(tangent_vec_b, field.dim, "tangent_vec_b")
    metric = field.metric_matrix(check_points(base_point, field.dim, "base_point"))

    def inner(u, w):
        return np.einsum("...i,...ij,...j->...", u, metric, w)

    area = inner(a, a) * inner(b, b) - inner(a, b) ** 2
    return inner(curvature(field, a, b, b, base_point), a) / area


def christoffel_product(field, tangent_vec_a, tangent_vec_b, base_point):
    r""":math:`\Gamma_x(a, b)^k = \Gamma^k_{ij} a^i b^j`, shape ``(..., dim)``, by polarization of the field's fused acceleration.

    .. math::
        \Gamma(a, b) = \tfrac{1}{4\alpha}\big(\Gamma(a + \alpha b, a + \alpha b) - \Gamma(a - \alpha b, a - \alpha b)\big),
        \quad \Gamma(w, w) = -\texttt{geodesic\_acceleration}(w),

    with :math:`\alpha = |a| / |b|` so that neither term cancels the other to round-off
    (:func:`~riemlocal.numerics._riders.christoffel_polarization`, also the right-hand side of parallel transport).
    """
    a, b = check_points(tangent_vec_a, field.dim, "tangent_vec_a"), check_points(tangent_vec_b, field.dim, "tangent_vec_b")
    x = check_points(base_point, field.dim, "base_point")
    return christoffel_polarization(field.geodesic_acceleration, a, b, x)


def _times(t):
    times = np.atleast_1d(np.asarray(t, dtype=float))
    if times.ndim != 1 or not np.all(np.isfinite(times)) or np.any(times < 0):
        raise ValueError(f"t must be a finite non-negative scalar or 1-D array, got {t!r}")
    return times


def _exp_solver(field, exp_solver):
    """``exp_solver``, checked, else the default ``ODEExpSolver(field, rtol=INTEGRATION_RTOL)``."""
    if exp_solver is None:
        return ODEExpSolver(_field(field), rtol=INTEGRATION_RTOL)
    if not callable(getattr(exp_solver, "integrate_with", None)):
        raise TypeError(f"exp_solver must have an integrate_with method (an ODEExpSolver), got {type(exp_solver).__name__}")
    return exp_solver


def _along_geodesic(exp_solver, base_point, tangent_vec, riders, equation, times):
    r"""Integrate the geodesic :math:`(x, v)` of ``(batch, dim)`` together with ``riders`` ``(batch, m, k)`` of ``equation``.

    Returns the riders at ``times``, shape ``(batch, len(times), m, k)``.
    """
    batch, m, k = riders.shape
    carried = exp_solver.integrate_with(equation, tangent_vec, base_point, riders.reshape(batch, m * k), times)
    return carried.reshape(batch, len(times), m, k)


def _on_geodesics(field, *named, riders=()):
    """Validate named arrays ``(value, name)``: the geodesic's flattened to ``(n, dim)``, those named in ``riders`` to ``(n, m, dim)``.

    The riders along the trailing batch axes on which the geodesic's arrays are constant ride
    one geodesic together (``m`` of them). Returns the batch shape and the arrays, in order.
    """
    dim = _field(field).dim
    shape, arrays = check_broadcast(dim, *named)
    carried = [name in riders for _, name in named]
    own = np.broadcast_shapes(*(array.shape for array, rider in zip(arrays, carried) if not rider))
    own = (1,) * (len(shape) - len(own)) + own
    split = len(shape) - 1
    while split and own[split - 1] == 1:
        split -= 1
    n, m = math.prod(shape[:split]), math.prod(shape[split:-1])
    path_shape = shape[:split] + own[split:]
    return shape[:-1], [
        np.broadcast_to(a, shape).reshape(n, m, dim) if rider else np.broadcast_to(a, path_shape).reshape(n, dim)
        for a, rider in zip(arrays, carried)
    ]


def parallel_transport(field, tangent_vec, base_point, direction, exp_solver=None):
    r"""Parallel transport of ``tangent_vec`` along :math:`t \mapsto \mathrm{Exp}_x(t\, \text{direction})`, :math:`t \in [0, 1]`.

    Integrates :math:`V' = -\Gamma(c', V)` together with the geodesic
    (by ``exp_solver``: see :func:`jacobi_field`); returns :math:`V(1)`,
    a tangent vector at :math:`\mathrm{Exp}_x(\text{direction})`, shape ``(..., dim)``.
    The transport is an isometry: :math:`\langle V(1), W(1)\rangle_{c(1)} = \langle V, W\rangle_x`.
    """
    batch, (v, x, d) = _on_geodesics(
        field, (tangent_vec, "tangent_vec"), (base_point, "base_point"), (direction, "direction"), riders=("tangent_vec",)
    )

    result = _along_geodesic(_exp_solver(field, exp_solver), x, d, v, "transport", np.ones(1))
    return result[:, 0].reshape(batch + (field.dim,))


def jacobi_field(field, tangent_vec, base_point, initial_value, initial_derivative, t=1.0, exp_solver=None):
    r"""Jacobi field :math:`J(t)` along the geodesic :math:`c(t) = \mathrm{Exp}_x(t v)`.

    Solves the variational (Jacobi) equation, the linearization of
    :math:`c'' = -\Gamma(c', c')`,

    .. math::
        J'' = -(\partial_J \Gamma)(c', c') - 2\, \Gamma(c', J'),
        \qquad J(0) = \text{initial\_value},\ J'(0) = \text{initial\_derivative},

    in coordinates (:math:`J'` is the coordinate derivative; with
    :math:`J(0) = 0` the field is :math:`J(t) = d\mathrm{Exp}_x(t v)[t\, J'(0)]`).

    Parameters
    ----------
    field : MetricField
    tangent_vec, base_point, initial_value, initial_derivative : array-like of shape (..., dim)
        Broadcast together; the fields along trailing batch axes on which ``tangent_vec``
        and ``base_point`` are constant (e.g. shapes ``(n, 1, dim)`` and ``(n, k, dim)``) share one geodesic.
    t : float or array-like of shape (n_times,), default=1.0
    exp_solver : ODEExpSolver, default=None
        Integrates the geodesic and the field together (:meth:`~riemlocal.numerics.ODEExpSolver.integrate_with`,
        at its tolerances); ``None``: ``ODEExpSolver(field, rtol=INTEGRATION_RTOL)``.

    Returns
    -------
    ndarray of shape (..., dim) for a scalar ``t``, else (..., n_times, dim)
    """
    times = _times(t)
    batch, (v, x, j0, dj0) = _on_geodesics(
        field,
        (tangent_vec, "tangent_vec"),
        (base_point, "base_point"),
        (initial_value, "initial_value"),
        (initial_derivative, "initial_derivative"),
        riders=("initial_value", "initial_derivative"),
    )
    riders = np.concatenate([j0, dj0], axis=-1)
    result = _along_geodesic(_exp_solver(field, exp_solver), x, v, riders, "jacobi", times)[..., : field.dim]
    result = np.moveaxis(result, 1, 2).reshape(batch + (len(times), field.dim))  # [geodesic, rider, time, :]
    return result[..., 0, :] if np.ndim(t) == 0 else result


def exp_differential(field, tangent_vec, base_point, exp_solver=None):
    r"""Jacobians of :math:`\mathrm{Exp}_x(v)` with respect to :math:`v` and to :math:`x`.

    Column :math:`b` of :math:`\partial \mathrm{Exp} / \partial v` is the Jacobi
    field at :math:`t = 1` with :math:`J(0) = 0`, :math:`J'(0) = e_b`; of
    :math:`\partial \mathrm{Exp} / \partial x` the one with :math:`J(0) = e_b`,
    :math:`J'(0) = 0` (all :math:`2D` fields integrated in one system by ``exp_solver``: see :func:`jacobi_field`).

    Returns
    -------
    d_tangent_vec, d_base_point : ndarray of shape (..., dim, dim)
        ``[..., a, b]`` = :math:`\partial\, \mathrm{Exp}_a / \partial v_b`, resp. :math:`\partial x_b`.
    """
    batch, (v, x) = _on_geodesics(field, (tangent_vec, "tangent_vec"), (base_point, "base_point"))
    dim = field.dim
    identity = np.eye(dim)
    starts = np.concatenate([np.hstack([np.zeros((dim, dim)), identity]), np.hstack([identity, np.zeros((dim, dim))])])
    riders = np.broadcast_to(starts, (len(x), 2 * dim, 2 * dim))
    columns = _along_geodesic(_exp_solver(field, exp_solver), x, v, riders, "jacobi", np.ones(1))[:, 0, :, :dim]
    jacobians = np.swapaxes(columns, -1, -2)  # [n, a, column]
    return jacobians[..., :dim].reshape(batch + (dim, dim)), jacobians[..., dim:].reshape(batch + (dim, dim))
