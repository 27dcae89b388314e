"""Geodesic numerics: the discrete curve energy, the energy-minimization core and the Exp/Log solver objects."""

from ._compiled_log import block_tridiagonal_solve, rbf_log_pairs
from ._energy import (
    curve_energy,
    initial_velocity,
    laplacian_inverse_sqrt,
    polyline_length,
    refine,
    trapezoid_energy,
)
from ._minimize import (
    COMPILED_NEWTON_MAX_DIM,
    LENGTHS_NEWTON_MAX_DIM,
    METHODS,
    NEWTON_MAX_DIM,
    NEWTON_MAX_WORK,
    NODE_CHART_MAX_DIM,
    EnergyMinimum,
    Extrapolation,
    extrapolate_levels,
    mean_metric_factors,
    minimize_curve_energy,
    resolve_method,
)
from ._runge_kutta import dormand_prince, rbf_dormand_prince
from ._solvers import (
    CHUNK_SIZE,
    BoundaryValueResult,
    EnergyLogSolver,
    ODEExpSolver,
    integrate_geodesic,
    solve_boundary_value,
)
from ._tolerances import EXP_ATOL_FACTOR, INTEGRATION_RTOL, RTOL, integration_tolerances

__all__ = [
    "curve_energy",
    "initial_velocity",
    "laplacian_inverse_sqrt",
    "polyline_length",
    "refine",
    "trapezoid_energy",
    "METHODS",
    "COMPILED_NEWTON_MAX_DIM",
    "LENGTHS_NEWTON_MAX_DIM",
    "NEWTON_MAX_DIM",
    "NEWTON_MAX_WORK",
    "NODE_CHART_MAX_DIM",
    "EnergyMinimum",
    "Extrapolation",
    "extrapolate_levels",
    "mean_metric_factors",
    "minimize_curve_energy",
    "resolve_method",
    "dormand_prince",
    "rbf_dormand_prince",
    "block_tridiagonal_solve",
    "rbf_log_pairs",
    "CHUNK_SIZE",
    "EXP_ATOL_FACTOR",
    "INTEGRATION_RTOL",
    "integration_tolerances",
    "RTOL",
    "BoundaryValueResult",
    "EnergyLogSolver",
    "ODEExpSolver",
    "integrate_geodesic",
    "solve_boundary_value",
]
