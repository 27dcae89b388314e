r"""A smooth metric field as a Riemannian manifold, in the style of geomstats.

``LearnedMetricManifold(field)`` is :math:`\mathbb{R}^D` (a geomstats
``VectorSpace``, so geomstats estimators accept it) equipped with
:class:`LearnedMetric`, whose Exp, Log and distance come from
:mod:`riemlocal.geodesics`. All methods take points of shape ``(..., dim)``
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
from .geodesics import METHODS, integrate_geodesic, solve_boundary_value
from .utils.parallel import parallel_map
from .utils.validation import check_int, check_option, check_points, check_positive

__all__ = ["LearnedMetricManifold", "LearnedMetric"]


class LearnedMetric(RiemannianMetric):
    r"""Riemannian metric :math:`\langle u, v \rangle_x = u^T M(x) v` of a smooth field.

    Parameters
    ----------
    space : LearnedMetricManifold
    field : MetricField
        A smooth field (``field.is_smooth``).
    n_nodes : int, default=16
        Segments of the coarse discrete geodesic used by Log and dist (the
        fine one has twice as many; the results are Richardson extrapolated).
    tol : float, default=1e-7
        Tolerance of the energy minimization (preconditioned gradient norm).
    max_iter : int, default=2000
        Iterations per resolution.
    method : {"auto", "newton", "lbfgs"}, default="auto"
        Energy minimizer of Log and dist: Newton's method on the
        block-tridiagonal Hessian or L-BFGS; ``"auto"`` takes Newton up to
        ``dim = 8`` (see :func:`~riemlocal.geodesics.solve_boundary_value`).
    rtol : float, default=1e-6
        Relative tolerance of the Exp integrator (absolute: ``rtol * 1e-2``);
        the default keeps Exp's relative error below 5e-8 in ``benchmarks/bench_geodesics.py``,
        far below that of Log.
    chunk_size : int, default=16
        Pairs solved jointly in one vectorized problem.
    n_jobs : int, default=None
        Parallel chunks through joblib (any joblib backend, e.g. dask); BLAS
        is limited to one thread inside workers.
    verbose : bool, default=False
        Progress bar over chunks.
    """

    def __init__(
        self,
        space,
        field,
        n_nodes=16,
        tol=1e-7,
        max_iter=2000,
        method="auto",
        rtol=1e-6,
        chunk_size=16,
        n_jobs=None,
        verbose=False,
    ):
        super().__init__(space)
        if not isinstance(field, MetricField):
            raise TypeError(f"field must be a riemlocal MetricField, got {type(field).__name__}")
        if not field.is_smooth:
            raise ValueError(
                f"field must be smooth to define a Riemannian manifold; {type(field).__name__} has structure="
                f"{field.structure!r} (use SmoothLocalField / RBFLocalField, or the 'line' distance rule)"
            )
        self.field = field
        self.n_nodes = check_int(n_nodes, "n_nodes", minimum=2)
        self.tol = check_positive(tol, "tol")
        self.max_iter = check_int(max_iter, "max_iter")
        self.method = check_option(method, "method", METHODS)
        self.rtol = check_positive(rtol, "rtol")
        self.chunk_size = check_int(chunk_size, "chunk_size")
        self.n_jobs = n_jobs
        self.verbose = verbose

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

    # -- batching ----------------------------------------------------------------
    def _map_pairs(self, solve, first, second, names, description):
        """Broadcast two point arrays, solve in chunks (joblib), restore the batch shape."""
        a, b = self._points(first, names[0]), self._points(second, names[1])
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(f"{names[0]} of shape {a.shape} and {names[1]} of shape {b.shape} do not broadcast together") from None
        a = np.broadcast_to(a, shape).reshape(-1, self.field.dim)
        b = np.broadcast_to(b, shape).reshape(-1, self.field.dim)
        if len(a) == 0:
            raise ValueError(f"{names[0]} and {names[1]} must hold at least one point, got shape {shape}")
        chunks = [slice(i, i + self.chunk_size) for i in range(0, len(a), self.chunk_size)]
        parts = parallel_map(solve, [(a[c], b[c]) for c in chunks], self.n_jobs, self.verbose, description)
        merged = [np.concatenate(outputs) for outputs in zip(*parts)]
        return [values.reshape(shape[:-1] + values.shape[1:]) for values in merged]

    def _boundary_value(self, point, base_point):
        result = solve_boundary_value(self.field, point, base_point, self.n_nodes, self.tol, self.max_iter, self.method)
        return result.initial_velocity, result.length

    # -- maps --------------------------------------------------------------------
    def exp(self, tangent_vec, base_point):
        r""":math:`\mathrm{Exp}_x(v) = c(1)` for the geodesic with :math:`c(0) = x`, :math:`c'(0) = v`."""

        def exp(v, x):
            return (integrate_geodesic(self.field, v, x, (1.0,), self.rtol, self.rtol * 1e-2)[:, 0],)

        return self._map_pairs(exp, tangent_vec, base_point, ("tangent_vec", "base_point"), "Exp (initial-value problems)")[0]

    def log(self, point, base_point):
        r""":math:`\mathrm{Log}_x(y) = c'(0)` of the constant-speed geodesic from :math:`x` to :math:`y` on [0, 1]."""
        return self._map_pairs(self._boundary_value, point, base_point, ("point", "base_point"), "Log (geodesic boundary-value problems)")[0]

    def dist(self, point_a, point_b):
        """Geodesic distance (length of the shortest curve), shape ``(...)``."""
        return self._map_pairs(self._boundary_value, point_b, point_a, ("point_b", "point_a"), "geodesic distances")[1]

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
        x = self._points(initial_point, "initial_point")
        v = self.log(end_point, x) if initial_tangent_vec is None else self._points(initial_tangent_vec, "initial_tangent_vec")
        shape = np.broadcast_shapes(x.shape, v.shape)
        x = np.broadcast_to(x, shape).reshape(-1, self.field.dim)
        v = np.broadcast_to(v, shape).reshape(-1, self.field.dim)

        def path(t):
            t = np.atleast_1d(np.asarray(t, dtype=float))
            if t.ndim != 1 or not np.all(np.isfinite(t)) or np.any(t < 0):
                raise ValueError(f"t must be a finite non-negative scalar or 1-D array, got shape {t.shape}")
            points = integrate_geodesic(self.field, v, x, t, self.rtol, self.rtol * 1e-2)
            return points.reshape(shape[:-1] + (len(t), self.field.dim))

        return path

    # -- the connection (riemlocal.connection): curvature, transport, Jacobi fields ---------------
    # (the ODEs run at Exp's tolerances, ``rtol`` and ``rtol * 1e-2``)
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
        return parallel_transport(self.field, tangent_vec, base_point, direction, self.rtol, self.rtol * 1e-2)

    def jacobi_field(self, tangent_vec, base_point, initial_value, initial_derivative, t=1.0):
        r"""Jacobi field along :math:`\mathrm{Exp}_x(t v)` (:func:`riemlocal.connection.jacobi_field`)."""
        return jacobi_field(
            self.field, tangent_vec, base_point, initial_value, initial_derivative, t, self.rtol, self.rtol * 1e-2
        )

    def exp_differential(self, tangent_vec, base_point):
        """Jacobians of Exp in the tangent vector and in the base point (:func:`riemlocal.connection.exp_differential`)."""
        return exp_differential(self.field, tangent_vec, base_point, self.rtol, self.rtol * 1e-2)

    # -- validated inner products (geomstats' check neither shape nor finiteness) ---
    def _tangent_vectors(self, base_point, **vectors):
        """The named tangent vectors and ``base_point``, validated, of broadcastable shapes ``(..., dim)``."""
        arrays = {name: self._points(value, name) for name, value in vectors.items()}
        arrays["base_point"] = self._points(base_point, "base_point")
        try:
            np.broadcast_shapes(*(value.shape for value in arrays.values()))
        except ValueError:
            shapes = ", ".join(f"{name} {value.shape}" for name, value in arrays.items())
            raise ValueError(f"shapes do not broadcast together: {shapes}") from None
        return arrays.values()

    def inner_product(self, tangent_vec_a, tangent_vec_b, base_point=None):
        r""":math:`\langle a, b \rangle_x = a^T M(x) b`, shape ``(...)``."""
        return super().inner_product(*self._tangent_vectors(base_point, tangent_vec_a=tangent_vec_a, tangent_vec_b=tangent_vec_b))

    def squared_norm(self, vector, base_point=None):
        """:math:`v^T M(x) v`, shape ``(...)``."""
        return super().squared_norm(*self._tangent_vectors(base_point, vector=vector))

    def norm(self, vector, base_point=None):
        r""":math:`\sqrt{v^T M(x) v}`, shape ``(...)``."""
        return super().norm(*self._tangent_vectors(base_point, vector=vector))


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
        Passed to :class:`LearnedMetric` (``n_nodes``, ``tol``, ``max_iter``,
        ``method``, ``rtol``, ``chunk_size``, ``n_jobs``, ``verbose``).

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
