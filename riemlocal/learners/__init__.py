"""Local metric learners (the *how*): scikit-learn estimators with ``metric_`` and ``components_``."""

from ._base import MetricLearner
from ._boostmetric import BoostMetric
from ._ccml import CCMLMetric
from ._lda import LDAMetric
from ._lmnn import LMNNMetric
from ._local_fit import (
    CONDITION_WARNING,
    WEIGHT_FLOOR,
    bound_condition,
    check_learner,
    check_max_condition,
    check_rank,
    condition_metric,
    condition_numbers,
    fit_local_metric,
)

__all__ = [
    "MetricLearner",
    "LDAMetric",
    "LMNNMetric",
    "BoostMetric",
    "CCMLMetric",
    "fit_local_metric",
    "condition_metric",
    "condition_numbers",
    "bound_condition",
    "check_max_condition",
    "check_rank",
    "check_learner",
    "WEIGHT_FLOOR",
    "CONDITION_WARNING",
]
