"""Kafka's durability guarantee, applied write by write: was a lost write inside the promise?

Kafka's documentation (Design, "Replicated Logs"): "a committed message will
not be lost, as long as there is at least one in sync replica alive, at all
times". A write acknowledged under acks=all is committed: every member of the
partition's ISR had it when the leader answered. kchaos reads "alive" as
"kept its log": a killed or paused broker keeps its page cache, so it still
counts; a broker whose power failed lost whatever it had neither fsynced nor
written back (lazyfs reports, per file, the oldest write it dropped), so it no
longer holds the writes it made after that. Unclean leader election is outside
the guarantee by definition. min.insync.replicas is not part of it: it only makes the leader
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
- a replica whose disk was replaced (the wipe nemesis) stops counting: it kept nothing;
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kchaos.core.promise import Promise

GUARANTEE = ("a write acknowledged with acks=all is not lost as long as, at every moment after its "
             "acknowledgement, some replica in the partition's ISR (with Eligible Leader Replicas: or an eligible "
             "leader replica) still holds it (a crash keeps the page cache; a power failure keeps only what was "
             "fsynced or written back), "
             "and no unclean election happens")
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
    kept all of that partition's log. A broker in `dropped` but not in `oldest` (its lazyfs reported no
    file) lost everything it had not fsynced. A replaced disk (the wipe nemesis) is a loss of the same shape
    that took everything: `what` says which, as the verdict tells it.
    """

    time: int
    dropped: frozenset[int]
    oldest: Mapping[int, Mapping[int, int]] = field(default_factory=dict, hash=False, compare=False)
    what: str = "lost power"

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
    """An unclean leader election of `partition` at `time` (history ns): by an operator (the `elect-unclean`
    nemesis), or by the controller on its own (`leader`, as the metadata log records it)."""

    time: int
    partition: int
    leader: int | None = None
    by_controller: bool = False


@dataclass
class Events:
    """The run's ISR samples per partition, power losses and unclean elections, each sorted by time, and
    the (broker, time) of each fencing the metadata log records (it names why a replica left the ISR)."""

    isr: dict[int, list[IsrSample]] = field(default_factory=dict)
    power: list[PowerLoss] = field(default_factory=list)
    unclean: list[UncleanElection] = field(default_factory=list)
    fenced: frozenset[tuple[int, int]] = frozenset()


def verdict(partition: int, acked_ns: int, ev: Events, promise: Promise) -> str | None:
    """None when the write is inside the guarantee (so its loss broke the promise), else why it is not."""
    if promise.not_covered:
        return promise.not_covered
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
                + (" or eligible leader replica" if promise.elr else "") + " kept these writes")

    for _, _, e in sorted(timeline, key=lambda x: (x[0], x[1])):
        if isinstance(e, UncleanElection):
            if not e.by_controller:
                return f"p{partition}: unclean election at {e.time / NS:.1f} s"
            where = "ELR" if prev.elr and set(holders) <= prev.elr else "ISR"
            held = f" while {_names(holders)}, in the {where} until then, still held them" if holders else ""
            return (f"p{partition}: in-sync replicas {_names(start)} at the acknowledgement; " + ", ".join(story)
                    + ("; " if story else "")
                    + f"the controller elected {_names([e.leader if e.leader is not None else -1])} uncleanly at "
                    f"{e.time / NS:.1f} s (ISR and ELR empty: Kafka's last-known-leader rule, with unclean leader "
                    f"election disabled){held}")
        if isinstance(e, PowerLoss):
            failed = set(holders) & e.dropped
            lost = {n for n in failed if not e.keeps(n, partition, holders[n])}
            for n in lost:
                del holders[n]
            if lost:
                story.append(f"{_names(lost)} {e.what} at {e.time / NS:.1f} s")
            if failed - lost:
                story.append(f"{_names(failed - lost)} lost power at {e.time / NS:.1f} s and kept them "
                             "(written back before it)")
            if lost and not holders:
                return none_left()
            continue
        removed, added = prev.isr - e.isr, e.isr - prev.isr
        eligible = (e.elr if e.elr is not None else removed if promise.elr and len(e.isr) < promise.min_insync
                    else frozenset())
        # with the metadata log's ELR, only ISR and ELR members count; else those removed and not eligible leave
        gone = {n for n in holders if (n not in e.isr | e.elr if e.elr is not None else n in removed - eligible)}
        if gone:
            fenced = {n for n in gone if (n, e.time) in ev.fenced}
            left = "the ISR and ELR" if prev.elr and gone & prev.elr else "the ISR"
            story.append(f"{_names(gone)} left {left} at {e.time / NS:.1f} s"
                         + (" (fenced)" if fenced == gone else f" ({_names(fenced)} fenced)" if fenced else ""))
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


def classify(lost: Iterable[tuple[Any, int | None, int | None]], ev: Events, promise: Promise,
             total_lost: int) -> dict[str, Any]:
    """The loss section for lost writes given as (value, partition, acked ns).

    `total_lost` is the checker's count: writes beyond the listed ones, or
    without a partition or ack time, count as inside the promise.
    """
    inside = outside = placed = 0
    reasons: dict[str, dict[str, Any]] = {}
    for _value, partition, acked in lost:
        if partition is None or acked is None:
            continue
        placed += 1
        why = verdict(int(partition), int(acked), ev, promise)
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
    if not promise.no_loss:
        inside, outside = 0, total_lost
    else:
        inside += unplaced
    return {"promised": promise.no_loss, "guarantee": GUARANTEE, "elr": promise.elr,
            "lost_in_promise": inside, "lost_outside_promise": outside, "unplaced": unplaced if promise.no_loss else 0,
            "outside": sorted(reasons.values(), key=lambda r: (r["partition"], r["first_acked_s"] or 0)),
            "broken": promise.no_loss and inside > 0,
            "expected_by_configuration": total_lost > 0 and not (promise.no_loss and inside > 0)}
