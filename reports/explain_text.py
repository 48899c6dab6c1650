"""The groups of a run's lost writes, from an explanation in its JSON form (explanation.json, or
`Explanation.to_dict()`), for report.html and the console (harness/console.py).

An explanation written before groups existed has only `ranges`; each of its
ranges then counts as a group of its own.
"""
from __future__ import annotations

from typing import Any, Mapping

__all__ = ["groups_of"]


def groups_of(explanation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The explanation's groups, largest first: `groups`, or one per range for an older explanation.json."""
    groups = explanation.get("groups")
    if isinstance(groups, list):
        return groups
    out = []
    for i, r in enumerate(explanation.get("ranges") or []):
        out.append({"partition": r.get("partition"), "ranges": [i], "spans": [[r.get("first_offset"),
                                                                                r.get("last_offset")]],
                    "values": len(r.get("values") or []), "acked_by": [r["leader"]] if r.get("leader") else [],
                    "acked_from_s": r.get("acked_from_s"), "acked_to_s": r.get("acked_to_s"),
                    "parts": [r.get("why") or ""], "why": r.get("why") or "",
                    "replicas": [{"node": f.get("node"), "statuses": {f.get("status"): len(r.get("values") or [])},
                                  "held": f.get("held"), "offsets": [f["offset"]] if f.get("offset") is not None
                                  else [], "times": [f["time_s"]] if f.get("time_s") is not None else [],
                                  "sources": [f["source"]] if f.get("source") else [],
                                  "details": ["; ".join(x for x in (f.get("had"), f.get("detail")) if x)]}
                                 for f in r.get("replicas") or []]})
    return sorted(out, key=lambda g: -g["values"])
