"""Statistics on a Riemannian manifold: Fréchet mean, PGA and regression (Hauberg et al. sec. 3.1.1).

Every estimator takes a geomstats-style ``space`` (``space.metric.exp``,
``log``, ``metric_matrix``): a :class:`~riemlocal.manifold.LearnedMetricManifold`
or any geomstats manifold.
"""

from ._frechet import FrechetMean
from ._pga import PrincipalGeodesicAnalysis
from ._regression import GeodesicRegression, TangentSpaceRegression

__all__ = ["FrechetMean", "PrincipalGeodesicAnalysis", "GeodesicRegression", "TangentSpaceRegression"]
