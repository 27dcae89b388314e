r"""Linear equations carried along a geodesic (riders): Jacobi fields and parallel transport.

With :math:`a(x, v) = -\Gamma_x(v, v)` the geodesic acceleration:

* ``"jacobi"``: riders :math:`[J, J']` of the variational equation
  :math:`J'' = \partial_x a[J] + \partial_v a[J'] = -(\partial_J \Gamma)(v, v) - 2 \Gamma(v, J')`
  (the field's ``acceleration_derivative``);
* ``"transport"``: vectors :math:`V' = -\Gamma(v, V)`, by polarization of the acceleration,
  :math:`\Gamma(a, b) = \tfrac{1}{4\alpha}\big(a(x, a - \alpha b) - a(x, a + \alpha b)\big)` with
  :math:`\alpha = |a| / |b|`, so that neither term cancels the other to round-off.

The numpy right-hand sides below and the compiled ones of
:func:`~riemlocal.numerics.geodesic_rhs` (the same formulas, inside
:func:`~riemlocal.numerics.compiled_dormand_prince`) are two evaluators of one
integrator (:meth:`~riemlocal.numerics.ODEExpSolver.integrate_with`).
"""

import numpy as np

__all__ = ["EQUATIONS", "rider_width", "christoffel_polarization", "rider_rhs"]

#: the rider equations and their codes in compiled code
EQUATIONS = {"jacobi": 0, "transport": 1}


def rider_width(equation, dim):
    """Length of one rider: :math:`2D` (``[J, J']``) for ``"jacobi"``, :math:`D` for ``"transport"``."""
    if equation not in EQUATIONS:
        raise ValueError(f"equation must be one of {sorted(EQUATIONS)}, got {equation!r}")
    return 2 * dim if equation == "jacobi" else dim


def christoffel_polarization(acceleration, a, b, x):
    r""":math:`\Gamma_x(a, b)` for rows ``(n, dim)`` from ``acceleration(v, x)`` :math:`= -\Gamma_x(v, v)`; 0 where ``a`` or ``b`` is 0."""
    norm_a, norm_b = np.linalg.norm(a, axis=-1, keepdims=True), np.linalg.norm(b, axis=-1, keepdims=True)
    degenerate = (norm_a == 0) | (norm_b == 0)
    alpha = np.where(degenerate, 1.0, norm_a / np.where(norm_b == 0, 1.0, norm_b))
    plus, minus = acceleration(a + alpha * b, x), acceleration(a - alpha * b, x)
    return np.where(degenerate, 0.0, (minus - plus) / (4.0 * alpha))


def rider_rhs(field, equation):
    """Right-hand side ``f(x, v, riders)`` of ``equation`` for rows ``(n, dim)``, ``(n, dim)`` and ``(n, m * width)``."""
    dim = field.dim
    width = rider_width(equation, dim)

    def rhs(x, v, riders):
        m = riders.shape[1] // width
        x, v, riders = np.repeat(x, m, axis=0), np.repeat(v, m, axis=0), riders.reshape(-1, width)
        if equation == "jacobi":
            position, velocity = riders[:, :dim], riders[:, dim:]
            derivative = np.concatenate([velocity, field.acceleration_derivative(v, x, position, velocity)], axis=1)
        else:
            derivative = -christoffel_polarization(field._acceleration, v, riders, x)
        return derivative.reshape(-1, m * width)

    return rhs
