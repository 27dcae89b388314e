"""The metric tensor field interface and the constant (global) field."""

from collections import namedtuple

import numpy as np

from ..utils.validation import broadcast_flat, check_broadcast, check_int, check_points, check_spd

__all__ = ["MetricField", "ConstantField", "STRUCTURES", "SegmentCells"]

#: what a field declares about itself (``MetricField.structure``); rules and the manifold choose their algorithm from it
STRUCTURES = ("constant", "piecewise_constant", "piecewise_smooth", "smooth")

SegmentCells = namedtuple("SegmentCells", ["pair", "span", "cell", "metrics"])
SegmentCells.__doc__ = """Cells crossed by a batch of segments (:meth:`MetricField.segment_cells`).

Piece ``k`` of segment ``pair[k]`` has length ``span[k]`` in :math:`\\lambda` and the
metric ``metrics[cell[k]]``; the pieces of one segment are listed in order along it
and their spans sum to 1, so the breakpoints are their cumulative sums.
"""


class MetricField:
    r"""A field of symmetric positive definite matrices :math:`M(x)` on :math:`\mathbb{R}^D`.

    Subclasses define :meth:`metric_matrix`; everything else (derivatives,
    Christoffel symbols, geodesics, distances) is derived from it. The
    derivative falls back to reverse-mode autodiff (when ``metric_matrix`` is
    written with ``autograd.numpy``) or to central differences; smooth fields
    with closed-form derivatives override :meth:`metric_derivative` and the
    fused products :meth:`energy_terms` / :meth:`derivative_vector_product`.

    Every method is batched over leading axes: points have shape ``(..., dim)``.

    Parameters
    ----------
    dim : int
        Dimension :math:`D` of the ambient space.

    Attributes
    ----------
    structure : {"constant", "piecewise_constant", "piecewise_smooth", "smooth"}
        What the field declares itself to be; a class attribute, ``"smooth"``
        unless a subclass says otherwise. Distance rules and
        :class:`~riemlocal.manifold.LearnedMetricManifold` choose their
        algorithm from it: a constant field makes every rule Mahalanobis; a
        piecewise-constant one implements :meth:`segment_cells`, and both line
        rules are exact finite sums; piecewise-smooth and smooth fields get
        line rules by quadrature; only constant and smooth fields have geodesics.
    is_smooth : bool
        ``True`` when :math:`M` is differentiable (``structure`` is
        ``"constant"`` or ``"smooth"``), i.e. the field is a Riemannian metric
        (Hauberg et al., Lemma 1) and geodesics exist. Read-only.
    """

    structure = "smooth"
    #: step of the central-difference fallback, relative to ``1 + |x|``
    finite_difference_step = 1e-5

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "is_smooth" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__}: is_smooth is derived from the class attribute structure; "
                f"declare structure = one of {STRUCTURES} instead"
            )
        if cls.structure not in STRUCTURES:
            raise ValueError(f"{cls.__name__}.structure must be one of {STRUCTURES}, got {cls.structure!r}")

    def __init__(self, dim):
        self.dim = check_int(dim, "dim")

    @property
    def is_smooth(self):
        """Whether :math:`M` is differentiable (a Riemannian metric with geodesics), from :attr:`structure`."""
        return self.structure in ("constant", "smooth")

    @property
    def capability(self):
        """What this field evaluates in compiled code: a :class:`~riemlocal.numerics.CompiledCapability`, or ``None`` (numpy methods only).

        The solvers ask for it and take the generic path without it; :mod:`riemlocal.numerics`
        lists the evaluators a capability's data must have.
        """
        return None

    def segment_cells(self, start_point, end_point):
        r"""Cells crossed by the segments :math:`x \to y`: the hook of piecewise-constant fields.

        Along :math:`x + \lambda (y - x)` a piecewise-constant field is constant
        between breakpoints :math:`0 = \lambda_0 < \dots < \lambda_m = 1`; listing
        them makes both line rules exact finite sums. A field declaring
        ``structure = "piecewise_constant"`` implements this method.

        Parameters
        ----------
        start_point, end_point : array-like of shape (..., dim)
            Segment ends; their leading axes broadcast, and segment ``p`` is
            entry ``p`` of the flattened broadcast batch.

        Returns
        -------
        cells : SegmentCells
            Flat arrays ``pair``, ``span``, ``cell`` (one entry per piece) and
            the table ``metrics`` of shape ``(n_cells, dim, dim)`` they index.
        """
        raise NotImplementedError(
            f"{type(self).__name__} declares structure={self.structure!r} and does not implement "
            "segment_cells(start_point, end_point)"
        )

    def _segments(self, start_point, end_point):
        """Broadcast and flatten segment ends to two ``(n, dim)`` arrays."""
        return broadcast_flat(self.dim, (start_point, "start_point"), (end_point, "end_point"))[1]

    def hidden_weight(self, start_point, end_point):
        """A bound on the weight of a part of the field that is weak at both ends of each chord but may be strong
        on it, shape ``(n,)`` for ends ``(n, dim)`` (Exp's steps: :mod:`riemlocal.numerics._runge_kutta`); 0 here,
        where the field knows of no such part."""
        return np.zeros(len(self._segments(start_point, end_point)[0]))

    def metric_matrix(self, base_point):
        """Metric :math:`M(x)`, shape ``(..., dim, dim)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement metric_matrix(base_point)")

    def __call__(self, base_point):
        return self.metric_matrix(base_point)

    def _check(self, base_point, name="base_point"):
        return check_points(base_point, self.dim, name)

    def _check_curves(self, curves):
        """Nodes of piecewise-linear curves, shape ``(..., n_nodes >= 2, dim)``."""
        curves = check_points(curves, self.dim, "curves", min_ndim=2)
        if curves.shape[-2] < 2:
            raise ValueError(f"curves must have at least 2 nodes (shape (..., n_nodes, dim)), got shape {curves.shape}")
        return curves

    def _check_pair(self, tangent_vec, base_point):
        """``tangent_vec`` and ``base_point`` validated, of broadcastable shapes ``(..., dim)``."""
        return check_broadcast(self.dim, (tangent_vec, "tangent_vec"), (base_point, "base_point"))[1]

    def metric_derivative(self, base_point):
        r"""Derivative :math:`\partial M_{ij} / \partial x_k`, shape ``(..., dim, dim, dim)``.

        Default: autodiff through ``metric_matrix`` when it is traceable by
        autograd, otherwise central differences (error :math:`O(h^2)`).
        """
        x = self._check(base_point)
        try:
            return self._autograd_derivative(x)
        except Exception:  # not traceable by autograd: fall back to central differences
            return self._central_difference_derivative(x)

    def _autograd_derivative(self, x):
        from autograd.differential_operators import make_jvp_reversemode

        jvp = make_jvp_reversemode(self.metric_matrix)(x)
        columns = []
        for k in range(self.dim):
            direction = np.zeros_like(x)
            direction[..., k] = 1.0
            columns.append(np.asarray(jvp(direction), dtype=float))
        return np.stack(columns, axis=-1)

    def _central_difference_derivative(self, x):
        return _central_differences(self.metric_matrix, x, self.finite_difference_step)

    def metric_vector_product(self, tangent_vec, base_point):
        """:math:`M(x) v`, shape ``(..., dim)``."""
        v, x = self._check_pair(tangent_vec, base_point)
        return np.einsum("...ij,...j->...i", self.metric_matrix(x), v)

    def energy_terms(self, tangent_vec, base_point):
        r"""Return :math:`M(x)v` and :math:`\nabla_x (v^T M(x) v)`, each of shape ``(..., dim)``.

        These are the two pieces of the gradient of the discrete curve energy.
        """
        v, x = self._check_pair(tangent_vec, base_point)
        grad = np.einsum("...ijk,...i,...j->...k", self.metric_derivative(x), v, v)
        return self.metric_vector_product(v, x), grad

    def energy_hessian(self, tangent_vec, base_point):
        r"""Second derivatives of :math:`f(x, v) = v^T M(x) v`, each of shape ``(..., dim, dim)``.

        Returns :math:`\nabla_x^2 f`, the mixed block
        :math:`[\nabla_x \nabla_v f]_{kj} = 2\, (\partial_k M(x)\, v)_j` and
        :math:`\nabla_v^2 f = 2 M(x)`: the pieces of the Hessian of the
        discrete curve energy. Default: :math:`\nabla_x^2 f` by central
        differences of the gradient from :meth:`energy_terms`.
        """
        v, x = self._check_pair(tangent_vec, base_point)
        x, v = np.broadcast_arrays(x, v)
        hessian_x = _central_differences(lambda point: self.energy_terms(v, point)[1], x, self.finite_difference_step)
        mixed = 2.0 * np.einsum("...jlk,...l->...kj", self.metric_derivative(x), v)
        return 0.5 * (hessian_x + np.swapaxes(hessian_x, -1, -2)), mixed, 2.0 * self.metric_matrix(x)

    def segment_energy_terms(self, curves, hessian=False):
        r""":meth:`energy_terms` (and :meth:`energy_hessian`) of the segments of piecewise-linear curves.

        For nodes ``curves`` of shape ``(..., N + 1, dim)``, returns
        :math:`M(m_i) d_i` and :math:`\nabla_x (d_i^T M(x) d_i)|_{m_i}`, each of
        shape ``(..., N, dim)``, with :math:`d_i = c_{i+1} - c_i` and
        :math:`m_i = (c_i + c_{i+1})/2`; with ``hessian=True`` also the three
        blocks of :meth:`energy_hessian` at :math:`(m_i, d_i)`, each of shape ``(..., N, dim, dim)``.
        """
        curves = self._check_curves(curves)
        steps, midpoints = np.diff(curves, axis=-2), 0.5 * (curves[..., 1:, :] + curves[..., :-1, :])
        terms = self.energy_terms(steps, midpoints)
        return tuple(terms) + (tuple(self.energy_hessian(steps, midpoints)) if hessian else ())

    def segment_end_quadratics(self, curves):
        r""":math:`d_i^T M(c_i)\, d_i` and :math:`d_i^T M(c_{i+1})\, d_i` of the segments of piecewise-linear curves.

        For nodes ``curves`` of shape ``(..., N + 1, dim)``, :math:`d_i = c_{i+1} - c_i`;
        shape ``(..., N, 2)``. The pieces of the trapezoid energy (:func:`~riemlocal.numerics.trapezoid_energy`).
        """
        curves = self._check_curves(curves)
        steps = np.diff(curves, axis=-2)
        ends = (curves[..., :-1, :], curves[..., 1:, :])
        return np.stack([np.einsum("...d,...d->...", steps, self.metric_vector_product(steps, end)) for end in ends], axis=-1)

    def derivative_vector_product(self, tangent_vec, base_point):
        r""":math:`(\sum_k v_k \partial_k M(x))\, v`, shape ``(..., dim)``."""
        v, x = self._check_pair(tangent_vec, base_point)
        return np.einsum("...ijk,...j,...k->...i", self.metric_derivative(x), v, v)

    def geodesic_acceleration(self, tangent_vec, base_point):
        r"""Acceleration :math:`c'' = -\Gamma(c', c')` of a geodesic through ``base_point``.

        Euler--Lagrange equation of the energy :math:`\int c'^T M(c) c'`:

        .. math::
            M(c)\, c'' = -\Big(\sum_k c'_k \partial_k M(c)\Big) c'
                         + \tfrac12 \big[c'^T \partial_l M(c)\, c'\big]_l .

        (Hauberg et al., eq. (8), print only a sign-flipped second term, which
        is wrong for :math:`D \ge 2`.)
        """
        v, x = self._check_pair(tangent_vec, base_point)
        _, grad = self.energy_terms(v, x)
        rhs = 0.5 * grad - self.derivative_vector_product(v, x)
        return np.linalg.solve(self.metric_matrix(x), rhs[..., None])[..., 0]

    def _acceleration(self, tangent_vec, base_point):
        """:meth:`geodesic_acceleration` of already validated ``(n, dim)`` arrays (ODE right-hand sides)."""
        return self.geodesic_acceleration(tangent_vec, base_point)

    # -- second derivatives (the Levi-Civita connection's curvature and variations) ---------
    #: step of the central differences of :meth:`metric_derivative`, relative to ``1 + |x|``
    second_difference_step = 2e-5

    def metric_second_derivative(self, base_point):
        r"""Second derivative :math:`\partial^2 M_{ij} / \partial x_k \partial x_l`, shape ``(..., dim, dim, dim, dim)``.

        Default: central differences of :meth:`metric_derivative` (exact by
        autodiff for an autograd-traceable ``metric_matrix``), symmetrized in
        :math:`(k, l)`; error :math:`O(h^2)` with ``second_difference_step``.
        """
        x = self._check(base_point)
        second = _central_differences(self.metric_derivative, x, self.second_difference_step)
        return 0.5 * (second + np.swapaxes(second, -1, -2))

    def acceleration_derivative(self, tangent_vec, base_point, position_vec, velocity_vec):
        r"""Directional derivative of :meth:`geodesic_acceleration` :math:`a(x, v) = -\Gamma_x(v, v)`, shape ``(..., dim)``.

        :math:`\partial_x a[\delta x] + \partial_v a[\delta v]`, the right-hand side of the Jacobi
        (variational) equation, with :math:`a = M^{-1} b`,
        :math:`b = \tfrac12 [v^T \partial_l M v]_l - (\partial_v M) v`:

        .. math::
            \partial_x a[\delta x] = -(\partial_{\delta x} \Gamma)(v, v)
            = M^{-1}\big(\tfrac12 [v^T \partial_l \partial_{\delta x} M\, v]_l
              - (\partial_{\delta x} \partial_v M)\, v - (\partial_{\delta x} M)\, a\big),

            \partial_v a[\delta v] = -2 \Gamma(v, \delta v)
            = M^{-1}\big([v^T \partial_l M\, \delta v]_l - (\partial_v M)\, \delta v - (\partial_{\delta v} M)\, v\big).

        Default: from :meth:`metric_derivative` and :meth:`metric_second_derivative`
        (:math:`O(D^4)` per point); the local fields override it with :math:`O(R D^2)` products.
        """
        x = self._check(base_point)
        v, dx, dv = (
            check_points(u, self.dim, name)
            for u, name in ((tangent_vec, "tangent_vec"), (position_vec, "position_vec"), (velocity_vec, "velocity_vec"))
        )
        second, first = self.metric_second_derivative(x), self.metric_derivative(x)
        acceleration = self.geodesic_acceleration(v, x)
        rhs = (
            0.5 * np.einsum("...ijlk,...i,...j,...k->...l", second, v, v, dx)
            - np.einsum("...ijkl,...j,...k,...l->...i", second, v, dx, v)
            - np.einsum("...ijk,...k,...j->...i", first, dx, acceleration)
            + np.einsum("...ijl,...i,...j->...l", first, v, dv)
            - np.einsum("...ijk,...k,...j->...i", first, v, dv)
            - np.einsum("...ijk,...k,...j->...i", first, dv, v)
        )
        return np.linalg.solve(self.metric_matrix(x), rhs[..., None])[..., 0]

    def __repr__(self):
        return f"{type(self).__name__}(dim={self.dim})"


def _central_differences(function, x, relative_step):
    """Central differences of ``function`` in each coordinate of ``x`` ``(..., dim)``, stacked on a new last axis.

    The step in coordinate :math:`k` is ``relative_step * (1 + |x_k|)``; the error is :math:`O(h^2)`.
    """
    h = relative_step * (1.0 + np.abs(x))
    columns = []
    for k in range(x.shape[-1]):
        step = np.zeros_like(x)
        step[..., k] = h[..., k]
        diff = function(x + step) - function(x - step)
        columns.append(diff / (2.0 * h[..., k]).reshape(h.shape[:-1] + (1,) * (diff.ndim - h.ndim + 1)))
    return np.stack(columns, axis=-1)


class ConstantField(MetricField):
    """Global Mahalanobis metric: :math:`M(x) = M` everywhere (Ramanan & Baker, *Global*).

    Parameters
    ----------
    metric : array-like of shape (dim, dim)
        Symmetric positive definite matrix.
    """

    structure = "constant"

    def __init__(self, metric):
        metric = check_spd(metric, "metric")
        if metric.ndim != 2:
            raise ValueError(f"metric must be a single (dim, dim) matrix, got shape {metric.shape}")
        super().__init__(metric.shape[0])
        self.metric = metric

    def metric_matrix(self, base_point):
        x = self._check(base_point)
        return np.broadcast_to(self.metric, x.shape[:-1] + self.metric.shape).copy()

    def metric_derivative(self, base_point):
        x = self._check(base_point)
        return np.zeros(x.shape[:-1] + (self.dim,) * 3)

    def metric_vector_product(self, tangent_vec, base_point):
        v, x = self._check_pair(tangent_vec, base_point)
        return np.broadcast_to(v @ self.metric, np.broadcast_shapes(v.shape, x.shape)).copy()

    def energy_terms(self, tangent_vec, base_point):
        mv = self.metric_vector_product(tangent_vec, base_point)
        return mv, np.zeros_like(mv)

    def energy_hessian(self, tangent_vec, base_point):
        v, x = self._check_pair(tangent_vec, base_point)
        shape = np.broadcast_shapes(v.shape, x.shape)[:-1] + self.metric.shape
        return np.zeros(shape), np.zeros(shape), np.broadcast_to(2.0 * self.metric, shape).copy()

    def derivative_vector_product(self, tangent_vec, base_point):
        v, x = self._check_pair(tangent_vec, base_point)
        return np.zeros(np.broadcast_shapes(v.shape, x.shape))

    def geodesic_acceleration(self, tangent_vec, base_point):
        return self.derivative_vector_product(tangent_vec, base_point)

    def metric_second_derivative(self, base_point):
        x = self._check(base_point)
        return np.zeros(x.shape[:-1] + (self.dim,) * 4)

    def acceleration_derivative(self, tangent_vec, base_point, position_vec, velocity_vec):
        shapes = (np.shape(tangent_vec), np.shape(base_point), np.shape(position_vec), np.shape(velocity_vec))
        return np.zeros(np.broadcast_shapes(*shapes))
