"""A field from placed local metrics, by interpolation kind (Ramanan & Baker eq. 13--14; Hauberg et al. eq. 6)."""

from ..utils.validation import check_option

__all__ = ["INTERPOLATIONS", "interpolate"]

#: interpolation kind -> the :class:`LocalMetrics` method that builds its field
_BUILDERS = {
    "nearest": lambda placement, rho: placement.nearest_field(),
    "rbf": lambda placement, rho: placement.rbf_field(),
    "smooth": lambda placement, rho: placement.smooth_field(rho),
}
#: names accepted by ``interpolation``
INTERPOLATIONS = tuple(_BUILDERS)


def interpolate(placement, interpolation="nearest", rho=1.0):
    """The field of a fitted :class:`LocalMetrics`: nearest center, RBF blend or smooth (sharpness ``rho``)."""
    return _BUILDERS[check_option(interpolation, "interpolation", INTERPOLATIONS)](placement, rho)
