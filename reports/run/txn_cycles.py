"""The example cycles of a txn run (results.json's `cycles`) as report.html shows them:
one small table per cycle, and the history lines of every op the report links to.

A link to an op goes to an anchor inside report.html (`#op-<invocation index>`), where the op's invocation and
completion lines are quoted with their line numbers in history.jsonl: the report stays one self-contained file,
readable from a CI artifact, and `kchaos serve` serves history.jsonl as plain text, which has
no anchors to link to.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_RECORDS", "anchor", "cycle_tables", "micro_ops", "op_excerpts"]

MAX_RECORDS = 6  # records of a poll quoted in a table cell; the history lines below have them all
KINDS = {"G0": "write cycle (ww edges only)", "G1c": "cycle through a wr edge (ww and wr edges)",
         "G1c_wr": "cycle of wr edges only (transactions that read each other's writes)"}


def anchor(index: int) -> str:
    """The id of op `index`'s history lines in report.html."""
    return f"op-{index}"


def micro_ops(mops: Any) -> str:
    """A transaction's completed micro-ops in one line: `send 10 → p0@4; poll p0@3=20 p1@5=21 …(+4)`."""
    if not isinstance(mops, list):
        return "–"
    out = []
    for m in mops:
        if isinstance(m, list) and m and m[0] == "send":
            p, o = (m[3], m[4]) if len(m) >= 5 else (None, None)
            out.append(f"send {m[2]} → " + ("?" if p is None else f"p{p}@{'?' if o is None else o}"))
        elif isinstance(m, list) and m and m[0] == "poll":
            recs = m[1] if len(m) > 1 else None
            if not isinstance(recs, list):
                out.append("poll (never ran)")
                continue
            shown = " ".join(f"p{r[0]}@{r[1]}={r[2]}" for r in recs[:MAX_RECORDS]
                             if isinstance(r, list) and len(r) == 3)
            more = f" …(+{len(recs) - MAX_RECORDS})" if len(recs) > MAX_RECORDS else ""
            out.append(f"poll {shown}{more}" if recs else "poll (nothing)")
    return "; ".join(out) or "–"


def cycle_tables(results: Mapping[str, Any] | None, ops: Mapping[int, Mapping[str, Any]],
                 judged: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One table per example cycle of `results`, in G0, G1c, G1c_wr order: `{"kind", "what", "count", "effect",
    "rows"}`, a row per op around the cycle: `{"op", "anchor", "process", "type", "mops", "edge", "to", "why"}`,
    the edge leading from that op to the next (the last row's to the first). `ops` holds the ops' completions
    (as `read_txn_run` reads them); `judged` maps a kind to what it did to the verdict."""
    r = results or {}
    cycles, counts = r.get("cycles") or {}, r.get("counts") or {}
    out = []
    for kind in [*KINDS, *sorted(set(cycles) - set(KINDS))]:
        c = cycles.get(kind)
        if not isinstance(c, Mapping) or not c.get("ops"):
            continue
        edges = {e.get("from"): e for e in c.get("edges") or [] if isinstance(e, Mapping)}
        rows = []
        for i in c["ops"]:
            op, e = ops.get(i) or {}, edges.get(i) or {}
            rows.append({"op": i, "anchor": anchor(i) if i in ops else None, "process": op.get("process"),
                         "type": op.get("type"), "mops": micro_ops(op.get("value")), "edge": e.get("edge"),
                         "to": e.get("to"), "why": e.get("why")})
        out.append({"kind": kind, "what": KINDS.get(kind, ""), "count": counts.get(kind),
                    "effect": (judged or {}).get(kind, ""), "rows": rows})
    return out


def op_excerpts(ops: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The history lines of every op in `ops`, by invocation index: `{"op", "anchor", "lines": [(n, text)]}`."""
    return [{"op": i, "anchor": anchor(i), "lines": list(ops[i].get("lines") or [])} for i in sorted(ops)]
