"""The history's and the metadata log's facts that an explanation of lost writes looks up.

`load_facts(run, evidence, names, lost)` reads history.jsonl once: where each
value was acknowledged (partition, offset, time), every nemesis line (a fault
or a mend, as the run's faults.json says), and which acknowledged values
survived; with the evidence's metadata log and broker log lines it answers
the questions that explanation asks: who acknowledged a write (the brokers
that believed they led then, from their state-change.log, told apart by the
surviving log; else the metadata log's leader), the partition's state at a
history time, the first state of a leader epoch, the faults that hit some
nodes in a time window, and a partition's timeline as table rows. Times are
history seconds; metadata and broker-log times are mapped with the run's Clock.
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.core.faults import FaultCatalogue, FaultsError, read_faults
from kchaos.core.history import read_history
from kchaos.evidence.broker_logs import LogEvent
from kchaos.evidence.decode import Evidence
from kchaos.evidence.kraft_metadata import PartitionState
from kchaos.evidence.power_loss import dropped_since

__all__ = ["Ack", "Facts", "Leadership", "fault_phrase", "load_facts", "node_names"]

_NODE_ID = re.compile(r"^node\.id=(\d+)\s*$", re.M)
# How a fault's completion reads in a sentence, by its f.
_VERBS = {"kill": "was killed", "stop": "was stopped", "pause": "was paused", "power-fail": "lost power",
          "start-partition": "was partitioned", "start-flaky": "got a flaky network", "start-slow": "was slowed",
          "start-slow-disk": "got a slow disk", "start-starve": "was starved of CPU", "roll": "was restarted",
          "elect-unclean": "was elected uncleanly by an operator", "start": "was restarted", "resume": "was resumed",
          "stop-partition": "was reconnected", "stop-slow": "was unslowed", "stop-flaky": "got its network back",
          "stop-slow-disk": "got its disk back", "stop-starve": "got its CPU back",
          "start-stall": "stopped hearing from the other brokers' port 9092 (stalled)",
          "stop-stall": "could fetch again", "start-clock-skew": "had its clock skewed",
          "stop-clock-skew": "got its real clock back", "start-clock-strobe": "had its clock strobed",
          "stop-clock-strobe": "got its real clock back", "disk-full": "had its disk filled",
          "disk-free": "got its disk space back and was restarted"}


@dataclass(frozen=True)
class Leadership:
    """A span of history time during which a broker believed it led a partition in `epoch`.

    Opened by its state-change.log "Leader ... starts at leader epoch E" line;
    closed by its next role or log-load line, or by a kill, stop or power
    failure of the node in the history.
    """

    node: str
    partition: int
    epoch: int
    start_s: float
    end_s: float | None


@dataclass(frozen=True)
class Ack:
    """Who acknowledged a write: the leader, its epoch and the ISR it knew, and how that was decided."""

    leader: str | None
    epoch: int | None
    isr: tuple[int, ...] | None
    source: str
    candidates: tuple[str, ...] = ()


def node_names(run: Path) -> dict[int, str]:
    """Broker/controller id -> node name, from nodes/<node>/server.properties (n<i>/c<i> when absent)."""
    out: dict[int, str] = {}
    nodes = Path(run) / "nodes"
    if nodes.is_dir():
        for d in sorted(p for p in nodes.iterdir() if p.is_dir()):
            try:
                m = _NODE_ID.search((d / "server.properties").read_text(encoding="utf-8"))
            except OSError:
                continue
            if m:
                out[int(m.group(1))] = d.name
    return out


def fault_phrase(f: str, nodes: list[str], time_s: float | None, grudge: Any = None,
                 targets: list[str] | None = None) -> str:
    """A fault's completion as a clause: "n1 lost power at 39.7 s", "n2 and n3 were slowed at 14.7 s",
    "n2 was cut off from n1, n3 at 28.9 s" (a partition, told by its targets' grudges)."""
    at = "" if time_s is None else f" at {time_s:.1f} s"
    if f == "start-partition" and isinstance(grudge, dict) and targets:
        cut = [f"{t} was cut off from {', '.join(map(str, grudge[t]))}" for t in targets
               if isinstance(grudge.get(t), list) and grudge[t]]
        if cut:
            return " and ".join(cut) + at
    who = " and ".join(nodes) if len(nodes) <= 2 else ", ".join(nodes[:-1]) + " and " + nodes[-1]
    verb = _VERBS.get(f, f"underwent {f}")
    if len(nodes) > 1:
        verb = verb.replace("was ", "were ", 1)
    return f"{who} {verb}{at}"


@dataclass
class Facts:
    """Lookups over one run's history and decoded evidence (see the module docstring)."""

    ev: Evidence
    names: dict[int, str]
    acks: dict[int, tuple[int, int | None, float]]  # value -> (partition, offset, acked_s)
    nemesis: list[dict[str, Any]]
    survivors: dict[tuple[int, Any], list[int]] = field(default_factory=dict)
    leaderships: dict[int, list[Leadership]] = field(default_factory=dict)
    lineage: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)  # p -> (base, last, epoch)
    lineage_bases: dict[int, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # --- metadata ---------------------------------------------------------------------------
    def timeline(self, p: int) -> list[PartitionState]:
        """The partition's metadata states (empty without a metadata log)."""
        return self.ev.metadata.timeline(self.ev.topic, p) if self.ev.metadata else []

    def state_at_s(self, p: int, s: float | None) -> PartitionState | None:
        """The partition's metadata state at history time `s` (None when unknown)."""
        ms = self.ev.clock.to_unix_ms(s)
        if ms is None or self.ev.metadata is None:
            return None
        return self.ev.metadata.state_at(self.ev.topic, p, ms)

    def surviving_epoch(self, p: int, offset: int | None) -> int | None:
        """The leader epoch that wrote `offset` in the surviving log (the final leader's): its batch's, or,
        past its end, the epoch it is in now (a leader keeps what it wrote in its own epoch)."""
        spans = self.lineage.get(p, [])
        if offset is None or not spans:
            return None
        i = bisect_right(self.lineage_bases[p], offset) - 1
        if i >= 0 and spans[i][1] >= offset:
            return spans[i][2]
        if offset > spans[-1][1]:
            cp = self.ev.checkpoints.get((self.final_leader(p) or "", p))
            return cp[-1][0] if cp else spans[-1][2]
        return None

    def acker(self, p: int, s: float | None, offset: int | None, lost: bool) -> Ack:
        """Who acknowledged a write of partition `p` at history time `s` and `offset`.

        The brokers that believed they led the partition then (their own
        state-change.log): one is the answer. Several (an isolated leader that
        was already replaced) are told apart by the surviving log: a lost write
        was not written by the epoch whose batch now holds its offset, a kept one
        was. Without broker logs, the metadata log's leader at that time. The
        ISR is the metadata log's for that epoch as of that time.
        """
        believers = [lead for lead in self.leaderships.get(p, [])
                     if s is not None and lead.start_s <= s and (lead.end_s is None or s <= lead.end_s)]
        source = "state-change.log"
        if len(believers) > 1:
            here = self.surviving_epoch(p, offset)
            kept = [b for b in believers if (b.epoch == here) != lost]
            believers, source = (kept, "state-change.log and the surviving log") if kept else (believers, source)
        if len(believers) > 1:
            return Ack(None, None, None, "ambiguous", tuple(sorted({b.node for b in believers})))
        if believers:
            b = believers[0]
            st = self.state_in_epoch(p, b.epoch, s)
            return Ack(b.node, b.epoch, st.isr if st else None, source, (b.node,))
        st = self.state_at_s(p, s)
        if st is None or st.leader < 0:
            return Ack(None, st.leader_epoch if st else None, st.isr if st else None, "metadata log")
        return Ack(self.names.get(st.leader, f"broker {st.leader}"), st.leader_epoch, st.isr, "metadata log")

    def ack_key(self, p: int, s: float | None, offset: int | None, lost: bool) -> tuple[Any, ...]:
        """(leader, epoch, ISR) of `acker`: what a lost range shares."""
        a = self.acker(p, s, offset, lost)
        return (a.leader, a.epoch, a.isr)

    def state_in_epoch(self, p: int, epoch: int, s: float | None) -> PartitionState | None:
        """The last metadata state of leader epoch `epoch` at or before history time `s` (the leader's view)."""
        ms = self.ev.clock.to_unix_ms(s)
        out = None
        for st in self.timeline(p):
            if st.leader_epoch == epoch and (ms is None or st.time_ms <= ms):
                out = st
        return out

    def first_state_with_epoch(self, p: int, epoch: int) -> PartitionState | None:
        """The metadata record that started leader epoch `epoch` of partition `p`."""
        return next((s for s in self.timeline(p) if s.leader_epoch == epoch), None)

    def final_leader(self, p: int) -> str | None:
        """The partition's leader in the last metadata record (None if none or unknown)."""
        tl = self.timeline(p)
        return self.names.get(tl[-1].leader) if tl and tl[-1].leader >= 0 else None

    def became_leader(self, p: int, epoch: int) -> LogEvent | None:
        """state-change.log's "Leader ... starts at leader epoch E from offset N" line for epoch E."""
        return next((e for e in self.ev.log_events if e.kind == "leader" and e.partition == p and e.epoch == epoch),
                    None)

    def log_events(self, node: str, p: int, kind: str, after_s: float | None) -> list[LogEvent]:
        """The node's broker-log events of `kind` for partition `p` after history time `after_s`."""
        after = self.ev.clock.to_unix_ms(after_s)
        return [e for e in self.ev.log_events if e.node == node and e.partition == p and e.kind == kind
                and (after is None or e.time_ms >= after)]

    def timeline_rows(self, p: int) -> list[dict[str, Any]]:
        """The partition's leader/epoch/ISR/ELR changes and broker fencing, as rows for a table."""
        rows: list[dict[str, Any]] = []
        for s in self.timeline(p):
            name = lambda ids: None if ids is None else [self.names.get(i, str(i)) for i in ids]  # noqa: E731
            rows.append({"time_s": self.ev.clock.to_s(s.time_ms), "offset": s.offset,
                         "leader": self.names.get(s.leader, "none" if s.leader < 0 else str(s.leader)),
                         "leader_epoch": s.leader_epoch, "isr": name(s.isr), "elr": name(s.elr),
                         "last_known_elr": name(s.last_known_elr), "event": "created" if "created" in s.changed
                         else "changed " + ", ".join(s.changed)})
        if rows and self.ev.metadata:
            first = rows[0]["offset"]
            for b in self.ev.metadata.brokers:
                if b.offset > first and b.kind in ("fenced", "unfenced", "registered", "controlled-shutdown"):
                    rows.append({"time_s": self.ev.clock.to_s(b.time_ms), "offset": b.offset, "leader": None,
                                 "leader_epoch": None, "isr": None, "elr": None, "last_known_elr": None,
                                 "event": f"{self.names.get(b.broker, b.broker)} {b.kind}"})
        return sorted(rows, key=lambda r: r["offset"])

    # --- history ----------------------------------------------------------------------------
    def place(self, value: int) -> tuple[int | None, int | None]:
        """(partition, acknowledged offset) of a lost value; (None, None) if the history has no ack."""
        a = self.acks.get(value)
        return (None, None) if a is None else (a[0], a[1])

    def ack_s(self, value: int, acked_s: float | None) -> float | None:
        """When the value was acknowledged (history seconds), from the history, else results.json's."""
        a = self.acks.get(value)
        return a[2] if a is not None else acked_s

    def survivor_between(self, p: int, lo: int, hi: int, key: Any) -> bool:
        """Whether a value acknowledged under `key` (see ack_key) strictly between offsets lo and hi was kept."""
        offs = self.survivors.get((p, key), [])
        a, b = min(lo, hi), max(lo, hi)
        return bisect_left(offs, b) > bisect_right(offs, a)

    def faults_between(self, t0: float | None, t1: float | None, nodes: set[str]) -> list[dict[str, Any]]:
        """Nemesis completions that touched any of `nodes`: faults still in force at t0 (not yet mended
        for those nodes by the same nemesis), then every fault and mend after t0 up to t1."""
        out = []
        for i, op in enumerate(self.nemesis):
            hit = [n for n in op["nodes"] if n in nodes]
            if not hit or t1 is not None and op["time_s"] > t1:
                continue
            if t0 is not None and op["time_s"] < t0:
                mended = {n for m in self.nemesis[i + 1:] if m["role"] == "mend" and m["nemesis"] == op["nemesis"]
                          and m["time_s"] <= t0 for n in m["nodes"]}
                hit = [n for n in hit if n not in mended]
                if op["role"] != "fault" or not hit:
                    continue
            out.append({**op, "nodes": hit,
                        "phrase": fault_phrase(op["f"], hit, op["time_s"], op.get("grudge"), op.get("targets"))})
        return out


def _dropped_since(rec: dict[str, Any], topic: str, start_unix_ms: float | None) -> dict[str, dict[int, float]]:
    """For a power failure: per node with lazyfs's per-file report, per partition of `topic` whose log lost
    writes, the history second of the oldest write dropped (what came before was on disk)."""
    lost = raw if rec.get("f") == "power-fail" and isinstance(raw := rec.get("lost"), dict) else {}
    out = {}
    for node, loss in lost.items():
        since = dropped_since(loss, topic, int(rec["time"]), start_unix_ms) if isinstance(loss, dict) else None
        if since is not None:
            out[str(node)] = {p: round(ns / 1e9, 3) for p, ns in since.items()}
    return out


def _nemesis_line(rec: dict[str, Any], faults: FaultCatalogue, topic: str = "kchaos",
                  start_unix_ms: float | None = None) -> dict[str, Any] | None:
    if rec.get("process") != "nemesis" or rec.get("type") != "ok" or rec.get("f") == "heal":
        return None
    nodes = rec.get("nodes")
    if not isinstance(nodes, list):
        return None
    spec = str(rec.get("nemesis") or "")
    kind = faults.get(spec)
    role = "fault" if kind is None or rec["f"] == kind.breaks else "mend"
    targets = rec.get("targets")
    return {"index": rec.get("index"), "time_s": round(rec["time"] / 1e9, 3), "f": rec["f"], "nemesis": spec,
            "nodes": [str(n) for n in nodes], "role": role, "grudge": rec.get("grudge"),
            "targets": [str(t) for t in targets] if isinstance(targets, list) else None,
            "dropped_since": _dropped_since(rec, topic, start_unix_ms)}


def load_facts(run: Path, ev: Evidence, names: dict[int, str], lost: set[int]) -> Facts:
    """Read the run's history once into Facts: acknowledgements, nemesis lines, and the offsets of
    acknowledged values not in `lost` per (partition, leader/epoch/ISR at acknowledgement)."""
    acks: dict[int, tuple[int, int | None, float]] = {}
    ops: list[dict[str, Any]] = []
    for rec in read_history(Path(run) / "history.jsonl"):
        if rec.get("f") == "send" and rec.get("type") == "ok" and isinstance(rec.get("value"), int):
            off = rec.get("offset")
            acks[rec["value"]] = (int(rec.get("partition") or 0), off if isinstance(off, int) else None,
                                  round(rec["time"] / 1e9, 3))
        elif rec.get("process") == "nemesis":
            ops.append(rec)
    notes: list[str] = []
    try:
        faults = read_faults(run, ops)
    except FaultsError as e:
        notes.append(f"{e}; every nemesis op is taken for a fault")
        faults = FaultCatalogue()
    nemesis = [n for rec in ops if (n := _nemesis_line(rec, faults, ev.topic, ev.clock.start_unix_ms)) is not None]
    if not names:
        names = {i: f"n{i}" for i in range(1, 10)}
    facts = Facts(ev, names, acks, nemesis)
    facts.notes.extend(notes)
    if ev.clock.start_unix_ms is None:
        facts.notes.append("the history's start time is unknown: metadata times cannot be placed in the run")
    elif not ev.clock.source.startswith("test.json"):
        facts.notes.append(f"history start time from the {ev.clock.source}")
    facts.leaderships = _leaderships(ev, nemesis)
    facts.lineage = _lineage(ev, facts)
    facts.lineage_bases = {p: [b for b, _, _ in spans] for p, spans in facts.lineage.items()}
    per: dict[tuple[int, Any], list[int]] = {}
    for v, (p, off, t) in acks.items():
        if v not in lost and off is not None:
            per.setdefault((p, facts.ack_key(p, t, off, False)), []).append(off)
    facts.survivors = {k: sorted(v) for k, v in per.items()}
    return facts


_DOWN = ("kill", "stop", "power-fail")


def _leaderships(ev: Evidence, nemesis: list[dict[str, Any]]) -> dict[int, list[Leadership]]:
    """Each broker's spans of believed leadership per partition (see Leadership)."""
    out: dict[int, list[Leadership]] = {}
    open_: dict[tuple[str, int], tuple[int, float]] = {}

    def close(key: tuple[str, int], end: float | None) -> None:
        if key in open_:
            epoch, start = open_.pop(key)
            out.setdefault(key[1], []).append(Leadership(key[0], key[1], epoch, start, end))

    downs = sorted((op["time_s"], n) for op in nemesis if op["f"] in _DOWN for n in op["nodes"])
    events = sorted(((t, e) for e in ev.log_events
                     if e.kind in ("leader", "follower", "loaded") and (t := ev.clock.to_s(e.time_ms)) is not None),
                    key=lambda te: te[0])
    di = 0
    for t, e in events:
        while di < len(downs) and downs[di][0] <= t:
            for key in [k for k in open_ if k[0] == downs[di][1]]:
                close(key, downs[di][0])
            di += 1
        key = (e.node, e.partition)
        close(key, t)
        if e.kind == "leader" and e.epoch is not None:
            open_[key] = (e.epoch, t)
    for t, node in downs[di:]:
        for key in [k for k in open_ if k[0] == node]:
            close(key, t)
    for key in list(open_):
        close(key, None)
    return out


def _lineage(ev: Evidence, facts: Facts) -> dict[int, list[tuple[int, int, int]]]:
    """Per partition, the (base, last, epoch) batches of the surviving log: the final leader's segments."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for p in sorted({q for _, q in ev.batches}):
        node = facts.final_leader(p)
        batches = ev.batches.get((node, p)) if node else None
        if batches:
            out[p] = sorted((b.base_offset, b.last_offset, b.leader_epoch) for b in batches if not b.is_control)
    return out
