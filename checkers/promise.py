"""Kafka's durability guarantee, applied write by write: was a lost write inside the promise?

Kafka's documentation (Design, "Replicated Logs"): "a committed message will
not be lost, as long as there is at least one in sync replica alive, at all
times". A write acknowledged under acks=all is committed: every member of the
partition's ISR had it when the leader answered. kchaos reads "alive" as
"kept its log": a killed or paused broker keeps its page cache, so it still
counts; a broker whose power failed lost whatever it had neither fsynced nor
written back (lazyfs reports, per file, the oldest write it dropped), so it no
longer holds the writes it made after that. Unclean leader election is outside the guarantee by
definition. min.insync.replicas is not part of it: it only makes the leader
refuse acks=all writes while the ISR is small, and does not stop the ISR
from shrinking to one replica afterwards.

So, for one lost write w of partition p acknowledged at time t (acks=all,
unclean election not configured), kchaos follows the replicas that hold w
and count for the guarantee, starting from p's ISR at t:

- a replica that leaves the ISR stops counting (it may still hold w, but
  Kafka will not elect it) -- unless Eligible Leader Replicas are on
  (KIP-966, Kafka 4.1 new clusters) and the ISR fell below min.insync: such
  a replica becomes an eligible leader and keeps counting;
- a replica that joins the ISR starts counting when the leader counts: it
  caught up with the leader's log;
- a replica whose power failed stops counting, unless it had w before the
  oldest write that failure dropped from p's log (written back by then), or
  the failure dropped nothing (flush.messages=1 fsyncs each record before
  the ack); it had w by the acknowledgement, or by the sample showing it
  joined the ISR;
- an unclean election of p puts w outside the guarantee.

If no counting replica is left at some moment (after a power failure or an
ISR change, fencing included: docs/promise.md), w was lost outside the
guarantee; otherwise its loss broke the promise. ISR membership comes from
the run's isr.jsonl (sampled once a second), so a change within a second of
a power failure can be seen late; every verdict names the events it rests
on. A write the evidence cannot place (no ISR sample, or beyond the listed
anomalies) counts as inside the promise: a loss is a broken promise unless
the run shows it was outside.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from harness.evidence_files import EVIDENCE_DIR, HISTORY_START_KEY, ISR_FILE
from harness.evidence_files import METADATA_FILE as METADATA_NAME

GUARANTEE = ("a write acknowledged with acks=all is not lost as long as, at every moment after its "
             "acknowledgement, some replica in the partition's ISR (with Eligible Leader Replicas: or an eligible "
             "leader replica) still holds it (a crash keeps the page cache; a power failure keeps only what was "
             "fsynced or written back), "
             "and no unclean election happens")
METADATA_FILE = f"{EVIDENCE_DIR}/{METADATA_NAME}"  # run-relative; written by reports/evidence.py from the KRaft metadata log
NS = 1_000_000_000


@dataclass(frozen=True)
class IsrSample:
    """Partition `partition`'s leader and ISR (broker ids) as seen at `time` (history ns)."""

    time: int
    partition: int
    leader: int
    isr: frozenset[int]
    elr: frozenset[int] | None = None  # Kafka's own eligible leader replicas, when the metadata log says


@dataclass(frozen=True)
class PowerLoss:
    """A power failure at `time` of the brokers in `dropped`: those that lost unsynced bytes.

    `oldest` says, for brokers whose lazyfs reported each file it dropped, per partition the history time
    (ns) of the oldest write dropped from that partition's log: what the broker wrote before it had been
    written back (the writeback age) and survived. A broker in `oldest` without an entry for a partition
    kept all of that partition's log. A broker in `dropped` but not in `oldest` (runs recorded before
    lazyfs reported per file) lost everything it had not fsynced.
    """

    time: int
    dropped: frozenset[int]
    oldest: Mapping[int, Mapping[int, int]] = field(default_factory=dict, hash=False, compare=False)

    def keeps(self, node: int, partition: int, written_ns: int) -> bool:
        """Whether `node` still holds a record of `partition` it had written by history time `written_ns`."""
        if node not in self.dropped:
            return True
        if node not in self.oldest:
            return False
        oldest = self.oldest[node].get(partition)
        return oldest is None or written_ns < oldest


@dataclass(frozen=True)
class UncleanElection:
    """An unclean leader election of `partition` at `time` (history ns)."""

    time: int
    partition: int


