r"""Fields built from R local metrics :math:`M_r` placed at centers :math:`x_r`.

All three blend the same ingredients and differ only in the weights:

* :class:`NearestLocalField` -- the metric of the nearest center (piecewise constant);
* :class:`RBFLocalField` -- a softmax of proximities (Ramanan & Baker eq. 14--15);
* :class:`SmoothLocalField` -- the softmax with each center's own metric as
  proximity (Hauberg, Freifeld & Black eq. 6), i.e. ``RBFLocalField`` with
  ``proximity=None`` and ``sigma = 2 / rho``.

Nearness of ``x`` to center ``r`` is the squared distance
:math:`s_r(x) = (x - x_r)^T P_r (x - x_r)`, where :math:`P_r = M_r` (each
center's own metric: the anisotropic Voronoi diagram of Ramanan & Baker eq.
20--21) or one global matrix ``proximity``.
"""

import copy
from functools import cached_property

import numpy as np

from ..utils.arrays import CACHE_ELEMENTS, TASK_ELEMENTS
from ..utils.validation import check_broadcast, check_points, check_positive, check_spd, solve_spd
from ._base import MetricField, SegmentCells
from ._bank import LowRankMetrics, metric_bank
from ._envelope import envelope_arrays, envelope_cells
from ..numerics import HIDDEN_WEIGHT, CompiledCapability, acceleration_derivatives, accelerations, compiled_data, segment_energy_terms
from .shared_kernels import rbf_kernel

__all__ = ["NearestLocalField", "RBFLocalField", "SmoothLocalField"]

#: fewest points per chunk of a blend, whatever ``CACHE_ELEMENTS``: each chunk reads all R metrics, so a chunk of one or
#: two points pays that read per point (``metric_vector_product`` at 3,000 points, R = 1797, D = 10: 1.7 s in chunks of
#: 3 points, 1.2 s of 16; 200 points, R = 500, D = 164: 4.1 s of 1 point, 1.0 s of 16)
MIN_CHUNK_POINTS = 16
#: blends of at least this many centers evaluate only the centers whose weight can matter (:meth:`RBFLocalField._sparse`)
SPARSE_MIN_CENTERS = 32
#: ... when those are at most this fraction of the centers (else every center is evaluated)
SPARSE_FRACTION = 0.25
#: the metric of a sparse evaluation differs from the full blend by at most this fraction of :math:`\lambda_{\min}(M(x))`
DROP_RTOL = 1e-16


def _finite(result, name):
    """``result`` (an array or a tuple of arrays) after checking that nothing overflowed."""
    if not all(np.isfinite(part).all() for part in (result if isinstance(result, tuple) else (result,))):
        raise ValueError(f"{name} is too large for this field: the result overflows float64")
    return result


