"""JUnit XML for a suite: one <testcase> per configuration cell, readable by every CI system.

A cell's word is its verdict (docs/verdicts.md), merged over its repetitions: a cell
that fails gets <failure>, an unknown one <skipped> (the checker could not decide: not a pass, not a
failure), and one whose repetition could not be run <error>. Anomalies the configuration allows (loss
under acks=1, loss outside Kafka's guarantee) pass, and are listed in the case's output. A scenario's
variant is a test of its prediction: it fails when the prediction misses, and says its verdict beside.
Every case carries its verdict, severity and prediction as <properties>.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN
from kchaos.reports.severity import level

ERROR = "error"  # a repetition could not be run: no verdict on Kafka, a harness or cluster problem
# The compare row's numbers in a case's system-out; those that do not apply to the cell's workload are None: left out.
SHOWN = ("workload", "runs", "pass", "fail", "unknown", "acked", "lost", "lost_in_promise", "lost_outside_promise",
         "duplicate", "availability_in_faults", "acked_time_share", "longest_outage_s", "txn_committed", "txn_aborted",
         "txn_info", "copy_input", "copy_copied", "failing_anomalies", "kafka_internal", "kafka_errors",
         "unparsed_lines", "promise", "run_dirs")


@dataclass
class CellOutcome:
    """What the repetitions of one cell came to: the compare row (None when no run finished), errors, and for a
    scenario's variant whether the runs matched its prediction."""

    name: str
    label: str
    row: dict[str, Any] | None
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    short: str = ""  # terse label for the summary table
    prediction: str | None = None  # "matches" or "misses" for a scenario's variant; None without a prediction
    mismatch: str | None = None  # how the runs missed the prediction

    @property
    def verdict(self) -> str:
        """The cell's verdict: its runs' verdicts merged (the compare row's), "unknown" when none finished."""
        return (self.row or {}).get("verdict") or UNKNOWN

    @property
    def severity(self) -> str:
        """The cell's severity, for its colour."""
        r = self.row or {}
        return r.get("severity") or level(self.verdict, r.get("lost"), r.get("acked"), bool(r.get("allowed")))

    @property
    def result(self) -> str:
        """The cell's word in tables: "error" when a repetition could not be run, else its verdict."""
        return ERROR if self.errors else self.verdict

    @property
    def failure(self) -> str | None:
        """Why the cell fails (`fail: 3 lost (inside Kafka's guarantee) over 2 run(s)`), or None."""
        if self.verdict != FAIL:
            return None
        r = self.row or {}
        return f"fail: {r.get('fails') or 'an anomaly the configuration promises against'} over {r.get('runs')} run(s)"

    @property
    def error(self) -> str | None:
        """The errors of failed repetitions, or None."""
        return "; ".join(self.errors) if self.errors else None

    @property
    def passed(self) -> bool:
        """The cell's result is pass: no error, and its verdict is pass."""
        return self.result == PASS


def exit_code(outcomes: list[CellOutcome]) -> int:
    """A suite's exit code: 1 when a cell fails or errors, else 2 when one is unknown, else 0 (also for none)."""
    results = {o.result for o in outcomes}
    return 1 if results & {FAIL, ERROR} else 2 if UNKNOWN in results else 0


def _verdict_lines(o: CellOutcome) -> list[str]:
    r = o.row or {}
    lines = [f"verdict: {o.verdict}" + (f"; prediction {o.prediction}" if o.prediction else "")]
    lines += [f"fails: {r['fails']}"] if r.get("fails") else []
    lines += [f"observed, allowed: {r['allowed']}"] if r.get("allowed") else []
    lines += [f"unknown because: {r['unknown_because']}"] if r.get("unknown_because") else []
    lines += [f"page cache: {r['page_cache']}"] if r.get("page_cache") else []
    return lines


def write_junit(path: Path, suite: str, outcomes: list[CellOutcome]) -> Path:
    """Write JUnit XML for `outcomes` to `path` (whole, then renamed); return the path."""
    kinds: list[tuple[str, str, str] | None] = []
    for o in outcomes:
        if o.error is not None:
            kinds.append(("error", "run error", o.error))
        elif o.prediction is not None:
            kinds.append(("failure", "prediction missed", f"prediction misses: {o.mismatch}; verdict: {o.verdict}")
                         if o.prediction == "misses" else None)
        elif (failure := o.failure) is not None:  # the verdict is fail
            kinds.append(("failure", FAIL, failure))
        elif o.verdict == UNKNOWN:
            because = (o.row or {}).get("unknown_because") or "the checker could not decide; see the runs' reports"
            kinds.append(("skipped", UNKNOWN, f"unknown because: {because}"))
        else:
            kinds.append(None)
    count = {k: str(sum(1 for x in kinds if x and x[0] == k)) for k in ("failure", "error", "skipped")}
    ts = ET.Element("testsuite", name=suite, tests=str(len(outcomes)), failures=count["failure"],
                    errors=count["error"], skipped=count["skipped"], time=f"{sum(o.seconds for o in outcomes):.1f}")
    for o, kind in zip(outcomes, kinds):
        case = ET.SubElement(ts, "testcase", classname=f"kchaos.{suite}", name=o.name, time=f"{o.seconds:.1f}")
        props = ET.SubElement(case, "properties")
        r = o.row or {}
        for k, v in (("verdict", o.verdict), ("severity", o.severity), ("prediction", o.prediction),
                     ("page_cache", r.get("page_cache")), ("unparsed_lines", r.get("unparsed_lines")),
                     ("kafka_internal", r.get("kafka_internal")), ("kafka_errors", r.get("kafka_errors"))):
            if v is not None:
                ET.SubElement(props, "property", name=k, value=str(v))
        if kind is not None:
            tag, typ, message = kind
            ET.SubElement(case, tag, message=message[:500], type=typ).text = message
        out = [o.label, *_verdict_lines(o)] + [f"{k}={r[k]}" for k in SHOWN if r.get(k) is not None]
        ET.SubElement(case, "system-out").text = "\n".join(out)
    root = ET.Element("testsuites", name=suite, tests=str(len(outcomes)), failures=count["failure"],
                      errors=count["error"], skipped=count["skipped"])
    root.append(ts)
    ET.indent(root)
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)
    return Path(path)
