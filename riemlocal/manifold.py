r"""A smooth metric field as a Riemannian manifold, in the style of geomstats.

``LearnedMetricManifold(field)`` is :math:`\mathbb{R}^D` (a geomstats
``VectorSpace``, so geomstats estimators accept it) equipped with
:class:`LearnedMetric`, whose Exp, Log and distance come from
the solver objects of :mod:`riemlocal.numerics`. All methods take points of shape ``(..., dim)``
and broadcast over leading axes.

Reference: Hauberg, Freifeld & Black, *A Geometric Take on Metric Learning*,
NIPS 2012 (Lemma 1: a smooth blend of local metrics is a Riemannian metric).
"""

import numpy as np
from geomstats.geometry.base import VectorSpace
from geomstats.geometry.riemannian_metric import RiemannianMetric

from .connection import (
    christoffels,
    curvature,
    exp_differential,
    jacobi_field,
    parallel_transport,
    ricci_tensor,
    riemann_tensor,
    scalar_curvature,
    sectional_curvature,
)
from .fields import MetricField
from .numerics import CHUNK_SIZE, EXP_LOCAL_FRACTION, RTOL, EnergyLogSolver, ODEExpSolver
from .utils.validation import MIN_RTOL, check_broadcast, check_n_jobs, check_points, check_tolerance

__all__ = ["LearnedMetricManifold", "LearnedMetric"]

#: keyword options of :class:`LearnedMetricManifold` (and :class:`LearnedMetric`) for its solvers
_SOLVER_OPTIONS = (
    "rtol", "chunk_size", "n_jobs", "verbose", "compiled", "n_segments", "log_rtol", "max_segments", "tol", "max_iter", "method",
    "min_levels",
)


def _check_solver_options(options, owner):
    """Raise a ``TypeError`` naming ``owner`` and :data:`_SOLVER_OPTIONS` for an unknown key of ``options``."""
    unknown = sorted(set(options) - set(_SOLVER_OPTIONS))
    if unknown:
        raise TypeError(f"{owner} got unknown option(s) {unknown}; its solver options are {', '.join(_SOLVER_OPTIONS)}")


