"""Predictions and rule distances of LocalMetricKNN pinned before it became a composition of parts.

Computed with the code of commit bfeb71a (one class per estimator); a refactoring must
reproduce them to rounding. The three ``where="reference"`` rows were recomputed once
when ``sigma="auto"`` stopped counting a reference's zero distance to itself
(:func:`riemlocal.placement.auto_bandwidth`).
"""

import numpy as np
import pytest

from helpers import CovarianceLearner
from riemlocal.neighbors import LocalMetricKNN

PINNED = [
    ({'where': 'class', 'rule': 'train'}, [0, 2, 0, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0310833234, 0.0392728397, 0.0502761834], [0.0016462542, 0.0224303023, 0.0340424974]]),
    ({'where': 'exemplar', 'rule': 'test', 'n_local': 15}, [0, 2, 0, 0, 1, 1, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0289976268, 0.0622257435, 0.0478439775], [0.0028099442, 0.0280034853, 0.0649538005]]),
    ({'where': 'reference', 'rule': 'line', 'n_references': 10, 'random_state': 0}, [0, 2, 1, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0283033234, 0.0577739288, 0.049823988], [0.0020952713, 0.0194842056, 0.043049559]]),
    ({'where': 'reference', 'rule': 'line_length', 'interpolation': 'rbf', 'n_references': 10, 'random_state': 0}, [0, 2, 1, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0293621052, 0.0579486402, 0.0497513719], [0.0020192491, 0.0193654794, 0.0423954378]]),
    ({'where': 'reference', 'rule': 'test', 'interpolation': 'smooth', 'n_references': 10, 'random_state': 0, 'cv_smoothing': False}, [0, 2, 0, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0323084189, 0.0566886508, 0.0485978496], [0.0020260004, 0.0201996072, 0.042291444]]),
    ({'where': 'lazy', 'rule': 'test', 'n_local': 20, 'decision': 'ccknn'}, [0, 2, 0, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 0, 9], [7, 11, 1]], [[0.0470225971, 0.1139255805, 0.1239877902], [0.0499443145, 0.508064901, 0.9091928498]]),
    ({'where': 'lazy', 'rule': 'train', 'n_local': 20}, [0, 2, 0, 0, 1, 1, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0314314721, 0.0632945751, 0.0472274897], [0.0023304555, 0.0279978035, 0.0559172897]]),
    ({'where': 'global', 'rule': 'test', 'decision': 'ccknn'}, [0, 2, 1, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 0, 9], [7, 11, 1]], [[0.1247422323, 0.3097993119, 0.3535173837], [0.1436840919, 1.3511315129, 1.7359216048]]),
    ({'where': 'class', 'rule': 'line', 'decision': 'ccknn', 'shortlist': 10}, [0, 2, 1, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 0, 9], [7, 11, 1]], [[0.0310833234, 0.0714887989, 0.0820966573], [0.0325699387, 0.3373799066, 0.4160301976]]),
]


@pytest.mark.parametrize("params, predictions, candidates, distances_sq", PINNED)
def test_predictions_and_distances_are_unchanged(params, predictions, candidates, distances_sq):
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 25)
    X = rng.normal(size=(75, 3)) * [1.0, 2.0, 0.5] + np.c_[y, -y, 0.3 * y]
    Xq = X[::7] + np.random.default_rng(5).normal(scale=0.5, size=(11, 3))
    clf = LocalMetricKNN(CovarianceLearner(), **params).fit(X, y)
    np.testing.assert_array_equal(clf.predict(Xq), predictions)
    found, found_sq = clf.local_distances(Xq[:2])
    np.testing.assert_array_equal(found[:, :3], candidates)
    np.testing.assert_allclose(found_sq[:, :3], distances_sq, rtol=1e-8, atol=1e-10)
