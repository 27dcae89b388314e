"""Former home of the geodesic numerics, now :mod:`riemlocal.numerics`; its public names stay importable here."""

from .numerics import (
    METHODS,
    BoundaryValueResult,
    curve_energy,
    integrate_geodesic,
    laplacian_inverse_sqrt,
    solve_boundary_value,
)

__all__ = ["curve_energy", "BoundaryValueResult", "solve_boundary_value", "integrate_geodesic", "laplacian_inverse_sqrt", "METHODS"]
