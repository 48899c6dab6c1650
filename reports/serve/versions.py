"""The scenario × Kafka line table of `kchaos serve`: for each scenario variant, on each line it ran, how many
repetitions bore its prediction out, each repetition a square linked to its run.

Read from the scenario.json files below `scenarios/` in the store, one per scenario run. A variant run on another
line than its own is named NAME-kafka-LINE; it is shown in NAME's row, in LINE's column.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kchaos.core.kafka_versions import LINE_NAMES, UnsupportedVersion, line_of, split_on_line


def _line(version: Any) -> str | None:
    try:
        return line_of(str(version)).line
    except UnsupportedVersion:
        return None


def version_table(scenarios: Path, root: Path, href: Any, only: str | None = None) -> dict[str, Any] | None:
    """The table over every scenario run below `scenarios` (`only` that scenario), or None when there is none.
    `href(parts, is_dir)` is a store path's URL; `root` the store root the parts are relative to. Rows are
    sorted by scenario then first appearance; a cell holds matched, checked, the prediction and the squares."""
    rows: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for state_file in sorted(scenarios.glob("*/*/scenario.json")):
        if state_file.parent.is_symlink() or (only and state_file.parent.parent.name != only):
            continue  # `latest` points at a scenario run counted under its own stamp
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
            variants = [v for v in state["variants"] if isinstance(v, dict)]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        name = str(state.get("scenario") or state_file.parent.parent.name)
        for v in variants:
            base, _ = split_on_line(str(v.get("name")))
            for r in v.get("runs") or []:
                line = _line(r.get("kafka")) if isinstance(r, dict) else None
                if line is None:
                    continue
                cell = rows.setdefault((name, base), {}).setdefault(
                    line, {"matched": 0, "checked": 0, "predict": v.get("predict"), "squares": []})
                run = state_file.parent / str(r.get("run"))
                parts = run.resolve().relative_to(root).parts if run.resolve().is_relative_to(root) else None
                cell["checked"] += 1
                cell["matched"] += bool(r.get("matched"))
                cell["predict"] = v.get("predict")  # the newest run's
                word = "matched" if r.get("matched") else "missed"
                cell["squares"].append({"href": href(parts, True) if parts else None, "matched": bool(r.get("matched")),
                                        "title": f"{run.parent.parent.name} rep {r.get('rep', 0) + 1}: {word}, "
                                                 f"Kafka {r.get('kafka')}, verdict {r.get('verdict', 'unknown')}"})
    if not rows:
        return None
    lines = [x for x in LINE_NAMES if any(x in row for row in rows.values())]
    out = []
    for (scenario, variant), row in sorted(rows.items(), key=lambda kv: kv[0][0]):
        first = row[min(row, key=LINE_NAMES.index)]["predict"]
        out.append({"scenario": scenario, "variant": variant,
                    "label": scenario if variant == scenario else f"{scenario} · {variant}", "predict": first,
                    "cells": [dict(row[x], other=row[x]["predict"] != first) if x in row else None for x in lines]})
    return {"lines": lines, "rows": out}


__all__ = ["version_table"]