@dataclass(frozen=True)
class Rules:
    """What the guarantee depends on besides the events: acks, unclean config, ELR, min.insync."""

    acks: str
    unclean: bool
    elr: bool
    min_insync: int

    @property
    def promises(self) -> bool:
        """Whether the configuration is covered by Kafka's guarantee at all: acks=all and unclean election off."""
        return self.acks in ("all", "-1") and not self.unclean


@dataclass
class Events:
    """The run's ISR samples per partition, power losses and unclean elections, each sorted by time."""

    isr: dict[int, list[IsrSample]] = field(default_factory=dict)
    power: list[PowerLoss] = field(default_factory=list)
    unclean: list[UncleanElection] = field(default_factory=list)


def verdict(partition: int, acked_ns: int, ev: Events, rules: Rules) -> str | None:
    """None when the write is inside the guarantee (so its loss broke the promise), else why it is not."""
    if not rules.promises:
        return "acks=1 or 0: an acknowledgement is not a commit" if rules.acks not in ("all", "-1") \
            else "unclean leader election is configured"
    samples = ev.isr.get(partition) or []
    before = [s for s in samples if s.time <= acked_ns]
    if not samples:
        return None
    prev = before[-1] if before else samples[0]
    # holder -> the history time by which it had the write: the acknowledgement for the ISR then, the
    # sample that shows it joined for a replica that caught up later
    holders, start = dict.fromkeys(prev.isr, acked_ns), frozenset(prev.isr)
    story: list[str] = []
    timeline: list[tuple[int, int, Any]] = [(s.time, 2, s) for s in samples if s.time > acked_ns]
    timeline += [(p.time, 1, p) for p in ev.power if p.time > acked_ns]
    timeline += [(u.time, 0, u) for u in ev.unclean if u.time > acked_ns and u.partition == partition]

    def none_left() -> str:
        return (f"p{partition}: in-sync replicas {_names(start)} at the acknowledgement; " + ", ".join(story)
                + f"; ISR then {_names(prev.isr)}: no in-sync replica"
                + (" or eligible leader replica" if rules.elr else "") + " kept these writes")

    for _, _, e in sorted(timeline, key=lambda x: (x[0], x[1])):
        if isinstance(e, UncleanElection):
            return f"p{partition}: unclean election at {e.time / NS:.1f} s"
        if isinstance(e, PowerLoss):
            failed = set(holders) & e.dropped
            lost = {n for n in failed if not e.keeps(n, partition, holders[n])}
            for n in lost:
                del holders[n]
            if lost:
                story.append(f"{_names(lost)} lost power at {e.time / NS:.1f} s")
            if failed - lost:
                story.append(f"{_names(failed - lost)} lost power at {e.time / NS:.1f} s and kept them "
                             "(written back before it)")
            if lost and not holders:
                return none_left()
            continue
        removed, added = prev.isr - e.isr, e.isr - prev.isr
        eligible = (e.elr if e.elr is not None else removed if rules.elr and len(e.isr) < rules.min_insync
                    else frozenset())
        # with the metadata log's ELR, only ISR and ELR members count; else those removed and not eligible leave
        gone = {n for n in holders if (n not in e.isr | e.elr if e.elr is not None else n in removed - eligible)}
        if gone:
            story.append(f"{_names(gone)} left the ISR at {e.time / NS:.1f} s")
        for n in gone:
            del holders[n]
        if e.leader in holders:
            holders.update(dict.fromkeys(added - set(holders), e.time))
        prev = e
        if not holders:  # the replicas that held the writes are out of the ISR: Kafka will not elect them
            return none_left()
    return None


def _names(ids: Iterable[int]) -> str:
    return "{" + ", ".join(f"n{i}" for i in sorted(ids)) + "}"


def classify(lost: Iterable[tuple[Any, int | None, int | None]], ev: Events, rules: Rules,
             total_lost: int) -> dict[str, Any]:
    """The loss section for lost writes given as (value, partition, acked ns).

    `total_lost` is the checker's count: writes beyond the listed ones, or
    without a partition or ack time, count as inside the promise.
    """
    inside = outside = placed = 0
    reasons: dict[str, dict[str, Any]] = {}
    for value, partition, acked in lost:
        if partition is None or acked is None:
            continue
        placed += 1
        why = verdict(int(partition), int(acked), ev, rules)
        if why is None:
            inside += 1
            continue
        outside += 1
        r = reasons.setdefault(why, {"reason": why, "partition": int(partition), "count": 0,
                                     "first_acked_s": None, "last_acked_s": None})
        r["count"] += 1
        s = round(acked / NS, 3)
        r["first_acked_s"] = s if r["first_acked_s"] is None else min(r["first_acked_s"], s)
        r["last_acked_s"] = s if r["last_acked_s"] is None else max(r["last_acked_s"], s)
    unplaced = max(0, total_lost - placed)
    if not rules.promises:
        inside, outside = 0, total_lost
    else:
        inside += unplaced
    return {"promised": rules.promises, "guarantee": GUARANTEE, "elr": rules.elr,
            "lost_in_promise": inside, "lost_outside_promise": outside, "unplaced": unplaced if rules.promises else 0,
            "outside": sorted(reasons.values(), key=lambda r: (r["partition"], r["first_acked_s"] or 0)),
            "broken": rules.promises and inside > 0,
            "expected_by_configuration": total_lost > 0 and not (rules.promises and inside > 0)}


