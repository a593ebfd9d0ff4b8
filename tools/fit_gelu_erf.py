#!/usr/bin/env python3
"""Fit the erf form of GELU in cl/activation.cl: erfc(z) ~ (1 + z a(z))^-16, a of degree 5.

Least squares on Chebyshev nodes over [0, 6] of erfc(z)^(-1/16) - 1 against z, z^2, ..., z^6,
weighted (and re-weighted towards the worst points) so that the error is even in erfc itself,
not in its -1/16th power. Then the fp32 evaluation the kernel does is checked against the exact
GELU on a dense grid: |error| / max(1, |x|), the bound of docs/gelu.md (1e-6).
Needs numpy (not a build dependency): python3 -m venv /tmp/np && /tmp/np/bin/pip install numpy
"""
import math

import numpy as np

POWER, DEGREE, ZMAX = 16, 6, 6.0


def fit():
    n = 8000
    z = np.cos(np.pi * (np.arange(n) + 0.5) / n) * ZMAX / 2 + ZMAX / 2
    erfc = np.array([math.erfc(v) for v in z])
    h = erfc ** (-1.0 / POWER)
    sensitivity = POWER * erfc / h  # d erfc / d h, so that weights measure error in erfc
    basis = np.stack([z ** (i + 1) for i in range(DEGREE)], 1)
    w = sensitivity.copy()
    for _ in range(80):
        coef, *_ = np.linalg.lstsq(basis * w[:, None], (h - 1) * w, rcond=None)
        err = np.abs(basis @ coef - (h - 1)) * sensitivity
        w = w * (err / err.max() + 1e-3) ** 0.5
        w /= w.max()
    return [np.float32(c) for c in coef]


def gelu_fp32(x, coef):
    """The kernel's evaluation order, in fp32."""
    x = np.asarray(x, np.float32)
    z = np.abs(x) * np.float32(1 / math.sqrt(2))
    p = np.full_like(z, coef[-1])
    for c in coef[-2::-1]:
        p = (p * z + c).astype(np.float32)
    p = (p * z + np.float32(1)).astype(np.float32)
    with np.errstate(over="ignore"):
        for _ in range(4):
            p = (p * p).astype(np.float32)
        half_erfc = (np.float32(0.5) / p).astype(np.float32)
    y = (x * np.where(x > 0, np.float32(1) - half_erfc, half_erfc)).astype(np.float32)
    return np.where(x < -20, np.float32(-0.0), y)


def main():
    coef = fit()
    xs = np.concatenate([np.linspace(-30, 30, 300001), np.linspace(-6, 6, 300001)]).astype(np.float32)
    exact = np.array([float(v) * 0.5 * math.erfc(-float(v) / math.sqrt(2)) for v in xs])
    err = np.abs(gelu_fp32(xs, coef).astype(np.float64) - exact) / np.maximum(1, np.abs(xs.astype(np.float64)))
    print("coefficients of a(z), constant term first:")
    for c in coef:
        print(f"  {float(c):.17g}")
    print(f"max |error| / max(1, |x|) = {err.max():.3g} at x = {xs[err.argmax()]:.5g}")


if __name__ == "__main__":
    main()
