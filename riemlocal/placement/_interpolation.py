"""A field from placed local metrics, by interpolation kind (Ramanan & Baker eq. 13--14; Hauberg et al. eq. 6)."""

from ..fields import LazyField
from ..utils.validation import check_option
from ._local_metrics import NEIGHBOURHOOD_SIZES, PLACEMENTS, LocalMetrics

__all__ = ["INTERPOLATIONS", "WHERE_OPTIONS", "interpolate", "place_field"]

#: interpolation kind -> the :class:`LocalMetrics` method that builds its field
_BUILDERS = {
    "nearest": lambda placement, rho: placement.nearest_field(),
    "rbf": lambda placement, rho: placement.rbf_field(),
    "smooth": lambda placement, rho: placement.smooth_field(rho),
}
#: names accepted by ``interpolation``
INTERPOLATIONS = tuple(_BUILDERS)
#: names accepted by ``where`` of :func:`place_field`: the placements, or a LazyField learned at the query
WHERE_OPTIONS = (*PLACEMENTS, "lazy")


def interpolate(placement, interpolation="nearest", rho=1.0):
    """The field of a fitted :class:`LocalMetrics`: nearest center, RBF blend or smooth (sharpness ``rho``)."""
    return _BUILDERS[check_option(interpolation, "interpolation", INTERPOLATIONS)](placement, rho)


def place_field(learner, X, y, where, interpolation="nearest", rho=1.0, *, n_local="auto", verbose=False, **options):
    """Fit the placement ``where`` and build its field; return ``(placement, field)``.

    ``where="lazy"`` fits only the global metric (``where="global"``) and
    returns Ramanan & Baker's *Lazy* field around it: a
    :class:`~riemlocal.fields.LazyField` learning ``learner`` on the
    :math:`S` = ``n_local`` nearest training points of each query.
    ``options`` go to :class:`LocalMetrics` (``global_learner``,
    ``n_references``, ``sigma``, ...).
    """
    lazy = check_option(where, "where", WHERE_OPTIONS) == "lazy"
    placement = LocalMetrics(
        learner, where="global" if lazy else where, n_local=n_local, verbose=verbose, **options
    ).fit(X, y)
    if not lazy:
        return placement, interpolate(placement, interpolation, rho)
    size = NEIGHBOURHOOD_SIZES["lazy"] if n_local == "auto" else n_local
    field = LazyField(learner, X, y, n_local=size, proximity=placement.global_metric_, verbose=verbose)
    return placement, field
