"""JUnit XML for a suite: one <testcase> per configuration cell, readable by every CI system.

A cell fails when a repetition errored (the harness or the cluster broke, so
nothing was measured) or when its configuration broke a promise it makes: lost
acknowledged writes under acks=all, min.insync.replicas >= 2 and no unclean
election, or duplicates with idempotence on. Loss under a configuration that
does not promise durability is the expected, measured result and passes.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class CellOutcome:
    """What the repetitions of one cell came to: the compare row (None when no run finished) and errors."""

    name: str
    label: str
    row: dict[str, Any] | None
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    short: str = ""  # terse label for the summary table
    mismatch: str | None = None  # a scenario's prediction that the runs did not bear out

    @property
    def failure(self) -> str | None:
        """Why the cell failed (a broken promise or a missed prediction), or None when it passed."""
        if self.mismatch:
            return self.mismatch
        if self.row is not None and self.row.get("promise_held") is False:
            r = self.row
            inside = r["lost"] - (r.get("lost_outside_promise") or 0)
            what = f"lost {inside} of {r['acked']} acknowledged writes inside Kafka's guarantee" if inside else \
                f"{r['duplicate']} duplicates with idempotence on"
            return f"promise broken ({r['promise']}): {what} over {r['runs']} run(s)"
        return None

    @property
    def error(self) -> str | None:
        """The errors of failed repetitions, or None."""
        return "; ".join(self.errors) if self.errors else None

    @property
    def passed(self) -> bool:
        """No error and no broken promise."""
        return self.failure is None and self.error is None


def write_junit(path: Path, suite: str, outcomes: list[CellOutcome]) -> Path:
    """Write JUnit XML for `outcomes` to `path` (whole, then renamed); return the path."""
    failures = sum(o.failure is not None and o.error is None for o in outcomes)
    errors = sum(o.error is not None for o in outcomes)
    ts = ET.Element("testsuite", name=suite, tests=str(len(outcomes)), failures=str(failures), errors=str(errors),
                    skipped="0", time=f"{sum(o.seconds for o in outcomes):.1f}")
    for o in outcomes:
        case = ET.SubElement(ts, "testcase", classname=f"kchaos.{suite}", name=o.name, time=f"{o.seconds:.1f}")
        if o.error is not None:
            ET.SubElement(case, "error", message=o.error[:500], type="run error").text = o.error
        elif o.failure is not None:
            kind = "prediction missed" if o.mismatch else "promise broken"
            ET.SubElement(case, "failure", message=o.failure, type=kind).text = o.failure
        r = o.row or {}
        out = [o.label] + [f"{k}={r[k]}" for k in ("runs", "valid", "invalid", "unknown", "acked", "lost",
                                                   "duplicate", "availability_in_faults", "promise", "promise_held",
                                                   "run_dirs") if k in r]
        ET.SubElement(case, "system-out").text = "\n".join(out)
    root = ET.Element("testsuites", name=suite, tests=str(len(outcomes)), failures=str(failures), errors=str(errors))
    root.append(ts)
    ET.indent(root)
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)
    return Path(path)
