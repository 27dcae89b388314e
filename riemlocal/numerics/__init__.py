"""Geodesic numerics: the compiled capability of fields, the discrete curve energy, the energy-minimization core and the Exp/Log solver objects.

This layer sits below the fields: it knows a field only by its methods and its
declared :class:`CompiledCapability`, and the fields' modules register their
compiled evaluators here.
"""

from ._capability import (
    COMPILED_MAX_WORK,
    CURVE_MAX_DIM,
    EVALUATORS,
    HIDDEN_WEIGHT,
    CompiledCapability,
    acceleration_derivatives,
    accelerations,
    compiled_data,
    polyline_quadratics,
    register_evaluators,
    segment_energy_terms,
)
from ._cholesky import back_substitution, block_tridiagonal_solve, cholesky_factor, cholesky_solve, factored_solve, forward_substitution
from ._compiled_log import compiled_log_pairs
from ._energy import (
    curve_energy,
    initial_velocity,
    laplacian_inverse_sqrt,
    polyline_length,
    refine,
    trapezoid_energy,
)
from ._minimize import (
    COMPILED_LENGTHS_NEWTON_MAX_DIM,
    COMPILED_NEWTON_MAX_DIM,
    LENGTHS_NEWTON_MAX_DIM,
    METHODS,
    NEWTON_MAX_DIM,
    NEWTON_MAX_WORK,
    NODE_CHART_MAX_DIM,
    EnergyMinimum,
    Extrapolation,
    extrapolate_levels,
    geometric_error,
    mean_metric_factors,
    minimize_curve_energy,
    resolve_method,
)
from ._riders import EQUATIONS, christoffel_polarization
from ._runge_kutta import compiled_dormand_prince, dormand_prince
from ._solvers import (
    CHUNK_SIZE,
    BoundaryValueResult,
    EnergyLogSolver,
    ODEExpSolver,
    integrate_geodesic,
    solve_boundary_value,
)
from ._tolerances import EXP_ATOL_FACTOR, EXP_LOCAL_FRACTION, INTEGRATION_RTOL, RTOL, integration_tolerances

__all__ = [
    "COMPILED_MAX_WORK",
    "HIDDEN_WEIGHT",
    "CURVE_MAX_DIM",
    "EVALUATORS",
    "CompiledCapability",
    "acceleration_derivatives",
    "accelerations",
    "compiled_data",
    "polyline_quadratics",
    "register_evaluators",
    "segment_energy_terms",
    "back_substitution",
    "cholesky_factor",
    "cholesky_solve",
    "factored_solve",
    "forward_substitution",
    "curve_energy",
    "initial_velocity",
    "laplacian_inverse_sqrt",
    "polyline_length",
    "refine",
    "trapezoid_energy",
    "METHODS",
    "COMPILED_LENGTHS_NEWTON_MAX_DIM",
    "COMPILED_NEWTON_MAX_DIM",
    "LENGTHS_NEWTON_MAX_DIM",
    "NEWTON_MAX_DIM",
    "NEWTON_MAX_WORK",
    "NODE_CHART_MAX_DIM",
    "EnergyMinimum",
    "Extrapolation",
    "extrapolate_levels",
    "geometric_error",
    "mean_metric_factors",
    "minimize_curve_energy",
    "resolve_method",
    "dormand_prince",
    "compiled_dormand_prince",
    "EQUATIONS",
    "christoffel_polarization",
    "block_tridiagonal_solve",
    "compiled_log_pairs",
    "CHUNK_SIZE",
    "EXP_ATOL_FACTOR",
    "EXP_LOCAL_FRACTION",
    "INTEGRATION_RTOL",
    "integration_tolerances",
    "RTOL",
    "BoundaryValueResult",
    "EnergyLogSolver",
    "ODEExpSolver",
    "integrate_geodesic",
    "solve_boundary_value",
]
