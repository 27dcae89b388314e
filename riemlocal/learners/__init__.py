"""Local metric learners (the *how*): scikit-learn estimators with ``metric_`` and ``components_``."""

from ._base import MetricLearner
from ._boostmetric import BoostMetric
from ._ccml import CCMLMetric
from ._lda import LDAMetric
from ._lmnn import LMNNMetric

__all__ = ["MetricLearner", "LDAMetric", "LMNNMetric", "BoostMetric", "CCMLMetric"]