class _LocalField(MetricField):
    """Shared storage and proximity scores of the local fields; the metrics are kept by a bank (:func:`metric_bank`)."""

    def __init__(self, centers, metrics, proximity=None, low_rank=False):
        centers = check_points(centers, name="centers", min_ndim=2)
        if centers.ndim != 2:
            raise ValueError(f"centers must have shape (n_centers, dim), got {centers.shape}")
        n_centers, dim = centers.shape
        if n_centers == 0 or dim == 0:
            raise ValueError(f"centers must hold at least one center of dimension >= 1, got shape {centers.shape}")
        metrics = check_spd(metrics, "metrics", dim=dim)
        if metrics.shape != (n_centers, dim, dim):
            raise ValueError(
                f"metrics must have shape (n_centers, dim, dim) = {(n_centers, dim, dim)} "
                f"to match centers, got {metrics.shape}"
            )
        if proximity is not None:
            proximity = check_spd(proximity, "proximity", dim=dim)
            if proximity.ndim != 2:
                raise ValueError(f"proximity must be one (dim, dim) matrix or None, got shape {proximity.shape}")
        super().__init__(dim)
        self.centers = centers
        self._bank = metric_bank(metrics, low_rank)
        self.proximity = proximity
        # coordinates relative to the mean center (a shift of everything cancels exactly)
        self._origin = self.centers.mean(axis=0)
        self._shifted_products = self._proximity_products((self.centers - self._origin)[None])[0]  # P_r (x_r - mean)

    @property
    def metrics(self):
        """The local metrics :math:`M_r`, shape ``(n_centers, dim, dim)`` (built on each access where they are stored in low-rank form)."""
        return self._bank.dense

    @property
    def low_rank(self):
        r"""Whether the metrics are stored and applied as :math:`s_r I + U_r U_r^T` (:func:`~riemlocal.fields._bank.metric_bank`)."""
        return isinstance(self._bank, LowRankMetrics)

    @property
    def n_centers(self):
        """Number :math:`R` of local metrics."""
        return self.centers.shape[0]

    def _chunks(self, n_points):
        size = max(MIN_CHUNK_POINTS, CACHE_ELEMENTS // max(1, self.n_centers * self.dim))
        return [slice(start, start + size) for start in range(0, max(n_points, 1), size)]  # one, even if empty

    def _local_products(self, v):
        """:math:`M_r v` for every center, shape ``(n, R, dim)``."""
        return self._bank.products(v)

    def _proximity_products(self, diff):
        """:math:`P_r d_r` for differences ``diff`` of shape ``(n, R, dim)`` (one GEMM per center)."""
        if self.proximity is not None:
            return diff @ self.proximity
        return self._bank.own_products(diff)

    def _scores(self, x, half_grad=None):
        """Squared proximities :math:`s_r(x)` and their halved gradients :math:`h_r = P_r(x - x_r)`.

        ``x`` has shape ``(n, dim)``; returns ``(n, R)`` and ``(n, R, dim)``; ``half_grad``
        is :math:`h_r` when already known. Computed from the differences :math:`x - x_r`, never
        from the expanded :math:`x^T P_r x - 2 x^T P_r x_r + x_r^T P_r x_r`, whose cancellation
        at offsets of 1e8 picks the wrong cell: the field is translation invariant to rounding.
        """
        diff = x[:, None, :] - self.centers
        half_grad = self._proximity_products(diff) if half_grad is None else half_grad
        return self._proximities(half_grad, diff), half_grad

    @staticmethod
    def _proximities(half_grad, diff):
        r""":math:`s_r = h_r \cdot (x - x_r)`, shape ``(n, R)``; only their order and gaps are used.

        Beyond :math:`|x - x_r| \approx 10^{154}` the squares overflow: rows are then ranked by
        scaled scores, the nearest center at 0 and the gaps to the others (overflowing to +inf,
        weight 0) scaled back.
        """
        scores = np.einsum("nrd,nrd->nr", half_grad, diff)
        if np.maximum.reduce(scores, axis=None, initial=0.0) < np.inf:  # the common case, checked in one reduction (NaN fails it too)
            return scores
        overflow = ~np.all(np.isfinite(scores), axis=1)
        if np.any(overflow):
            scale = np.abs(diff[overflow]).max(axis=(1, 2))[:, None]
            scaled = np.einsum("nrd,nrd->nr", half_grad[overflow] / scale[:, :, None], diff[overflow] / scale[:, :, None])
            gaps = scaled - scaled.min(axis=1, keepdims=True)
            with np.errstate(over="ignore", invalid="ignore"):
                scores[overflow] = np.where(gaps > 0, gaps * scale**2, 0.0)
            if not np.all(np.isfinite(scores.min(axis=1))):
                raise ValueError("base_point is too far from the centers: its proximities overflow float64")
        return scores

    def _flat(self, base_point, name="base_point"):
        x = check_points(base_point, self.dim, name)
        return x.reshape(-1, self.dim), x.shape[:-1]

    def __repr__(self):
        return f"{type(self).__name__}(n_centers={self.n_centers}, dim={self.dim})"


def _chord_minimum(constant, linear, quadratic):
    r""":math:`\min_{\tau \in [0, 1]} (a + b \tau + c \tau^2)`, elementwise."""
    smallest = np.minimum(constant, constant + linear + quadratic)
    vertex = (quadratic > 0.0) & (0.0 < -linear) & (-linear < 2.0 * quadratic)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(vertex, np.minimum(smallest, constant - linear * linear / (4.0 * quadratic)), smallest)


class NearestLocalField(_LocalField):
    r"""Piecewise-constant field: :math:`M(x) = M_{r^*}` with :math:`r^* = \arg\min_r s_r(x)`.

    Ramanan & Baker's nearest-neighbour interpolation (eq. 13) and, with
    ``proximity=None``, the anisotropic Voronoi cells of eq. 20--21. Per-class
    and per-exemplar metrics are this field with the training points as
    centers. It is not smooth, so it has no geodesics; the ``"line"`` rules
    of :mod:`riemlocal.distances` integrate it exactly, from the cells that
    :meth:`segment_cells` finds by walking the lower envelope of parabolas.

    Parameters
    ----------
    centers : array-like of shape (n_centers, dim)
    metrics : array-like of shape (n_centers, dim, dim)
        SPD matrices :math:`M_r`.
    proximity : array-like of shape (dim, dim), default=None
        Global metric defining nearness; ``None`` uses each center's own metric.
    """

    structure = "piecewise_constant"

    def __init__(self, centers, metrics, proximity=None):
        super().__init__(centers, metrics, proximity)
        self._shifted_norms = np.einsum("rd,rd->r", self._shifted_products, self.centers - self._origin)  # c_r^T P_r c_r
        self._norm_memo = {}  # line rule: float32 y^T P_r y of candidates seen before (fields/_envelope.py)

    def nearest_center(self, base_point):
        r"""Index of the active cell at each point, shape ``(...)``.

        Ranks :math:`x'^T P_r x' - 2 x'^T P_r c_r + c_r^T P_r c_r` in coordinates
        :math:`x' = x - \bar c`, :math:`c_r = x_r - \bar c` relative to the mean
        center: one matrix product for all centers (the per-center products of
        differences cost 1.7x more at R = 500, D = 164), and translation
        invariant, since a common shift cancels in :math:`x'` and :math:`c_r`
        before any product. Rows whose ranking is not finite (points near
        :math:`10^{154}` from the centers) are ranked by :meth:`_scores`.
        """
        x, batch = self._flat(base_point)
        index = np.empty(len(x), dtype=int)
        size = max(1, TASK_ELEMENTS // (self.n_centers * (self.dim if self.proximity is None else 1)))
        for start in range(0, len(x), size):
            shifted = x[start : start + size] - self._origin
            with np.errstate(over="ignore", invalid="ignore"):
                scores = self._shifted_norms - 2.0 * shifted @ self._shifted_products.T
                if self.proximity is None:
                    scores += np.einsum("nrd,nd->nr", self._local_products(shifted), shifted)
            finite = np.all(np.isfinite(scores), axis=1)
            index[start : start + size] = np.argmin(scores, axis=1)
            if not np.all(finite):
                far = start + np.flatnonzero(~finite)
                index[far] = np.argmin(self._scores(x[far])[0], axis=1)
        return index.reshape(batch)

    def metric_matrix(self, base_point):
        return self.metrics[self.nearest_center(base_point)]

    @cached_property
    def _envelope_arrays(self):
        """Float32 packed metrics and their bounds for :meth:`segment_cells` (own metrics), made once, read-only."""
        return envelope_arrays(self)

    def segment_cells(self, start_point, end_point):
        """Cells crossed by each segment: the pieces of the lower envelope of the centers' parabolas."""
        pair, cell, span = envelope_cells(self, *self._segments(start_point, end_point))
        return SegmentCells(pair, span, cell, self.metrics)

    def metric_derivative(self, base_point):
        """Zero almost everywhere (undefined on cell boundaries)."""
        x = self._check(base_point)
        return np.zeros(x.shape[:-1] + (self.dim,) * 3)


class RBFLocalField(_LocalField):
    r"""Smooth blend :math:`M(x) = \sum_r w_r(x) M_r`, :math:`w = \mathrm{softmax}_r(-s_r(x)/\sigma)`.

    Ramanan & Baker eq. 14--15 (RBF interpolation of reference-point
    metrics). Weights are computed in log space, so points far from every
    center never give 0/0. The derivative is

    .. math::
        \partial_k M = \sum_r w_r (g_r - \bar g)_k M_r, \quad
        g_r = -\tfrac{2}{\sigma} P_r (x - x_r), \quad \bar g = \sum_r w_r g_r .

    Parameters
    ----------
    centers : array-like of shape (n_centers, dim)
    metrics : array-like of shape (n_centers, dim, dim)
    sigma : float
        Temperature (> 0) of the softmax on squared proximities.
    proximity : array-like of shape (dim, dim), default=None
        Global metric defining proximity; ``None`` uses each center's own metric.
    """

    def __init__(self, centers, metrics, sigma, proximity=None):
        self.sigma = check_positive(sigma, "sigma")
        super().__init__(centers, metrics, proximity, low_rank=True)

    @cached_property
    def capability(self):
        """Compiled evaluation (:mod:`~riemlocal.fields.kernels`; :mod:`~riemlocal.fields.shared_kernels` where centers
        share metrics) of the field's arrays, which the evaluators only read; R dim^2 per point.

        ``None`` where the metrics are stored in low-rank form (:attr:`low_rank`): the evaluators read dense metrics.
        """
        if self.low_rank:
            return None
        return CompiledCapability(rbf_kernel(self.centers, self.metrics, self.proximity, self.sigma), point_cost=self.metrics.size)

    def weights(self, base_point):
        """Blending weights :math:`w_r(x)`, shape ``(..., n_centers)``; they sum to one."""
        x, batch = self._flat(base_point)
        return self._weights(x)[0].reshape(batch + (self.n_centers,))

    def hidden_weight(self, start_point, end_point):
        r"""The bound of :func:`~riemlocal.fields.kernels.rbf_hidden_weight` for chords ``(n, dim)``, shape ``(n,)``.

        Scores are quadratics along a chord, and :math:`w_r \le e^{-(s_r - s_q) / \sigma}` for any center :math:`q`:
        with :math:`q` the leading center at either end, the largest weight, relative to the leader's, that a
        center below :data:`~riemlocal.numerics.HIDDEN_WEIGHT` at both ends can reach on the chord.
        """
        x0, x1 = self._segments(start_point, end_point)
        diff, step = x0[:, None, :] - self.centers, x1 - x0
        half_grad = self._proximity_products(diff)
        start = np.einsum("nrd,nrd->nr", half_grad, diff)
        slope = 2.0 * np.einsum("nrd,nd->nr", half_grad, step)
        curvature = np.einsum("nrd,nd->nr", self._proximity_products(np.broadcast_to(step[:, None, :], diff.shape)), step)
        end = start + slope + curvature
        rows, cutoff = np.arange(len(x0)), -self.sigma * np.log(HIDDEN_WEIGHT)
        gaps = []
        for leader in (np.argmin(start, axis=1), np.argmin(end, axis=1)):
            parts = (array - array[rows, leader][:, None] for array in (start, slope, curvature))
            gaps.append(_chord_minimum(*parts))
        seen = (start - start.min(axis=1, keepdims=True) <= cutoff) | (end - end.min(axis=1, keepdims=True) <= cutoff)
        bound = np.where(seen, 0.0, np.exp(-np.maximum(np.maximum(*gaps), 0.0) / self.sigma))
        return bound.max(axis=1, initial=0.0)

    def _weights(self, x, half_grad=None):
        r"""Weights :math:`w_r(x)` and half-gradients :math:`h_r = P_r (x - x_r)`.

        The weight gradients are :math:`g_r = \nabla \log \tilde w_r = -\tfrac{2}{\sigma} h_r`;
        callers fold the factor into their ``(n, R)`` coefficients.
        """
        return self._softmax(*self._scores(x, half_grad))

    def _softmax(self, scores, half_grad):
        r"""Weights :math:`\mathrm{softmax}_r(-s_r / \sigma)` (largest term 1 before normalizing), and ``half_grad``."""
        # ufunc reductions directly: the ndarray methods add Python overhead that dominates at small R
        weights = np.exp((np.minimum.reduce(scores, axis=1, keepdims=True) - scores) / self.sigma)
        weights /= np.add.reduce(weights, axis=1, keepdims=True)
        return weights, half_grad

    def _map_chunks(self, fn, base_point, *vectors, names=("tangent_vec", "position_vec", "velocity_vec")):
        """Apply ``fn(field, x, *vectors)`` to flattened chunks and restore batch shapes; ``names`` name the vectors.

        ``field`` is this field or, for the chunk's points, its sparse view (:meth:`_sparse`).
        """
        shape, arrays = check_broadcast(self.dim, *zip(vectors, names), (base_point, "base_point"))
        arrays = arrays[-1:] + arrays[:-1]  # fn takes the base point first
        if len(shape) == 2 and shape[0] * self.n_centers * self.dim <= CACHE_ELEMENTS:
            if all(a.shape == shape for a in arrays):  # the common case: skip the chunk bookkeeping
                return _finite(fn(self._sparse(arrays[0]), *arrays), names[0] if vectors else "base_point")
        flat = [np.broadcast_to(a, shape).reshape(-1, self.dim) for a in arrays]
        outputs = None
        for chunk in self._chunks(len(flat[0])):
            parts = [a[chunk] for a in flat]
            result = fn(self._sparse(parts[0]), *parts)
            result = result if isinstance(result, tuple) else (result,)
            outputs = [[] for _ in result] if outputs is None else outputs
            for store, part in zip(outputs, result):
                store.append(part)
        merged = [np.concatenate(parts).reshape(shape[:-1] + parts[0].shape[1:]) for parts in outputs]
        return _finite(merged[0] if len(merged) == 1 else tuple(merged), names[0] if vectors else "base_point")

    @cached_property
    def _drop_gap(self):
        r"""The score gap :math:`T \sigma` beyond which a center's weight is dropped (:meth:`_sparse`).

        A dropped center has weight at most :math:`e^{-T}` of the largest, so the dropped weight is
        :math:`\delta \le R e^{-T}` and the sparse metric (renormalized over the kept centers)
        differs from :math:`M(x)` by at most :math:`2 \delta \max_r \lambda_{\max}(M_r) \le 2 \delta \kappa\,\lambda_{\min}(M(x))`,
        :math:`\kappa = \max_r \lambda_{\max}(M_r) / \min_r \lambda_{\min}(M_r)`. :math:`T` solves
        :math:`R \kappa (1 + T)^2 e^{-T} = ` ``DROP_RTOL``; the factor :math:`(1 + T)^2` is a margin for the
        derivatives, whose dropped terms are those weights times one or two slopes :math:`\tfrac{2}{\sigma} P_r (x - x_r)`.
        """
        spectra = self._bank.spectra
        spread = self.n_centers * spectra[:, 1].max() / spectra[:, 0].min() / DROP_RTOL
        gap = 40.0
        for _ in range(8):  # a contraction: converges in a few steps
            gap = np.log(spread) + 2.0 * np.log1p(gap)
        return gap * self.sigma

    def _sparse(self, points, curves=False):
        r"""This field restricted to the centers whose weight can matter at ``points`` ``(n, dim)`` (:meth:`_kept`), or the field itself.

        Used off the compiled path by fields of at least ``SPARSE_MIN_CENTERS`` centers where it pays
        (:attr:`_sparse_pays`) and at most ``SPARSE_FRACTION`` of the centers are kept; the view has no compiled capability.
        """
        if self.n_centers < SPARSE_MIN_CENTERS or not len(points) or not self._sparse_pays or compiled_data(self, len(points), curves) is not None:
            return self
        kept = np.flatnonzero(self._kept(points).any(axis=0))
        if len(kept) > SPARSE_FRACTION * self.n_centers:
            return self
        view = copy.copy(self)
        view.centers, view._bank, view._shifted_products = self.centers[kept], self._bank.subset(kept), self._shifted_products[kept]
        view.__dict__["capability"] = None
        return view

    @cached_property
    def _sparse_pays(self):
        """Whether, at the centers themselves (up to 256 of them, evenly spaced), at most ``SPARSE_FRACTION`` of the centers are kept (median)."""
        sample = self.centers[:: max(1, self.n_centers // 256)]
        return bool(np.median(self._kept(sample).mean(axis=1)) <= SPARSE_FRACTION)

    def _kept(self, points):
        r"""Which centers ``(n, R)`` may have a proximity :math:`s_r` within :attr:`_drop_gap` of the smallest at each point.

        Exactly for a global ``proximity``, else from the bank's bounds (:meth:`~riemlocal.fields._bank.DenseMetrics.own_norm_bounds`:
        exact for low-rank metrics, by :math:`\lambda_{\min}(M_r) |x - x_r|^2 \le s_r \le \lambda_{\max}(M_r) |x - x_r|^2` for dense ones).
        """
        anchor = points.mean(axis=0)
        relative, centers = points - anchor, self.centers - anchor
        if self.proximity is not None:
            relative, centers = relative @ self._proximity_factor, centers @ self._proximity_factor
        squares, center_squares = np.einsum("nd,nd->n", relative, relative)[:, None], np.einsum("rd,rd->r", centers, centers)
        distances = squares - 2.0 * relative @ centers.T + center_squares  # |x - x_r|^2 (in the proximity's norm)
        slack = 1e-10 * (squares + center_squares)  # the rounding of the expansion, with a wide margin
        if self.proximity is not None:
            lower, upper = distances - slack, distances + slack
        else:
            lower, upper = self._bank.own_norm_bounds(relative, centers, distances, slack)
        return lower - upper.min(axis=1, keepdims=True) <= self._drop_gap

    @cached_property
    def _proximity_factor(self):
        """:math:`L` with :math:`P = L L^T` for a global ``proximity``."""
        return np.linalg.cholesky(self.proximity)

    def _blend_metric(self, weights):
        r""":math:`M = \sum_r w_r M_r`, shape ``(n, dim, dim)``."""
        return self._bank.blend(weights)

    def metric_matrix(self, base_point):
        return self._map_chunks(lambda field, x: field._blend_metric(field._weights(x)[0]), base_point)

    def metric_derivative(self, base_point):
        def derivative(field, x):
            weights, half_grad = field._weights(x)
            centered = half_grad - np.einsum("nr,nrk->nk", weights, half_grad)[:, None, :]
            coefficients = (weights[:, :, None] * centered).transpose(0, 2, 1).reshape(-1, field.n_centers)  # (n dim, R)
            blended = field._bank.blend(coefficients).reshape(len(x), self.dim, self.dim, self.dim)  # [n, k, i, j]
            return (-2.0 / self.sigma) * blended.transpose(0, 2, 3, 1)

        return self._map_chunks(derivative, base_point)

    def _blend(self, x, v):
        """Weights :math:`w_r(x)`, half-gradients :math:`h_r(x)` and :math:`M_r v`."""
        return (*self._weights(x), self._local_products(v))

    def metric_vector_product(self, tangent_vec, base_point):
        def product(field, x, v):
            weights, _, local = field._blend(x, v)
            return (weights[:, None, :] @ local)[:, 0]

        return self._map_chunks(product, base_point, tangent_vec)

    @staticmethod
    def _centered(weights, values):
        r""":math:`w_r (a_r - \bar a)`, :math:`\bar a = \sum_r w_r a_r` for ``values`` a of shape ``(..., R)``."""
        return weights * (values - np.add.reduce(weights * values, axis=-1, keepdims=True))

    def _energy_terms(self, weights, half_grad, local, v, hessian=False):
        r"""First (and with ``hessian=True`` second) derivatives of :math:`f = v^T M(x) v = \sum_r w_r q_r`.

        With :math:`q_r = v^T M_r v` and :math:`g_r = -\tfrac{2}{\sigma} h_r`,
        :math:`h_r = P_r (x - x_r)` (so :math:`\nabla w_r = w_r (g_r - \bar g)`):

        .. math::
            M v = \sum_r w_r M_r v, \quad
            \nabla_x f = \sum_r w_r (q_r - \bar q)\, g_r, \quad
            \nabla_x^2 f = \sum_r w_r (q_r - \bar q)
                \big[(g_r - \bar g)(g_r - \bar g)^T - \tfrac{2}{\sigma} P_r\big],

        :math:`\nabla_x \nabla_v f = 2 \sum_r w_r (g_r - \bar g)(M_r v)^T` and
        :math:`\nabla_v^2 f = 2 M(x)`. The :math:`P_r` term vanishes for a
        global ``proximity`` (:math:`\sum_r w_r (q_r - \bar q) = 0`).
        """
        spread = self._centered(weights, (local @ v[:, :, None])[..., 0])  # w_r (q_r - q_bar)
        terms = ((weights[:, None, :] @ local)[:, 0], (-2.0 / self.sigma) * (spread[:, None, :] @ half_grad)[:, 0])
        if not hessian:
            return terms
        centered = half_grad - (weights[:, None, :] @ half_grad)  # h_r - h_bar = -(sigma / 2) (g_r - g_bar)
        hessian_x = (4.0 / self.sigma**2) * (spread[:, :, None] * centered).transpose(0, 2, 1) @ centered
        if self.proximity is None:
            hessian_x -= (2.0 / self.sigma) * self._blend_metric(spread)
        mixed = (-4.0 / self.sigma) * (weights[:, :, None] * centered).transpose(0, 2, 1) @ local
        return terms + (hessian_x, mixed, 2.0 * self._blend_metric(weights))

    def energy_terms(self, tangent_vec, base_point):
        return self._map_chunks(lambda field, x, v: field._energy_terms(*field._blend(x, v), v), base_point, tangent_vec)

    def energy_hessian(self, tangent_vec, base_point):
        return self._map_chunks(lambda field, x, v: field._energy_terms(*field._blend(x, v), v, True)[2:], base_point, tangent_vec)

    def segment_energy_terms(self, curves, hessian=False):
        return self._map_curves(lambda field, nodes: field._segment_terms(nodes, hessian), curves)

    def segment_end_quadratics(self, curves):
        return self._map_curves(lambda field, nodes: field._end_quadratics(nodes), curves)

    def _map_curves(self, fn, curves):
        """Apply ``fn(field, nodes)`` to chunks of flattened curves ``(batch, n_nodes, dim)`` (``field``: :meth:`_sparse` at
        their nodes and midpoints); its outputs ``(batch N, ...)`` come back as ``(..., N, ...)``."""
        curves = self._check_curves(curves)
        nodes = curves.reshape((-1,) + curves.shape[-2:])
        n_nodes = nodes.shape[1]
        size = max(1, CACHE_ELEMENTS // (n_nodes * self.n_centers * self.dim))
        parts = [fn(self._sparse_along(chunk), chunk) for chunk in (nodes[start : start + size] for start in range(0, len(nodes), size))]
        parts = [part if isinstance(part, tuple) else (part,) for part in parts]
        merged = parts[0] if len(parts) == 1 else [np.concatenate(values) for values in zip(*parts)]
        shape = curves.shape[:-2] + (n_nodes - 1,)
        merged = tuple(values.reshape(shape + values.shape[1:]) for values in merged)
        return _finite(merged if len(merged) > 1 else merged[0], "curves")

    def _sparse_along(self, nodes):
        """:meth:`_sparse` at the nodes and segment midpoints of curves ``(batch, n_nodes, dim)``."""
        if self.n_centers < SPARSE_MIN_CENTERS:
            return self
        points = np.concatenate([nodes, 0.5 * (nodes[:, 1:] + nodes[:, :-1])], axis=1).reshape(-1, self.dim)
        return self._sparse(points, curves=True)

    def _node_terms(self, nodes):
        r"""Products at the nodes of curves ``(batch, n_nodes, dim)``, one GEMM for all of them.

        :math:`M_r` is linear: :math:`M_r (c_j - c_0)` at the nodes give :math:`M_r d_i`
        (differences) and the halved gradients :math:`h_r = P_r (x - x_r)` anywhere on the
        curve; relative to the curve's first node :math:`c_0`, so nothing cancels at large
        offsets. The zero row of :math:`c_0` itself carries :math:`c_0 - \bar x` instead
        (:math:`\bar x` the mean center), which gives :math:`M_r (c_0 - x_r) = M_r (c_0 - \bar x)
        - M_r (x_r - \bar x)` without a second pass over the :math:`M_r`.
        Returns :math:`c_j - c_0`, :math:`x_r - c_0` ``(batch, R, dim)``,
        :math:`M_r (c_j - c_0)` and :math:`h_r(c_j)`, both ``(batch, n_nodes, R, dim)``.
        """
        batch, n_nodes, dim = nodes.shape
        relative = nodes - nodes[:, :1]
        centers = self.centers - nodes[:, :1]
        rows = relative.copy()
        if self.proximity is None:
            rows[:, 0] = nodes[:, 0] - self._origin
        products = self._local_products(rows.reshape(-1, dim)).reshape(batch, n_nodes, self.n_centers, dim)
        if self.proximity is None:  # M_r (c_j - x_r) = M_r (c_j - c_0) + M_r (c_0 - x_r)
            anchor = products[:, 0] - self._shifted_products
            products[:, 0] = 0.0
            half_grad = products + anchor[:, None]
        else:
            half_grad = (relative @ self.proximity)[:, :, None, :] - (centers @ self.proximity)[:, None]
        return relative, centers, products, half_grad

    def _segment_terms(self, nodes, hessian):
        data = compiled_data(self, nodes.shape[0] * (nodes.shape[1] - 1), curves=True)
        if data is not None:  # compiled where that is faster, unless a proximity overflows
            terms, done = segment_energy_terms(data, np.ascontiguousarray(nodes), hessian)
            if done:
                return terms if hessian else terms[:2]
        relative, centers, products, node_grad = self._node_terms(nodes)
        local = np.diff(products, axis=1).reshape(-1, self.n_centers, self.dim)
        steps = np.diff(nodes, axis=1).reshape(-1, self.dim)
        midpoints = 0.5 * (relative[:, 1:] + relative[:, :-1])
        diff = (midpoints[:, :, None, :] - centers[:, None]).reshape(-1, self.n_centers, self.dim)
        half_grad = (0.5 * (node_grad[:, 1:] + node_grad[:, :-1])).reshape(-1, self.n_centers, self.dim)
        return self._energy_terms(*self._softmax(self._proximities(half_grad, diff), half_grad), local, steps, hessian)

    def _end_quadratics(self, nodes):
        r""":math:`d_i^T M(c_i) d_i = \sum_r w_r(c_i)\, d_i^T M_r d_i` and the same at :math:`c_{i+1}`, from :meth:`_node_terms`."""
        relative, centers, products, node_grad = self._node_terms(nodes)
        batch, n_nodes = relative.shape[:2]
        diff = relative[:, :, None, :] - centers[:, None]
        scores = self._proximities(node_grad.reshape(-1, self.n_centers, self.dim), diff.reshape(-1, self.n_centers, self.dim))
        weights = self._softmax(scores, None)[0].reshape(batch, n_nodes, self.n_centers)
        quadratics = np.einsum("bnrd,bnd->bnr", np.diff(products, axis=1), np.diff(nodes, axis=1))  # d_i^T M_r d_i
        return np.stack([np.einsum("bnr,bnr->bn", w, quadratics) for w in (weights[:, :-1], weights[:, 1:])], axis=-1).reshape(-1, 2)

    def _derivative_product(self, weights, half_grad, local, v):
        r""":math:`(\partial_v M) v = \sum_r w_r ((g_r - \bar g) \cdot v) M_r v`."""
        slopes = (-2.0 / self.sigma) * (half_grad @ v[:, :, None])[..., 0]  # g_r . v
        return (self._centered(weights, slopes)[:, None, :] @ local)[:, 0]

    def derivative_vector_product(self, tangent_vec, base_point):
        return self._map_chunks(lambda field, x, v: field._derivative_product(*field._blend(x, v), v), base_point, tangent_vec)

    def _acceleration(self, tangent_vec, base_point):
        r"""The fused form of :meth:`MetricField.geodesic_acceleration`, for ``(n, dim)`` arrays (ODE right-hand sides).

        With :math:`q_r = v^T M_r v` and :math:`\nu_r = h_r \cdot v`, the right-hand side
        :math:`\tfrac12 \nabla_x f - (\partial_v M) v` of :meth:`_energy_terms` and
        :meth:`_derivative_product` is :math:`-\tfrac{1}{\sigma} \sum_r [\tilde q_r h_r - 2 \tilde \nu_r M_r v]`,
        :math:`\tilde a_r = w_r (a_r - \bar a)`: one product with the stacked :math:`[h_r; M_r v]`.
        """
        weights, half_grad = self._weights(base_point)
        local = self._local_products(tangent_vec)
        stacked = np.concatenate([half_grad, local], axis=1)  # (n, 2R, dim)
        quadratics = (stacked @ tangent_vec[:, :, None]).reshape(len(weights), 2, self.n_centers)  # [nu_r], [q_r]
        spread = self._centered(weights[:, None, :], quadratics)[:, ::-1] * np.array([[1.0], [-2.0]])
        rhs = (-1.0 / self.sigma) * (spread.reshape(len(weights), 1, 2 * self.n_centers) @ stacked)[:, 0]
        return solve_spd(self._blend_metric(weights), rhs)

    @staticmethod
    def _compiled(compiled_function, numpy_function):
        """``f(field, x, *vectors)`` by a compiled batch function of :mod:`~riemlocal.numerics` where that is faster
        (:func:`~riemlocal.numerics.compiled_data`), else, or where it declines (overflow), by numpy."""

        def function(field, x, *vectors):
            data = compiled_data(field, len(x))
            if data is not None:
                out, done = compiled_function(data, *(np.ascontiguousarray(a) for a in (x, *vectors)))
                if done:
                    return out
            return numpy_function(field, x, *vectors)

        return function

    def geodesic_acceleration(self, tangent_vec, base_point):
        numpy_function = lambda field, x, v: field._acceleration(v, x)  # noqa: E731
        return self._map_chunks(self._compiled(accelerations, numpy_function), base_point, tangent_vec)

    def _slopes(self, weights, half_grad):
        r"""Centered weight gradients :math:`c_r = g_r - \bar g`, shape ``(n, R, dim)``."""
        return (-2.0 / self.sigma) * (half_grad - weights[:, None, :] @ half_grad)

    def metric_second_derivative(self, base_point):
        r"""Analytic :math:`\partial_k \partial_l M = \sum_r \partial_k \partial_l w_r\, M_r`.

        With :math:`c_r = g_r - \bar g`, :math:`C = \sum_s w_s c_s c_s^T` and
        :math:`\bar P = \sum_s w_s P_s`:
        :math:`\partial_k \partial_l w_r = w_r [c_r c_r^T - C - \tfrac{2}{\sigma}(P_r - \bar P)]_{kl}`
        (the last term vanishes for a global ``proximity``).
        """
        full = self.metrics

        def second(field, x):
            weights, half_grad = field._weights(x)
            slopes = field._slopes(weights, half_grad)
            outer = np.einsum("nrk,nrl->nrkl", slopes, slopes)
            covariance = np.einsum("nr,nrkl->nkl", weights, outer)
            metric, metrics = field._blend_metric(weights), full if field is self else field.metrics
            result = np.einsum("nr,nrkl,rij->nijkl", weights, outer, metrics)
            result -= np.einsum("nkl,nij->nijkl", covariance, metric)
            if field.proximity is None:
                result -= (2.0 / field.sigma) * (
                    np.einsum("nr,rkl,rij->nijkl", weights, metrics, metrics)
                    - np.einsum("nkl,nij->nijkl", metric, metric)
                )
            return result

        return self._map_chunks(second, base_point)

    def _acceleration_derivative(self, x, v, delta, delta_v):
        r"""Fused :meth:`acceleration_derivative` from the weights: :math:`O(R D^2)`, no :math:`D^4` tensor.

        With :math:`q_r = v^T M_r v`, :math:`p_r = v^T M_r \delta v`, :math:`\kappa_r = c_r \cdot \delta x`,
        :math:`\nu_r = c_r \cdot v`, :math:`\eta_r = c_r \cdot \delta v` and :math:`\tilde a_r = w_r (a_r - \bar a)`:
        :math:`\tfrac12 [v^T \partial_l \partial_{\delta x} M v]_l = \tfrac12 \sum_r \tilde q_r (\kappa_r c_r - \tfrac{2}{\sigma} P_r \delta x)`,
        :math:`(\partial_{\delta x} \partial_v M) v = \sum_r \widetilde{(\kappa\nu - \tfrac{2}{\sigma} \delta x^T P v)}_r M_r v`,
        :math:`(\partial_{\delta x} M) a = \sum_r w_r \kappa_r M_r a`,
        :math:`[v^T \partial_l M \delta v]_l = \sum_r \tilde p_r c_r`,
        :math:`(\partial_v M) \delta v + (\partial_{\delta v} M) v = \sum_r w_r (\nu_r M_r \delta v + \eta_r M_r v)`.
        """
        weights, half_grad, local = self._blend(x, v)
        metric = self._blend_metric(weights)
        rhs = 0.5 * self._energy_terms(weights, half_grad, local, v)[1] - self._derivative_product(weights, half_grad, local, v)
        acceleration = solve_spd(metric, rhs)
        slopes = self._slopes(weights, half_grad)
        kappa, nu, eta = ((slopes @ u[:, :, None])[..., 0] for u in (delta, v, delta_v))
        spread = self._centered(weights, (local @ v[:, :, None])[..., 0])
        first = 0.5 * ((spread * kappa)[:, None, :] @ slopes)[:, 0]
        mixed = kappa * nu
        if self.proximity is None:
            local_delta = self._local_products(delta)
            first -= (1.0 / self.sigma) * (spread[:, None, :] @ local_delta)[:, 0]
            mixed = mixed - (2.0 / self.sigma) * (local_delta @ v[:, :, None])[..., 0]
        second = (self._centered(weights, mixed)[:, None, :] @ local)[:, 0]
        third = ((weights * kappa)[:, None, :] @ self._local_products(acceleration))[:, 0]
        local_dv = self._local_products(delta_v)
        cross = self._centered(weights, (local @ delta_v[:, :, None])[..., 0])
        velocity = (cross[:, None, :] @ slopes)[:, 0] - ((weights * nu)[:, None, :] @ local_dv)[:, 0]
        velocity -= ((weights * eta)[:, None, :] @ local)[:, 0]
        return solve_spd(metric, first - second - third + velocity)

    def acceleration_derivative(self, tangent_vec, base_point, position_vec, velocity_vec):
        function = self._compiled(acceleration_derivatives, lambda field, *arrays: field._acceleration_derivative(*arrays))
        return self._map_chunks(function, base_point, tangent_vec, position_vec, velocity_vec)


class SmoothLocalField(RBFLocalField):
    r"""Hauberg, Freifeld & Black's smooth local metric (eq. 6).

    .. math::
        M(x) = \sum_r w_r(x) M_r, \qquad
        w = \mathrm{softmax}_r\big(-\tfrac{\rho}{2} \|x - x_r\|^2_{M_r}\big).

    Smooth, hence a Riemannian metric (Lemma 1). Computed in log space.

    Parameters
    ----------
    centers : array-like of shape (n_centers, dim)
    metrics : array-like of shape (n_centers, dim, dim)
    rho : float, default=1.0
        Sharpness (> 0) of the blend; large ``rho`` approaches the nearest field.
    """

    def __init__(self, centers, metrics, rho=1.0):
        self.rho = check_positive(rho, "rho")
        if not np.isfinite(2.0 / self.rho):
            raise ValueError(f"rho must be > 0 with 2 / rho finite, got {rho!r}")
        super().__init__(centers, metrics, sigma=2.0 / self.rho, proximity=None)

    def __repr__(self):
        return f"SmoothLocalField(n_centers={self.n_centers}, dim={self.dim}, rho={self.rho})"
