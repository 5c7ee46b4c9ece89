"""One rounding rule for the numbers a payload shows: `DECIMALS` decimals, and a value that is
not finite (NaN, ±inf) becomes None, as JSON writes it (null) and as pandas reads it back (NaN).
Every analysis that rounds uses these two functions, so a number reads the same in every view,
the CLI's JSON and the Python API."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

DECIMALS = 3


def round3(value: Any) -> Optional[float]:
    """`value` as a float rounded to DECIMALS decimals; None when it is not finite."""
    number = float(value)
    return round(number, DECIMALS) if math.isfinite(number) else None


def floats3(values: Any) -> list[Optional[float]]:
    """`round3` of every element of a 1-D array-like."""
    return [round(v, DECIMALS) if math.isfinite(v) else None
            for v in np.asarray(values, dtype=np.float64).tolist()]
