"""Default tolerances of integrations along geodesics called directly, beside those of the solver objects.

The solver objects' defaults are :data:`~riemlocal.numerics.RTOL` (relative
accuracy of Exp and of distances) and absolute tolerances ``rtol *``
:data:`~riemlocal.numerics.EXP_ATOL_FACTOR`; a space integrates parallel
transport and Jacobi fields at its Exp solver's ``tolerances``.
"""

__all__ = ["INTEGRATION_RTOL"]

#: default relative tolerance of an integration along a geodesic called directly (parallel transport,
#: Jacobi fields and the differential of Exp of :mod:`riemlocal.connection`); the absolute one is
#: ``rtol * EXP_ATOL_FACTOR``, as for the Exp solver
INTEGRATION_RTOL = 1e-10
