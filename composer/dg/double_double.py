"""Double-double arithmetic on FP64 numpy arrays, for the few values that need ~32 digits.

A double-double is an unevaluated sum ``hi + lo`` of two FP64 arrays with ``|lo| <= ulp(hi)/2``;
the error-free transformations (Knuth's TwoSum, Dekker's split and TwoProduct) make each
operation exact to about ``2**-104`` relative using FP64 operations only. The LGL weights use it:
``P_N`` at a node by the three-term recurrence loses up to ``~N**1.3`` ulp in plain FP64
(measured 1e-12 relative in the weights at N = 1023), which no later step can recover.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import numpy as np

_SPLITTER = 134217729.0  # 2**27 + 1: Dekker's split of a 53-bit significand into two 26-bit halves


class DoubleDouble(NamedTuple):
    """``hi + lo`` elementwise; ``hi`` alone is the FP64 rounding of the value."""

    hi: np.ndarray
    lo: np.ndarray


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``s + e == a + b`` exactly, ``s = fl(a + b)`` (Knuth; no ordering of |a|, |b| needed)."""
    s = a + b
    b_virtual = s - a
    e = (a - (s - b_virtual)) + (b - b_virtual)
    return s, e


def _quick_two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``s + e == a + b`` exactly when ``|a| >= |b|`` (renormalisation after an operation)."""
    s = a + b
    return s, b - (s - a)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLITTER * a
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p + e == a * b`` exactly, ``p = fl(a * b)`` (Dekker; numpy has no fused multiply-add)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def from_float(a: np.ndarray) -> DoubleDouble:
    """The FP64 array ``a`` exactly."""
    a = np.asarray(a, dtype=float)
    return DoubleDouble(a.copy(), np.zeros_like(a))


def from_fraction(value: Fraction) -> DoubleDouble:
    """A rational constant to double-double precision (scalar arrays; the coefficients of a recurrence)."""
    hi = float(value)
    lo = float(value - Fraction(hi))
    return DoubleDouble(np.float64(hi), np.float64(lo))


def add(a: DoubleDouble, b: DoubleDouble) -> DoubleDouble:
    s, e = _two_sum(a.hi, b.hi)
    t, f = _two_sum(a.lo, b.lo)
    e = e + t
    s, e = _quick_two_sum(s, e)
    e = e + f
    return DoubleDouble(*_quick_two_sum(s, e))


def neg(a: DoubleDouble) -> DoubleDouble:
    return DoubleDouble(-a.hi, -a.lo)


def sub(a: DoubleDouble, b: DoubleDouble) -> DoubleDouble:
    return add(a, neg(b))


def mul(a: DoubleDouble, b: DoubleDouble) -> DoubleDouble:
    p, e = _two_prod(a.hi, b.hi)
    e = e + (a.hi * b.lo + a.lo * b.hi)
    return DoubleDouble(*_quick_two_sum(p, e))


def mul_float(a: DoubleDouble, b: np.ndarray) -> DoubleDouble:
    """``a * b`` for an FP64 ``b`` (exact input, e.g. an LGL node or an integer)."""
    p, e = _two_prod(a.hi, b)
    e = e + a.lo * b
    return DoubleDouble(*_quick_two_sum(p, e))


def div(a: DoubleDouble, b: DoubleDouble) -> DoubleDouble:
    """``a / b``: one long-division step on the FP64 quotient (Bailey's QD ``sloppy_div``)."""
    q1 = a.hi / b.hi
    remainder = sub(a, mul_float(b, q1))
    q2 = remainder.hi / b.hi
    return DoubleDouble(*_quick_two_sum(q1, q2))
