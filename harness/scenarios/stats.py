"""How often a scenario's prediction held over repetitions: k of n with a 95% Wilson score interval, and the
spread (min, median, max) of the metrics it was decided on.

A repetition that errored (the cluster or the harness broke, or the run was
never checked) is not evidence either way: it is counted apart, as
`errored`, and is neither in k nor in n. `kchaos scenario`, its
scenario.json and report.xml, and the bench's scenario_rates script all use these.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

Z95 = statistics.NormalDist().inv_cdf(0.975)  # 1.95996...


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for k successes in n trials (95% by default); (0, 1) when n is 0.

    Unlike k/n ± z·se it stays inside [0, 1] and is not empty at k = 0 or k = n,
    which is where a scenario's rate usually is.
    """
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k} n={n}")
    if n == 0:
        return 0.0, 1.0
    p, zz = k / n, z * z
    centre = (p + zz / (2 * n)) / (1 + zz / n)
    half = z * math.sqrt(p * (1 - p) / n + zz / (4 * n * n)) / (1 + zz / n)
    # at k = 0 (k = n) the bound is exactly 0 (1); rounding would leave it a hair off, excluding the rate
    return 0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half)


@dataclass(frozen=True)
class Rate:
    """`matched` of `runs` checked repetitions bore out the prediction; `errored` more gave no evidence."""

    matched: int
    runs: int
    errored: int = 0

    @property
    def rate(self) -> float | None:
        """matched / runs, or None when no repetition was checked."""
        return self.matched / self.runs if self.runs else None

    @property
    def ci(self) -> tuple[float, float]:
        """The 95% Wilson interval of the rate ((0, 1) when nothing was checked)."""
        return wilson(self.matched, self.runs)

    def fraction(self) -> str:
        """`k/n`, with `+e errored` when some repetitions errored."""
        return f"{self.matched}/{self.runs}" + (f" +{self.errored} errored" if self.errored else "")

    def interval(self) -> str:
        """`90% (95% CI 60%–98%)`, or `-` when nothing was checked."""
        if self.rate is None:
            return "-"
        lo, hi = self.ci
        return f"{self.rate:.0%} (95% CI {lo:.0%}–{hi:.0%})"

    def as_json(self) -> dict[str, Any]:
        """matched, runs, errored, rate, ci_low, ci_high (rounded to 4 places; rate None when runs is 0)."""
        lo, hi = self.ci
        return {"matched": self.matched, "runs": self.runs, "errored": self.errored,
                "rate": None if self.rate is None else round(self.rate, 4), "ci_low": round(lo, 4),
                "ci_high": round(hi, 4)}


@dataclass(frozen=True)
class Spread:
    """The smallest, median and largest of some numbers."""

    min: float
    median: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread | None:
        """The spread of `values`, or None when there are none."""
        vals = sorted(values)
        return cls(vals[0], statistics.median(vals), vals[-1]) if vals else None

    def text(self) -> str:
        """`12` when every value was the same, else `median (min–max)`."""
        if self.min == self.max:
            return f"{self.min:g}"
        return f"{self.median:g} ({self.min:g}–{self.max:g})"

    def as_json(self) -> dict[str, float]:
        """{"min", "median", "max"}."""
        return {"min": self.min, "median": self.median, "max": self.max}


def spreads(metrics: list[dict[str, float]], names: Iterable[str]) -> dict[str, Spread]:
    """The spread of each of `names` over the repetitions' metrics (names no repetition has are left out)."""
    out = {}
    for name in names:
        s = Spread.of(m[name] for m in metrics if isinstance(m.get(name), (int, float)))
        if s is not None:
            out[name] = s
    return out


__all__ = ["wilson", "Rate", "Spread", "spreads", "Z95"]
