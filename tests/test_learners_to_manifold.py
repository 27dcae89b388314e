"""Every learner reaches LearnedMetricManifold: the snippet of docs/concepts.rst, run as written."""

from pathlib import Path

import numpy as np

CONCEPTS = Path(__file__).parents[1] / "docs" / "concepts.rst"


def docs_snippet():
    """The code block of the section "Every learner becomes a manifold", dedented."""
    section = CONCEPTS.read_text().split("Every learner becomes a manifold")[1]
    block = section.split(".. code-block:: python\n\n")[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("   "):
            break
        lines.append(line[3:])
    return "\n".join(lines)


def test_each_of_the_five_learners_gives_a_manifold_with_a_symmetric_positive_distance():
    namespace = {}
    exec(compile(docs_snippet(), str(CONCEPTS), "exec"), namespace)
    manifolds, X = namespace["manifolds"], namespace["X"]
    assert sorted(manifolds) == ["BoostMetric", "CCML", "GLML", "LDA", "LMNN"]
    for name, space in manifolds.items():
        forward = space.metric.dist(X[:3], X[-3:])
        np.testing.assert_allclose(namespace["distances"][name], forward)
        np.testing.assert_allclose(space.metric.dist(X[-3:], X[:3]), forward, rtol=1e-6, err_msg=name)
        assert np.all(forward > 0.1), name
        assert np.all(space.metric.dist(X[:3], X[:3]) < 1e-8), name
