r"""Where and when local metrics are learned (Ramanan & Baker, Sec. II-C and II-D).

:class:`LocalMetrics` fits one Mahalanobis metric per *region* with a
learner (the *how*) and turns them into metric tensor fields:

===============  ==============================================  ==========================
``where``        sample weights of the local fit                 centers of the field
===============  ==============================================  ==========================
``"global"``     all points (Global, eq. 5)                      one center
``"class"``      class :math:`j` and its neighbours (eq. 6--8)   every training point
``"exemplar"``   the :math:`S` nearest neighbours (eq. 9)        every training point
``"reference"``  RBF weights :math:`w_{ij}` (eq. 15)             :math:`R` random points
===============  ==============================================  ==========================

The parts: :mod:`._regions` (which samples each local fit sees, the RBF
bandwidth), :class:`LocalMetrics` (the global metric, one fit per region) and
:func:`interpolate` (a field from the placed metrics); :func:`place_field`
composes them for any ``where``, ``"lazy"`` included. The *Lazy* metric
learned at the query point is :class:`riemlocal.fields.LazyField`; it shares
:func:`fit_local_metric`.
Which distance is read from a field is the job of the rule (``"test"``,
``"train"``, ``"line"``, ...) in :mod:`riemlocal.distances`, so Global,
Per-class, Per-exemplar, Lazy, Interpolated and Line-integral are fields
times rules, not separate code paths.
"""

from ..learners import condition_metric, fit_local_metric
from ._interpolation import INTERPOLATIONS, WHERE_OPTIONS, interpolate, place_field
from ._local_metrics import (
    CONDITION_WARNING,
    NEIGHBOURHOOD_SIZES,
    PLACEMENTS,
    PROXIMITIES,
    LocalMetrics,
    default_learner,
    validate_classes,
)
from ._regions import auto_bandwidth

__all__ = [
    "LocalMetrics",
    "interpolate",
    "place_field",
    "auto_bandwidth",
    "default_learner",
    "validate_classes",
    "fit_local_metric",
    "condition_metric",
    "PLACEMENTS",
    "WHERE_OPTIONS",
    "INTERPOLATIONS",
    "NEIGHBOURHOOD_SIZES",
    "PROXIMITIES",
    "CONDITION_WARNING",
]
