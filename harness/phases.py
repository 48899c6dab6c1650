"""Where a run's wall-clock time goes: each phase timed, written to phases.json and said in one line.

The phases are the runner's steps (cluster start, clients start, workload, heal, final read, evidence,
teardown, check, explain, report). The fixed cost is everything but the workload's time limit: what every run of
a suite or campaign pays again.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PHASES_FILE = "phases.json"
WORKLOAD = "workload"


class Phases:
    """A run's phases in the order they ran, each with its seconds; a phase entered twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._began = time.monotonic()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as `name`, whether it returns or raises."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - start

    def total(self) -> float:
        """Seconds since this recorder was made."""
        return time.monotonic() - self._began

    def fixed(self) -> float:
        """Seconds of the whole run spent outside the workload phase."""
        return self.total() - self.seconds.get(WORKLOAD, 0.0)

    def record(self) -> dict[str, object]:
        """phases.json's content: each phase's seconds, the total and the fixed cost, rounded to 0.1 s."""
        return {"phases": {k: round(v, 1) for k, v in self.seconds.items()},
                "total_s": round(self.total(), 1), "fixed_s": round(self.fixed(), 1)}

    def write(self, run: Path) -> None:
        """Write run/phases.json."""
        (run / PHASES_FILE).write_text(json.dumps(self.record(), indent=2) + "\n", encoding="utf-8")

    def line(self) -> str:
        """One line for the console: every phase's seconds, then the fixed cost beside the workload's."""
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items())
        return f"time: {parts}; {self.fixed():.1f} s besides the workload"


# A run's fixed cost assumed where the store has no run to measure it by (this 2-core machine's, rounded up).
FIXED_S_GUESS = 20.0
RECENT = 50  # how many of a store's newest runs a typical fixed cost is taken from


def typical_fixed(store: Path) -> tuple[float, int]:
    """The fixed cost to expect of a run in `store`: the median `fixed_s` of the phases.json of its newest runs (at
    most RECENT), and how many that is; FIXED_S_GUESS and 0 when it has none."""
    found = sorted(Path(store).glob(f"**/{PHASES_FILE}"), key=lambda p: p.stat().st_mtime)[-RECENT:] \
        if Path(store).is_dir() else []
    costs = []
    for path in found:
        try:
            costs.append(float(json.loads(path.read_text(encoding="utf-8"))["fixed_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    if not costs:
        return FIXED_S_GUESS, 0
    costs.sort()
    return costs[len(costs) // 2], len(costs)

