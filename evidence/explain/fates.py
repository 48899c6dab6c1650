"""What became of a lost range on each replica, decided from Kafka's files only.

A replica `holds` the values when its segments still contain them (at any
offset). Otherwise it must first be shown to have had them: it was the
leader that acknowledged them, or an ISR member of an acks=all write (the
metadata log at acknowledgement), or its own log said its log end was past
them later (state-change.log, the log load at restart). A replica that had
them then:

- `truncated`: its server.log shows a truncation with effect to an offset
  at or below the range's end after the acknowledgement (time and offset
  from that line); failing that line, its leader-epoch-checkpoint has a later
  epoch starting at or below the range's end (offset known, time unknown);
- `lost-unsynced`: it lost power after the acknowledgement and its log,
  on restart or on taking a role, ended at or below the range's start;
- `missing`: it had them and they are gone, by no recorded means.

A replica not shown to have had them `did not hold` them when its own log
said, after the first acknowledgement, that its log ended at or below the
range's start (taking a role, or loading its log); otherwise it is `unknown`
(its detail says what is known, e.g. a truncation whose extent the log line
does not give). One whose data was not collected is `not collected`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kchaos.evidence.broker_logs import LogEvent
    from kchaos.evidence.decode import Evidence
    from kchaos.evidence.explain.facts import Facts

__all__ = ["LostRange", "ReplicaFate", "replica_fates"]


@dataclass(frozen=True)
class ReplicaFate:
    """One replica's part in a lost range: status (see the module docstring), with where it was read."""

    node: str
    status: str
    held: int
    offset: int | None = None
    time_s: float | None = None
    had: str | None = None
    source: str | None = None
    detail: str | None = None


def _had(facts: Facts, node: str, p: int, lo: int | None, t0: float | None, leader: str | None,
         isr: tuple[str, ...] | None, acks_all: bool) -> str | None:
    if node == leader:
        return "acknowledged them as leader"
    if acks_all and isr and node in isr:
        return "in the ISR of acks=all writes (metadata log)"
    if lo is None:
        return None
    for kind in ("follower", "leader", "loaded"):
        for e in facts.log_events(node, p, kind, t0):
            if e.offset > lo:
                return f"log end {e.offset} at {facts.ev.clock.to_s(e.time_ms)} s ({e.source})"
    return None


def _power_loss(facts: Facts, node: str, p: int, lo: int | None, t0: float | None
                ) -> tuple[dict[str, Any], LogEvent] | None:
    """The node's first power failure after t0 after which its log (on load, or on taking a role, before
    the next power failure) ended at or below `lo`, with that log line; None when there is none."""
    if lo is None:
        return None
    failures = [op for op in facts.nemesis if op["f"] == "power-fail" and node in op["nodes"]
                and (t0 is None or op["time_s"] >= t0)]
    for i, pf in enumerate(failures):
        until = failures[i + 1]["time_s"] if i + 1 < len(failures) else None
        after = sorted((e for k in ("loaded", "leader", "follower") for e in facts.log_events(node, p, k, pf["time_s"])
                        if until is None or facts.ev.clock.to_s(e.time_ms) < until), key=lambda e: e.time_ms)
        if after and after[0].offset <= lo:
            return pf, after[0]
    return None


