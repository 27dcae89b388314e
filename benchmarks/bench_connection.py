"""Speed of the Levi-Civita connection beside one Exp at the same size.

Usage::

    python benchmarks/bench_connection.py [--n-centers 5] [--repeats 3]

Fields: SmoothLocalField with R random SPD metrics (condition 10) at random
centers, rho = 1. Rows: curvature (Riemann tensor and scalar curvature) at
1,000 points in D = 10 beside a batch of 1,000 Exp maps; one parallel transport
and one Jacobi field (the variational ODE, fused O(R D^2) products, no D^4
array) at D = 100 beside one Exp, all integrated at the same tolerances
(rtol = 1e-6, atol = 1e-8; a LearnedMetric at its default rtol integrates at 1e-7). Prints a markdown
table of median times over ``--repeats`` runs. Target: each within a small
multiple of the Exp beside it.
"""

import argparse
import time

import numpy as np

from riemlocal import connection
from riemlocal.fields import SmoothLocalField
from riemlocal.geodesics import integrate_geodesic
from riemlocal.numerics import EXP_ATOL_FACTOR, ODEExpSolver

RTOL = 1e-6
ATOL = RTOL * EXP_ATOL_FACTOR  # 1e-8


def _field(dim, n_centers, rng):
    q, _ = np.linalg.qr(rng.normal(size=(n_centers, dim, dim)))
    metrics = np.einsum("nij,nj,nkj->nik", q, np.exp(rng.uniform(0, np.log(10.0), (n_centers, dim))), q)
    return SmoothLocalField(rng.normal(size=(n_centers, dim)), metrics, rho=1.0)


def _median_time(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-centers", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []

    field = _field(10, args.n_centers, rng)
    x, v = rng.normal(size=(2, 1000, 10))
    v *= 0.3
    exp = _median_time(lambda: integrate_geodesic(field, v, x, (1.0,), RTOL, ATOL), args.repeats)
    riemann = _median_time(lambda: connection.riemann_tensor(field, x), args.repeats)
    scalar = _median_time(lambda: connection.scalar_curvature(field, x), args.repeats)
    rows.append(f"| Riemann tensor, 1,000 points | 10 | {riemann:.3f} | {exp:.3f} | {riemann / exp:.1f} |")
    rows.append(f"| scalar curvature, 1,000 points | 10 | {scalar:.3f} | {exp:.3f} | {scalar / exp:.1f} |")

    field = _field(100, args.n_centers, rng)
    x, v, w = rng.normal(size=(3, 1, 100))
    v *= 0.3 / np.sqrt(100)
    exp = _median_time(lambda: integrate_geodesic(field, v, x, (1.0,), RTOL, ATOL), args.repeats)
    solver = ODEExpSolver(field, rtol=RTOL)  # atol = RTOL * EXP_ATOL_FACTOR = ATOL
    transport = _median_time(lambda: connection.parallel_transport(field, w, x, v, solver), args.repeats)
    jacobi = _median_time(lambda: connection.jacobi_field(field, v, x, np.zeros_like(w), w, 1.0, solver), args.repeats)
    rows.append(f"| parallel transport, 1 vector | 100 | {transport:.3f} | {exp:.3f} | {transport / exp:.1f} |")
    rows.append(f"| Jacobi field, 1 vector | 100 | {jacobi:.3f} | {exp:.3f} | {jacobi / exp:.1f} |")

    print(f"Connection on SmoothLocalField (R = {args.n_centers}, rho = 1); median of {args.repeats} runs, seconds\n")
    print("| operation | D | time | one Exp (same batch) | ratio |")
    print("|---|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
