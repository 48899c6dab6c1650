"""Kafka's durability guarantee, applied write by write: was a lost write inside the promise?

Kafka's documentation (Design, "Replicated Logs"): "a committed message will
not be lost, as long as there is at least one in sync replica alive, at all
times". A write acknowledged under acks=all is committed: every member of the
partition's ISR had it when the leader answered. kchaos reads "alive" as
"kept its log": a killed or paused broker keeps its page cache, so it still
counts; a broker whose power failed lost whatever it had not fsynced, so it
no longer does. Unclean leader election is outside the guarantee by
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
- a replica whose power failed stops counting, unless that failure dropped
  no unsynced bytes (flush.messages=1 fsyncs each record before the ack);
- an unclean election of p puts w outside the guarantee.

If no counting replica is left at some moment, w was lost outside the
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

from harness.evidence_files import EVIDENCE_DIR, ISR_FILE
from harness.evidence_files import METADATA_FILE as METADATA_NAME

GUARANTEE = ("a write acknowledged with acks=all is not lost as long as, at every moment after its "
             "acknowledgement, some replica in the partition's ISR (with Eligible Leader Replicas: or an eligible "
             "leader replica) still holds it (a crash keeps the page cache; a power failure does not), "
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
    """A power failure at `time` of the brokers in `dropped`: those that lost unsynced bytes."""

    time: int
    dropped: frozenset[int]


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
    holders, start = set(prev.isr), frozenset(prev.isr)
    story: list[str] = []
    timeline: list[tuple[int, int, Any]] = [(s.time, 2, s) for s in samples if s.time > acked_ns]
    timeline += [(p.time, 1, p) for p in ev.power if p.time > acked_ns]
    timeline += [(u.time, 0, u) for u in ev.unclean if u.time > acked_ns and u.partition == partition]
    for _, _, e in sorted(timeline, key=lambda x: (x[0], x[1])):
        if isinstance(e, UncleanElection):
            return f"p{partition}: unclean election at {e.time / NS:.1f} s"
        if isinstance(e, PowerLoss):
            hit = holders & e.dropped
            holders -= e.dropped
            if hit:
                story.append(f"{_names(hit)} lost power at {e.time / NS:.1f} s")
            if hit and not holders:
                return (f"p{partition}: in-sync replicas {_names(start)} at the acknowledgement; "
                        + ", ".join(story) + f"; ISR then {_names(prev.isr)}: no in-sync replica"
                        + (" or eligible leader replica" if rules.elr else "") + " kept these writes")
            continue
        removed, added = prev.isr - e.isr, e.isr - prev.isr
        eligible = (e.elr if e.elr is not None else removed if rules.elr and len(e.isr) < rules.min_insync
                    else frozenset())
        if holders & (removed - eligible):
            story.append(f"{_names(holders & (removed - eligible))} left the ISR at {e.time / NS:.1f} s")
        if e.elr is not None:  # the metadata log names the eligible replicas: only ISR and ELR members count
            holders &= e.isr | e.elr
        else:
            holders -= removed - eligible
        if e.leader in holders:
            holders |= added
        prev = e
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


def nemesis_events(lines: Iterable[Mapping[str, Any]]) -> tuple[list[PowerLoss], list[UncleanElection]]:
    """Power losses and unclean elections from completed (ok) nemesis lines of a history."""
    power, unclean = [], []
    for d in lines:
        if d.get("process") != "nemesis" or d.get("type") != "ok":
            continue
        if d.get("f") == "power-fail":
            nodes = d.get("nodes") or d.get("targets") or []
            lost = d.get("lost") if isinstance(d.get("lost"), dict) else {}
            # a node whose failure dropped no unsynced bytes kept everything (its log was fsynced)
            dropped = {node_id(n) for n in nodes
                       if not (isinstance(lost.get(n), dict) and lost[n].get("unsynced_bytes") == 0)}
            power.append(PowerLoss(int(d["time"]), frozenset(i for i in dropped if i is not None)))
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
    power, unclean = nemesis_events(lines)
    topic = str((test.get("topic") or {}).get("name") or "kchaos")
    exact = read_metadata_samples(Path(run) / METADATA_FILE, topic)
    ev = Events(isr=exact or read_isr_samples(Path(run) / ISR_FILE), power=power, unclean=unclean)
    out = classify([(v, *acks.get(v, (None, None))) for v in listed], ev, rules, total)
    return {**out, "isr_source": METADATA_FILE if exact else ISR_FILE}
