"""One line of cause for an anomalous transaction, where Kafka's files let it be read off.

`cause(story)` looks at a transaction's facts (its
`TxnStory`: its op, `TxnFates`, its process's neighbouring ops) and returns
(kind, sentence), or None when no rule fits. The rules, in order:

- `late-produce`: a value of the transaction is committed although its record
  stands after the marker that ended its own transaction (the record was sent
  before that marker and appended after it): a produce request of the ended
  transaction arrived late and joined the producer's next transaction, whose
  COMMIT made it visible (KAFKA-17754 class).
- `foreign-commit`: some values are committed and some were never written
  by a transaction the client did not see commit. A client asks for the commit
  only once every send is acknowledged, so the commit was not this
  transaction's own; with the same producer id and epoch, only an EndTxn of
  an earlier transaction sent again can have asked for it (KAFKA-17754 class).
- `split`: its markers disagree: some partitions got COMMIT, some ABORT.
- `coordinator-commit`: the client saw it fail, the coordinator committed it.
- `coordinator-abort`: the client saw it commit, the coordinator aborted it
  (with the transaction timeout when it had run that long).
- `not-written`: a committed value no replica holds.
- `open`: no marker of its producer and epoch follows a value's record (a
  hanging transaction).
- `aborted-read`: an aborted_read value stood in the log until its ABORT
  marker (what read_uncommitted allows).

Each sentence names its facts: markers with offset and time, coordinator
states with time, ms after the transaction's first record.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kchaos.evidence.explain.txn_fates import TxnStory

__all__ = ["HEADS", "cause", "marker_phrase", "markers_phrase", "values_phrase"]

# Each kind of cause in a few words: the summary line groups transactions by them.
HEADS = {"late-produce": "committed by a later transaction", "foreign-commit": "committed in part",
         "split": "markers disagree", "coordinator-commit": "committed though the client saw it fail",
         "coordinator-abort": "aborted though the client saw it commit",
         "not-written": "committed without some of its values", "open": "still open",
         "aborted-read": "read before its ABORT marker", None: "the files do not say why"}


def _s(x: float | None) -> str:
    return "an unknown time" if x is None else f"{x:.3f} s"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def values_phrase(values: list[int]) -> str:
    """"value 40" or "values 40 and 46"."""
    return ("value " if len(values) == 1 else "values ") + _and([str(v) for v in values])


def marker_phrase(m: dict[str, Any]) -> str:
    """"the COMMIT marker at p1 offset 58 (51.864 s, coordinator epoch 0)"."""
    ce = m.get("coordinator_epoch")
    return (f"the {m['kind']} marker at p{m['partition']} offset {m['offset']} ({_s(m.get('time_s'))}"
            + (f", coordinator epoch {ce}" if ce is not None else "") + ")")


def _producer(story: TxnStory) -> str:
    f = story.fates
    return f"producer {f.producer_id} epoch {f.producer_epoch}" if f.producer_id is not None else "its producer"


def _first_state(story: TxnStory, names: tuple[str, ...]) -> dict[str, Any] | None:
    d = story.fates.decided
    return d if d and d["state"] in names else None


def _late(story: TxnStory) -> str | None:
    late = [v for v in story.fates.values if v.late and v.status == "committed"]
    if not late:
        return None
    said = []
    for v in late:
        r, m, e = v.record, v.marker, v.late
        if r is None or m is None or e is None:  # never: a committed value has its record and marker
            continue
        with_ = story.committed_with.get((m["partition"], m["offset"])) or []
        others = [f"op {i}'s" for i in with_ if i != story.op.index]
        said.append(f"value {v.value}'s record (sent at {_s(r['time_s'])}) stands at p{r['partition']} offset "
                    f"{r['offset']}, after {marker_phrase(e)} that ended its transaction, so it joined the next "
                    f"transaction of {_producer(story)}" + (f" ({_and(others)})" if others else "")
                    + f", and {marker_phrase(m)} committed it")
    return ("committed by a later transaction: " + "; ".join(said)
            + ": a produce request of the ended transaction arrived late (KAFKA-17754 class)")


def _ms_after(story: TxnStory, time_ms: float) -> str:
    first = story.fates.first_record_ms
    return "" if first is None else f"{int(time_ms - first)} ms after value {story.fates.first_value}"


def _range(xs: list[float], fmt: Any) -> str:
    lo, hi = min(xs), max(xs)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def markers_phrase(story: TxnStory, ms: list[dict[str, Any]]) -> str:
    """Several markers of the transaction in one clause: "its COMMIT markers on p0 (offset 129) and p1 (113) came
    136–137 ms after value 213, at 51.864–51.865 s (coordinator epoch 0)"."""
    kinds = sorted({m["kind"] for m in ms})
    where = _and([f"p{m['partition']} (offset {m['offset']})" if i == 0 else f"p{m['partition']} ({m['offset']})"
                  for i, m in enumerate(ms)])
    epochs = sorted({m["coordinator_epoch"] for m in ms if m.get("coordinator_epoch") is not None})
    out = f"its {'/'.join(kinds)} marker{'s' if len(ms) > 1 else ''} on {where} came"
    first = story.fates.first_record_ms
    if first is not None:
        out += f" {_range([m['time_ms'] - first for m in ms], lambda x: str(int(x)))} ms after value " \
               f"{story.fates.first_value}, at"
    times = [m["time_s"] for m in ms if m.get("time_s") is not None]
    out += f" {_range(times, lambda x: f'{x:.3f}')} s" if times else " an unknown time"
    return out + (f" (coordinator epoch {', '.join(map(str, epochs))})" if epochs else "")


