r"""How the R local metrics of a field are stored and applied: dense, or low rank plus a multiple of the identity.

Local metrics learned by LDA (and conditioned by a ridge) have the form
:math:`M_r = s_r I + U_r U_r^T` with :math:`U_r` of shape ``(D, d)``, :math:`d \ll D`.
Stored that way they take :math:`O(R D d)` memory and a product
:math:`M_r v = s_r v + U_r (U_r^T v)` costs :math:`O(D d)` instead of :math:`O(D^2)`.
:func:`metric_bank` chooses the form from the metrics' eigenvalues. A blend
:math:`M(x) = \sum_r w_r M_r` reads every entry of every :math:`M_r` in either form
(:math:`O(R D^2)`; from the factors, :math:`O(R D^2 d)`): the low-rank form blends one
point from its factors (the metric at a Log's base point) and builds the dense stack,
once, for a blend of several points (Exp's integration, ``metric_matrix`` of a batch).
"""

from functools import cached_property

import numpy as np

__all__ = ["DenseMetrics", "LowRankMetrics", "metric_bank", "LOW_RANK_MIN_DIM", "LOW_RANK_RTOL"]

#: the low-rank form is used from this dimension on, for ranks up to a quarter of it: below, the dense products are
#: cheap and the compiled evaluators (which read dense metrics) serve the field
LOW_RANK_MIN_DIM = 64
#: eigenvalues within this fraction of a metric's largest of its smallest count as equal to the smallest
LOW_RANK_RTOL = 1e-12


class _Blend:
    """The blend of a stack of metrics of dimension ``dim``, from their flattened dense entries ``_flat`` ``(R, D^2)``."""

    def blend(self, weights):
        r""":math:`\sum_r w_r M_r` for weights ``(n, R)``: shape ``(n, D, D)``."""
        return (weights @ self._flat).reshape(-1, self.dim, self.dim)


class DenseMetrics(_Blend):
    """The metrics ``(R, D, D)`` as they are."""

    def __init__(self, metrics):
        self.dense, self.dim = metrics, metrics.shape[-1]
        self._stacked = metrics.reshape(-1, metrics.shape[-1])  # rows: M_1, ..., M_R
        self._flat = metrics.reshape(len(metrics), -1)

    def products(self, v):
        """:math:`M_r v` for every metric and each row of ``v`` ``(n, D)``: shape ``(n, R, D)``."""
        return (v @ self._stacked.T).reshape(len(v), *self.dense.shape[:2])

    def own_products(self, diff):
        """:math:`M_r d_r` for differences ``diff`` ``(n, R, D)``, one per metric: shape ``(n, R, D)``."""
        return (diff.transpose(1, 0, 2) @ self.dense).transpose(1, 0, 2)  # M_r symmetric: d M_r = (M_r d)^T

    def subset(self, columns):
        """The metrics ``columns`` (indices), in the same form."""
        return DenseMetrics(self.dense[columns])

    @cached_property
    def spectra(self):
        """Smallest and largest eigenvalue of each metric, ``(R, 2)``."""
        eigenvalues = np.linalg.eigvalsh(self.dense)
        return eigenvalues[:, [0, -1]]

    def own_norm_bounds(self, relative, centers, squares, slack):
        r"""Bounds ``(n, R)`` on :math:`\|x - x_r\|^2_{M_r}` without ``(n, R, D)`` arrays: here
        :math:`\lambda_{\min}(M_r) |x - x_r|^2` and :math:`\lambda_{\max}(M_r) |x - x_r|^2`.

        ``relative`` ``(n, D)`` and ``centers`` ``(R, D)`` are the points and the centers from a common
        anchor, ``squares`` ``(n, R)`` their :math:`|x - x_r|^2` and ``slack`` ``(n, R)`` its rounding.
        """
        return self.spectra[:, 0] * (squares - slack), self.spectra[:, 1] * (squares + slack)


