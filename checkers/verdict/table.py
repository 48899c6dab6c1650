"""One row per checked run: what `kchaos check DIR` prints and writes as checks.json and checks.csv.

A row names the run (its path below the checked directory), its verdict
(pass, fail or unknown, and `valid` matching it), its
configuration (acks, min.insync.replicas, unclean election, idempotence,
nemeses), every anomaly count, whether the configuration promised no loss,
send availability (overall and inside fault windows) and send latency.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from kchaos.checkers.outages import outages_of
from kchaos.checkers.queue.reference import COUNTS
from kchaos.checkers.verdict.judge import of_valid
from kchaos.core.promise import Promise

__all__ = ["COLUMNS", "in_faults", "row", "write_table"]

COLUMNS = ("run", "verdict", "valid", "acks", "min_insync", "unclean", "idempotence", "nemesis", *COUNTS,
           "loss_promised", "loss_expected_by_configuration", "availability", "availability_in_faults",
           "acked_time_share", "longest_outage_s", "send_p50_ms", "send_p99_ms", "error")


def in_faults(availability: dict[str, Any]) -> tuple[int, int]:
    """(ok, invoked) sends inside fault windows of a results timeline's availability; overlaps count once."""
    overall, outside = availability.get("overall") or {}, availability.get("outside_faults") or {}
    invoked = (overall.get("invoked") or 0) - (outside.get("invoked") or 0)
    return (overall.get("ok") or 0) - (outside.get("ok") or 0), invoked


def _in_faults(availability: dict[str, Any]) -> float | None:
    ok, invoked = in_faults(availability)
    return round(ok / invoked, 4) if invoked else None


def row(root: Path, run: Path, test: dict[str, Any], result: dict[str, Any], error: str | None) -> dict[str, Any]:
    """The row of `run` (checked, with `result` as results.json holds it) below `root`."""
    settings = Promise.of(test)
    counts = result.get("counts", {})
    availability = (result.get("timeline") or {}).get("availability", {})
    ok_latency = (result.get("latency_ms") or {}).get("send", {}).get("ok", {})
    loss = result.get("loss", {})
    outages = outages_of(result)
    if error is None:
        error = next((r["error"] for r in result.get("checkers", {}).values() if r.get("error")), None)
    return {
        "run": str(run.relative_to(root)) if run != root else ".",
        "verdict": result.get("verdict") or of_valid(result.get("valid")),
        "valid": result.get("valid", "unknown"),
        "acks": settings.acks, "min_insync": settings.min_insync, "unclean": settings.unclean,
        "idempotence": settings.idempotence,
        "nemesis": ",".join((test.get("nemesis") or {}).get("names", [])) or None,
        **{k: counts.get(k) for k in COUNTS},
        "loss_promised": loss.get("promised"),
        "loss_expected_by_configuration": loss.get("expected_by_configuration"),
        "availability": (availability.get("overall") or {}).get("ok_ratio"),
        "availability_in_faults": _in_faults(availability),
        "acked_time_share": outages.get("acked_share"), "longest_outage_s": outages.get("longest_s"),
        "send_p50_ms": ok_latency.get("p50"), "send_p99_ms": ok_latency.get("p99"),
        "error": error,
    }


def write_table(root: Path, rows: list[dict[str, Any]]) -> None:
    """Write `rows` as root/checks.json and root/checks.csv (each written whole, then renamed)."""
    for name, write in (("checks.json", _json), ("checks.csv", _csv)):
        tmp = root / f".{name}.tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            write(fh, rows)
        os.replace(tmp, root / name)


def _json(fh: Any, rows: list[dict[str, Any]]) -> None:
    json.dump(rows, fh, indent=2)
    fh.write("\n")


def _csv(fh: Any, rows: list[dict[str, Any]]) -> None:
    w = csv.DictWriter(fh, fieldnames=COLUMNS)
    w.writeheader()
    w.writerows(rows)
