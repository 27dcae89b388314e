"""Metric tensor fields :math:`M(x)` on :math:`\\mathbb{R}^D` (the *where* of local metrics)."""

from ._base import STRUCTURES, ConstantField, MetricField, SegmentCells
from ._glml import GLMLField
from ._lazy import LazyField
from ._local import NearestLocalField, RBFLocalField, SmoothLocalField

__all__ = [
    "MetricField",
    "STRUCTURES",
    "SegmentCells",
    "ConstantField",
    "NearestLocalField",
    "RBFLocalField",
    "SmoothLocalField",
    "LazyField",
    "GLMLField",
]