class LearnedMetric(RiemannianMetric):
    r"""Riemannian metric :math:`\langle u, v \rangle_x = u^T M(x) v` of a smooth field.

    Exp, Log, distances and geodesics are forwarded to two solver objects
    (geomstats' pattern), built from the options below and replaceable, e.g.
    ``space.metric.log_solver = MySolver()`` (any object with ``log`` and,
    optionally, ``dist``; an Exp solver has ``exp`` and ``geodesic_ivp``).

    Parameters
    ----------
    space : LearnedMetricManifold
    field : MetricField
        A smooth field (``field.is_smooth``).
    rtol : float, default=1e-6
        Requested relative accuracy: of the distance (Log solver) and of Exp's
        end points (Exp solver, :class:`~riemlocal.numerics.ODEExpSolver`, whose
        tolerance per step is ``EXP_LOCAL_FRACTION * rtol``, ``rtol / 10``, at least ``MIN_RTOL``).
    chunk_size, n_jobs, verbose
        Batching options of both solvers.
    compiled : bool, default=True
        Exp and Log in compiled code for fields with a compiled capability (:class:`~riemlocal.numerics.ODEExpSolver`,
        :class:`~riemlocal.numerics.EnergyLogSolver`).
    **log_options
        Further options of the Log solver, :class:`~riemlocal.numerics.EnergyLogSolver`:
        ``n_segments``, ``log_rtol``, ``max_segments``, ``tol``, ``max_iter``, ``method``, ``min_levels``.

    Attributes
    ----------
    exp_solver : ODEExpSolver
    log_solver : EnergyLogSolver
    """

    def __init__(
        self,
        space,
        field,
        rtol=RTOL,
        chunk_size=CHUNK_SIZE,
        n_jobs=None,
        verbose=False,
        compiled=True,
        **log_options,
    ):
        super().__init__(space)
        _check_solver_options(log_options, "LearnedMetric")
        check_n_jobs(n_jobs)
        if not isinstance(field, MetricField):
            raise TypeError(f"field must be a riemlocal MetricField, got {type(field).__name__}")
        if not field.is_smooth:
            raise ValueError(
                f"field must be smooth to define a Riemannian manifold; {type(field).__name__} has structure="
                f"{field.structure!r} (use SmoothLocalField / RBFLocalField, or the 'line' distance rule)"
            )
        self.field = field
        batching = {"chunk_size": chunk_size, "n_jobs": n_jobs, "verbose": verbose}
        exp_rtol = max(EXP_LOCAL_FRACTION * check_tolerance(rtol, "rtol"), MIN_RTOL)
        self.exp_solver = ODEExpSolver(field, rtol=exp_rtol, compiled=compiled, **batching)
        self.log_solver = EnergyLogSolver(field, rtol=rtol, compiled=compiled, **log_options, **batching)

    # -- tensors -----------------------------------------------------------------
    def _points(self, x, name):
        return check_points(x, self.field.dim, name)

    def metric_matrix(self, base_point=None):
        """:math:`M(x)`, shape ``(..., dim, dim)``."""
        return self.field.metric_matrix(self._points(base_point, "base_point"))

    def inner_product_derivative_matrix(self, base_point=None):
        r""":math:`\partial M_{ij} / \partial x_k` at ``[..., i, j, k]``."""
        return self.field.metric_derivative(self._points(base_point, "base_point"))

    def christoffels(self, base_point=None):
        r"""Christoffel symbols :math:`\Gamma^k_{ij}` at ``[..., k, i, j]``.

        .. math::
            \Gamma^k_{ij} = \tfrac12 M^{kl} (\partial_i M_{lj} + \partial_j M_{li} - \partial_l M_{ij}).
        """
        return christoffels(self.field, self._points(base_point, "base_point"))

    # -- maps (forwarded to the solvers) ------------------------------------------
    def exp(self, tangent_vec, base_point):
        r""":math:`\mathrm{Exp}_x(v) = c(1)` for the geodesic with :math:`c(0) = x`, :math:`c'(0) = v`."""
        return self.exp_solver.exp(tangent_vec, base_point)

    def log(self, point, base_point):
        r""":math:`\mathrm{Log}_x(y) = c'(0)` of the constant-speed geodesic from :math:`x` to :math:`y` on [0, 1]."""
        return self.log_solver.log(point, base_point)

    def dist(self, point_a, point_b):
        """Geodesic distance (length of the shortest curve), shape ``(...)``; the norm of the Log for solvers without ``dist``."""
        if hasattr(self.log_solver, "dist"):
            return self.log_solver.dist(point_a, point_b)
        return self.norm(self.log(point_b, point_a), point_a)

    def squared_dist(self, point_a, point_b):
        """Squared geodesic distance."""
        return self.dist(point_a, point_b) ** 2

    def geodesic(self, initial_point, end_point=None, initial_tangent_vec=None):
        """Geodesic as a callable ``path(t)`` -> points of shape ``(..., n_times, dim)``.

        Give either ``end_point`` (the velocity is then ``log(end_point, initial_point)``)
        or ``initial_tangent_vec``. ``t`` is a scalar or 1-D array; ``t = 1`` reaches ``end_point``.
        """
        if (end_point is None) == (initial_tangent_vec is None):
            raise ValueError("give exactly one of end_point and initial_tangent_vec")
        if initial_tangent_vec is None:
            initial_tangent_vec = self.log(end_point, initial_point)
        path = self.exp_solver.geodesic_ivp(initial_tangent_vec, initial_point)
        return lambda t: path(check_points(t, name="t", min_ndim=0))

    # -- the connection (riemlocal.connection): curvature, transport, Jacobi fields ---------------
    # (the ODEs are integrated by the Exp solver, ``exp_solver.integrate_with``)
    def riemann_tensor(self, base_point=None):
        r"""Riemann tensor :math:`R^l_{ijk}` at ``[..., i, j, k, l]`` (geomstats' order; :func:`riemlocal.connection.riemann_tensor`)."""
        return riemann_tensor(self.field, base_point)

    def curvature(self, tangent_vec_a, tangent_vec_b, tangent_vec_c, base_point=None):
        r""":math:`R(a, b)c` (:func:`riemlocal.connection.curvature`)."""
        return curvature(self.field, tangent_vec_a, tangent_vec_b, tangent_vec_c, base_point)

    def ricci_tensor(self, base_point=None):
        r"""Ricci tensor :math:`\mathrm{Ric}_{ik} = R^j_{ijk}`."""
        return ricci_tensor(self.field, base_point)

    def scalar_curvature(self, base_point=None):
        """Scalar curvature (:func:`riemlocal.connection.scalar_curvature`)."""
        return scalar_curvature(self.field, base_point)

    def sectional_curvature(self, tangent_vec_a, tangent_vec_b, base_point=None):
        """Sectional curvature of the plane spanned by the two vectors (:func:`riemlocal.connection.sectional_curvature`)."""
        return sectional_curvature(self.field, tangent_vec_a, tangent_vec_b, base_point)

    def parallel_transport(self, tangent_vec, base_point, direction=None, end_point=None):
        r"""Parallel transport along :math:`t \mapsto \mathrm{Exp}_x(t\,\text{direction})` to :math:`t = 1`.

        Give ``direction`` or ``end_point`` (then ``direction = self.log(end_point, base_point)``);
        see :func:`riemlocal.connection.parallel_transport`.
        """
        if (direction is None) == (end_point is None):
            raise ValueError("give exactly one of direction and end_point")
        if direction is None:
            direction = self.log(end_point, base_point)
        return parallel_transport(self.field, tangent_vec, base_point, direction, self.exp_solver)

    def jacobi_field(self, tangent_vec, base_point, initial_value, initial_derivative, t=1.0):
        r"""Jacobi field along :math:`\mathrm{Exp}_x(t v)` (:func:`riemlocal.connection.jacobi_field`)."""
        return jacobi_field(self.field, tangent_vec, base_point, initial_value, initial_derivative, t, self.exp_solver)

    def exp_differential(self, tangent_vec, base_point):
        """Jacobians of Exp in the tangent vector and in the base point (:func:`riemlocal.connection.exp_differential`)."""
        return exp_differential(self.field, tangent_vec, base_point, self.exp_solver)

    # -- validated inner products (geomstats' check neither shape nor finiteness) ---
    def _tangent_vectors(self, base_point, **vectors):
        """The named tangent vectors and ``base_point``, validated, of broadcastable shapes ``(..., dim)``."""
        named = [(value, name) for name, value in vectors.items()] + [(base_point, "base_point")]
        return check_broadcast(self.field.dim, *named)[1]

    def inner_product(self, tangent_vec_a, tangent_vec_b, base_point=None):
        r""":math:`\langle a, b \rangle_x = a^T M(x) b`, shape ``(...)``."""
        return super().inner_product(*self._tangent_vectors(base_point, tangent_vec_a=tangent_vec_a, tangent_vec_b=tangent_vec_b))

    def squared_norm(self, vector, base_point=None):
        """:math:`v^T M(x) v`, shape ``(...)``."""
        return super().squared_norm(*self._tangent_vectors(base_point, vector=vector))

    def norm(self, vector, base_point=None):
        r""":math:`\sqrt{v^T M(x) v}`, shape ``(...)``."""
        return super().norm(*self._tangent_vectors(base_point, vector=vector))

    def normalization_factor(self, variances):
        """Refused: the normalizing constant of a Riemannian Gaussian has no closed form here.

        geomstats' ``RiemannianEM`` needs it in closed form (its symmetric spaces provide
        one); this makes that estimator refuse a learned manifold with a clear message.
        """
        raise NotImplementedError(
            "the normalization factor of a Riemannian Gaussian has no closed form on a learned metric, so "
            "geomstats' RiemannianEM cannot run on it; use riemlocal's FrechetMean and PrincipalGeodesicAnalysis"
        )


