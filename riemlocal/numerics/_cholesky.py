"""Dense and block-tridiagonal Cholesky solves in compiled code, for the compiled solvers and evaluators.

Small systems (``dim`` up to a few tens) inside compiled loops: no LAPACK call,
no allocation, and the same operations on every CPU.
"""

import math

from ..utils.compiled import refcount_free

__all__ = ["cholesky_factor", "forward_substitution", "back_substitution", "factored_solve", "cholesky_solve", "block_tridiagonal_solve"]


@refcount_free
def cholesky_factor(matrix, relative_pivot=1e-12):
    """Cholesky factor :math:`L` in the lower triangle of ``matrix``, in place; False if not positive definite.

    A pivot at most ``relative_pivot`` times the largest diagonal entry counts
    as not positive definite (0: LAPACK's test, a pivot that is not > 0).
    """
    dim = len(matrix)
    largest = 0.0
    for i in range(dim):
        largest = max(largest, matrix[i, i])
    for j in range(dim):
        pivot = matrix[j, j]
        for k in range(j):
            pivot -= matrix[j, k] * matrix[j, k]
        if not pivot > relative_pivot * largest:
            return False
        pivot = math.sqrt(pivot)
        matrix[j, j] = pivot
        for i in range(j + 1, dim):
            total = matrix[i, j]
            for k in range(j):
                total -= matrix[i, k] * matrix[j, k]
            matrix[i, j] = total / pivot
    return True


@refcount_free
def forward_substitution(factor, vector):
    """Solve :math:`L y = b` in place of ``vector`` for the lower triangle :math:`L` of ``factor``."""
    for i in range(len(vector)):
        total = vector[i]
        for k in range(i):
            total -= factor[i, k] * vector[k]
        vector[i] = total / factor[i, i]


@refcount_free
def back_substitution(factor, vector):
    """Solve :math:`L^T x = y` in place of ``vector`` for the lower triangle :math:`L` of ``factor``."""
    for i in range(len(vector) - 1, -1, -1):
        total = vector[i]
        for k in range(i + 1, len(vector)):
            total -= factor[k, i] * vector[k]
        vector[i] = total / factor[i, i]


@refcount_free
def factored_solve(factor, vector):
    """Solve :math:`L L^T x = b` in place of ``vector`` for the factor of :func:`cholesky_factor`."""
    forward_substitution(factor, vector)
    back_substitution(factor, vector)


@refcount_free
def cholesky_solve(matrix, vector):
    """Solve ``matrix x = vector`` in place (``matrix`` is overwritten by its Cholesky factor); False if not SPD."""
    if not cholesky_factor(matrix):
        return False
    factored_solve(matrix, vector)
    return True


@refcount_free
def block_tridiagonal_solve(diagonal, upper, rhs, factor, coupling):
    r"""Solve :math:`H x = ` ``rhs`` ``(n, dim)`` in place for the SPD block-tridiagonal :math:`H`; False if it is not.

    :math:`H` has the diagonal blocks ``diagonal`` ``(n, dim, dim)`` (upper
    triangles read) and the upper blocks ``upper`` ``(n - 1, dim, dim)``.
    Block Cholesky: :math:`L_k L_k^T = D_k - W_{k-1}^T W_{k-1}`,
    :math:`W_k = L_k^{-1} U_k` (``factor`` ``(n, dim, dim)`` and
    ``coupling`` ``(n - 1, dim, dim)`` are scratch), then two block
    substitutions: :math:`O(n\, dim^3)`, no LAPACK call. :math:`W_k` is
    solved for all its columns at once, row by row, so that the innermost loop
    runs along a row (it vectorizes, every entry summed in the same order: the
    same results as column by column; 31 blocks of dimension 10 / 17 / 20:
    26.8 / 92.7 / 136 -> 20.7 / 62.1 / 92.6 us, unchanged at dimensions 2 to 4).
    A pivot that is not > 0 means not positive definite (LAPACK's ``dpbsv``
    test, which the numpy path uses).
    """
    n, dim = rhs.shape
    for k in range(n):
        for i in range(dim):
            for j in range(i + 1):
                total = diagonal[k, j, i]
                if k:
                    for m in range(dim):
                        total -= coupling[k - 1, m, i] * coupling[k - 1, m, j]
                factor[k, i, j] = total
        if not cholesky_factor(factor[k], 0.0):
            return False
        if k < n - 1:
            for i in range(dim):  # forward substitution of every column of U_k at once
                for c in range(dim):
                    coupling[k, i, c] = upper[k, i, c]
                for m in range(i):
                    entry = factor[k, i, m]
                    for c in range(dim):
                        coupling[k, i, c] -= entry * coupling[k, m, c]
                pivot = factor[k, i, i]
                for c in range(dim):
                    coupling[k, i, c] /= pivot
    for k in range(n):
        if k:
            for i in range(dim):
                for m in range(dim):
                    rhs[k, i] -= coupling[k - 1, m, i] * rhs[k - 1, m]
        forward_substitution(factor[k], rhs[k])
    for k in range(n - 1, -1, -1):
        if k < n - 1:
            for i in range(dim):
                for m in range(dim):
                    rhs[k, i] -= coupling[k, i, m] * rhs[k + 1, m]
        back_substitution(factor[k], rhs[k])
    return True
