"""riemlocal: local metric learning as metric tensor fields, with geodesics and Riemannian statistics."""

from .fields import (
    ConstantField,
    GLMLField,
    LazyField,
    MetricField,
    NearestLocalField,
    RBFLocalField,
    SmoothLocalField,
)
from .manifold import LearnedMetric, LearnedMetricManifold

__version__ = "0.1.0"

__all__ = [
    "MetricField",
    "ConstantField",
    "NearestLocalField",
    "RBFLocalField",
    "SmoothLocalField",
    "LazyField",
    "GLMLField",
    "LearnedMetricManifold",
    "LearnedMetric",
]
