"""Why a txn run's transactions were torn, or their aborted values read, told from Kafka's own files.

`explain_txn(run)` takes the anomalies of the txn check from results.json
(torn_transaction, G1a, lost_write, aborted_read: docs/checkers.md), puts each
on its transaction in the history (a `TxnOp`), decodes the run's evidence (the
topic's segments, the coordinators' `__transaction_state`) and, per anomalous
transaction, assembles a `TxnStory`:

- the op: process, values, the offsets its sends got, its outcome and error,
  the history line;
- its facts in Kafka's files (`TxnFates`): producer id and
  epoch, each value's record and the marker that decided it, the marker that
  ended it on each partition (offset, time, coordinator epoch, ms after its
  first record), the coordinator's state changes around it;
- its process's previous transaction, the client's own log lines meanwhile
  (harness.log), and the ops a late record's marker committed too;
- a cause where one can be read off (`txn_why.cause`).

Stories are grouped by cause (`groups`: kind, sentence head, ops). It writes
RUN/evidence/txn_explanation.json and returns a `TxnExplanation`;
`kchaos.evidence.explain.txn_text` tells it as lines.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.core.history import HistoryError
from kchaos.evidence import EvidenceError
from kchaos.evidence.decode import Dumper, FindLibs, check_run, decode
from kchaos.evidence.explain.txn_facts import KINDS, TxnOp, anomalies, anomalous_ops, client_log, load_txn_ops
from kchaos.evidence.explain.txn_fates import TxnStory, txn_fates
from kchaos.evidence.explain.txn_why import HEADS, cause
from kchaos.evidence.files import EVIDENCE_DIR, TXN_EXPLANATION_FILE, read_json_object
from kchaos.evidence.kafka_logs import dump
from kchaos.evidence.txn_decode import TxnEvidence, decode_txn

__all__ = ["TxnExplanation", "explain_txn", "load_txn_explanation"]

_CLIENT_LOG_SLACK_MS = 1000  # the client logs an op's end a little after the history records it


@dataclass(frozen=True)
class TxnExplanation:
    """A txn run's anomalous transactions explained: stories in invocation order, groups by cause (largest
    first), the anomaly counts and notes."""

    run: str
    counts: dict[str, int]
    stories: tuple[TxnStory, ...]
    groups: tuple[dict[str, Any], ...]
    clock: dict[str, Any]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what txn_explanation.json holds)."""
        return {"run": self.run, "counts": self.counts, "transactions": [s.to_dict() for s in self.stories],
                "groups": list(self.groups), "clock": self.clock, "notes": list(self.notes)}


def _committed_with(te: TxnEvidence, ops: list[TxnOp], story: TxnStory) -> dict[tuple[int, int], list[int]]:
    """For each marker that committed a late record of the story, the ops of its process whose records it decided."""
    wanted = {(v.marker["partition"], v.marker["offset"]) for v in story.fates.values if v.late and v.marker}
    out: dict[tuple[int, int], list[int]] = {}
    if not wanted:
        return out
    for op in ops:
        if op.process != story.op.process:
            continue
        for s in op.sends:
            r = te.record(s.value)
            m = r and te.marker_after(r.partition, r.producer_id, r.producer_epoch, r.offset)
            if m and (m.partition, m.offset) in wanted and op.index not in out.setdefault((m.partition, m.offset), []):
                out[(m.partition, m.offset)].append(op.index)
    return out


def _groups(stories: list[TxnStory]) -> tuple[dict[str, Any], ...]:
    by: dict[str, list[TxnStory]] = {}
    for s in stories:
        by.setdefault(s.kind or "unexplained", []).append(s)
    groups = [{"kind": k, "ops": [s.op.index for s in ss], "head": HEADS.get(ss[0].kind, k)} for k, ss in by.items()]
    return tuple(sorted(groups, key=lambda g: (-len(g["ops"]), g["ops"][0])))


def explain_txn(run: Path, libs: Path | None = None, dumper: Dumper = dump,
                find_libs: FindLibs | None = None) -> TxnExplanation:
    """(Re)build the explanation of a txn run's anomalous transactions from RUN/evidence/raw; write
    txn_explanation.json.

    Raises EvidenceError (one line) when the run has no evidence/raw, no
    test.json or no readable results.json or history. `libs` are the Kafka
    jars; without them `find_libs` finds the run's own from test.json.
    `dumper` stands in for DumpLogSegments (tests).
    """
    run = Path(run)
    check_run(run)
    listed, counts, notes = anomalies(run)
    try:
        ops = load_txn_ops(run)
    except (OSError, HistoryError) as e:
        raise EvidenceError(f"{run}: history.jsonl unreadable ({e})") from None
    named, more = anomalous_ops(ops, listed)
    notes += more
    test = json.loads((run / "test.json").read_text(encoding="utf-8"))
    stories: list[TxnStory] = []
    te = None
    if named:
        try:
            libs = libs or (find_libs(test) if find_libs else None)
        except Exception as e:
            notes.append(f"no Kafka jars for test.json's version: {type(e).__name__}: {e}")
        ev = decode(run, libs, dumper)  # without libs: a note, and no segments
        te = decode_txn(ev, libs, dumper)
        notes += ev.notes + te.notes
        prev_of = {}
        last: dict[int, TxnOp] = {}
        for op in ops:
            prev_of[op.index] = last.get(op.process)
            last[op.process] = op
        seed = test.get("seed")
        for op in named:
            hint = f"kchaos-{seed}-txn-{op.process}" if seed is not None else None
            story = TxnStory(op, txn_fates(op, te, hint), prev_of.get(op.index))
            story.committed_with = _committed_with(te, ops, story)
            clock = ev.clock
            t0 = clock.to_unix_ms(op.invoke_s)
            t1 = clock.to_unix_ms(op.complete_s)
            story.client_log = client_log(run, op.process, story.fates.transactional_id, clock.start_unix_ms, t0,
                                          None if t1 is None else t1 + _CLIENT_LOG_SLACK_MS)
            story.kind, story.cause = cause(story) or (None, None)
            stories.append(story)
    clock_doc: dict[str, Any] = ({"history_start_unix_ms": te.ev.clock.start_unix_ms, "source": te.ev.clock.source}
                                 if te else {})
    exp = TxnExplanation(str(run), {k: counts[k] for k in KINDS}, tuple(stories), _groups(stories), clock_doc,
                         tuple(dict.fromkeys(notes)))
    out = run / EVIDENCE_DIR / TXN_EXPLANATION_FILE
    out.write_text(json.dumps(exp.to_dict(), indent=1) + "\n", encoding="utf-8")
    return exp


def load_txn_explanation(run: Path) -> dict[str, Any] | None:
    """RUN/evidence/txn_explanation.json as a dict, or None when absent or unreadable."""
    return read_json_object(Path(run) / EVIDENCE_DIR / TXN_EXPLANATION_FILE)
