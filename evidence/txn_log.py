"""The transaction coordinators' log (`__transaction_state`) as DumpLogSegments decodes it.

`kafka_logs.dump(..., txn_log=True)` prints one record per state
change of a transactional id, `key` naming the id and `payload` its metadata
after the change. Kafka 3.7 prints them as text:

    key: transaction_metadata::transactionalId=kchaos-7-txn-3 payload: producerId:0,producerEpoch:0,
    state=Ongoing,partitions=[kchaos-0,__consumer_offsets-1],txnLastUpdateTimestamp=1795696048448,txnTimeoutMs=10000

Kafka 4.1 prints both as JSON, the state as its number (Kafka's
TransactionState ids: 0 Empty ... 7 PrepareEpochFence) and the partitions as
`[{"topic", "partitionIds"}]`; it adds `transactionStartTimestampMs`. Both
were checked on the same real segment. A tombstone (an expired id) prints
`<DELETE>` as its payload and becomes state "Dead". `txn_states(batches)`
turns either into `TxnState`s; nothing here needs a cluster.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from kchaos.evidence.kafka_logs import Batch

__all__ = ["STATES", "TxnState", "txn_states"]

# Kafka's TransactionState by id (the order of its `id` values), for 4.x's JSON form.
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
          "PrepareEpochFence")
_TEXT_KEY = re.compile(r"transaction_metadata::transactionalId=(.*)$")
_TEXT = re.compile(r"producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),partitions=\[(.*)\],"
                   r"txnLastUpdateTimestamp=(-?\d+),txnTimeoutMs=(-?\d+)")


@dataclass(frozen=True)
class TxnState:
    """One state change of a transactional id, as its coordinator wrote it.

    `offset` and `time_ms` are the record's in its `__transaction_state`
    partition (`partition`) and its CreateTime (when the coordinator appended
    it); `last_update_ms` is the metadata's own txnLastUpdateTimestamp (when the
    coordinator decided the change); `partitions` are "topic-p" names; `start_ms`
    only from Kafka 4.x's form.
    """

    partition: int
    offset: int
    time_ms: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    partitions: tuple[str, ...]
    last_update_ms: int
    timeout_ms: int
    start_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (a line of evidence/txn_state.jsonl)."""
        d = asdict(self)
        d["partitions"] = list(self.partitions)
        return d


def _key(text: str | None) -> str | None:
    if text is None:
        return None
    m = _TEXT_KEY.search(text)
    if m:
        return m.group(1)
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    tid = (obj.get("data") or {}).get("transactionalId") if isinstance(obj, dict) else None
    return tid if isinstance(tid, str) else None


def _value(text: str) -> dict[str, Any] | None:
    """The payload's fields in one shape, or None when it is neither form."""
    m = _TEXT.fullmatch(text.strip())
    if m:
        parts = tuple(p for p in m.group(4).split(",") if p)
        return {"producer_id": int(m.group(1)), "producer_epoch": int(m.group(2)), "state": m.group(3),
                "partitions": parts, "last_update_ms": int(m.group(5)), "timeout_ms": int(m.group(6))}
    try:
        data = (json.loads(text) or {}).get("data")
    except (ValueError, AttributeError):
        return None
    if not isinstance(data, dict) or "transactionStatus" not in data:
        return None
    status = data["transactionStatus"]
    state = STATES[status] if isinstance(status, int) and 0 <= status < len(STATES) else str(status)
    parts = tuple(f"{t['topic']}-{p}" for t in data.get("transactionPartitions") or [] for p in t.get("partitionIds")
                  or [])
    start = data.get("transactionStartTimestampMs")
    return {"producer_id": int(data.get("producerId", -1)), "producer_epoch": int(data.get("producerEpoch", -1)),
            "state": state, "partitions": parts,
            "last_update_ms": int(data.get("transactionLastUpdateTimestampMs", -1)),
            "timeout_ms": int(data.get("transactionTimeoutMs", -1)),
            "start_ms": start if isinstance(start, int) and start >= 0 else None}


def txn_states(batches: Iterable[Batch], partition_of: Any = None,
               notes: list[str] | None = None) -> Iterator[TxnState]:
    """The state changes in `__transaction_state` batches (parse_dump of a `txn_log=True` dump), in file order.

    `partition_of(batch)` gives a batch's `__transaction_state` partition (by
    default the number ending the folder its file is in). A tombstone is state
    "Dead" with producer -1. A record of another shape (a group-metadata key
    would be one) goes to `notes`, when given, and is skipped.
    """
    for b in batches:
        p = partition_of(b) if partition_of else _folder_partition(b.file)
        for r in b.records:
            tid = _key(r.key)
            if r.payload is None or tid is None:
                if notes is not None and r.payload is not None:
                    notes.append(f"{b.file}: offset {r.offset}: not a transaction-log record: {(r.key or '')[:80]}")
                continue
            if r.payload.strip() in ("<DELETE>", "null"):
                yield TxnState(p, r.offset, r.time_ms, tid, -1, -1, "Dead", (), r.time_ms, -1)
                continue
            v = _value(r.payload)
            if v is None:
                if notes is not None:
                    notes.append(f"{b.file}: offset {r.offset}: unparsed transaction metadata: {r.payload[:120]}")
                continue
            yield TxnState(p, r.offset, r.time_ms, tid, **v)


def _folder_partition(file: str) -> int:
    m = re.search(r"-(\d+)/[^/]*$", file)
    return int(m.group(1)) if m else -1