# --- reading a run directory -------------------------------------------------------------------------------

def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def rules_of(test: Mapping[str, Any]) -> Rules:
    """The Rules of a test.json object. ELR: Kafka 4.1 and later enable it on new clusters (kchaos formats
    a new cluster for every run)."""
    producer, topic = test.get("producer") or {}, test.get("topic") or {}
    version = str((test.get("versions") or {}).get("kafka") or (test.get("cluster") or {}).get("kafka_version")
                  or "3.7.2")
    min_insync = topic.get("min_insync", 1)
    return Rules(acks=str(producer.get("acks", "all")), unclean=topic.get("unclean", False) is not False,
                 elr=_version(version) >= (4, 1), min_insync=min_insync if isinstance(min_insync, int) else 1)


def node_id(name: Any) -> int | None:
    """Broker id of a node name: nodes are n<id> (clusters/kraft.py layout)."""
    m = re.fullmatch(r"n(\d+)", str(name))
    return int(m.group(1)) if m else None


def _samples(path: Path, parse: Callable[[dict[str, Any]], IsrSample | None]) -> dict[int, list[IsrSample]]:
    """The lines of a JSONL file that `parse` makes samples of, per partition in time order; lines it cannot
    read (errors, a truncated last line) are skipped; {} if the file is absent."""
    out: dict[int, list[IsrSample]] = {}
    if not Path(path).exists():
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                s = parse(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                continue
            if s is not None:
                out.setdefault(s.partition, []).append(s)
    for v in out.values():
        v.sort(key=lambda s: s.time)
    return out


def _ids(xs: Iterable[Any]) -> frozenset[int]:
    return frozenset(int(i) for i in xs)


def read_isr_samples(path: Path) -> dict[int, list[IsrSample]]:
    """isr.jsonl (the run's ISR monitor, once a second) as samples per partition, in time order."""
    return _samples(path, lambda d: IsrSample(int(d["time"]), int(d["partition"]), int(d.get("leader", -1)),
                                              _ids(d["isr"])))


def read_metadata_samples(path: Path, topic: str) -> dict[int, list[IsrSample]]:
    """The KRaft metadata log's partition states of `topic` (evidence/metadata.jsonl, decoded by Kafka's
    own tool; times on the history clock) as samples per partition; {} if absent or without times."""
    def parse(d: dict[str, Any]) -> IsrSample | None:
        if d.get("type") != "partition" or d.get("topic") != topic or d.get("time_s") is None:
            return None
        elr = d.get("elr")
        return IsrSample(round(float(d["time_s"]) * NS), int(d["partition"]), int(d["leader"]), _ids(d["isr"]),
                         None if elr is None else _ids(elr))

    return _samples(path, parse)


def dropped_since(loss: Mapping[str, Any], topic: str, line_ns: int,
                  start_unix_ms: float | None) -> dict[int, int] | None:
    """Per partition of `topic`, the history time (ns) of the oldest write a power failure dropped from that
    partition's log, from one node's `lost` entry (lazyfs's per-file report); None when the entry has no
    per-file report (then everything unsynced was lost).

    A file's time is its `oldest_unix_ms` on the run's clock (`start_unix_ms`, test.json); without the clock,
    the nemesis line's time minus the file's `oldest_age_ms`, which is at or after the true time (the line is
    written after the report), so the error, if any, credits the replica with a write it may not have kept.
    """
    files = loss.get("files")
    if not isinstance(files, list) or loss.get("unsynced_bytes") is None:  # no report: assume the worst
        return None
    out: dict[int, int] = {}
    for f in files:
        m = re.search(rf"(?:^|/){re.escape(topic)}-(\d+)/[^/]+\.log$", str(f.get("path") or ""))
        if not m:
            continue
        if start_unix_ms is not None and f.get("oldest_unix_ms") is not None:
            t = round((float(f["oldest_unix_ms"]) - start_unix_ms) * 1e6)
        elif f.get("oldest_age_ms") is not None:
            t = line_ns - round(float(f["oldest_age_ms"]) * 1e6)
        else:
            t = -1  # no time: count the whole file as dropped
        p = int(m.group(1))
        out[p] = min(out.get(p, t), t)
    return out


def nemesis_events(lines: Iterable[Mapping[str, Any]], topic: str = "kchaos",
                   start_unix_ms: float | None = None) -> tuple[list[PowerLoss], list[UncleanElection]]:
    """Power losses and unclean elections from completed (ok) nemesis lines of a history (`topic`'s logs and
    the run's clock place what each power failure dropped: `dropped_since`)."""
    power, unclean = [], []
    for d in lines:
        if d.get("process") != "nemesis" or d.get("type") != "ok":
            continue
        if d.get("f") == "power-fail":
            nodes = d.get("nodes") or d.get("targets") or []
            lost = d.get("lost") if isinstance(d.get("lost"), dict) else {}
            dropped: set[int] = set()
            oldest: dict[int, dict[int, int]] = {}
            for n in nodes:
                loss, i = lost.get(n), node_id(n)
                if i is None:
                    continue
                # a node whose failure dropped no unsynced bytes kept everything (its log was fsynced)
                if isinstance(loss, dict) and loss.get("unsynced_bytes") == 0:
                    continue
                dropped.add(i)
                since = dropped_since(loss, topic, int(d["time"]), start_unix_ms) if isinstance(loss, dict) else None
                if since is not None:
                    oldest[i] = since
            power.append(PowerLoss(int(d["time"]), frozenset(dropped), oldest))
        elif d.get("f") == "elect-unclean" and d.get("partition") is not None:
            unclean.append(UncleanElection(int(d["time"]), int(d["partition"])))
    return sorted(power, key=lambda p: p.time), sorted(unclean, key=lambda u: u.time)


def _rows(parquet: Path, values: list[Any]) -> tuple[dict[Any, tuple[int, int]], list[dict[str, Any]]]:
    """From a history's Parquet form: (partition, ack ns) of the acked sends of `values`, and the ok nemesis
    lines with their detail fields spread out."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(parquet, columns=["time", "process", "type", "f", "partition", "value", "detail"])
    ok = pc.equal(t["type"], "ok")
    sends = t.filter(pc.and_(pc.and_(ok, pc.equal(t["f"], "send")),
                             pc.is_in(t["value"], value_set=pa_array(values, t.schema.field("value").type))))
    acks = {v: (p, ts) for v, p, ts in zip(sends["value"].to_pylist(), sends["partition"].to_pylist(),
                                           sends["time"].to_pylist())}
    nem = t.filter(pc.and_(ok, pc.equal(t["process"], "nemesis"))).to_pylist()
    lines = [{**json.loads(d.pop("detail") or "{}"), **{k: v for k, v in d.items() if v is not None}} for d in nem]
    return acks, lines


def pa_array(values: list[Any], type_: Any) -> Any:
    """`values` as an Arrow array of the history's value type (values that do not fit are dropped)."""
    import pyarrow as pa

    try:
        return pa.array(values, type=type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([], type=type_)


def loss_section(run: Path, parquet: Path, test: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """`classify` for a checked run: lost writes from results' timeline, their partitions and ack times and
    the faults from the history's Parquet form, ISR samples from the run's isr.jsonl."""
    total = int((results.get("counts") or {}).get("lost") or 0)
    listed = [a["key"] for a in ((results.get("timeline") or {}).get("anomalies") or {}).get("lost") or []]
    rules = rules_of(test)
    if not total or not rules.promises or not Path(parquet).exists():
        return {**classify([], Events(), rules, total), "isr_source": None}
    acks, lines = _rows(Path(parquet), listed)
    topic = str((test.get("topic") or {}).get("name") or "kchaos")
    start = test.get(HISTORY_START_KEY)
    power, unclean = nemesis_events(lines, topic, float(start) if isinstance(start, (int, float)) else None)
    exact = read_metadata_samples(Path(run) / METADATA_FILE, topic)
    ev = Events(isr=exact or read_isr_samples(Path(run) / ISR_FILE), power=power, unclean=unclean)
    out = classify([(v, *acks.get(v, (None, None))) for v in listed], ev, rules, total)
    return {**out, "isr_source": METADATA_FILE if exact else ISR_FILE}
