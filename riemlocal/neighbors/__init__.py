r"""Nearest-neighbour classification with local metrics (Ramanan & Baker, Sec. III-A).

A global metric shortlists candidates with a KD-tree (:class:`GlobalShortlist`);
a local metric field, read through a distance rule, re-ranks them; a vote
(:func:`knn_votes`) or the class-conditional rule (:func:`ccknn_scores`)
decides. :class:`LocalMetricKNN` composes these parts; which (where, rule)
pairs it accepts follows from the rule registry, :data:`riemlocal.distances.RULES`.
"""

from ._classifier import LocalMetricKNN
from ._decision import DECISIONS, ccknn_predict, ccknn_scores, knn_votes
from ._shortlist import GlobalShortlist
from ._taxonomy import check_where_rule, field_structure

__all__ = [
    "LocalMetricKNN",
    "GlobalShortlist",
    "knn_votes",
    "ccknn_scores",
    "ccknn_predict",
    "check_where_rule",
    "field_structure",
    "DECISIONS",
]