class LowRankMetrics(_Blend):
    r"""The metrics :math:`M_r = s_r I + U_r U_r^T`: ``scales`` ``(R,)``, ``factors`` :math:`U_r` ``(R, D, d)``."""

    def __init__(self, scales, factors):
        self.scales, self.factors, self.dim = scales, factors, factors.shape[1]
        self._stacked = factors.transpose(0, 2, 1).reshape(-1, factors.shape[1])  # rows: U_1^T, ..., U_R^T

    @property
    def dense(self):
        """The metrics ``(R, D, D)``, built on each call."""
        dense = self.factors @ self.factors.transpose(0, 2, 1)
        dense[:, np.arange(dense.shape[1]), np.arange(dense.shape[1])] += self.scales[:, None]
        return dense

    def _expand(self, coefficients, v):
        """:math:`s_r v_r + U_r c_r` for coefficients ``(n, R, d)`` and vectors ``v`` ``(n, D)`` or ``(n, R, D)``."""
        n_metrics, dim, rank = self.factors.shape
        rows = self._stacked.reshape(n_metrics, rank, dim)  # U_r^T
        out = np.ascontiguousarray((coefficients.transpose(1, 0, 2) @ rows).transpose(1, 0, 2))
        out += self.scales[:, None] * (v[:, None, :] if v.ndim == 2 else v)
        return out

    def products(self, v):
        n_metrics, _, rank = self.factors.shape
        return self._expand((v @ self._stacked.T).reshape(len(v), n_metrics, rank), v)

    def subset(self, columns):
        return LowRankMetrics(self.scales[columns], self.factors[columns])

    @cached_property
    def spectra(self):
        largest = np.linalg.eigvalsh(self.factors.transpose(0, 2, 1) @ self.factors)[:, -1]  # of U_r^T U_r (d x d)
        return np.stack([self.scales, self.scales + largest], axis=1)

    def own_norm_bounds(self, relative, centers, squares, slack):
        r""":math:`\|x - x_r\|^2_{M_r} = s_r |x - x_r|^2 + |U_r^T (x - x_r)|^2` ``(n, R)``, exact to the rounding
        ``slack`` (times :math:`\lambda_{\max}(M_r)`), as lower and upper bound: one product with all the factors.
        The arguments are those of :meth:`DenseMetrics.own_norm_bounds`."""
        n_metrics, _, rank = self.factors.shape
        projected = (relative @ self._stacked.T).reshape(len(relative), n_metrics, rank)
        projected -= np.einsum("rd,rdk->rk", centers, self.factors)  # U_r^T (x - x_r)
        norms = self.scales * squares + np.einsum("nrk,nrk->nr", projected, projected)
        slack = slack * self.spectra[:, 1]
        return norms - slack, norms + slack

    def own_products(self, diff):
        return self._expand((diff.transpose(1, 0, 2) @ self.factors).transpose(1, 0, 2), diff)

    @cached_property
    def _flat(self):
        """The dense stack ``(R, D^2)``, built on the first blend of several points."""
        return self.dense.reshape(len(self.scales), -1)

    def blend(self, weights):
        if len(weights) != 1 or "_flat" in self.__dict__:
            return super().blend(weights)
        scaled = self._stacked * np.repeat(weights[0], self.factors.shape[2])[:, None]  # rows w_r U_r^T
        blended = (self._stacked.T @ scaled)[None]
        blended[0].flat[:: self.dim + 1] += weights[0] @ self.scales
        return blended

    products.__doc__, own_products.__doc__, blend.__doc__ = DenseMetrics.products.__doc__, DenseMetrics.own_products.__doc__, _Blend.blend.__doc__
    subset.__doc__, spectra.__doc__ = DenseMetrics.subset.__doc__, DenseMetrics.spectra.__doc__



def metric_bank(metrics, low_rank=True):
    r"""The metrics ``(R, D, D)`` (SPD) in the cheaper of the two forms.

    With ``low_rank`` and :math:`D \geq` ``LOW_RANK_MIN_DIM``: eigenvalues
    :math:`\lambda_1 \le \dots \le \lambda_D` of each :math:`M_r`, :math:`s_r = \lambda_1` and
    :math:`U_r = V_r \sqrt{\lambda - s_r}` over the eigenvectors whose eigenvalue exceeds
    :math:`s_r` by more than ``LOW_RANK_RTOL`` :math:`\lambda_D`; the low-rank form is kept when
    the largest such rank :math:`d` is at most :math:`D / 4`. It equals the metrics to
    ``LOW_RANK_RTOL`` times their largest eigenvalue (plus the rounding of the eigensolver).
    """
    n_metrics, dim = metrics.shape[:2]
    if not low_rank or dim < LOW_RANK_MIN_DIM:
        return DenseMetrics(metrics)
    eigenvalues, vectors = np.linalg.eigh(metrics)
    excess = eigenvalues - eigenvalues[:, :1]
    rank = max(1, int((excess > LOW_RANK_RTOL * eigenvalues[:, -1:]).sum(axis=1).max()))
    if 4 * rank > dim:
        return DenseMetrics(metrics)
    factors = vectors[:, :, dim - rank :] * np.sqrt(excess[:, None, dim - rank :])
    return LowRankMetrics(eigenvalues[:, 0].copy(), np.ascontiguousarray(factors))