def _one(ev: Evidence, facts: Facts, node: str, p: int, values: tuple[int, ...], lo: int | None,
         hi: int | None, t0: float | None, leader: str | None, epoch: int | None, isr: tuple[str, ...] | None,
         acks_all: bool, holders: dict[tuple[int, Any], list[tuple[str, int, int]]]) -> ReplicaFate:
    if (node, p) not in ev.batches:
        return ReplicaFate(node, "not collected", 0, detail="no segments of this partition were copied from it")
    held = sum(1 for v in values if any(h[0] == node for h in holders.get((p, v), [])))
    if held == len(values):
        return ReplicaFate(node, "holds", held, source="segments")
    had = _had(facts, node, p, lo, t0, leader, isr, acks_all)
    top = hi if hi is not None else -1
    cut = [e for e in facts.log_events(node, p, "truncated", t0) if not e.no_effect and e.offset <= top]
    lost = _power_loss(facts, node, p, lo, t0) if had else None
    # Whichever removed them first is the cause: a replica that lost power and came back empty may
    # later truncate records it wrote afterwards.
    if cut and had and (lost is None or cut[0].time_ms <= lost[1].time_ms):
        e = cut[0]
        return ReplicaFate(node, "truncated", held, e.offset, ev.clock.to_s(e.time_ms), had, e.source,
                           f"due to {e.reason}" if e.reason else None)
    if lost is not None:
        pf, e = lost
        return ReplicaFate(node, "lost-unsynced", held, e.offset, pf["time_s"], had, e.source,
                           f"lost power at {pf['time_s']:.1f} s; log end {e.offset} at {ev.clock.to_s(e.time_ms)} s")
    cp = ev.checkpoints.get((node, p))
    later = [(e, s) for e, s in (cp or []) if epoch is not None and e > epoch]
    if had and later and later[0][1] <= top:
        later_epoch, s = later[0]
        return ReplicaFate(node, "truncated", held, s, None, had, "leader-epoch-checkpoint",
                           f"epoch {later_epoch} starts at offset {s} in its leader-epoch-checkpoint")
    if had:
        return ReplicaFate(node, "missing", held, had=had, detail="had them; no truncation or power failure recorded")
    if cut:
        e = cut[0]
        return ReplicaFate(node, "unknown", held, e.offset, ev.clock.to_s(e.time_ms), None, e.source,
                           f"truncated to {e.offset}; whether it held these offsets is not recorded")
    short = [e for k in ("leader", "follower", "loaded") for e in facts.log_events(node, p, k, t0)
             if lo is not None and e.offset <= lo]
    if short:
        e = min(short, key=lambda e: e.time_ms)
        return ReplicaFate(node, "did not hold", held, e.offset, ev.clock.to_s(e.time_ms), None, e.source,
                           f"its log ended at offset {e.offset} (exclusive) after they were acknowledged")
    return ReplicaFate(node, "unknown", held, detail="not shown to have held them")


def replica_fates(ev: Evidence, facts: Facts, p: int, values: tuple[int, ...], lo: int | None, hi: int | None,
                  t0: float | None, leader: str | None, epoch: int | None, isr: tuple[str, ...] | None,
                  acks_all: bool, holders: dict[tuple[int, Any], list[tuple[str, int, int]]]
                  ) -> tuple[ReplicaFate, ...]:
    """Every replica's fate for one lost range (replicas from the metadata log, else every node with data).

    `holders` is `Evidence.holders()`: who holds each (partition, value) now.
    """
    st = facts.state_at_s(p, t0)
    tl = facts.timeline(p)
    ids = st.replicas if st else (tl[-1].replicas if tl else ())
    nodes = [facts.names.get(i, f"broker {i}") for i in ids] or sorted({n for n, q in ev.batches if q == p})
    return tuple(_one(ev, facts, n, p, values, lo, hi, t0, leader, epoch, isr, acks_all, holders) for n in nodes)


@dataclass(frozen=True)
class LostRange:
    """A run of lost offsets of one partition, acknowledged under one leader, epoch and ISR, with no value
    acknowledged under them kept in between (`candidates`: the brokers it is ambiguous between, when the
    leader is unknown because several believed they led)."""

    partition: int
    first_offset: int | None
    last_offset: int | None
    values: tuple[int, ...]
    acked_from_s: float | None
    acked_to_s: float | None
    leader: str | None
    leader_epoch: int | None
    isr: tuple[str, ...] | None
    faults: tuple[dict[str, Any], ...]
    isr_at_fault: tuple[str, ...] | None
    election: dict[str, Any] | None
    replicas: tuple[ReplicaFate, ...]
    why: str
    acked_by_source: str | None = None
    controller_moved_on: dict[str, Any] | None = None
    candidates: tuple[str, ...] = ()  # the brokers that believed they led then, when which one acked is unknown

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        d = asdict(self)
        d["replicas"] = [asdict(r) for r in self.replicas]
        return d

    def truncated(self) -> set[str]:
        """The replicas that truncated past (part of) this range."""
        return {r.node for r in self.replicas if r.status == "truncated"}
