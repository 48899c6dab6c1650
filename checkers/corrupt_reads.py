"""Reads of records the `corrupt` nemesis flipped on disk, told apart from Kafka's anomalies.

A flipped value a reader is handed (librdkafka's default `check.crcs=false` does not check batch CRCs) shows
to the queue checker as `unexpected` when it is not a number a producer sent, but a flipped digit is often
another producer's number: then it shows as a `duplicate`, an `inconsistent_offset` and an
`acked_offset_mismatch`, kinds that acks=1 allows. `corrupt_read` names it for what it is, so such a read
never passes as a rewritten log: a read, by a client op, of an offset whose record a `corrupt` op flipped,
returning another value than the one acknowledged there. Only histories with a `corrupt` op are read twice.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kchaos.core.history import read_history

KIND = "corrupt_read"
EXAMPLES = 10


def flipped_offsets(history: Path) -> set[tuple[int, int]]:
    """(partition, offset) of every record a completed `corrupt` op flipped: the record whose value was hit, or
    every offset of the batch when the flip was in a compressed batch's records (offset unknown)."""
    hit: set[tuple[int, int]] = set()
    with open(history, encoding="utf-8", errors="replace") as fh:
        lines = [line for line in fh if '"corrupted"' in line]
    for line in lines:
        try:
            op = json.loads(line)
        except ValueError:
            continue
        if op.get("process") != "nemesis" or op.get("type") != "ok" or op.get("f") != "corrupt":
            continue
        for node in (op.get("corrupted") or {}).values():
            p = node.get("partition")
            for f in node.get("flips") or []:
                if f.get("offset") is not None:
                    hit.add((p, f["offset"]))
                else:
                    hit.update((p, o) for o in range(f["batch_base_offset"], f["batch_last_offset"] + 1))
    return hit


def corrupt_reads(history: Path) -> dict[str, Any] | None:
    """`{"count": N, "examples": [{"partition", "offset", "acked", "read", "process", "f"}]}` for the reads of
    flipped records that returned another value than the acknowledged one; None when no `corrupt` op flipped
    anything (the history is then read once, for the ops that name `corrupted`)."""
    hit = flipped_offsets(history)
    if not hit:
        return None
    acked: dict[tuple[int, int], int | None] = {}
    reads: list[tuple[int, int, Any, Any, str]] = []
    for op in read_history(history):
        if op.get("type") != "ok":
            continue
        if op.get("f") == "send" and (op.get("partition"), op.get("offset")) in hit:
            acked[(op["partition"], op["offset"])] = op.get("value")
        elif op.get("f") in ("poll", "drain"):
            reads += [(r[0], r[1], r[2], op.get("process"), op["f"]) for r in op.get("records") or []
                      if (r[0], r[1]) in hit]
    bad = [r for r in reads if (r[0], r[1]) in acked and r[2] != acked[(r[0], r[1])]]
    return {"count": len(bad), "examples": [
        {"partition": p, "offset": o, "acked": acked[(p, o)], "read": v, "process": proc, "f": f}
        for p, o, v, proc, f in bad[:EXAMPLES]]}
