"""Which (where, rule) pairs are legal: the structure of the field a placement gives, and the rule registry.

A placement and an interpolation give a field of one declared structure
(:data:`riemlocal.fields.STRUCTURES`), read here from the field classes; the
rule registry (:data:`riemlocal.distances.RULES`) states which structures
each rule serves. :class:`~riemlocal.neighbors.LocalMetricKNN` validates its
parameters against both before it fits anything.
"""

from ..distances import check_rule
from ..fields import ConstantField, LazyField, NearestLocalField, RBFLocalField, SmoothLocalField
from ..placement import INTERPOLATIONS, WHERE_OPTIONS
from ..utils.validation import check_option

__all__ = ["field_structure", "check_where_rule"]

#: the field class of each interpolation (:func:`riemlocal.placement.interpolate`)
_INTERPOLATED = {"nearest": NearestLocalField, "rbf": RBFLocalField, "smooth": SmoothLocalField}


def field_structure(where, interpolation):
    """Declared structure of the field placed by ``where`` and read through ``interpolation``."""
    if where == "global":
        return ConstantField.structure
    if where == "lazy":
        return LazyField.structure
    return _INTERPOLATED[interpolation].structure


def check_where_rule(where, interpolation, rule):
    """Check the options, then that the field of ``(where, interpolation)`` is served by ``rule``."""
    check_option(where, "where", WHERE_OPTIONS)
    check_option(interpolation, "interpolation", INTERPOLATIONS)
    source = f"the field of where={where!r} with interpolation={interpolation!r}"
    return check_rule(rule, field_structure(where, interpolation), source)
