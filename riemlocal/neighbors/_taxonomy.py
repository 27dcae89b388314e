"""Which (where, rule) pairs are legal, from one table: :data:`riemlocal.distances.RULES_BY_STRUCTURE`.

A placement and an interpolation give a field of one declared structure
(:data:`riemlocal.fields.STRUCTURES`); the structure decides which distance
rules it serves (docs/concepts.rst, "Distance rules").
:class:`~riemlocal.neighbors.LocalMetricKNN` validates its parameters against
that table before it fits anything.
"""

from ..distances import RULES, RULES_BY_STRUCTURE
from ..fields import LazyField
from ..placement import INTERPOLATIONS, WHERE
from ..utils.validation import check_option

__all__ = ["field_structure", "check_where_rule"]


def field_structure(where, interpolation):
    """Declared structure of the field placed by ``where`` and read through ``interpolation``."""
    if where == "global":
        return "constant"
    if where == "lazy":
        return LazyField.structure
    return "piecewise_constant" if interpolation == "nearest" else "smooth"


def check_where_rule(where, interpolation, rule):
    """Check the options, then that the field of ``(where, interpolation)`` serves ``rule``."""
    check_option(where, "where", WHERE)
    check_option(interpolation, "interpolation", INTERPOLATIONS)
    check_option(rule, "rule", RULES)
    if rule not in RULES_BY_STRUCTURE[field_structure(where, interpolation)]:
        raise ValueError(
            f"rule={rule!r} needs a smooth field; where={where!r} with interpolation={interpolation!r} "
            "gives a piecewise-constant one (no geodesics): use rule='line' or a smooth interpolation ('rbf', 'smooth')"
        )
