"""Which (where, rule) pairs are legal: declared once, in :data:`RULES_BY_STRUCTURE`.

A placement and an interpolation give a field of one structure; a structure
serves some distance rules (DESIGN.md, "Field structure decides the
algorithm"). :class:`~riemlocal.neighbors.LocalMetricKNN` validates its
parameters against this table before it fits anything.
"""

from ..distances import RULES
from ..placement import INTERPOLATIONS, WHERE
from ..utils.validation import check_option

__all__ = ["RULES_BY_STRUCTURE", "LAZY_STRUCTURE", "field_structure", "check_where_rule"]

#: structure of a LazyField for the rules. It lists the cells a segment crosses once fields
#: declare their structure (issue 11); then this becomes "piecewise constant" and allows the line rules.
LAZY_STRUCTURE = "learned at points"

#: structure -> (rules it serves, what the other rules need)
RULES_BY_STRUCTURE = {
    "constant": (RULES, ""),
    "smooth": (RULES, ""),
    "piecewise constant": (
        tuple(rule for rule in RULES if rule != "geodesic"),
        (
            "a smooth field; a piecewise-constant field (interpolation='nearest') has no geodesics: "
            "use rule='line' or a smooth interpolation ('rbf', 'smooth')"
        ),
    ),
    "learned at points": (
        ("test", "train"),
        (
            "the metric along whole curves; a lazy field is learned at points only, so use rule='test' (Lazy) "
            "or 'train' (online per-exemplar)"
        ),
    ),
}


def field_structure(where, interpolation):
    """Structure of the field placed by ``where`` and read through ``interpolation``."""
    if where == "global":
        return "constant"
    if where == "lazy":
        return LAZY_STRUCTURE
    return "piecewise constant" if interpolation == "nearest" else "smooth"


def check_where_rule(where, interpolation, rule):
    """Check the options, then that the field of ``(where, interpolation)`` serves ``rule``."""
    check_option(where, "where", WHERE)
    check_option(interpolation, "interpolation", INTERPOLATIONS)
    check_option(rule, "rule", RULES)
    served, needs = RULES_BY_STRUCTURE[field_structure(where, interpolation)]
    if rule not in served:
        raise ValueError(f"rule={rule!r} needs {needs} (where={where!r}, interpolation={interpolation!r})")