def _client(story: TxnStory) -> str:
    """The client's most telling line: the harness's own ("process N: ...") before the client library's."""
    own = [c for c in story.client_log if c["text"].startswith(f"process {story.op.process}:")]
    pick = (own or story.client_log)[:1]
    return f"; the client at {_s(pick[0]['time_s'])}: {pick[0]['text']}" if pick else ""


def _foreign_commit(story: TxnStory) -> str | None:
    f, op = story.fates, story.op
    done = [v for v in f.values if v.status == "committed" and not v.late]
    missing = [v for v in f.values if v.status == "not written"]
    if not done or not missing or op.outcome == "ok":
        return None
    ends = [e.marker for e in f.ends if e.marker and e.marker["kind"] == "COMMIT"]
    prep = f.decided if f.decided and f.decided["state"] == "PrepareCommit" else None
    out = "committed in part: "
    if prep:
        out += (f"the coordinator moved {_producer(story)} to PrepareCommit at {_s(prep['time_s'])}"
                + (f", {_ms_after(story, prep['time_ms'])}" if f.first_record_ms is not None else "") + ", and ")
    out += markers_phrase(story, ends) if ends else "no COMMIT marker is in the collected segments"
    prev = story.previous
    out += (f"; {values_phrase([v.value for v in missing])} {'was' if len(missing) == 1 else 'were'} never written "
            f"(no replica holds {'it' if len(missing) == 1 else 'them'}), so the commit was not this transaction's "
            "own (a client asks for one only once every send is acknowledged): with the same producer epoch, it was "
            "an EndTxn of an earlier transaction sent again"
            + (f" (the previous one: op {prev.index}, {prev.outcome} at {_s(prev.complete_s)})" if prev is not None
               else "") + " (KAFKA-17754 class)")
    return out + _client(story)


def _split(story: TxnStory) -> str | None:
    kinds = {e.marker["kind"] for e in story.fates.ends if e.marker}
    if kinds != {"COMMIT", "ABORT"}:
        return None
    said = [marker_phrase(e.marker) + " " + _ms_after(story, e.marker["time_ms"]) for e in story.fates.ends
            if e.marker]
    return "its markers disagree: " + _and(said)


def _coordinator_commit(story: TxnStory) -> str | None:
    done = [v for v in story.fates.values if v.status == "committed"]
    if story.op.outcome != "fail" or not done:
        return None
    prep = _first_state(story, ("PrepareCommit",))
    ms = _distinct_markers(done)
    return (f"the client saw it fail ({story.op.error or 'no error given'}), yet "
            + (f"the coordinator moved it to PrepareCommit at {_s(prep['time_s'])} and " if prep else "")
            + _and([marker_phrase(m) for m in ms]) + f" committed {values_phrase([v.value for v in done])}")


def _distinct_markers(vs: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for v in vs:
        if v.marker and v.marker not in out:
            out.append(v.marker)
    return out


def _coordinator_abort(story: TxnStory) -> str | None:
    gone = [v for v in story.fates.values if v.status == "aborted"]
    if story.op.outcome != "ok" or not gone:
        return None
    prep = _first_state(story, ("PrepareAbort",))
    out = ("the client saw it commit, yet " + _and([marker_phrase(m) for m in _distinct_markers(gone)])
           + f" aborted {values_phrase([v.value for v in gone])}")
    if prep:
        out += f", after the coordinator's PrepareAbort at {_s(prep['time_s'])}"
        began = story.fates.began
        if began and prep["timeout_ms"] > 0 and prep["last_update_ms"] - began["last_update_ms"] >= prep["timeout_ms"]:
            out += f", {prep['timeout_ms']} ms (its transaction timeout) after it began: the coordinator timed it out"
    return out


def _not_written(story: TxnStory) -> str | None:
    missing = [v.value for v in story.fates.values if v.status == "not written"]
    if story.op.outcome != "ok" or not missing:
        return None
    return f"the client saw it commit, yet no replica holds {values_phrase(missing)}"


def _open(story: TxnStory) -> str | None:
    hanging = [v for v in story.fates.values if v.status == "open"]
    if not hanging:
        return None
    where = _and(sorted({f"p{v.record['partition']}" for v in hanging if v.record is not None}))  # open: has a record
    return (f"no marker of {_producer(story)} follows {values_phrase([v.value for v in hanging])} on {where}: "
            "the transaction is still open there (a hanging transaction holds the last stable offset)")


def _aborted_read(story: TxnStory) -> str | None:
    read = [v for v in story.fates.values if v.status == "aborted" and v.value in story.op.anomalies.get(
        "aborted_read", [])]
    if not read:
        return None
    return (f"{values_phrase([v.value for v in read])} stood in the log until "
            + _and([marker_phrase(m) for m in _distinct_markers(read)])
            + " aborted them: a read_uncommitted reader sees a record before its marker (allowed)")


def cause(story: TxnStory) -> tuple[str, str] | None:
    """(kind, one-line cause) of the transaction by the first rule that fits (module docstring), else None."""
    for kind, rule in (("late-produce", _late), ("foreign-commit", _foreign_commit), ("split", _split),
                       ("coordinator-commit", _coordinator_commit), ("coordinator-abort", _coordinator_abort),
                       ("not-written", _not_written), ("open", _open), ("aborted-read", _aborted_read)):
        said = rule(story)
        if said:
            return kind, said
    return None
