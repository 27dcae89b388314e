import numpy as np

from riemlocal.fields import SmoothLocalField


def test_placeholder_smooth_weights_sum_to_one():
    rng = np.random.default_rng(0)
    field = SmoothLocalField(rng.normal(size=(3, 2)), np.stack([np.eye(2)] * 3))
    np.testing.assert_allclose(field.weights(rng.normal(size=(4, 2))).sum(-1), 1.0)
