"""Predictions and rule distances of LocalMetricKNN pinned before it became a composition of parts.

Computed with the code of commit bfeb71a (one class per estimator); a refactoring must
reproduce them to rounding.
"""

import numpy as np
import pytest

from helpers import CovarianceLearner
from riemlocal.neighbors import LocalMetricKNN

PINNED = [
    ({'where': 'class', 'rule': 'train'}, [0, 2, 0, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0310833234, 0.0392728397, 0.0502761834], [0.0016462542, 0.0224303023, 0.0340424974]]),
    ({'where': 'exemplar', 'rule': 'test', 'n_local': 15}, [0, 2, 0, 0, 1, 1, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0289976268, 0.0622257435, 0.0478439775], [0.0028099442, 0.0280034853, 0.0649538005]]),
    ({'where': 'reference', 'rule': 'line', 'n_references': 10, 'random_state': 0}, [0, 2, 1, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0282064414, 0.0582285316, 0.0497267105], [0.0021155046, 0.0194160647, 0.0440288352]]),
    ({'where': 'reference', 'rule': 'line_length', 'interpolation': 'rbf', 'n_references': 10, 'random_state': 0}, [0, 2, 1, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0293503535, 0.0584147038, 0.0496545867], [0.0020353191, 0.0192972191, 0.043141383]]),
    ({'where': 'reference', 'rule': 'test', 'interpolation': 'smooth', 'n_references': 10, 'random_state': 0, 'cv_smoothing': False}, [0, 2, 0, 0, 1, 0, 0, 1, 2, 2, 0], [[1, 42, 53], [66, 74, 7]], [[0.0324124437, 0.0571424059, 0.0484828471], [0.0020429637, 0.0201868899, 0.0429993443]]),
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
