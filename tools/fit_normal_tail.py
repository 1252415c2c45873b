#!/usr/bin/python3
"""fit_normal_tail.py - the two polynomials behind the AVX2 exact GELU (common/kernels/vecmath_avx2.c).

    /usr/bin/python3 tools/fit_normal_tail.py      prints the coefficients and each fit's error

GELU(x) = x Phi(x), with Phi the standard normal CDF. The AVX2 kernel needs
Phi to float precision RELATIVE to its value, so that GELU(-9) = -9 * 1.1e-19
is as accurate as GELU(1). It uses two pieces:

  center, |x| < 0.75:   Phi(x) = 1/2 + x R(x^2)
      R(w) = erf(sqrt(w / 2)) / (2 sqrt(w)), a polynomial of degree 4 in w = x^2.

  tail, u = |x| >= 0.75:   Phi(-u) = e^(-u^2 / 2) q(u),   q(u) = t P(t),   t = 2 / (2 + u)
      e^(-u^2/2) carries the fast decay (the kernel's exp, with u^2 split
      exactly in two floats); q(u) is smooth and mild: it falls from 0.31 at
      u = 0.75 to about 1 / (u sqrt(2 pi)) for large u (q times sqrt(2 pi) is
      the Mills ratio). The substitution t = 2 / (2 + u) maps u in
      [0.75, 14.5] (beyond 14.4, GELU(-u) is below the smallest float) onto
      t in [0.12, 0.73], where q / t is so smooth that a degree-9 polynomial
      P fits it to 7e-9 relative error, a tenth of a float ulp.

Each fit: weighted least squares on a few thousand points, reweighted by
Lawson's iteration towards the smallest MAXIMUM relative error (minimax). The
coefficients are then fixed to float32 one at a time, from the constant term
up, refitting the remaining ones after each (so rounding them to float costs
almost nothing; R's error is then set by R(0) = 1/sqrt(2 pi) itself, which no
float holds exactly). References use Python's double-precision erf and erfc,
accurate to about 1e-15 here.

Only numpy is needed. The output is deterministic; the printed coefficients
are the ones in vecmath_avx2.c (normal_center8, normal_tail8).
"""
import math

import numpy as np

CENTER_LIMIT = 0.75
U_MAX = 14.5
T_SCALE = 2.0


def lawson(basis, target, fixed_part, iterations=80):
    """Coefficients c minimising max |basis @ c + fixed_part - target| / |target|."""
    weights = np.ones(len(target))
    for _ in range(iterations):
        scale = np.sqrt(weights) / np.abs(target)
        c, *_ = np.linalg.lstsq(basis * scale[:, None], (target - fixed_part) * scale, rcond=None)
        rel_err = (basis @ c + fixed_part - target) / target
        weights = weights * np.abs(rel_err) + 1e-300
        weights /= weights.sum()
    return c


def fit_float32(variable, target, degree):
    """Polynomial coefficients (constant term first), each a float32, and the max relative error."""
    basis = np.vander(variable, degree + 1, increasing=True)   # 1, v, v^2, ...
    fixed = []
    for j in range(degree + 1):
        fixed_part = basis[:, :j] @ np.array(fixed) if fixed else np.zeros(len(target))
        c = lawson(basis[:, j:], target, fixed_part)
        fixed.append(float(np.float32(c[0])))     # fix this coefficient to a float, refit the rest
    coeffs = np.array(fixed)
    rel_err = np.abs(basis @ coeffs - target) / np.abs(target)
    return coeffs, rel_err.max()


def show(title, coeffs, err, variable):
    print(f"{title}: max relative error {err:.3g} ({err / 2.0**-24:.2f} of a float ulp 2^-24)")
    print("  coefficients, highest power first (Horner order):")
    for j in range(len(coeffs) - 1, -1, -1):
        print(f"    {variable}^{j}: {coeffs[j]:.9e}f")


def main():
    x = np.linspace(1e-6, CENTER_LIMIT, 4001)
    r = np.array([math.erf(v / math.sqrt(2.0)) / (2.0 * v) for v in x])
    coeffs, err = fit_float32(x * x, r, 4)
    show(f"center: Phi(x) = 1/2 + x R(x^2), |x| < {CENTER_LIMIT}", coeffs, err, "w")

    u = np.linspace(CENTER_LIMIT, U_MAX, 6001)
    q = np.array([0.5 * math.erfc(v / math.sqrt(2.0)) * math.exp(0.5 * v * v) for v in u])
    t = T_SCALE / (T_SCALE + u)
    coeffs, err = fit_float32(t, q / t, 9)
    show(f"tail: Phi(-u) = e^(-u^2/2) t P(t), t = {T_SCALE:g} / ({T_SCALE:g} + u), u in [{CENTER_LIMIT}, {U_MAX}]",
         coeffs, err, "t")


if __name__ == "__main__":
    main()
