"""The share coordinators' log (`__share_group_state`) as DumpLogSegments decodes it.

Kafka's share coordinator keeps, for each share group and partition it serves (the key
`group:topic-id:partition`), the partition's delivery state as records in `__share_group_state`: a
snapshot (`ShareSnapshot`, key type 0) of every offset range still in flight, then updates
(`ShareUpdate`, key type 1) with the ranges a write changed. `--share-group-state-decoder` prints
each record's key and value as JSON:

    key: {"type":"1","data":{"groupId":"g","topicId":"x2f5...","partition":0}}
    payload: {"version":"0","data":{"leaderEpoch":1,"startOffset":35,"stateBatches":[{"firstOffset":52,
      "lastOffset":52,"deliveryState":2,"deliveryCount":1}]}}

`share_states(batches)` reads those records; `decode_share(run, libs, dumper)` decodes a run's
collected copies (RUN/evidence/raw/<node>/__share_group_state-<p>/), keeps for each state partition
the replica holding the most records, and writes them to RUN/evidence/share_state.jsonl.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.evidence.files import EVIDENCE_DIR, RAW_DIR, SHARE_STATE_DIR
from kchaos.evidence.kafka_logs import Batch, DumpError, parse_dump

__all__ = ["DELIVERY_STATES", "SHARE_STATE_FILE", "ShareState", "decode_share", "share_states"]

SHARE_STATE_FILE = "share_state.jsonl"  # in EVIDENCE_DIR: every share-group state record, decoded
# Kafka's RecordState ids, as the state records carry them.
DELIVERY_STATES = {0: "available", 1: "acquired", 2: "acknowledged", 4: "archived"}
_KINDS = {"0": "snapshot", "1": "update"}
_FOLDER = re.compile(re.escape(SHARE_STATE_DIR) + r"-(\d+)")


@dataclass(frozen=True)
class ShareState:
    """One record of `__share_group_state`: which share partition it is about and the delivery state it wrote.

    `batches` are (first offset, last offset, delivery state name, delivery count); `state_epoch` is a
    snapshot's (None for an update); `time_ms` is when the coordinator appended it."""

    state_partition: int
    offset: int
    time_ms: int
    kind: str
    group: str
    topic_id: str
    partition: int
    leader_epoch: int
    start_offset: int
    batches: tuple[tuple[int, int, str, int], ...]
    state_epoch: int | None = None

    def covering(self, offset: int) -> tuple[str, int] | None:
        """(delivery state, count) this record wrote for `offset`, None when none of its ranges holds it."""
        for first, last, state, count in self.batches:
            if first <= offset <= last:
                return state, count
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (a line of share_state.jsonl)."""
        return {"state_partition": self.state_partition, "offset": self.offset, "time_ms": self.time_ms,
                "kind": self.kind, "group": self.group, "topic_id": self.topic_id, "partition": self.partition,
                "leader_epoch": self.leader_epoch, "state_epoch": self.state_epoch, "start_offset": self.start_offset,
                "batches": [list(b) for b in self.batches]}


def share_states(batches: Iterable[Batch], state_partition: int, notes: list[str] | None = None
                 ) -> Iterator[ShareState]:
    """The state records of `batches` (a `share_log=True` dump of one `__share_group_state` partition), in file
    order; a record that does not read as one is a note."""
    for b in batches:
        for r in b.records:
            try:
                key, value = json.loads(r.key or ""), json.loads(r.payload or "")
                k, v = key["data"], value["data"]
                yield ShareState(
                    state_partition, r.offset, r.time_ms, _KINDS.get(str(key["type"]), f"type {key['type']}"),
                    str(k["groupId"]), str(k["topicId"]), int(k["partition"]), int(v.get("leaderEpoch", -1)),
                    int(v.get("startOffset", -1)),
                    tuple((int(s["firstOffset"]), int(s["lastOffset"]),
                           DELIVERY_STATES.get(s["deliveryState"], str(s["deliveryState"])), int(s["deliveryCount"]))
                          for s in v.get("stateBatches") or ()),
                    int(v["stateEpoch"]) if "stateEpoch" in v else None)
            except (ValueError, KeyError, TypeError) as e:
                if notes is not None:
                    notes.append(f"{b.file}@{r.offset}: not a share state record ({type(e).__name__}: {e})")


def decode_share(run: Path, libs: Path, dumper: Callable[..., Sequence[str]], notes: list[str]) -> list[ShareState]:
    """Every state record of the run's `__share_group_state`, from the replica of each of its partitions with the
    most records, ordered by partition and offset; also written to RUN/evidence/share_state.jsonl. Nothing
    collected, or a DumpLogSegments failure, is a note."""
    raw = Path(run) / EVIDENCE_DIR / RAW_DIR
    files = sorted(str(f.relative_to(raw)) for f in raw.glob(f"*/{SHARE_STATE_DIR}-*/*.log"))
    best: dict[int, list[ShareState]] = {}
    if not files:
        notes.append(f"no {SHARE_STATE_DIR} segments were collected: the share coordinators' side is unknown")
    else:
        per: dict[tuple[str, int], list[ShareState]] = {}
        try:
            for b in parse_dump(dumper(libs, files, raw, share_log=True), notes):
                node, folder = b.file.split("/")[:2]
                if m := _FOLDER.fullmatch(folder):
                    per.setdefault((node, int(m.group(1))), []).extend(share_states([b], int(m.group(1)), notes))
        except (DumpError, OSError, RuntimeError) as e:
            notes.append(f"DumpLogSegments --share-group-state-decoder: {e}")
        for (_node, p), states in sorted(per.items()):
            if len(states) > len(best.get(p, [])):
                best[p] = states
    out = [s for p in sorted(best) for s in best[p]]
    with open(Path(run) / EVIDENCE_DIR / SHARE_STATE_FILE, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(s.to_dict(), separators=(",", ":")) + "\n" for s in out)
    return out
