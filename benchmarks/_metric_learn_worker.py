"""Fit metric-learn learners in their own environment (run by bench_learners.py through a subprocess).

metric-learn 0.7.0 needs an older scikit-learn than riemlocal, so it lives in a
separate virtual environment (not tracked by git)::

    python3 -m venv .venv-metriclearn
    .venv-metriclearn/bin/pip install metric-learn==0.7.0 "scikit-learn<1.6"

Usage::

    python _metric_learn_worker.py LEARNER IN.npz OUT.npz

``IN.npz`` holds ``X_0, y_0, X_1, y_1, ...`` (one training set per split);
``OUT.npz`` receives ``components_0, ...`` (``L`` with metric ``L^T L``) and
``fit_seconds`` (one entry per split). Only numpy and metric-learn are used.
"""

import os
import sys
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import numpy as np  # noqa: E402


def make_learner(name):
    import metric_learn

    if name == "LMNN":
        return metric_learn.LMNN(n_neighbors=3, random_state=0)
    if name == "NCA":
        return metric_learn.NCA(max_iter=100, random_state=0)
    if name == "ITML":
        return metric_learn.ITML_Supervised(random_state=0)
    raise ValueError(f"unknown metric-learn learner {name!r}")


def main(name, path_in, path_out):
    data = np.load(path_in)
    n_splits = sum(key.startswith("X_") for key in data.files)
    components, seconds = {}, []
    for split in range(n_splits):
        learner = make_learner(name)
        start = time.perf_counter()
        learner.fit(data[f"X_{split}"], data[f"y_{split}"])
        seconds.append(time.perf_counter() - start)
        components[f"components_{split}"] = learner.components_
    np.savez(path_out, fit_seconds=np.array(seconds), **components)


if __name__ == "__main__":
    main(*sys.argv[1:])