class LearnedMetricManifold(VectorSpace):
    r""":math:`\mathbb{R}^D` with the Riemannian metric of a smooth :class:`MetricField`.

    A geomstats space: ``space.metric`` is a :class:`LearnedMetric` with
    ``metric_matrix``, ``christoffels``, ``exp``, ``log``, ``geodesic``,
    ``inner_product``, ``norm``, ``squared_norm``, ``dist`` and ``squared_dist``.
    It is not geomstats' ``Euclidean``, which is a Lie group under addition:
    estimators that would then average flatly (``ExponentialBarycenter``)
    raise a ``TypeError`` naming the Riemannian alternative instead.

    Parameters
    ----------
    field : MetricField
        A smooth field, e.g. :class:`~riemlocal.fields.SmoothLocalField`.
    **solver_options
        Passed to :class:`LearnedMetric` (``n_segments``, ``log_rtol``, ``max_segments``, ``tol``,
        ``max_iter``, ``method``, ``rtol``, ``chunk_size``, ``n_jobs``, ``verbose``),
        which builds the default solvers from them.

    Examples
    --------
    >>> import numpy as np
    >>> from riemlocal import LearnedMetricManifold, SmoothLocalField
    >>> field = SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2 * np.eye(2), np.eye(2)])
    >>> space = LearnedMetricManifold(field)
    >>> x, y = np.array([1.0, 3.0]), np.array([5.0, 3.0])
    >>> bool(space.metric.dist(x, y) < np.sqrt((y - x) @ field.metric_matrix(x) @ (y - x)))
    True
    """

    def __init__(self, field, **solver_options):
        if not isinstance(field, MetricField):
            raise TypeError(f"field must be a riemlocal MetricField, got {type(field).__name__}")
        _check_solver_options(solver_options, "LearnedMetricManifold")
        super().__init__(shape=(field.dim,), equip=False)
        self.field = field
        self.solver_options = dict(solver_options)
        self.equip_with_metric(LearnedMetric, field=field, **solver_options)

    def _create_basis(self):
        return np.eye(self.dim)

    def _no_group_structure(self, *args, **kwargs):
        raise TypeError(
            "LearnedMetricManifold has no Lie group operations: group barycenters would ignore the learned metric; "
            "use geomstats.learning.frechet_mean.FrechetMean or riemlocal.learning.FrechetMean"
        )

    compose = inverse = _no_group_structure
