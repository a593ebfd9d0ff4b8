#!/usr/bin/env python3
"""The tables of cl/gelu.cl's GELU16 form (session 26): h(a) = (1 - tanh u(a)) / 2 (tanh form) or
erfc(a / sqrt 2) / 2 (erf form) for a = min(|x|, 4.6), GELU(x) = max(-0, x) - a h(a), as one quadratic
c0 + a (c1 + a c2) per interval of width 1/3.2 (interval j holds a with round(3.2 a) = j, 0 <= j < 14;
entries 14 and 15 are 0, so y = x, or -0, exactly from |x| = 4.21875 on). Each interval's coefficients minimize
the largest a |h - h_true| / max(1, a) (GELU's error over max(1, |x|), as TSR_GELU16_ERROR bounds it)
over the interval widened by 1e-3 each side (linear programming, scipy), rounded to fp32. Prints the
error of the fp32 evaluation over [0, 4.6] and the tables as gelu.cl's and bench/gelu16_tables.h's text.
Needs numpy and scipy (/work/venv-bench has them).

    python3 bench/gelu16_fit.py [--c]"""
import sys

import numpy as np
from scipy.optimize import linprog
from scipy.special import erfc

WIDTH, NONZERO, ENTRIES, DEGREE = 0.3125, 14, 16, 2


def h_true(a, form):
    if form == "tanh":
        u = np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)
        return 1 / (1 + np.exp(2 * u))
    return 0.5 * erfc(a / np.sqrt(2))


def fit(form):
    c = np.zeros((ENTRIES, DEGREE + 1))
    for j in range(NONZERO):
        a = np.linspace(max(0.0, (j - 0.5) * WIDTH - 1e-3), (j + 0.5) * WIDTH + 1e-3, 801)
        w = np.maximum(a / np.maximum(1, a), 1e-3)
        v = np.vander(a, DEGREE + 1, increasing=True)
        ht = h_true(a, form)
        n = len(a)
        a_ub = np.vstack([np.c_[w[:, None] * v, -np.ones(n)], np.c_[-w[:, None] * v, -np.ones(n)]])
        b_ub = np.r_[w * ht, -w * ht]
        r = linprog(np.r_[np.zeros(DEGREE + 1), 1], A_ub=a_ub, b_ub=b_ub, bounds=[(None, None)] * (DEGREE + 2),
                    method="highs")
        c[j] = r.x[:DEGREE + 1]
    return c.astype(np.float32)


def error(c, form):
    a = np.linspace(0, 4.6, 500001).astype(np.float32)
    j = np.rint(a.astype(np.float64) / WIDTH).astype(int) % ENTRIES
    h = c[j, 2]
    h = (h * a + c[j, 1]).astype(np.float32)
    h = (h * a + c[j, 0]).astype(np.float32)
    a64 = a.astype(np.float64)
    e = a64 * np.abs(h.astype(np.float64) - h_true(a64, form)) / np.maximum(1, a64)
    return e.max(), a[e.argmax()], h.min()


def lit(v):
    return "0.0f" if v == 0 else "%.9gf" % v


def main():
    as_c = "--c" in sys.argv[1:]
    for form in ("tanh", "erf"):
        c = fit(form)
        e, at, hmin = error(c, form)
        print("/* %s: largest a |h - h_true| / max(1, a) %.3g at a = %.4f, smallest h %.3g */" % (form, e, at, hmin))
        for k in range(3):
            vals = [lit(x) for x in c[:, k]]
            if as_c:
                print("static const float %s_C%d[16] = {%s};" % (form.upper(), k, ", ".join(vals)))
                continue
            rows = [", ".join(vals[i:i + 6]) for i in range(0, ENTRIES, 6)]
            print("#define G16_T%d ((float16)(%s))" % (k, ", \\\n    ".join(rows)))


if __name__ == "__main__":
    main()
